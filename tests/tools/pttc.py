#!/usr/bin/env python3
"""pttc.py - build btr's own .ptt test cases (tests/ptt/) into the files
libipt's conformance cases come with: NAME.pt (the PT packets), NAME.bin
(the code), NAME-ptdump.exp and NAME-ptxed.exp (the expected outputs),
next to a copy of NAME.ptt, in OUTDIR.

Usage: pttc.py OUTDIR CASE.ptt...

The .ptt format is libipt's (test/src/*.ptt; the pttc it builds them with
is not packaged), for the subset btr's cases use:
  org 0xADDR / bits 64           where the code is loaded
  LABEL: INSN                    code in NASM syntax, assembled with GNU as
                                 (intel syntax): nop, hlt, jmp/call/jcc
                                 LABEL, ret, xbegin LABEL, xend, ...;
                                 ALIGN N
  ; @pt pN: PACKET(ARGS)         a packet: psb() psbend() ovf() stop() pad()
                                 mode.exec(64bit) mode.tsx(begin|commit|abort)
                                 fup/tip/tip.pge/tip.pgd(IPC: %LABEL)
                                 tnt(t.n...) pip(CR3) vmcs(BASE)
                                 tma(CTC, FC) cbr(R) mtc(V) cyc(V) tsc(V)
                                 raw(HEX BYTES...)  (bytes as they are)
  ; @pt .exp(ptdump) / .exp(ptxed)   the expected output: the ';' lines
                                 that follow, with %0pN the packet's offset
                                 and %0lN the label's address (16 hex digits);
                                 text after ' #' is a comment.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile


def die(msg):
    sys.stderr.write("pttc: %s\n" % msg)
    sys.exit(1)


def assemble(lines, org, tmp):
    """GNU as over NASM-ish lines: returns (code bytes, {label: address})."""
    src = [".intel_syntax noprefix", ".code64", ".text"]
    for ln in lines:
        m = re.match(r"\s*align\s+(\S+)", ln, re.I)
        src.append(".balign %s, 0x90" % m.group(1) if m else ln)
    s = os.path.join(tmp, "c.s")
    o = os.path.join(tmp, "c.o")
    b = os.path.join(tmp, "c.bin")
    with open(s, "w") as f:
        f.write("\n".join(src) + "\n")
    subprocess.run(["as", "--64", "-o", o, s], check=True)
    subprocess.run(["objcopy", "-O", "binary", "-j", ".text", o, b], check=True)
    labels = {}
    out = subprocess.run(["nm", o], check=True, capture_output=True, text=True).stdout
    for ln in out.splitlines():
        f = ln.split()
        if len(f) == 3:
            labels[f[2]] = org + int(f[0], 16)
    with open(b, "rb") as f:
        return f.read(), labels


def ip_payload(ipc, ip):
    n = {0: 0, 1: 2, 2: 4, 3: 6, 4: 6, 6: 8}.get(ipc)
    if n is None:
        die("bad IP compression %d" % ipc)
    return (ip & ((1 << (8 * n)) - 1)).to_bytes(n, "little") if n else b""


def packet(kind, args, labels):
    a = [x.strip() for x in args.split(",")] if args.strip() else []

    def num(x):
        return labels[x[1:]] if x.startswith("%l") else int(x, 0)

    ipop = {"fup": 0x1d, "tip": 0x0d, "tip.pge": 0x11, "tip.pgd": 0x01}
    if kind in ipop:
        m = re.match(r"(\d)\s*:\s*(\S+)", args.strip())
        if not m:
            die("bad IP argument '%s'" % args)
        ipc = int(m.group(1))
        return bytes([ipop[kind] | ipc << 5]) + ip_payload(ipc, num(m.group(2)))
    if kind == "psb":
        return b"\x02\x82" * 8
    if kind == "psbend":
        return b"\x02\x23"
    if kind == "ovf":
        return b"\x02\xf3"
    if kind == "stop":
        return b"\x02\x83"
    if kind == "pad":
        return b"\x00"
    if kind == "mode.exec":
        return bytes([0x99, {"64bit": 1, "32bit": 2, "16bit": 0}[a[0]]])
    if kind == "mode.tsx":
        return bytes([0x99, 0x20 | {"begin": 1, "commit": 0, "abort": 2}[a[0]]])
    if kind == "tnt":
        bits = a[0].split(".") if a else []
        bits = [c for c in "".join(bits)]
        v = 1
        for c in bits:
            v = v << 1 | (c == "t")
        if len(bits) > 6:
            die("tnt: at most 6 bits")
        return bytes([v << 1])
    if kind == "pip":
        cr3 = num(a[0])
        return b"\x02\x43" + ((cr3 >> 5) << 1).to_bytes(6, "little")
    if kind == "vmcs":
        return b"\x02\xc8" + (num(a[0]) >> 12).to_bytes(5, "little")
    if kind == "tma":
        ctc, fc = num(a[0]), num(a[1])
        return b"\x02\x73" + ctc.to_bytes(2, "little") + b"\x00" + bytes([fc & 0xff, fc >> 8 & 1])
    if kind == "cbr":
        return bytes([0x02, 0x03, num(a[0]), 0])
    if kind == "mtc":
        return bytes([0x59, num(a[0])])
    if kind == "cyc":
        v = num(a[0])
        if v >= 32:
            die("cyc: small values only")
        return bytes([v << 3 | 3])
    if kind == "tsc":
        return b"\x19" + num(a[0]).to_bytes(7, "little")
    if kind == "raw":
        return bytes(int(x, 16) for x in args.split())
    die("unknown packet '%s'" % kind)


def build(ptt, outdir):
    name = os.path.basename(ptt)[:-4]
    org = None
    code = []
    pkts = []  # (name, kind, args)
    exp = {}
    cur = None
    with open(ptt) as f:
        for ln in f:
            ln = ln.rstrip("\n")
            m = re.match(r";\s*@pt\s+\.exp\((\w+)\)", ln)
            if m:
                cur = exp.setdefault(m.group(1), [])
                continue
            m = re.match(r";\s*@pt\s+(\w+)\s*:\s*([\w.]+)\((.*)\)\s*$", ln)
            if m:
                pkts.append(m.groups())
                cur = None
                continue
            if ln.startswith(";"):
                if cur is not None:
                    cur.append(ln[1:])
                continue
            cur = None
            body = ln.split(";")[0].rstrip()
            if not body.strip():
                continue
            m = re.match(r"\s*org\s+(\S+)", body)
            if m:
                org = int(m.group(1), 0)
                continue
            if re.match(r"\s*bits\s+64", body):
                continue
            code.append(body)
    if org is None:
        die("%s: no org" % ptt)
    with tempfile.TemporaryDirectory() as tmp:
        blob, labels = assemble(code, org, tmp)
    stream = b""
    offs = {}
    for pname, kind, args in pkts:
        offs[pname] = len(stream)
        stream += packet(kind, args, labels)

    def subst(line):
        line = re.sub(r"%0p(\w+)", lambda m: "%016x" % offs["p" + m.group(1)], line)
        line = re.sub(r"%0l(\w+)", lambda m: "%016x" % labels["l" + m.group(1)], line)
        return line.split(" #")[0].rstrip()

    with open(os.path.join(outdir, name + ".pt"), "wb") as f:
        f.write(stream)
    with open(os.path.join(outdir, name + ".bin"), "wb") as f:
        f.write(blob)
    for k, lines in exp.items():
        while lines and not lines[-1].strip():
            lines.pop()
        with open(os.path.join(outdir, "%s-%s.exp" % (name, k)), "w") as f:
            for ln in lines:
                f.write(subst(ln) + "\n")
    dst = os.path.join(outdir, name + ".ptt")
    if not os.path.exists(dst) or not os.path.samefile(ptt, dst):
        shutil.copy(ptt, dst)


def main():
    if len(sys.argv) < 3:
        die("usage: pttc.py OUTDIR CASE.ptt...")
    for p in sys.argv[2:]:
        build(p, sys.argv[1])


if __name__ == "__main__":
    main()
