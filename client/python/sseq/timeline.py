"""Draw an sseqd timeline (``sseqctl trace --chrome FILE``) as a PNG, for people without
a browser to open it in Perfetto::

    python3 -m sseq.timeline trace.json -o timeline.png

One row per track (stream), one bar per operation coloured by kind, a line from each
producer to the operation that waited for it, a tick where a wait was passed. Any
Chrome trace-event JSON with "X" slices will do. Needs matplotlib (Debian:
python3-matplotlib); it draws with the Agg backend, so no display is needed.
"""

import argparse
import bisect
import json
import sys
from typing import Any, Dict, List, Optional, Tuple

COLOURS = {
    "h2d": "#4c72b0",
    "d2h": "#55a868",
    "d2d": "#8172b2",
    "execute": "#dd8452",
}
EXIT_BAD_INPUT = 1
EXIT_USAGE = 2
EXIT_NO_MATPLOTLIB = 3


class TimelineError(Exception):
    """The file is not a trace this can draw; the message says why."""


Track = Tuple[Any, Any]  # (pid, tid)


class Trace:
    """The parts of a trace-event file the drawing needs."""

    def __init__(self) -> None:
        self.slices: List[Dict[str, Any]] = []
        self.instants: List[Dict[str, Any]] = []
        self.flow_starts: Dict[Any, Dict[str, Any]] = {}
        self.flow_ends: Dict[Any, Dict[str, Any]] = {}
        self.process_names: Dict[Any, str] = {}
        self.process_order: Dict[Any, float] = {}
        self.thread_names: Dict[Track, str] = {}
        self.thread_order: Dict[Track, float] = {}
        self._by_track: Optional[Dict[Track, Tuple[List[float], List[Dict[str, Any]]]]] = None

    def tracks(self) -> List[Track]:
        """Every track that has a slice, in the order the trace asks for."""
        seen = {(s["pid"], s["tid"]) for s in self.slices}

        def key(t: Track) -> Tuple[float, str, float, str]:
            return (
                self.process_order.get(t[0], 1e9),
                str(t[0]),
                self.thread_order.get(t, 1e9),
                str(t[1]),
            )

        return sorted(seen, key=key)

    def track_name(self, t: Track) -> str:
        return self.thread_names.get(t) or "%s / %s" % (
            self.process_names.get(t[0], "pid %s" % t[0]),
            "tid %s" % t[1],
        )

    def enclosing(self, track: Track, ts: float) -> Optional[Dict[str, Any]]:
        """The slice on track that holds ts (the latest to start at or before it, as
        viewers bind flow events), or None."""
        if self._by_track is None:
            self._by_track = {}
            for sl in sorted(self.slices, key=lambda sl: sl["ts"]):
                starts, lst = self._by_track.setdefault((sl["pid"], sl["tid"]), ([], []))
                starts.append(sl["ts"])
                lst.append(sl)
        starts, lst = self._by_track.get(track, ([], []))
        i = bisect.bisect_right(starts, ts) - 1
        if i >= 0 and lst[i]["ts"] + lst[i]["dur"] >= ts:
            return lst[i]
        return None

    def flows(self) -> List[Tuple[Dict[str, Any], Dict[str, Any]]]:
        return [(s, self.flow_ends[i]) for i, s in self.flow_starts.items() if i in self.flow_ends]


def _number(ev: Dict[str, Any], key: str, where: str) -> float:
    v = ev.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TimelineError("%s: %r is %r, not a number" % (where, key, v))
    return float(v)


def parse(doc: Any, name: str = "trace") -> Trace:
    """A Trace from a loaded JSON document (an object with traceEvents, or the bare
    array the format also allows)."""
    if isinstance(doc, dict):
        if "traceEvents" not in doc:
            raise TimelineError("%s: a JSON object without 'traceEvents': not a Chrome trace" % name)
        events = doc["traceEvents"]
    else:
        events = doc
    if not isinstance(events, list):
        raise TimelineError("%s: 'traceEvents' is not an array" % name)
    tr = Trace()
    for i, ev in enumerate(events):
        where = "%s: event %d" % (name, i)
        if not isinstance(ev, dict):
            raise TimelineError("%s is not an object" % where)
        ph = ev.get("ph")
        if ph == "X":
            for k in ("pid", "tid"):
                if k not in ev:
                    raise TimelineError("%s: an X event without %r" % (where, k))
            ts, dur = _number(ev, "ts", where), _number(ev, "dur", where)
            if dur < 0:
                raise TimelineError("%s: negative duration %r" % (where, dur))
            tr.slices.append(dict(ev, ts=ts, dur=dur))
        elif ph in ("i", "I"):
            tr.instants.append(dict(ev, ts=_number(ev, "ts", where)))
        elif ph in ("s", "f"):
            if "id" not in ev:
                raise TimelineError("%s: a flow event without 'id'" % where)
            target = tr.flow_starts if ph == "s" else tr.flow_ends
            target[(ev.get("cat"), ev["id"])] = dict(ev, ts=_number(ev, "ts", where))
        elif ph == "M":
            args = ev.get("args") or {}
            if ev.get("name") == "process_name":
                tr.process_names[ev.get("pid")] = str(args.get("name", ""))
            elif ev.get("name") == "process_sort_index":
                tr.process_order[ev.get("pid")] = float(args.get("sort_index", 0))
            elif ev.get("name") == "thread_name":
                tr.thread_names[(ev.get("pid"), ev.get("tid"))] = str(args.get("name", ""))
            elif ev.get("name") == "thread_sort_index":
                tr.thread_order[(ev.get("pid"), ev.get("tid"))] = float(args.get("sort_index", 0))
    if not tr.slices:
        raise TimelineError(
            "%s: no operations (no \"X\" events) to draw: had the daemon completed any work?" % name
        )
    return tr


def load(path: str) -> Trace:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise TimelineError("cannot read %s: %s" % (path, e.strerror or e)) from None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise TimelineError("%s is not UTF-8 text (byte %d)" % (path, e.start)) from None
    except json.JSONDecodeError as e:
        raise TimelineError(
            "%s is not valid JSON: %s at line %d column %d" % (path, e.msg, e.lineno, e.colno)
        ) from None
    return parse(doc, path)


def render(tr: Trace, out: str, title: Optional[str] = None, width: float = 14.0) -> None:
    """Draw tr into the image file out (its extension picks the format: .png, .svg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    tracks = tr.tracks()
    row = {t: i for i, t in enumerate(tracks)}
    t0 = min(s["ts"] for s in tr.slices)
    t1 = max(s["ts"] + s["dur"] for s in tr.slices)
    span = max(t1 - t0, 1e-3)
    # Milliseconds past the first op, unless the whole trace is shorter than one.
    scale, unit = (1e-3, "ms") if span >= 1000 else (1.0, "\u00b5s")

    def x(ts: float) -> float:
        return (ts - t0) * scale

    fig_h = max(2.5, 0.45 * len(tracks) + 1.5)
    fig, ax = plt.subplots(figsize=(width, fig_h))
    min_w = span * scale / 2000  # a bar of no duration still shows
    bars: Dict[Tuple[str, int], List[Tuple[float, float]]] = {}
    for s in tr.slices:
        kind = str(s.get("cat") or "other")
        r = row[(s["pid"], s["tid"])]
        bars.setdefault((kind, r), []).append((x(s["ts"]), max(s["dur"] * scale, min_w)))
    handles = []
    for (kind, r), spans in sorted(bars.items()):
        ax.broken_barh(spans, (r - 0.35, 0.7), facecolors=COLOURS.get(kind, "#937860"))
    for kind in sorted({k for k, _ in bars}):
        handles.append(Patch(color=COLOURS.get(kind, "#937860"), label=kind))
    nflows = 0
    for s, f in tr.flows():
        a, b = (s.get("pid"), s.get("tid")), (f.get("pid"), f.get("tid"))
        if a not in row or b not in row:
            continue
        # As a viewer binds them: from the end of the producer's slice to the start of
        # the consumer's.
        prod, cons = tr.enclosing(a, s["ts"]), tr.enclosing(b, f["ts"])
        x0 = prod["ts"] + prod["dur"] if prod else s["ts"]
        x1 = cons["ts"] if cons else f["ts"]
        nflows += 1
        ax.annotate(
            "",
            xy=(x(x1), row[b]),
            xytext=(x(x0), row[a]),
            arrowprops=dict(arrowstyle="->", color="#444444", lw=0.6, alpha=0.6),
        )
    marks = {
        "wait": ("v", "#c44e52", "event wait"),
        "observed": ("v", "#999999", "elided: seen complete"),
        "legacy": ("x", "#000000", "MISSING WAIT (legacy)"),
    }
    for how, (marker, colour, label) in marks.items():
        waits = [
            i
            for i in tr.instants
            if (i.get("pid"), i.get("tid")) in row
            and ((i.get("args") or {}).get("how", "wait") == how)
        ]
        if not waits:
            continue
        ax.scatter(
            [x(i["ts"]) for i in waits],
            [row[(i["pid"], i["tid"])] - 0.42 for i in waits],
            marker=marker,
            s=10,
            color=colour,
            zorder=3,
        )
        handles.append(plt.Line2D([], [], marker=marker, color=colour, linestyle="none", label=label))
    if nflows:
        handles.append(plt.Line2D([], [], color="#444444", lw=0.8, label="producer \u2192 consumer"))
    ax.set_yticks(range(len(tracks)))
    ax.set_yticklabels([tr.track_name(t) for t in tracks], fontsize=8)
    ax.set_ylim(len(tracks) - 0.4, -0.6)
    ax.set_xlim(-span * scale * 0.01, span * scale * 1.01)
    ax.set_xlabel("time since the first operation (%s)" % unit)
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(
        title or "sseq timeline: %d operations on %d tracks" % (len(tr.slices), len(tracks)),
        fontsize=10,
    )
    # Beside the plot, not over the bars.
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(
        prog="python3 -m sseq.timeline",
        description="Draw a timeline written by 'sseqctl trace --chrome FILE' as an image.",
    )
    p.add_argument("trace", help="the Chrome trace-event JSON file")
    p.add_argument("-o", "--output", default="timeline.png", help="image to write (default %(default)s)")
    p.add_argument("--title", help="the plot's title")
    p.add_argument("--width", type=float, default=14.0, help="inches (default %(default)s)")
    args = p.parse_args(argv)
    try:
        tr = load(args.trace)
    except TimelineError as e:
        print("sseq.timeline: %s" % e, file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print(
            "sseq.timeline: drawing needs matplotlib (Debian: apt install python3-matplotlib)",
            file=sys.stderr,
        )
        return EXIT_NO_MATPLOTLIB
    try:
        render(tr, args.output, args.title, args.width)
    except (OSError, ValueError) as e:
        print("sseq.timeline: cannot write %s: %s" % (args.output, e), file=sys.stderr)
        return EXIT_BAD_INPUT
    print(
        "sseq.timeline: %d operations, %d tracks, %d arrows -> %s"
        % (len(tr.slices), len(tr.tracks()), len(tr.flows()), args.output),
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
