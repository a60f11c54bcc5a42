#!/usr/bin/env python3
"""Per-kind spans of the operations in a `sseqctl trace --chrome` file: for each op kind
(the kernel's name for a launch), the median and p90, in microseconds, of issue to start,
start to end (what the daemon observed; hip: an upper bound) and issue to complete (the
loop saw the completion), and the median gap between an op's issue and the completion
of the op it waited for. Usage: timeline-ops.py FILE [LABEL]"""
import collections
import json
import sys


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, len(v) * p // 100)] if v else float("nan")


def main():
    doc = json.load(open(sys.argv[1]))
    label = sys.argv[2] if len(sys.argv) > 2 else sys.argv[1]
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    spans = collections.defaultdict(lambda: collections.defaultdict(list))
    byp = {}
    ops = [e for e in events if e.get("ph") == "X" and "issue_ns" in e.get("args", {})]
    for e in ops:
        byp[e["args"].get("point")] = e["args"]
    t0 = min((e["args"]["issue_ns"] for e in ops), default=0)
    t1 = max((e["args"]["complete_ns"] for e in ops), default=0)
    for e in ops:
        a = e["args"]
        k = a.get("kernel") or a.get("op") or e.get("cat")
        s = spans[k]
        s["issue_to_start"].append((a["start_ns"] - a["issue_ns"]) / 1e3)
        s["start_to_end"].append((a["end_ns"] - a["start_ns"]) / 1e3)
        s["issue_to_complete"].append((a["complete_ns"] - a["issue_ns"]) / 1e3)
        s["end_to_complete"].append((a["complete_ns"] - a["end_ns"]) / 1e3)
        for w in a.get("waits") or []:
            p = byp.get(w.get("producer"))
            if p:
                s["producer_complete_to_complete"].append(
                    (a["complete_ns"] - p["complete_ns"]) / 1e3)
    print(f"timeline {label} ops={len(ops)} span_ms={(t1 - t0) / 1e6:.1f}")
    for k, s in sorted(spans.items()):
        parts = " ".join(f"{n}_med_us={pct(v, 50):.1f} {n}_p90_us={pct(v, 90):.1f}"
                         for n, v in s.items() if v)
        print(f"timeline {label} kind={k} n={len(s['issue_to_start'])} {parts}")


if __name__ == "__main__":
    main()
