#!/usr/bin/env python3
"""Where a lone 4 KiB H2D + await spends its time: joins bench-client latency's stamps
($SSEQ_BENCH_STAMPS: "tag t0_ns t1_ns" a round) with the daemon's timeline (`sseqctl
trace --chrome`, run with --device-timeline on, whose times count from ORIGIN, the daemon's
start on CLOCK_MONOTONIC: `sseqctl --json status`'s started_monotonic_ns) by the H2D's tag,
and prints the median and p90, in microseconds, of each part of a round: the client's call
to the loop building the op (staging, send, the loop's wake-up and read, decode), the op's
issue to its start on the device (sequencing and the enqueue call), the device's own time,
the device's end to the client's await returning (the completion seen and the word written
and read), and the whole. Usage: latency-parts.py STAMPS TRACE ORIGIN [LABEL]"""
import json
import sys


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, len(v) * p // 100)] if v else float("nan")


def main():
    stamps = {}
    for line in open(sys.argv[1]):
        tag, t0, t1 = (int(x) for x in line.split())
        stamps[tag] = (t0, t1)
    doc = json.load(open(sys.argv[2]))
    origin = int(sys.argv[3])
    label = sys.argv[4] if len(sys.argv) > 4 else "latency-parts"
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    parts = {k: [] for k in ("to_issue", "to_start", "device", "to_client", "total")}
    timing = set()
    for e in events:
        a = e.get("args", {})
        if e.get("ph") != "X" or a.get("op") != "h2d" or a.get("tag") not in stamps:
            continue
        t0, t1 = (t - origin for t in stamps[a["tag"]])
        timing.add(a.get("timing"))
        parts["to_issue"].append((a["issue_ns"] - t0) / 1e3)
        parts["to_start"].append((a["start_ns"] - a["issue_ns"]) / 1e3)
        parts["device"].append((a["end_ns"] - a["start_ns"]) / 1e3)
        parts["to_client"].append((t1 - a["end_ns"]) / 1e3)
        parts["total"].append((t1 - t0) / 1e3)
    n = len(parts["total"])
    if not n:
        sys.exit("latency-parts: no H2D of the stamps is in the trace")
    out = [f"{label} rounds={n} of={len(stamps)} timing={'/'.join(sorted(map(str, timing)))}"]
    for k, v in parts.items():
        out.append(f"{k}_median_us={pct(v, 50):.2f} {k}_p90_us={pct(v, 90):.2f}")
    print(" ".join(out))


if __name__ == "__main__":
    main()
