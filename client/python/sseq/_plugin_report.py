"""What the plugin reports beyond pass and fail: the device-reset section, the counter
line, and the terminal summary's bookkeeping (on the xdist controller, from the workers'
reports)."""

from __future__ import annotations

import collections
import re
from typing import Any, Optional

import pytest

_RESET_CAUSE = re.compile(
    r"reset (?P<reset>\d+) at (?P<at>[^,\s]+),? .*?caused by (?P<cause>session "
    r"(?P<session>\d+) \((?P<who>[^)]*)\), (?:kernel (?P<kernel>\S+)|an operation) "
    r"at point \(\d+, \d+\))(?P<others>; also running then: (?:[^()]|\([^()]*\))*)?")


def describe_reset(message: str, my_session: Optional[int]) -> Optional[str]:
    """For a daemon message about a device reset: who caused it, and whether that was
    the session ``my_session`` (this test) or another (a bystander). None for any other
    message."""
    m = _RESET_CAUSE.search(message or "")
    if m is None:
        return None
    kernel = m.group("kernel")
    if my_session is not None and int(m.group("session")) == my_session:
        # A copy is named first only when no kernel of this loop failed before it: the
        # daemon's hint, not a kernel that faulted.
        what = (f"its kernel {kernel} poisoned the GPU context" if kernel else
                "its operation was the first to fail on the poisoned GPU context")
        text = (f"sseq: this test caused device reset {m.group('reset')} "
                f"({m.group('at')}): {what}")
    else:
        text = (f"sseq: this test was a bystander of device reset {m.group('reset')} "
                f"({m.group('at')}), caused by {m.group('cause')}")
    if m.group("others"):
        text += ("\n  several kernels ran at the fault, so that is the first to fail, "
                 "not certain; the others" + m.group("others")[len("; also running then"):])
    return text + ("\n  its buffers on the old context are gone: free them and allocate "
                   "again")


def format_counters(c: dict[str, int], own_ops: Optional[int] = None) -> str:
    """One line for a counter delta, which is daemon-wide; ``own_ops``: the copies and
    launches the worker's own session queued meanwhile."""
    text = (f"daemon-wide waits {c.get('waits_enqueued', 0)} enqueued, elided "
            f"{c.get('waits_elided_same_stream', 0)} same-stream / "
            f"{c.get('waits_elided_observed', 0)} observed")
    if c.get("waits_elided_legacy"):
        text += f" / {c['waits_elided_legacy']} LEGACY"
    text += f"; ops {c.get('ops_submitted', 0)}"
    if own_ops is not None:
        text += f" ({own_ops} by this worker's session)"
    text += (f", races {c.get('race_findings', 0)}, "
             f"backpressure {c.get('backpressure_events', 0)}")
    return text


class _Reporter:
    """Collects from the reports (on the xdist controller, they arrive from the workers)
    the counter deltas, printed with -v, and what kept tests from sseqd, failovers and
    reconnects, always summed up at the end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.counters: dict[str, dict[str, int]] = {}
        self.own_ops: dict[str, Optional[int]] = {}
        self.skipped: collections.Counter[str] = collections.Counter()
        self.refused: collections.Counter[str] = collections.Counter()
        self.gone: list[str] = []
        self.notes: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        counters = getattr(report, "sseq_counters", None)
        if report.when == "teardown" and counters:
            self.counters[report.nodeid] = counters
            self.own_ops[report.nodeid] = getattr(report, "sseq_own_ops", None)
        why = getattr(report, "sseq_unavailable", None)
        if why:
            (self.skipped if report.skipped else self.refused)[why] += 1
        if getattr(report, "sseq_gone", None):
            self.gone.append(report.nodeid)
        self.notes.extend(getattr(report, "sseq_notes", None) or ())

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        tr = terminalreporter
        if self.skipped or self.refused or self.gone or self.notes:
            tr.write_sep("-", "sseq")
        for why, n in self.skipped.items():
            tr.write_line(f"sseq: {n} test{'s' if n != 1 else ''} skipped: {why[6:]} "
                          "(--sseq-require makes this an error)", yellow=True, bold=True)
        for why, n in self.refused.items():
            tr.write_line(f"sseq: {n} test{'s' if n != 1 else ''} could not run: {why[6:]}",
                          red=True, bold=True)
        if self.gone:
            tr.write_line(f"sseq: {len(self.gone)} test{'s' if len(self.gone) != 1 else ''} "
                          f"failed because sseqd went away: {', '.join(self.gone)}",
                          red=True, bold=True)
        for note in self.notes:
            tr.write_line(note, yellow=True)
        if self.config.getoption("verbose") <= 0 or not self.counters:
            return
        tr.write_sep("-", "sseq counters per test (daemon-wide deltas: every session on the "
                     "daemon counts, not only this run's; ops also by the worker's own)")
        for nodeid, c in self.counters.items():
            tr.write_line(f"{nodeid}: {format_counters(c, self.own_ops.get(nodeid))}")
