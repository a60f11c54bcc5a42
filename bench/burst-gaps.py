#!/usr/bin/env python3
"""Where a burst of copies spends its time, from a `sseqctl trace --chrome` file taken with
`sseqd --device-timeline on` (bench/burst-gaps.sh): the operations in issue order, cut into
bursts where the kind changes or the loop saw the previous one complete before this one
was issued, and for each kind the medians, in microseconds, of
  lead    first op's issue by the loop to its start on the device (the hand-off to a
          submit thread, the enqueue call, the device picking it up)
  gaps    the device's idle time between the burst's ops (each start minus the previous end)
  device  the ops' own time on the device
  tail    the last op's end on the device to the loop seeing it complete (the watcher and
          the hand-off to the loop)
  span    first issue to last completion seen by the loop
so that a burst's time beyond the native one can be split into the daemon's parts; what
is not in the span is the client's (its request reaching the loop, the Completion
reaching it). Usage: burst-gaps.py FILE [LABEL]"""
import collections
import json
import sys


def median(v):
    v = sorted(v)
    if not v:
        return float("nan")
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def bursts(ops):
    """Consecutive ops of one kind, none issued after the one before it was seen complete."""
    out, cur = [], []
    for a in ops:
        if cur and (a["op"] != cur[-1]["op"] or a["issue_ns"] >= cur[-1]["complete_ns"]):
            out.append(cur)
            cur = []
        cur.append(a)
    if cur:
        out.append(cur)
    return out


def main():
    doc = json.load(open(sys.argv[1]))
    label = sys.argv[2] if len(sys.argv) > 2 else sys.argv[1]
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    ops = [e["args"] for e in events if e.get("ph") == "X" and "issue_ns" in e.get("args", {})]
    timing = collections.Counter(a.get("timing") for a in ops)
    if timing.get("device", 0) < len(ops):
        print(f"{label}: {timing.get('observed', 0)} of {len(ops)} ops timed as observed, "
              "not on the device: run sseqd with --device-timeline on", file=sys.stderr)
    ops.sort(key=lambda a: (a["issue_ns"], a["point"]))
    rows = collections.defaultdict(lambda: collections.defaultdict(list))
    for b in bursts(ops):
        r = rows[(b[0]["op"], len(b))]
        r["lead"].append(b[0]["start_ns"] - b[0]["issue_ns"])
        r["gaps"].append(sum(max(0, b[i]["start_ns"] - b[i - 1]["end_ns"])
                             for i in range(1, len(b))))
        r["device"].append(sum(a["end_ns"] - a["start_ns"] for a in b))
        r["tail"].append(b[-1]["complete_ns"] - b[-1]["end_ns"])
        r["span"].append(max(a["complete_ns"] for a in b) - b[0]["issue_ns"])
    for (op, n), r in sorted(rows.items()):
        print(f"{label} op={op} burst={n} bursts={len(r['span'])} " +
              " ".join(f"{k}_us={median(r[k]) / 1e3:.1f}"
                       for k in ("lead", "gaps", "device", "tail", "span")))


if __name__ == "__main__":
    main()
