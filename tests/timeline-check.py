"""Checks the structure of a timeline written by `sseqctl trace --chrome` (Chrome's Trace
Event Format) against what the daemon promised: every slice complete and named by
session, worker and kernel, one track per stream, flows that pair up and bind to the
producer's and the consumer's slices, and, for device-timed entries, every consumer
starting no earlier than the producer it depended on ended.
With --whole WHOLE and a filter (--session, --worker, --since-ms, --last-ms, as given to
`sseqctl trace --chrome`), FILE must hold exactly the operations of WHOLE that the filter
keeps, and fewer than WHOLE: --last counts back from the newest end among the session's
and worker's own. --only-worker W: every operation is W's.
Usage: timeline-check.py FILE [--min-ops N] [--min-flows N] [--device]
       [--whole WHOLE [--session N] [--worker W] [--since-ms MS] [--last-ms MS]]
       [--only-worker W]
Exit 0 with a summary line, 1 with every failure listed."""

import argparse
import json
import sys
from collections import Counter, defaultdict


def check(doc, min_ops, min_flows, device):
    bad = []
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["no traceEvents array"], ""
    evs = doc["traceEvents"]
    xs = [e for e in evs if e.get("ph") == "X"]
    if len(xs) < min_ops:
        bad.append("%d X events, fewer than %d" % (len(xs), min_ops))
    by_point = {}
    max_err = 0
    stream_track = defaultdict(set)
    track_stream = defaultdict(set)
    for e in xs:
        for k in ("ts", "dur", "pid", "tid", "name", "args"):
            if k not in e:
                bad.append("X event without %s: %r" % (k, e))
        a = e.get("args", {})
        if not isinstance(e.get("ts"), (int, float)) or not isinstance(e.get("dur"), (int, float)):
            bad.append("ts/dur not numbers: %r" % e)
            continue
        if e["dur"] < 0:
            bad.append("negative dur: %r" % e)
        what = a.get("kernel") if a.get("op") == "execute" else a.get("op")
        if a.get("op") == "execute" and not a.get("kernel"):
            bad.append("an execute without its kernel: %r" % e)
        want = "s%s %s %s" % (a.get("session"), a.get("worker") or "-", what)
        if e["name"] != want:
            bad.append("name %r, want %r (session, worker, kernel)" % (e["name"], want))
        if not a.get("worker"):
            bad.append("no worker label: %r" % e)
        # The microsecond fields say what the exact ns fields say.
        if abs(e["ts"] * 1000 - a.get("start_ns", -1)) > 1 or abs(
            e["dur"] * 1000 - (a.get("end_ns", 0) - a.get("start_ns", 0))
        ) > 1:
            bad.append("ts/dur disagree with start_ns/end_ns: %r" % e)
        if not a.get("issue_ns", 0) <= a.get("complete_ns", 0):
            bad.append("completed before it was issued: %r" % e)
        if a.get("timing") not in ("device", "observed"):
            bad.append("timing %r" % a.get("timing"))
        if device and a.get("timing") != "device":
            bad.append("not device-timed: %r" % e)
        # Device times are the device's clock mapped onto the host's, within the
        # mapping's error bound: against the host's own instants (issue, complete)
        # they may lie that far off; against each other they are exact.
        err = a.get("clock_error_ns")
        if not isinstance(err, int) or err < 0 or (a.get("timing") != "device" and err != 0):
            bad.append("clock_error_ns %r for %s timing: %r" % (err, a.get("timing"), e))
            err = 0
        max_err = max(max_err, err)
        if a.get("timing") == "device" and not (
            a["issue_ns"] <= a["start_ns"] + err
            and a["start_ns"] <= a["end_ns"]
            and a["end_ns"] <= a["complete_ns"] + err
        ):
            bad.append(
                "device times out of order (issue <= start <= end <= complete, within"
                " clock_error_ns): %r" % e
            )
        if a.get("point") in by_point:
            bad.append("point %s twice" % a.get("point"))
        by_point[a.get("point")] = e
        stream_track[a.get("stream")].add((e["pid"], e["tid"]))
        track_stream[(e["pid"], e["tid"])].add(a.get("stream"))
    # One track per stream, each named.
    for x, tracks in stream_track.items():
        if len(tracks) != 1:
            bad.append("stream %s on %d tracks" % (x, len(tracks)))
    for t, streams in track_stream.items():
        if len(streams) != 1:
            bad.append("track %r holds streams %r" % (t, streams))
    named = {(e.get("pid"), e.get("tid")) for e in evs if e.get("ph") == "M" and e.get("name") == "thread_name"}
    for t in track_stream:
        if t not in named:
            bad.append("track %r has no thread_name" % (t,))
    pnamed = {e.get("pid") for e in evs if e.get("ph") == "M" and e.get("name") == "process_name"}
    for t in track_stream:
        if t[0] not in pnamed:
            bad.append("process %r has no process_name" % (t[0],))
    # Flows pair up and bind to slices on their tracks.
    starts = {e["id"]: e for e in evs if e.get("ph") == "s"}
    ends = {e["id"]: e for e in evs if e.get("ph") == "f"}
    if len(starts) != sum(1 for e in evs if e.get("ph") == "s"):
        bad.append("flow ids repeat")
    if set(starts) != set(ends):
        bad.append("unpaired flows: %r" % sorted(set(starts) ^ set(ends))[:10])
    if len(starts) < min_flows:
        bad.append("%d flows, fewer than %d" % (len(starts), min_flows))

    def bound(ev):
        return [
            x
            for x in xs
            if (x["pid"], x["tid"]) == (ev["pid"], ev["tid"]) and x["ts"] <= ev["ts"] <= x["ts"] + x["dur"]
        ]

    for i, s in starts.items():
        f = ends.get(i)
        if not f:
            continue
        if f.get("bp") != "e":
            bad.append("flow end without bp e: %r" % f)
        if not bound(s) or not bound(f):
            bad.append("flow %s binds to no slice" % i)
    # Waits: each dependency names a producer; device-timed consumers start after it.
    ordered = waits = 0
    hows = Counter()
    for e in xs:
        for w in e["args"].get("waits", []):
            hows[w.get("how")] += 1
            waits += 1
            p = by_point.get(w.get("producer"))
            if not p:
                continue  # left the ring, or from before
            pa, ca = p["args"], e["args"]
            if w.get("how") == "wait" and pa["stream"] == ca["stream"]:
                bad.append("an event wait on its own stream: %s -> %s" % (pa["point"], ca["point"]))
            if pa["timing"] == ca["timing"] == "device" and w.get("how") != "legacy":
                ordered += 1
                if ca["start_ns"] < pa["end_ns"]:
                    bad.append(
                        "%s started at %d, before its producer %s ended at %d"
                        % (ca["point"], ca["start_ns"], pa["point"], pa["end_ns"])
                    )
    instants = sum(1 for e in evs if e.get("ph") == "i" and e.get("cat") == "wait")
    if instants != waits:
        bad.append("%d wait instants for %d waits" % (instants, waits))
    if min_flows and not ordered and device:
        bad.append("no device-timed producer/consumer pair to check")
    summary = "ops=%d tracks=%d flows=%d waits=%d (%s) ordered_pairs=%d clock_error_max_ns=%d" % (
        len(xs),
        len(track_stream),
        len(starts),
        waits,
        ", ".join("%s %d" % kv for kv in sorted(hows.items())),
        ordered,
        max_err,
    )
    return bad, summary


def kept_points(doc, session, worker, since_ms, last_ms):
    """The points of doc's operations that the filter keeps, as sseqctl keeps them."""
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    xs = [
        e
        for e in xs
        if (session is None or e["args"]["session"] == session)
        and (worker is None or e["args"]["worker"] == worker)
    ]
    cutoff = -1
    if since_ms is not None:
        cutoff = since_ms * 1000000
    if last_ms is not None and xs:
        cutoff = max(cutoff, max(e["args"]["end_ns"] for e in xs) - last_ms * 1000000)
    return {e["args"]["point"] for e in xs if e["args"]["end_ns"] >= cutoff}


def check_filter(doc, whole, a):
    bad = []
    have = {e["args"]["point"] for e in doc["traceEvents"] if e.get("ph") == "X"}
    want = kept_points(whole, a.session, a.worker, a.since_ms, a.last_ms)
    total = sum(1 for e in whole["traceEvents"] if e.get("ph") == "X")
    extra, missing = sorted(have - want), sorted(want - have)
    if extra:
        bad.append("%d operations the filter should have left out, e.g. %s" % (len(extra), extra[:5]))
    if missing:
        bad.append("%d operations the filter should have kept are missing, e.g. %s"
                   % (len(missing), missing[:5]))
    if not want or len(want) >= total:
        bad.append("a filter that keeps %d of %d operations tests nothing" % (len(want), total))
    return bad


def main():
    p = argparse.ArgumentParser()
    p.add_argument("file")
    p.add_argument("--min-ops", type=int, default=1)
    p.add_argument("--min-flows", type=int, default=0)
    p.add_argument("--device", action="store_true", help="every entry must be device-timed")
    p.add_argument("--whole", help="the unfiltered timeline FILE was cut from")
    p.add_argument("--session", type=int)
    p.add_argument("--worker")
    p.add_argument("--since-ms", type=int)
    p.add_argument("--last-ms", type=int)
    p.add_argument("--only-worker")
    a = p.parse_args()
    with open(a.file, encoding="utf-8") as f:  # strict: invalid UTF-8 fails here
        doc = json.load(f)
    bad, summary = check(doc, a.min_ops, a.min_flows, a.device)
    if a.whole and not bad:
        with open(a.whole, encoding="utf-8") as f:
            bad += check_filter(doc, json.load(f), a)
    if a.only_worker is not None:
        others = {
            e["args"]["worker"]
            for e in doc["traceEvents"]
            if e.get("ph") == "X" and e["args"]["worker"] != a.only_worker
        }
        if others:
            bad.append("operations of %s, not only %s's" % (sorted(others), a.only_worker))
    for b in bad[:30]:
        print("FAIL:", b, file=sys.stderr)
    if bad:
        print("%d failures" % len(bad), file=sys.stderr)
        return 1
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
