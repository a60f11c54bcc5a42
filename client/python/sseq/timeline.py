"""Draw an sseqd timeline (``sseqctl trace --chrome FILE``) as a PNG, for people without
a browser to open it in Perfetto::

    python3 -m sseq.timeline trace.json -o timeline.png
    python3 -m sseq.timeline trace.json --worker gw3 --last 2000 -o gw3.png

One row per track (stream), labelled with the sessions that used it; one bar per
operation, coloured by session and worker (the legend names them), with the kernel's
name on bars wide enough to hold it; a line from each producer to the operation that
waited for it, a tick where a wait was passed. ``--session``, ``--worker``, ``--since``
and ``--last`` keep some of the operations, as they do for ``sseqctl trace --chrome``.
A daemon that served for a while leaves bursts of work between long idle stretches:
when idle time is most of what would be shown, the idle gaps are cut out of the time
axis (each marked with how long it was, and the plot says so); ``--gaps keep`` draws
the real axis. A render that takes a while says what it is doing on stderr.

Any Chrome trace-event JSON with "X" slices will do. Needs matplotlib (Debian:
python3-matplotlib); it draws with the Agg backend, so no display is needed.
"""

import argparse
import bisect
import dataclasses
import json
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

COLOURS = {
    "h2d": "#4c72b0",
    "d2h": "#55a868",
    "d2d": "#8172b2",
    "execute": "#dd8452",
}
# One colour per session and worker: matplotlib's tab10, then tab20's lighter halves.
PALETTE = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    "#7f7f7f", "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896",
    "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5",
]
LEGEND_OWNERS = 20  # legend entries for sessions; the rest are counted
MAX_SLICE_LABELS = 600  # kernel names drawn on bars, at most
MAX_ARROWS = 400  # producer -> consumer arrows with heads; past it, plain lines
DPI = 110
EXIT_BAD_INPUT = 1
EXIT_USAGE = 2
EXIT_NO_MATPLOTLIB = 3


class TimelineError(Exception):
    """The file is not a trace this can draw, or nothing in it matches; the message says
    why."""


Track = Tuple[Any, Any]  # (pid, tid)
Owner = Tuple[Any, str]  # (session, worker) of an sseq slice, or (None, its category)


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
        self.other: Dict[str, Any] = {}  # otherData: what sseqctl says about the file
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


def owner(s: Dict[str, Any]) -> Owner:
    """Whose operation a slice is: (session, worker) from sseqctl's args; a slice of
    another program's trace belongs to its category."""
    a = s.get("args") if isinstance(s.get("args"), dict) else {}
    if "session" in a:
        return (a.get("session"), str(a.get("worker") or "-"))
    return (None, str(s.get("cat") or "other"))


def owner_label(o: Owner) -> str:
    return o[1] if o[0] is None else "s%s %s" % o


def _owner_key(o: Owner) -> Tuple[int, float, str, str]:
    try:
        return (0, float(o[0]), "", o[1])
    except (TypeError, ValueError):
        return (1, 0.0, str(o[0]), o[1])


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
    if isinstance(doc, dict) and isinstance(doc.get("otherData"), dict):
        tr.other = doc["otherData"]
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


# ---- which operations ----


@dataclasses.dataclass
class Filter:
    """Which operations to draw; all of them when nothing is set. Times are the trace's
    own (sseqctl's: since the daemon started), in milliseconds."""

    session: Optional[int] = None  # this session's only
    worker: Optional[str] = None  # this worker id's (or client name's) only
    since_ms: Optional[float] = None  # those that ended at or after it
    last_ms: Optional[float] = None  # those that ended within it of the newest end

    def empty(self) -> bool:
        return self.session is None and self.worker is None and self.since_ms is None and (
            self.last_ms is None
        )

    def describe(self) -> str:
        """As the command line says it."""
        parts = []
        if self.session is not None:
            parts.append("--session %s" % self.session)
        if self.worker is not None:
            parts.append("--worker %s" % self.worker)
        if self.since_ms is not None:
            parts.append("--since %g" % self.since_ms)
        if self.last_ms is not None:
            parts.append("--last %g" % self.last_ms)
        return " ".join(parts)


def _matches(f: Filter, s: Dict[str, Any]) -> bool:
    o = owner(s)
    if f.session is not None and (o[0] is None or str(o[0]) != str(f.session)):
        return False
    return f.worker is None or (o[0] is not None and o[1] == f.worker)


def select(tr: Trace, f: Filter) -> Trace:
    """The part of tr that f keeps: the session's and worker's slices, of those the ones
    that ended in the time asked for (--last counts back from the newest end among
    them, as sseqctl does), and the waits and arrows that bind to slices kept. Raises
    TimelineError, naming what the trace does hold, when nothing is left."""
    if f.empty():
        return tr
    kept = [s for s in tr.slices if _matches(f, s)]
    cutoff = float("-inf")
    if f.since_ms is not None:
        cutoff = f.since_ms * 1000.0
    if f.last_ms is not None and kept:
        newest = max(s["ts"] + s["dur"] for s in kept)
        cutoff = max(cutoff, newest - f.last_ms * 1000.0)
    kept = [s for s in kept if s["ts"] + s["dur"] >= cutoff]
    if not kept:
        owners = sorted({owner(s) for s in tr.slices}, key=_owner_key)
        t0 = min(s["ts"] for s in tr.slices)
        t1 = max(s["ts"] + s["dur"] for s in tr.slices)
        raise TimelineError(
            "no operation matches %s: the trace holds %d, from %.3f to %.3f ms, of %s"
            % (
                f.describe(),
                len(tr.slices),
                t0 / 1000.0,
                t1 / 1000.0,
                ", ".join(owner_label(o) for o in owners[:12]) + (" and more" if len(owners) > 12 else ""),
            )
        )
    ids = {id(s) for s in kept}

    def bound(ev: Dict[str, Any]) -> bool:
        sl = tr.enclosing((ev.get("pid"), ev.get("tid")), ev["ts"])
        return sl is not None and id(sl) in ids

    out = Trace()
    out.slices = kept
    out.instants = [i for i in tr.instants if bound(i)]
    for k, s in tr.flow_starts.items():
        e = tr.flow_ends.get(k)
        if e is not None and bound(s) and bound(e):
            out.flow_starts[k], out.flow_ends[k] = s, e
    out.process_names, out.process_order = tr.process_names, tr.process_order
    out.thread_names, out.thread_order = tr.thread_names, tr.thread_order
    out.other = tr.other
    return out


# ---- the time axis ----


class TimeAxis:
    """Where a time goes across the plot. Either the real axis, time since the first
    operation shown, or one with the long idle gaps cut out: the busy stretches side by
    side at their own scale, a narrow band for each gap between them."""

    MIN_GAP_US = 1000.0  # a gap shorter than a millisecond is never cut

    def __init__(self, slices: Sequence[Dict[str, Any]], gaps: str = "auto") -> None:
        ivs = sorted((s["ts"], s["ts"] + s["dur"]) for s in slices)
        self.t0, self.t1 = ivs[0][0], max(e for _, e in ivs)
        self.span = max(self.t1 - self.t0, 1e-3)
        # The busy intervals (the union of the slices) and the idle gaps between them.
        busy: List[List[float]] = []
        for a, b in ivs:
            if busy and a <= busy[-1][1]:
                busy[-1][1] = max(busy[-1][1], b)
            else:
                busy.append([a, b])
        idle = [(busy[i][1], busy[i + 1][0]) for i in range(len(busy) - 1)]
        busy_us = sum(b - a for a, b in busy)
        # The longest gaps go, until the idle time left between the bars is no more than
        # the busy time (a quarter of it when asked to compress): then every burst is as
        # wide as the time it took allows. Nothing goes when idle time is not most of
        # the span, unless asked to compress.
        left = sum(b - a for a, b in idle)
        target = busy_us / 4 if gaps == "compress" else busy_us
        cuts = []
        for a, b in sorted(idle, key=lambda g: g[0] - g[1]):
            if gaps == "keep" or left <= target or b - a < self.MIN_GAP_US:
                break
            cuts.append((a, b))
            left -= b - a
        # Nor should one gap left take much of the axis: cut those longer than a
        # twentieth of what is left shown, until none is.
        done = set(cuts)
        while cuts:
            threshold = max((busy_us + left) / 20, self.MIN_GAP_US)
            more = [g for g in idle if g[1] - g[0] > threshold and g not in done]
            if not more:
                break
            cuts += more
            done.update(more)
            left -= sum(b - a for a, b in more)
        cuts.sort()
        self.compressed = bool(cuts)
        self.idle_cut = sum(b - a for a, b in cuts)
        self.gaps: List[Tuple[float, float]] = []
        if not self.compressed:
            self.stretches = [(self.t0, self.t1)]
        else:
            self.gaps = cuts
            self.stretches = []
            start = self.t0
            for a, b in cuts:
                self.stretches.append((start, a))
                start = b
            self.stretches.append((start, self.t1))
        shown = sum(b - a for a, b in self.stretches)
        # Each gap a band as wide as 4% of the time shown, narrower when there are many:
        # all of them together at most 30% of it.
        self.gap_width = shown * min(0.04, 0.3 / len(self.gaps)) if self.gaps else 0.0
        longest = max(b - a for a, b in self.stretches)
        if longest >= 20e6:
            self.scale, self.unit = 1e-6, "s"
        elif longest >= 1000:
            self.scale, self.unit = 1e-3, "ms"
        else:
            self.scale, self.unit = 1.0, "\u00b5s"
        self._real: List[float] = []
        self._axis: List[float] = []
        x = 0.0
        for i, (a, b) in enumerate(self.stretches):
            if i:
                x += self.gap_width
            self._real += [a, b]
            self._axis += [x, x + (b - a)]
            x += b - a
        self.length = max(x, 1e-3) * self.scale

    def x(self, ts: float) -> float:
        """Where ts goes on the axis (in self.unit); a time inside a cut gap goes
        proportionally into its band."""
        r, a = self._real, self._axis
        if ts <= r[0]:
            return (a[0] + ts - r[0]) * self.scale
        if ts >= r[-1]:
            return (a[-1] + ts - r[-1]) * self.scale
        i = bisect.bisect_right(r, ts) - 1
        if r[i + 1] == r[i]:
            return a[i] * self.scale
        return (a[i] + (ts - r[i]) * (a[i + 1] - a[i]) / (r[i + 1] - r[i])) * self.scale

    def stretch_ranges(self) -> List[Tuple[float, float, float, float]]:
        """(axis start, axis end, real start, real end) per busy stretch."""
        return [
            (self._axis[2 * i] * self.scale, self._axis[2 * i + 1] * self.scale, a, b)
            for i, (a, b) in enumerate(self.stretches)
        ]


def _duration(us: float) -> str:
    if us >= 60e6:
        return "%.1f min" % (us / 60e6)
    if us >= 1e6:
        return "%.1f s" % (us / 1e6)
    if us >= 1e3:
        return "%.1f ms" % (us / 1e3)
    return "%.0f \u00b5s" % us


def _ink(fill: str) -> str:
    """Text that reads on a bar of colour fill ("#rrggbb"): white on dark, black on light."""
    r, g, b = (int(fill[i:i + 2], 16) for i in (1, 3, 5))
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "white"


def _tick_text(v: float) -> str:
    return ("%.3f" % v).rstrip("0").rstrip(".")


# ---- progress ----


class Progress:
    """Stage lines on stderr while a render takes a while: every stage when asked for
    (--progress), else from the first that comes a second or more after the start."""

    AFTER_S = 1.0
    LONG = 2000  # operations that make a render long enough to say every stage of

    def __init__(self, always: bool = False, stream: Any = None) -> None:
        self.always = always
        self.printed = False
        self.stream = stream if stream is not None else sys.stderr
        self.start = time.monotonic()
        self.lines: List[str] = []

    def step(self, what: str) -> None:
        elapsed = time.monotonic() - self.start
        if not self.always and elapsed < self.AFTER_S:
            return
        if what == "done" and not self.printed:
            return  # a lone "done" says nothing
        line = "sseq.timeline: [%.1f s] %s" % (elapsed, what)
        self.lines.append(line)
        self.printed = True
        print(line, file=self.stream, flush=True)


# ---- the picture ----


@dataclasses.dataclass
class Drawing:
    """What render drew, for its caller to report (and tests to check)."""

    operations: int
    tracks: List[str]
    track_labels: List[str]  # as drawn: the track's name, then who used it
    owners: List[str]  # the legend's sessions and workers, in its order
    owner_kind: Tuple[str, str]  # what they are: ("session", "sessions") or categories
    legend: List[str]  # every legend entry
    slice_labels: List[str]  # kernel names drawn on bars
    title: str
    note: str  # the line under the title: what is left out or cut
    compressed: bool
    gaps: int  # idle gaps cut out of the axis
    idle_cut_us: float
    shown_us: Tuple[float, float]  # the first start and the last end drawn
    unit: str
    arrows: int


def render(
    tr: Trace,
    out: str,
    title: Optional[str] = None,
    width: float = 14.0,
    gaps: str = "auto",
    progress: Optional[Progress] = None,
    note: str = "",
) -> Drawing:
    """Draw tr into the image file out (its extension picks the format: .png, .svg).
    gaps: "auto" cuts the long idle gaps out of the time axis when idle time is most of
    it, "compress" cuts harder and even when it is not, "keep" never (see TimeAxis).
    note: a line for under the title (what was filtered out)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator
    from matplotlib.transforms import blended_transform_factory

    prog = progress or Progress()
    if len(tr.slices) >= Progress.LONG:
        prog.always = True
    tracks = tr.tracks()
    row = {t: i for i, t in enumerate(tracks)}
    prog.step("laying out %d operations on %d tracks" % (len(tr.slices), len(tracks)))
    axis = TimeAxis(tr.slices, gaps)

    # Sessions and workers: a colour each, in session order.
    counts: Dict[Owner, int] = {}
    for s in tr.slices:
        o = owner(s)
        counts[o] = counts.get(o, 0) + 1
    owners = sorted(counts, key=_owner_key)
    colour = {o: PALETTE[i % len(PALETTE)] for i, o in enumerate(owners)}
    # Which sessions used each track: a session's lanes and copy streams are its own
    # while it lives, so most tracks name one.
    on_track: Dict[Track, Dict[Owner, int]] = {}
    for s in tr.slices:
        d = on_track.setdefault((s["pid"], s["tid"]), {})
        d[owner(s)] = d.get(owner(s), 0) + 1

    def track_label(t: Track) -> str:
        users = sorted(on_track.get(t, {}), key=_owner_key)
        name = tr.track_name(t)
        if not users or users[0][0] is None:
            return name
        more = " +%d more" % (len(users) - 1) if len(users) > 1 else ""
        return "%s\n%s%s" % (name, owner_label(users[0]), more)

    fig_h = max(3.0, 0.5 * len(tracks) + 2.0)
    fig, ax = plt.subplots(figsize=(width, fig_h))
    # The plot's width in pixels, roughly (the legend and labels take the rest): what
    # decides whether a kernel's name fits on its bar.
    axes_px = width * DPI * 0.72
    px_per_unit = axes_px / axis.length
    min_w = 1.2 / px_per_unit  # a bar of no duration still shows
    prog.step("drawing %d bars" % len(tr.slices))
    bars: Dict[Tuple[Owner, int, bool], List[Tuple[float, float]]] = {}
    for s in tr.slices:
        r = row[(s["pid"], s["tid"])]
        x0 = axis.x(s["ts"])
        w = max(axis.x(s["ts"] + s["dur"]) - x0, min_w)
        bars.setdefault((owner(s), r, w * px_per_unit >= 4), []).append((x0, w))
    for (o, r, wide), spans in bars.items():
        # A thin white edge tells back-to-back operations of one session apart, where
        # they are wide enough to keep their colour with it.
        ax.broken_barh(spans, (r - 0.35, 0.7), facecolors=colour[o],
                       edgecolor="white" if wide else "none", linewidth=0.3)

    # Kernel names where they fit, the widest first when there are too many to draw.
    char_px = 0.6 * 6.0 * DPI / 72.0
    fits = []
    for s in tr.slices:
        a = s.get("args") if isinstance(s.get("args"), dict) else {}
        text = str(a.get("kernel") or "") or (str(s.get("name") or "") if "session" not in a else "")
        if not text:
            continue
        w_px = (axis.x(s["ts"] + s["dur"]) - axis.x(s["ts"])) * px_per_unit
        if w_px >= len(text) * char_px + 4:
            fits.append((w_px, text, s))
    fits.sort(key=lambda f: -f[0])
    labels = []
    for _, text, s in fits[:MAX_SLICE_LABELS]:
        ax.text(
            axis.x(s["ts"] + s["dur"] / 2),
            row[(s["pid"], s["tid"])],
            text,
            ha="center",
            va="center",
            fontsize=6,
            color=_ink(colour[owner(s)]),
            clip_on=True,
        )
        labels.append(text)

    flows = []
    for s, f in tr.flows():
        a, b = (s.get("pid"), s.get("tid")), (f.get("pid"), f.get("tid"))
        if a not in row or b not in row:
            continue
        # As a viewer binds them: from the end of the producer's slice to the start of
        # the consumer's.
        prod, cons = tr.enclosing(a, s["ts"]), tr.enclosing(b, f["ts"])
        x0 = prod["ts"] + prod["dur"] if prod else s["ts"]
        x1 = cons["ts"] if cons else f["ts"]
        flows.append(((axis.x(x0), row[a]), (axis.x(x1), row[b])))
    prog.step("drawing %d arrows" % len(flows))
    if len(flows) <= MAX_ARROWS:
        for p0, p1 in flows:
            ax.annotate(
                "",
                xy=p1,
                xytext=p0,
                arrowprops=dict(arrowstyle="->", color="#444444", lw=0.6, alpha=0.6),
            )
    else:
        # Too many for heads: fainter lines, so the bars still show through.
        ax.add_collection(LineCollection(flows, colors="#444444", linewidths=0.4, alpha=0.2))

    handles: List[Any] = []
    for o in owners[:LEGEND_OWNERS]:
        handles.append(Patch(color=colour[o], label="%s (%d %s)" % (
            owner_label(o), counts[o], "op" if counts[o] == 1 else "ops")))
    if len(owners) > LEGEND_OWNERS:
        handles.append(
            Patch(color="#ffffff", label="... %d more sessions" % (len(owners) - LEGEND_OWNERS))
        )
    marks = {
        "wait": ("v", "#c44e52", "event wait"),
        "observed": ("v", "#999999", "elided: seen complete"),
        "legacy": ("x", "#000000", "MISSING WAIT (legacy)"),
    }
    for how, (marker, mcolour, label) in marks.items():
        waits = [
            i
            for i in tr.instants
            if (i.get("pid"), i.get("tid")) in row
            and ((i.get("args") or {}).get("how", "wait") == how)
        ]
        if not waits:
            continue
        ax.scatter(
            [axis.x(i["ts"]) for i in waits],
            [row[(i["pid"], i["tid"])] - 0.42 for i in waits],
            marker=marker,
            s=10,
            color=mcolour,
            zorder=3,
        )
        handles.append(plt.Line2D([], [], marker=marker, color=mcolour, linestyle="none", label=label))
    if flows:
        handles.append(plt.Line2D([], [], color="#444444", lw=0.8, label="producer \u2192 consumer"))

    ax.set_yticks(range(len(tracks)))
    ax.set_yticklabels([track_label(t) for t in tracks], fontsize=7)
    ax.set_ylim(len(tracks) - 0.4, -0.6)
    ax.set_xlim(-axis.length * 0.01, axis.length * 1.01)
    ax.grid(axis="x", alpha=0.3)
    top = blended_transform_factory(ax.transData, ax.transAxes)
    # sseqctl's slices say whose they are, and their clock starts with the daemon; another
    # program's trace is told by category, on its own clock.
    sseq = any(o[0] is not None for o in owners)
    clock = "since the daemon started" if sseq else "on the trace's clock"
    who = ("session", "sessions") if sseq else ("category", "categories")
    if axis.compressed:
        # Each busy stretch its own ticks, counted from its start; its start (daemon
        # time) above it; each cut gap a grey band saying how long it was.
        ticks, ticklabels = [], []
        right_px = -1e9
        for x0, x1, a, _ in axis.stretch_ranges():
            w_px = (x1 - x0) * px_per_unit
            nb = int(w_px // 70)
            vals = [0.0]
            if nb >= 1:
                vals = [
                    v
                    for v in MaxNLocator(nbins=nb + 1, steps=[1, 2, 2.5, 5, 10]).tick_values(0, x1 - x0)
                    if -1e-9 <= v <= (x1 - x0) * (1 + 1e-9)
                ]
            for v in vals:
                # The start is the time above it; its tick unlabelled.
                ticks.append(x0 + v)
                ticklabels.append("+" + _tick_text(v) if v else "")
            head = "%.3f s" % (a / 1e6)
            if x0 * px_per_unit >= right_px + 6:
                ax.text(x0, 1.005, head, transform=top, fontsize=6, ha="left", va="bottom",
                        color="#333333")
                right_px = x0 * px_per_unit + len(head) * char_px
        for (ga, gb), (_, x1, _, _) in zip(axis.gaps, axis.stretch_ranges()):
            gx0, gx1 = x1, x1 + axis.gap_width * axis.scale
            ax.axvspan(gx0, gx1, color="#e8e8e8", zorder=0, lw=0)
            if (gx1 - gx0) * px_per_unit >= 8:
                ax.text((gx0 + gx1) / 2, 0.5, "%s idle" % _duration(gb - ga), transform=top,
                        rotation=90, fontsize=6, ha="center", va="center", color="#666666")
        ax.set_xticks(ticks)
        ax.set_xticklabels(ticklabels, fontsize=7)
        ax.set_xlabel(
            "%s from the start of each busy stretch (its start above it, in seconds %s); "
            "grey: idle, not to scale" % (axis.unit, clock)
        )
        lens = [b - a for a, b in axis.gaps]
        cut_note = "%d idle %s cut out of the time axis (%s%s in all)" % (
            len(lens),
            "gap" if len(lens) == 1 else "gaps",
            "" if len(lens) == 1 else "%s to %s each, " % (_duration(min(lens)), _duration(max(lens))),
            _duration(axis.idle_cut),
        )
    else:
        # The real axis, from the first operation shown.
        ax.set_xlabel(
            "%s since the first operation shown (at %.3f s %s)" % (axis.unit, axis.t0 / 1e6, clock)
        )
        cut_note = ""
    notes = [n for n in (note, cut_note) if n]
    heading = title or "sseq timeline: %d operations on %d tracks, %d %s, %s to %s s" % (
        len(tr.slices),
        len(tracks),
        len(owners),
        who[0] if len(owners) == 1 else who[1],
        _tick_text(axis.t0 / 1e6),
        _tick_text(axis.t1 / 1e6),
    )
    ax.set_title(heading + ("\n" + "; ".join(notes) if notes else ""), fontsize=9,
                 pad=14 if axis.compressed else 6)
    # Beside the plot, not over the bars.
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=7,
              title="session worker" if sseq else "category", title_fontsize=7)
    prog.step("writing %s" % out)
    fig.tight_layout()
    fig.savefig(out, dpi=DPI)
    plt.close(fig)
    prog.step("done")
    return Drawing(
        operations=len(tr.slices),
        tracks=[tr.track_name(t) for t in tracks],
        track_labels=[track_label(t) for t in tracks],
        owners=[owner_label(o) for o in owners],
        owner_kind=who,
        legend=[h.get_label() for h in handles],
        slice_labels=labels,
        title=heading,
        note="; ".join(notes),
        compressed=axis.compressed,
        gaps=len(axis.gaps),
        idle_cut_us=axis.idle_cut,
        shown_us=(axis.t0, axis.t1),
        unit=axis.unit,
        arrows=len(flows),
    )


def _ms(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("want milliseconds, not %r" % text) from None
    if not v >= 0 or v == float("inf"):
        raise argparse.ArgumentTypeError("want milliseconds, 0 or more, not %r" % text)
    return v


def _session(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError("want a session number, 1 or more, not %r" % text)
    return v


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(
        prog="python3 -m sseq.timeline",
        description="Draw a timeline written by 'sseqctl trace --chrome FILE' as an image.",
    )
    p.add_argument("trace", help="the Chrome trace-event JSON file")
    p.add_argument("-o", "--output", default="timeline.png", help="image to write (default %(default)s)")
    p.add_argument("--title", help="the plot's title")
    p.add_argument("--width", type=float, default=14.0, help="inches (default %(default)s)")
    p.add_argument("--session", type=_session, help="only session N's operations")
    p.add_argument("--worker", help="only worker NAME's operations (its worker id, else client name)")
    p.add_argument("--since", type=_ms, metavar="MS",
                   help="only operations that ended MS ms or more after the daemon started")
    p.add_argument("--last", type=_ms, metavar="MS",
                   help="only operations that ended in the MS ms up to the newest one's end")
    p.add_argument("--gaps", choices=("auto", "compress", "keep"), default="auto",
                   help="cut idle gaps out of the time axis when idle time is most of it "
                   "(auto, the default); cut harder, and even when it is not (compress); "
                   "or never (keep)")
    p.add_argument("--progress", action="store_true",
                   help="say each stage on stderr (by default only once a render takes a second)")
    args = p.parse_args(argv)
    if args.last is not None and args.last <= 0:
        p.error("argument --last: want milliseconds, more than 0")
    prog = Progress(always=args.progress)
    flt = Filter(session=args.session, worker=args.worker, since_ms=args.since, last_ms=args.last)
    try:
        tr = load(args.trace)
        if len(tr.slices) >= Progress.LONG:
            prog.always = True
        prog.step("read %d operations from %s" % (len(tr.slices), args.trace))
        whole = len(tr.slices)
        tr = select(tr, flt)
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
    notes = []
    if isinstance(tr.other.get("filter"), str) and tr.other["filter"]:
        notes.append("sseqctl kept %s" % tr.other["filter"])
    if not flt.empty():
        notes.append("%d of %d operations: %s" % (len(tr.slices), whole, flt.describe()))
    try:
        d = render(tr, args.output, args.title, args.width, args.gaps, prog, "; ".join(notes))
    except (OSError, ValueError) as e:
        print("sseq.timeline: cannot write %s: %s" % (args.output, e), file=sys.stderr)
        return EXIT_BAD_INPUT
    print(
        "sseq.timeline: %d operations, %d tracks, %d %s, %d arrows%s -> %s"
        % (
            d.operations,
            len(d.tracks),
            len(d.owners),
            d.owner_kind[0] if len(d.owners) == 1 else d.owner_kind[1],
            d.arrows,
            ", %d idle %s cut out" % (d.gaps, "gap" if d.gaps == 1 else "gaps") if d.compressed else "",
            args.output,
        ),
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
