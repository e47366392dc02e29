"""tests/test_python_dtypes.py - the Python binding's numpy arrays against
two things that are not the binding (run by tests/cli_python_tables.sh):

  layout LAYOUT.txt   every field of BRANCH_DTYPE, BLOCK_DTYPE, EDGE_DTYPE
                      against offsetof and sizeof of the C structs (LAYOUT.txt
                      printed by a program compiled against include/btr/);
  tables TRACE DIFF.json
                      the blocks and edges of btr.open(TRACE).blocks() against
                      `btr diff OTHER TRACE --format json`'s blocks_only_b and
                      edges_only_b (OTHER shares no module with TRACE, so every
                      block and edge of TRACE is listed there, with its module
                      name, addresses, taken flag and count as the CLI prints
                      them).

Prints one "ok ..." or "bad ..." line per comparison; exits 1 on any bad."""

import json
import sys

from btr import _lib


def layout(path):
    dt = {"btr_branch": _lib.BRANCH_DTYPE, "btr_block": _lib.BLOCK_DTYPE, "btr_edge": _lib.EDGE_DTYPE}
    seen, bad = set(), 0
    for line in open(path):
        s, f, off, size = line.split()
        d = dt[s]
        if f == ".":
            good = d.itemsize == int(size)
            print(("ok" if good else "bad") + " %s: itemsize %d, sizeof %s" % (s, d.itemsize, size))
            bad += not good
            continue
        seen.add((s, f))
        got = d.fields.get(f)
        good = got is not None and got[1] == int(off) and got[0].itemsize == int(size)
        print(("ok" if good else "bad") + " %s.%s: dtype (offset, size) %s, C offset %s size %s" %
              (s, f, got and (got[1], got[0].itemsize), off, size))
        bad += not good
    for s, d in dt.items():
        for f in d.names:
            if f != "reserved" and (s, f) not in seen:
                print("bad %s.%s: a dtype field the C struct does not have" % (s, f))
                bad += 1
    return bad


def tables(trace, diff):
    import btr
    r = btr.open(trace).blocks()
    d = json.load(open(diff))
    names = [m["name"] for m in r["modules"]]

    def mname(i):
        return names[i] if 0 <= i < len(names) else ""

    bad = 0
    py_blocks = sorted((mname(int(b["module"])), int(b["start"]), int(b["end"]), int(b["count"]))
                       for b in r["blocks"])
    cli_blocks = sorted((b["module"], int(b["start"], 16), int(b["end"], 16), b["count_b"])
                        for b in d["blocks_only_b"])
    good = len(py_blocks) > 10 and py_blocks == cli_blocks
    print(("ok" if good else "bad") + " blocks: %d from the binding, %d in btr diff's table%s" %
          (len(py_blocks), len(cli_blocks),
           "" if good else "; first difference: %s" % next(
               ((a, b) for a, b in zip(py_blocks, cli_blocks) if a != b), "(lengths)")))
    bad += not good
    py_edges = sorted((mname(int(e["from_module"])), int(e["from"]), mname(int(e["to_module"])), int(e["to"]),
                       bool(e["taken"]), int(e["count"])) for e in r["edges"])
    cli_edges = sorted((e["module"], int(e["from"], 16), e["to_module"], int(e["to"], 16), e["taken"], e["count_b"])
                       for e in d["edges_only_b"])
    good = len(py_edges) > 10 and py_edges == cli_edges
    print(("ok" if good else "bad") + " edges: %d from the binding, %d in btr diff's table%s" %
          (len(py_edges), len(cli_edges),
           "" if good else "; first difference: %s" % next(
               ((a, b) for a, b in zip(py_edges, cli_edges) if a != b), "(lengths)")))
    bad += not good
    # both arms of the conditionals occur, so taken is not a constant
    good = {e[4] for e in py_edges} == {False, True}
    print(("ok" if good else "bad") + " edges: taken and not-taken both present")
    bad += not good
    return bad


if __name__ == "__main__":
    if sys.argv[1] == "layout":
        sys.exit(1 if layout(sys.argv[2]) else 0)
    if sys.argv[1] == "tables":
        sys.exit(1 if tables(sys.argv[2], sys.argv[3]) else 0)
    sys.exit("usage: test_python_dtypes.py layout LAYOUT.txt | tables TRACE DIFF.json")
