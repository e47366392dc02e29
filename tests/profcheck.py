#!/usr/bin/env python3
"""profcheck.py - checks of btr's profile outputs for the tests/cli_*.sh
scripts, run in one python process (starting python is slow on the shared
machines): python3 profcheck.py CHECK ARG... [';;' CHECK ARG...]...
Prints 'ok CHECK' or 'FAIL CHECK: why' per check; exits with the number of
failures.  Expected values come from the test programs' structure, never
from btr's own output."""
import collections
import json
import os
import re
import sys
import traceback
import xml.etree.ElementTree as ET


def folded(path):
    for line in open(path):
        stack, n = line.rstrip('\n').rsplit(' ', 1)
        yield stack.split(';'), int(n)


def project(path, keep):
    """Stacks reduced to the program's own functions; only the self weight
    of the program's functions counts."""
    out = collections.Counter()
    for fr, n in folded(path):
        if fr[-1] in keep:
            out[';'.join(f for f in fr if f in keep)] += n
    return out


def fib_calls(n):
    """Leaf and inner calls of fib(n) per depth (main -> fib is depth 1)."""
    leaf, inner = collections.Counter(), collections.Counter()

    def rec(k, d):
        if k < 2:
            leaf[d] += 1
            return
        inner[d] += 1
        rec(k - 1, d + 1)
        rec(k - 2, d + 1)
    rec(n, 1)
    return leaf, inner


def check_fib(path):
    """fib(10): per depth d the weight of main;fib^d is a_d*k_leaf +
    b_d*k_inner for one pair of per-call instruction counts."""
    w = collections.Counter()
    for fr, n in folded(path):
        if 'fib' not in fr:
            continue
        i = fr.index('main')
        tail = fr[i + 1:]
        assert fr.index('fib') == i + 1, fr
        assert all(f == 'fib' for f in tail), fr
        w[len(tail)] += n
    leaf, inner = fib_calls(10)
    depths = sorted(set(leaf) | set(inner))
    assert sorted(w) == depths, (sorted(w), depths)
    k_inner = w[1]
    dmax = depths[-1]
    assert inner[dmax] == 0
    k_leaf = w[dmax] // leaf[dmax]
    for d in depths:
        assert w[d] == leaf[d] * k_leaf + inner[d] * k_inner, (d, w[d], leaf[d], inner[d], k_leaf, k_inner)


def check_shapes(path):
    keep = {'main', 'tail_a', 'tail_b', 'tail_c', 'spin', 'lj_outer', 'lj_mid', 'lj_inner', 'sig_raiser', 'on_usr1',
            'fall_a', 'fall_b'}
    got = project(path, keep)
    want = {
        'main',
        'main;tail_a', 'main;tail_b', 'main;tail_c', 'main;tail_c;spin',   # a jmp replaces the caller
        'main;fall_a', 'main;fall_b',                                      # so does running into fall_b
        'main;lj_outer', 'main;lj_outer;lj_mid', 'main;lj_outer;lj_mid;lj_inner',
        'main;lj_outer;lj_mid;lj_inner;spin',
        'main;lj_outer;spin',                                              # after longjmp
        'main;sig_raiser', 'main;sig_raiser;on_usr1', 'main;sig_raiser;on_usr1;spin',
        'main;sig_raiser;spin',                                            # after sigreturn
    }
    assert set(got) == want, (sorted(set(got) - want), sorted(want - set(got)))
    # fall_a's add, and fall_b's first pass up to its first branch, go to
    # fall_a (the stack learns of fall_b at that branch); the other 19
    # passes (3 instructions) and the ret to fall_b
    assert got['main;fall_a'] == 5 and got['main;fall_b'] == 19 * 3 + 1, (got['main;fall_a'], got['main;fall_b'])
    # spin(n) runs a fixed number of instructions plus a fixed number per
    # iteration: the five calls (n = 10, 5, 3, 7, 2) lie on one line
    n = {'main;tail_c;spin': 10, 'main;lj_outer;lj_mid;lj_inner;spin': 5, 'main;lj_outer;spin': 3,
         'main;sig_raiser;on_usr1;spin': 7, 'main;sig_raiser;spin': 2}
    a = (got['main;tail_c;spin'] - got['main;sig_raiser;spin']) / (10 - 2)
    b = got['main;sig_raiser;spin'] - 2 * a
    for s, k in n.items():
        assert got[s] == a * k + b, (s, got[s], a, b)


def check_except(path):
    keep = {'main', 'ex_catcher', 'ex_mid', 'ex_thrower', 'ex_after'}
    got = project(path, keep)
    want = {'main', 'main;ex_catcher', 'main;ex_catcher;ex_mid', 'main;ex_catcher;ex_mid;ex_thrower',
            'main;ex_catcher;ex_after'}                                    # the handler runs in ex_catcher
    assert set(got) == want, (sorted(set(got) - want), sorted(want - set(got)))
    for fr, _ in folded(path):
        if 'ex_after' in fr:
            assert 'ex_mid' not in fr and 'ex_thrower' not in fr, fr


def check_speedscope(path, schema):
    d = json.load(open(path))
    try:
        import jsonschema
        jsonschema.validate(d, json.load(open(schema)))
    except ImportError:
        # an oracle: under BTR_REQUIRE_ORACLES=1 (make test) its absence fails
        if os.environ.get('BTR_REQUIRE_ORACLES') == '1' and os.environ.get('BTR_ALLOW_MISSING_ORACLES') != '1':
            raise AssertionError('oracle python3-jsonschema missing (scripts/deps.sh installs it; '
                                 'BTR_ALLOW_MISSING_ORACLES=1 allows this): speedscope schema not checked')
        print('note: python3-jsonschema absent, schema not checked')
    frames = d['shared']['frames']
    assert d['profiles'], 'no profiles'
    fib = [i for i, f in enumerate(frames) if f['name'] == 'fib']
    assert len(fib) == 1
    opens = 0
    for p in d['profiles']:
        st = []
        last = p['startValue']
        for e in p['events']:
            assert e['at'] >= last, e
            last = e['at']
            if e['type'] == 'O':
                st.append(e['frame'])
                opens += e['frame'] == fib[0]
            else:
                assert st and st.pop() == e['frame'], e
        assert not st, 'unbalanced'
        assert last <= p['endValue']
    assert opens == 177, opens    # fib(10) calls fib 2*fib(11) - 1 times


def check_svg(path, fold):
    t = ET.parse(path).getroot()
    ns = '{http://www.w3.org/2000/svg}'
    assert t.find(ns + 'script') is not None
    titles = [g.find(ns + 'title').text for g in t.iter(ns + 'g')]
    main = [x for x in titles if x.startswith('main (')]
    assert len(main) == 1, main
    want = sum(n for fr, n in folded(fold) if 'main' in fr)
    got = int(re.match(r'main \((\d+) ', main[0]).group(1))
    assert got == want, (got, want)
    assert any(x.startswith('fib (') for x in titles)
    assert 'fib &lt;10&gt;' in open(path).read()
    # geometry: the frames of one depth lie side by side, never on top of
    # each other, and each lies inside the frame below it
    fr = sorted((int(g.get('data-d')), float(g.get('data-x')), float(g.get('data-w')))
                for g in t.iter(ns + 'g') if g.get('data-x') is not None)
    assert len(fr) > 2, fr
    for (d0, x0, w0), (d1, x1, w1) in zip(fr, fr[1:]):
        if d0 == d1:
            assert x1 >= x0 + w0 - 1e-9, ('overlapping frames at depth', d0, x0, w0, x1, w1)
    for d, x, w in fr:
        if d:
            assert any(pd == d - 1 and px - 1e-9 <= x and x + w <= px + pw + 1e-9 for pd, px, pw in fr), \
                ('a frame outside the one below it', d, x, w)


def check_lbr(path):
    st = dict((';'.join(fr), n) for fr, n in folded(path))
    # gzip's deflate() calls longest_match(), compress_block() send_bits()
    assert any(s.endswith('deflate;longest_match') for s in st), 'no deflate;longest_match'
    assert any(s.endswith('compress_block;send_bits') for s in st), 'no compress_block;send_bits'
    assert sum(st.values()) == 147712, sum(st.values())


def check_under_main(path):
    t = m = 0
    for fr, n in folded(path):
        t += n
        if '__libc_start_call_main' in fr[:-1]:
            m += n
    assert m > 0.8 * t, (m, t)


def callgraph_funcs(path):
    d = json.load(open(path))
    return d, {f['name']: f for f in d['functions']}


def edges(f, key):
    return {e['name']: e['calls'] for e in f[key]}


def check_cg_fib(path, insns):
    d, fs = callgraph_funcs(path)
    assert d['unit'] == 'instructions' and d['total'] == int(insns), (d['unit'], d['total'], insns)
    leaf, inner = fib_calls(10)
    ncalls = sum(leaf.values()) + sum(inner.values())
    fib, main = fs['fib'], fs['main']
    assert fib['calls'] == ncalls == 177, fib['calls']
    assert edges(fib, 'callers') == {'main': 1, 'fib': ncalls - 1}, fib['callers']
    assert edges(fib, 'callees') == {'fib': ncalls - 1}, fib['callees']
    assert fib['inclusive'] == fib['self'] > 0          # fib calls nothing else; recursion counted once
    assert main['inclusive'] == main['self'] + fib['inclusive'], (main, fib)
    assert main['calls'] == 1 and edges(main, 'callees') == {'fib': 1}
    # inclusive never exceeds the total, self adds up to it
    assert all(f['inclusive'] <= d['total'] for f in d['functions'])
    assert sum(f['self'] for f in d['functions']) == d['total']


def check_cg_shapes(path):
    d, fs = callgraph_funcs(path)
    # a tail call replaces the caller's frame: tail_b and tail_c run on
    # behalf of main, as the stack says
    mc = edges(fs['main'], 'callees')
    assert all(mc.get(f) == 1 for f in ('tail_a', 'tail_b', 'tail_c', 'fall_a', 'fall_b', 'lj_outer', 'sig_raiser')), mc
    assert edges(fs['tail_a'], 'callees') == {} and edges(fs['tail_b'], 'callees') == {}
    assert edges(fs['fall_a'], 'callees') == {} and edges(fs['fall_b'], 'callees') == {}
    assert edges(fs['tail_c'], 'callees') == {'spin': 1}, fs['tail_c']
    assert edges(fs['lj_inner'], 'callers') == {'lj_mid': 1}
    assert fs['spin']['calls'] == 5, fs['spin']
    assert edges(fs['spin'], 'callers') == {'tail_c': 1, 'lj_inner': 1, 'lj_outer': 1, 'on_usr1': 1,
                                            'sig_raiser': 1}, fs['spin']['callers']
    assert fs['on_usr1']['calls'] == 1
    assert fs['lj_outer']['inclusive'] > fs['lj_mid']['inclusive'] > fs['lj_inner']['inclusive']


def check_dot(path):
    txt = open(path).read()
    assert txt.startswith('digraph callgraph {') and txt.rstrip().endswith('}')
    nodes = set(re.findall(r'^  (f\d+) \[label=', txt, re.M))
    for a, b in re.findall(r'^  (f\d+) -> (f\d+) ', txt, re.M):
        assert a in nodes and b in nodes, (a, b)
    assert re.search(r'label="fib\\ninclusive', txt)
    # arrows point from caller to callee: main -> fib, fib -> fib, never fib -> main
    ids = {n: i for i, n in re.findall(r'^  (f\d+) \[label="([^"\\]+)\\n', txt, re.M)}
    arrows = set(re.findall(r'^  (f\d+) -> (f\d+) ', txt, re.M))
    assert (ids['main'], ids['fib']) in arrows and (ids['fib'], ids['main']) not in arrows, (ids, arrows)


def chrome_slices(path):
    """Slices (tid, name, begin, end, depth) of a Chrome trace-event JSON
    file, checking that every thread's B/E events nest and keep time order."""
    d = json.load(open(path))
    assert isinstance(d['traceEvents'], list)
    stacks, last, out = {}, {}, []
    for e in d['traceEvents']:
        assert e['ph'] in ('B', 'E', 'M'), e
        if e['ph'] == 'M':
            continue
        key = (e['pid'], e['tid'])
        assert isinstance(e['ts'], (int, float)) and e['ts'] >= last.get(key, 0), e
        last[key] = e['ts']
        st = stacks.setdefault(key, [])
        if e['ph'] == 'B':
            st.append((e['name'], e['ts']))
        else:
            assert st, ('E without B', e)
            name, ts = st.pop()
            assert name == e['name'], (name, e)
            out.append((e['tid'], name, ts, e['ts'], len(st)))
    assert all(not st for st in stacks.values()), 'unclosed slices'
    return d, out


def varints(buf, i):
    v = s = 0
    while True:
        c = buf[i]
        i += 1
        v |= (c & 0x7f) << s
        s += 7
        if not c & 0x80:
            return v, i


def pb_fields(buf):
    """(field, wiretype, value) of one protobuf message."""
    i, out = 0, []
    while i < len(buf):
        key, i = varints(buf, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varints(buf, i)
        elif wt == 2:
            n, i = varints(buf, i)
            v = buf[i:i + n]
            assert len(v) == n, 'truncated field'
            i += n
        elif wt == 1:
            v = int.from_bytes(buf[i:i + 8], 'little')
            i += 8
        elif wt == 5:
            v = int.from_bytes(buf[i:i + 4], 'little')
            i += 4
        else:
            raise AssertionError('bad wire type %d' % wt)
        out.append((f, wt, v))
    return out


def one(fields, num, default=None):
    vals = [v for f, _, v in fields if f == num]
    return vals[-1] if vals else default


def perfetto_slices(path):
    """Slices of a Perfetto protobuf trace (Trace.packet = 1, TracePacket:
    timestamp 8, trusted_packet_sequence_id 10, track_event 11,
    interned_data 12, sequence_flags 13, track_descriptor 60), checking
    interning per sequence, nesting and time order per track."""
    data = open(path, 'rb').read()
    tracks, names, stacks, last, out = {}, {}, {}, {}, []
    for f, wt, pkt in pb_fields(data):
        assert f == 1 and wt == 2, f
        p = pb_fields(pkt)
        seq = one(p, 10)
        assert seq, 'packet without sequence id'
        flags = one(p, 13, 0)
        if flags & 1:
            names[seq] = {}
        td = one(p, 60)
        if td is not None:
            t = pb_fields(td)
            th = pb_fields(one(t, 4))
            tracks[one(t, 1)] = (one(th, 1), one(th, 2))
            continue
        idata = one(p, 12)
        if idata is not None:
            assert flags & 2
            for f2, _, en in pb_fields(idata):
                if f2 == 2:
                    e = pb_fields(en)
                    names[seq][one(e, 1)] = one(e, 2).decode()
        ev = pb_fields(one(p, 11))
        ts = one(p, 8)
        uuid = one(ev, 11)
        assert uuid in tracks, 'event on an undeclared track'
        assert ts >= last.get(uuid, 0)
        last[uuid] = ts
        st = stacks.setdefault(uuid, [])
        typ = one(ev, 9)
        if typ == 1:
            st.append((names[seq][one(ev, 10)], ts))
        else:
            assert typ == 2 and st, 'SLICE_END without begin'
            name, b = st.pop()
            out.append((tracks[uuid][1], name, b, ts, len(st)))
    assert all(not st for st in stacks.values()), 'unclosed slices'
    return out


def check_timeline_fib(path, pftrace):
    d, sl = chrome_slices(path)
    assert d['otherData']['unit'] == 'instructions'
    fib = [s for s in sl if s[1] == 'fib']
    assert len(fib) == 177, len(fib)
    main = [s for s in sl if s[1] == 'main']
    assert len(main) == 1
    # fib slices nest inside main, depth 1..10 below it
    mb, me, md = main[0][2], main[0][3], main[0][4]
    assert all(mb <= s[2] <= s[3] <= me for s in fib)
    assert sorted(set(s[4] - md for s in fib)) == list(range(1, 11))
    # the protobuf trace holds the same slices (timestamps in ns)
    pf = perfetto_slices(pftrace)
    a = sorted((t, n, b, e, k) for t, n, b, e, k in sl)
    b = sorted((t, n, bb // 1000, e // 1000, k) for t, n, bb, e, k in pf)
    assert a == b, (len(a), len(b), [x for x in a if x not in b][:3])


def check_timeline_window(path, lo, hi, mindur):
    lo, hi, mindur = int(lo), int(hi), int(mindur)
    d, sl = chrome_slices(path)
    assert sl, 'no slices in the window'
    for t, n, b, e, k in sl:
        assert lo <= b <= e <= hi, (n, b, e)
        assert e - b >= mindur or b == lo or e == hi, (n, b, e)


def check_timeline_mt(path):
    d, sl = chrome_slices(path)
    tids = set(s[0] for s in sl)
    assert len(tids) >= 2, tids


def pprof_decode(path):
    """profile.proto: the string table, functions, locations, samples."""
    data = open(path, 'rb').read()
    if data[:2] == b'\x1f\x8b':
        import gzip
        data = gzip.decompress(data)
    f = pb_fields(data)
    strings = [v.decode() for n, _, v in f if n == 6]
    assert strings and strings[0] == '', 'string_table[0] must be ""'
    funcs, locs, samples, maps, types = {}, {}, [], [], []
    for n, _, v in f:
        if n == 1:
            t = pb_fields(v)
            types.append(strings[one(t, 1, 0)])
        elif n == 5:
            t = pb_fields(v)
            funcs[one(t, 1)] = strings[one(t, 2, 0)]
        elif n == 4:
            t = pb_fields(v)
            line = pb_fields(one(t, 4))
            locs[one(t, 1)] = one(line, 1)
        elif n == 3:
            t = pb_fields(v)
            maps.append((strings[one(t, 5, 0)], strings[one(t, 6, 0)]))
        elif n == 2:
            t = pb_fields(v)
            ids, vals = [], []
            for n2, wt, v2 in t:
                lst = ids if n2 == 1 else vals if n2 == 2 else None
                if lst is None:
                    continue
                if wt == 2:          # packed
                    i = 0
                    while i < len(v2):
                        x, i = varints(v2, i)
                        lst.append(x)
                else:
                    lst.append(v2)
            samples.append((ids, vals))
    # samples come before locations and functions in the message
    samples = [([funcs[locs[i]] for i in ids], vals) for ids, vals in samples]
    return types, samples, maps


def check_pprof(path, insns, top):
    types, samples, maps = pprof_decode(path)
    assert types[0] in ('instructions', 'branches'), types
    assert sum(v[0] for _, v in samples) == int(insns), (sum(v[0] for _, v in samples), insns)
    flat = collections.Counter()
    for stack, v in samples:
        flat[stack[0]] += v[0]
    assert flat.most_common(1)[0][0] == top, flat.most_common(3)
    assert maps and all(b for _, b in maps[:1]), maps[:2]


def pprof_stacks(path):
    types, samples, maps = pprof_decode(path)
    out = collections.Counter()
    for stack, v in samples:
        out[';'.join(reversed(stack))] += v[0]
    return out


def check_merge_pprof(ab, a, b):
    sa, sb, sab = pprof_stacks(a), pprof_stacks(b), pprof_stacks(ab)
    assert sab == sa + sb, (len(sab), len(sa + sb), [k for k in sab if sab[k] != (sa + sb)[k]][:3])
    ta, sa_, ma = pprof_decode(a)
    tab, _, mab = pprof_decode(ab)
    assert ta == tab
    # modules matched by build-id: as many mappings as distinct build-ids
    assert len(mab) == len(set(ma + pprof_decode(b)[2])), (mab, ma)


def check_merge_folded(ab, a, b):
    def rd(p):
        c = collections.Counter()
        for fr, n in folded(p):
            c[';'.join(fr)] += n
        return c
    assert rd(ab) == rd(a) + rd(b)


def check_merge_fdata(ab, a, b, nkey):
    nkey = int(nkey)
    def rd(p):
        c = collections.Counter()
        for line in open(p):
            f = line.split()
            if not f[-1].isdigit():
                continue
            k = ' '.join(f[:nkey])
            c[(k, 'v')] += int(f[-1])
            if len(f) > nkey + 1:
                c[(k, 'w')] += int(f[-2])
        return c
    assert rd(ab) == rd(a) + rd(b)


def check_procs_cg(path, insns, nproc, prog):
    """A loop of NPROC runs of prog_prof_fib 10: fib and main are one
    function each across the processes (module PROG), called NPROC x
    their per-process counts; every function name+module is listed once."""
    nproc = int(nproc)
    d = json.load(open(path))
    assert d['total'] == int(insns), (d['total'], insns)
    assert sum(f['self'] for f in d['functions']) == d['total']
    keys = [(f['name'], f['module'], f['addr']) for f in d['functions'] if f['module']]
    assert len(keys) == len(set(keys)), [k for k in keys if keys.count(k) > 1][:3]
    fib = [f for f in d['functions'] if f['name'] == 'fib']
    main = [f for f in d['functions'] if f['name'] == 'main' and (f['module'] or '').endswith(prog)]
    assert len(fib) == 1 and len(main) == 1, (len(fib), len(main))
    fib, main = fib[0], main[0]
    leaf, inner = fib_calls(10)
    per = sum(leaf.values()) + sum(inner.values())       # 177
    assert fib['calls'] == nproc * per, (fib['calls'], nproc, per)
    assert edges(fib, 'callers') == {'main': nproc, 'fib': nproc * (per - 1)}, fib['callers']
    assert main['calls'] == nproc and edges(main, 'callees')['fib'] == nproc, main
    assert fib['inclusive'] == fib['self'] > 0


def check_procs_flame(full, *per_pid):
    """The flame graph of the whole trace is the sum of the flame graphs of
    its processes (--pid), stack by stack, and has one line per stack."""
    total = collections.Counter()
    for p in per_pid:
        for fr, n in folded(p):
            total[';'.join(fr)] += n
    lines = [(';'.join(fr), n) for fr, n in folded(full)]
    names = [k for k, _ in lines]
    assert len(names) == len(set(names)), 'a stack on two lines'
    assert dict(lines) == dict(total), [k for k in set(total) | set(dict(lines))
                                        if total.get(k) != dict(lines).get(k)][:3]


def check_procs_pprof(path, insns, nproc):
    """One pprof function per function: fib once, its samples the fib
    stacks of every process."""
    types, samples, maps = pprof_decode(path)
    assert sum(v[0] for _, v in samples) == int(insns), (sum(v[0] for _, v in samples), insns)
    fib = sum(v[0] for st, v in samples if st[0] == 'fib')
    assert fib > 0 and all(st[1] in ('fib', 'main') for st, v in samples if st[0] == 'fib')
    data = open(path, 'rb').read()
    import gzip
    f = pb_fields(gzip.decompress(data))
    strings = [v.decode() for n, _, v in f if n == 6]
    names = [strings[one(pb_fields(v), 2, 0)] for n, _, v in f if n == 5]
    assert names.count('fib') == 1, names.count('fib')


def check_procs_timeline(path, nproc):
    d, sl = chrome_slices(path)
    fib = [s for s in sl if s[1] == 'fib']
    assert len(fib) == int(nproc) * 177, len(fib)
    assert len(set(s[0] for s in fib)) == int(nproc), set(s[0] for s in fib)


CHECKS = {k[6:]: v for k, v in globals().items() if k.startswith('check_')}


def main(argv):
    groups, cur = [], []
    for a in argv:
        if a == ';;':
            groups.append(cur)
            cur = []
        else:
            cur.append(a)
    if cur:
        groups.append(cur)
    fails = 0
    for g in groups:
        name, args = g[0], g[1:]
        try:
            CHECKS[name](*args)
            print('ok', name)
        except Exception as e:  # noqa: BLE001 - every failure is reported
            fails += 1
            tb = traceback.extract_tb(e.__traceback__)[-1]
            print('FAIL %s: %s (line %d)' % (name, repr(e)[:2000], tb.lineno))
    return fails


if __name__ == '__main__':
    sys.exit(min(main(sys.argv[1:]), 100))
