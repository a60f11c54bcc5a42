"""pytest plugin for tests that run work through sseqd.

Load it with ``-p sseq.pytest_plugin`` (an installed package also registers it as a
``pytest11`` entry point under that name). It gives every pytest(-xdist) worker one
connection, checks each test for leaked buffers and unreported errors, and measures
the daemon's sequencing counters over each test.

- ``--sseq-socket PATH`` (or ``$SSEQ_SOCKETS``, else ``$SSEQ_SOCKET``, else libsseq's
  default ``/run/sseq/gpu0.sock``): the daemon. Several sockets, colon- or
  comma-separated, are one per GPU: xdist worker ``gwN`` uses socket ``N mod count``.
- Fixture ``sseq_session`` (session scope, one per worker): the :class:`sseq.Session`,
  connected with name ``pytest`` and the xdist worker id (``sseqctl clients`` shows
  ``gw3``). When no daemon answers, every test that uses it is skipped with the reason.
- Marker ``@pytest.mark.sseq``: the test needs sseqd (skipped with the reason when none
  answers) even without the fixture. ``@pytest.mark.sseq(check_leaks=False)`` turns the
  leak check off, ``check_errors=False`` the error check.
- Leak check: buffers and slices allocated through the session during a test (by the
  test or its function-scoped fixtures) and not freed by the end of its teardown fail
  the test, listed by label; the plugin then frees them. Buffers made by fixtures of a
  wider scope (module, class, session) are not counted.
- Error check: at teardown the session is synced; an error nobody collected (a failed
  copy or launch whose Op was never waited on) fails the test.
- Device resets: a test that fails with a DEVICE_ERROR from a device reset (a kernel
  poisoned the GPU context and the daemon built it again) gets a section saying which
  kernel caused it and whether this test did or was a bystander.
- Counters: fixture ``sseq_counters`` gives ``.start`` and ``.delta()`` during the test;
  after it, ``item.sseq_counters`` (and the teardown report's ``sseq_counters``) hold
  the change over the test as a dict. With ``-v`` the terminal summary lists them per
  test. The counters are the daemon's, daemon-wide: with several workers on one
  daemon a test's delta includes whatever the others ran meanwhile.
"""

from __future__ import annotations

import os
import re
from typing import Any, Generator, Optional

import pytest
from _pytest.runner import runtestprotocol

import sseq
from sseq._lib import DEFAULT_SOCKET
from sseq.session import Session, Stats

__all__ = ["split_sockets", "socket_for_worker", "CounterProbe", "describe_reset"]

_FIXTURES = ("sseq_session", "sseq_counters")


def split_sockets(spec: Optional[str]) -> list[str]:
    """The socket paths in a colon- or comma-separated list (empty entries dropped)."""
    if not spec:
        return []
    return [p for p in re.split(r"[:,]", spec) if p.strip()]


def socket_for_worker(worker_id: Optional[str], sockets: list[str]) -> Optional[str]:
    """The socket xdist worker ``gwN`` uses: ``sockets[N % len(sockets)]``; the first
    for a run without xdist; None (libsseq's default) when the list is empty."""
    if not sockets:
        return None
    m = re.fullmatch(r"gw(\d+)", worker_id or "")
    n = int(m.group(1)) if m else 0
    return sockets[n % len(sockets)]


class _WorkerState:
    """This process's connection, made on first use, and what the plugin collects."""

    def __init__(self, config: pytest.Config) -> None:
        self.worker_id: Optional[str] = getattr(config, "workerinput", {}).get("workerid")
        spec = (config.getoption("sseq_socket") or os.environ.get("SSEQ_SOCKETS")
                or os.environ.get("SSEQ_SOCKET"))
        self.socket = socket_for_worker(self.worker_id, split_sockets(spec))
        self.session: Optional[Session] = None
        self.skip_reason: Optional[str] = None
        # The scope of the fixture being set up, when wider than a function.
        self.scope: Optional[str] = None

    def where(self) -> str:
        return self.socket or os.environ.get("SSEQ_SOCKET") or DEFAULT_SOCKET

    def get(self) -> Session:
        if self.session is not None and not self.session.closed:
            return self.session
        if self.skip_reason:
            pytest.skip(self.skip_reason)
        try:
            self.session = sseq.connect(self.socket, name="pytest", worker_id=self.worker_id)
        except (sseq.Error, sseq.LibraryNotFoundError) as e:
            self.skip_reason = f"sseq: no sseqd answers at {self.where()}: {e}"
            pytest.skip(self.skip_reason)
        self.session._alloc_scope = self.scope
        return self.session

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None


_STATE = pytest.StashKey[_WorkerState]()
_START = pytest.StashKey[Stats]()
_RESULT = pytest.StashKey["_TestResult"]()


class _TestResult:
    def __init__(self, counters: dict[str, int], problems: list[str],
                 leaked: list[str]) -> None:
        self.counters = counters
        self.problems = problems
        self.leaked = leaked


class CounterProbe:
    """The daemon's counters around the running test: ``start`` when it began,
    ``delta()`` the change since then (a :class:`sseq.Stats`)."""

    def __init__(self, session: Session, start: Stats) -> None:
        self.session = session
        self.start = start

    def now(self) -> Stats:
        return self.session.stats()

    def delta(self) -> Stats:
        return self.session.stats() - self.start


def _uses_sseq(item: pytest.Item) -> bool:
    names = getattr(item, "fixturenames", ())
    return item.get_closest_marker("sseq") is not None or any(f in names for f in _FIXTURES)


# -- options, configuration --


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sseq", "sseqd sessions")
    group.addoption(
        "--sseq-socket", dest="sseq_socket", default=None, metavar="PATH[:PATH...]",
        help="sseqd socket; several (colon- or comma-separated, one per GPU) spread xdist "
             "workers gwN over them by N mod count. Default: $SSEQ_SOCKETS, else "
             f"$SSEQ_SOCKET, else {DEFAULT_SOCKET}.")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "sseq(check_leaks=True, check_errors=True): the test needs sseqd; skipped with "
        "the reason when none answers. Buffers it leaves and errors nobody collected "
        "fail it unless turned off here.")
    config.stash[_STATE] = _WorkerState(config)
    config.pluginmanager.register(_Reporter(config), "sseq-reporter")


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None:
        state.close()


def pytest_report_header(config: pytest.Config) -> str:
    spec = (config.getoption("sseq_socket") or os.environ.get("SSEQ_SOCKETS")
            or os.environ.get("SSEQ_SOCKET") or DEFAULT_SOCKET)
    lib = os.environ.get("SSEQ_LIBRARY") or "installed libsseq"
    return f"sseq: socket(s) {spec}; library {lib}"


# -- fixtures --


@pytest.fixture(scope="session")
def sseq_socket(pytestconfig: pytest.Config) -> Optional[str]:
    """The socket this worker uses (None: libsseq's default)."""
    return pytestconfig.stash[_STATE].socket


@pytest.fixture(scope="session")
def sseq_session(pytestconfig: pytest.Config) -> Generator[Session, None, None]:
    """This worker's :class:`sseq.Session`; skips the test when no daemon answers."""
    state = pytestconfig.stash[_STATE]
    yield state.get()
    state.close()


@pytest.fixture
def sseq_counters(request: pytest.FixtureRequest, sseq_session: Session) -> CounterProbe:
    """The daemon's counters over this test: ``.start``, ``.delta()``."""
    return CounterProbe(sseq_session, request.node.stash[_START])


@pytest.fixture(autouse=True)
def _sseq_per_test(request: pytest.FixtureRequest) -> Generator[None, None, None]:
    # Autouse fixtures are set up first and torn down last among a test's
    # function-scoped fixtures, so the check sees what the others freed.
    item = request.node
    if not _uses_sseq(item):
        yield
        return
    state = request.config.stash[_STATE]
    session: Session = request.getfixturevalue("sseq_session")
    marker = item.get_closest_marker("sseq")
    opts = marker.kwargs if marker is not None else {}
    before = set(session._live)
    item.stash[_START] = start = session.stats()
    yield

    problems: list[str] = []
    leaked: list[str] = []
    if session.closed:
        problems.append("sseq: the test closed the shared sseq_session")
        state.session = None
        item.stash[_RESULT] = _TestResult({}, problems, leaked)
        return
    errors = []
    # Each sync reports one error; a few show the pattern without flooding.
    for _ in range(5):
        try:
            session.sync()
            break
        except sseq.Error as e:
            errors.append(str(e))
    if errors and opts.get("check_errors", True):
        problems.append("sseq: errors nobody collected (an Op never waited on):\n"
                        + "\n".join(f"  {e}" for e in errors))
    left = [b for h, b in session._live.items()
            if h not in before and b.scope in (None, "function")]
    for b in left:
        leaked.append(f"{b.label or '<no label>'} (handle {b.handle}, {b.nbytes} bytes"
                      f"{', slice' if b.base is not None else ''})")
        try:
            b.free()
        except sseq.Error:
            pass
    if leaked and opts.get("check_leaks", True):
        problems.append(f"sseq: the test leaked {len(leaked)} buffer"
                        f"{'s' if len(leaked) != 1 else ''}:\n"
                        + "\n".join(f"  {name}" for name in leaked))
    else:
        leaked = []
    counters = (session.stats() - start).as_dict()
    item.sseq_counters = counters
    item.stash[_RESULT] = _TestResult(counters, problems, leaked)


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: Any, request: pytest.FixtureRequest) -> Generator:
    # Allocations made while a wider-scoped fixture is set up belong to it, not to the
    # test that happened to trigger it.
    state = request.config.stash.get(_STATE, None)
    if state is None or fixturedef.scope == "function":
        yield
        return
    prev = state.scope
    state.scope = fixturedef.scope
    if state.session is not None:
        state.session._alloc_scope = state.scope
    try:
        yield
    finally:
        state.scope = prev
        if state.session is not None:
            state.session._alloc_scope = prev


# -- reports --


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Optional[pytest.Item]) -> Optional[bool]:
    """pytest's own protocol, with the reports held back until the teardown's leak and
    error check ran, so that a test failing it is one failed test (not a passed test
    plus an error). Tests that do not use sseq take pytest's default path."""
    if not _uses_sseq(item):
        return None
    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    reports = runtestprotocol(item, nextitem=nextitem, log=False)
    res = item.stash.get(_RESULT, None)
    if res is not None:
        reports[-1].sseq_counters = res.counters
        if res.problems:
            _report_problems(item, reports, res)
    for rep in reports:
        ihook.pytest_runtest_logreport(report=rep)
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def _report_problems(item: pytest.Item, reports: list[pytest.TestReport],
                     res: "_TestResult") -> None:
    text = "\n".join(res.problems)
    call = next((r for r in reports if r.when == "call"), None)
    target = call if call is not None else reports[-1]
    if target.passed:
        # Shown like pytest.fail(text, pytrace=False): no traceback, and a
        # representation xdist knows how to send.
        try:
            pytest.fail(text, pytrace=False)
        except pytest.fail.Exception:
            excinfo = pytest.ExceptionInfo.from_current()
        target.outcome = "failed"
        target.longrepr = item.repr_failure(excinfo)
    else:
        target.sections.append(("sseq", text))
    target.sseq_leaks = res.leaked
    target.sseq_problems = res.problems


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
    kernel = m.group("kernel") or "an operation"
    if my_session is not None and int(m.group("session")) == my_session:
        text = (f"sseq: this test caused device reset {m.group('reset')} "
                f"({m.group('at')}): its kernel {kernel} poisoned the GPU context")
    else:
        text = (f"sseq: this test was a bystander of device reset {m.group('reset')} "
                f"({m.group('at')}), caused by {m.group('cause')}")
    if m.group("others"):
        text += ("\n  several kernels ran at the fault, so that is the first to fail, "
                 "not certain; the others" + m.group("others")[len("; also running then"):])
    return text + ("\n  its buffers on the old context are gone: free them and allocate "
                   "again")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Generator:
    outcome = yield
    rep = outcome.get_result()
    if not rep.failed or call.excinfo is None or not isinstance(call.excinfo.value, sseq.Error):
        return
    state = item.config.stash.get(_STATE, None)
    mine = state.session.info.session if state is not None and state.session is not None \
        else None
    text = describe_reset(call.excinfo.value.message, mine)
    if text is not None:
        rep.sections.append(("sseq device reset", text))


def format_counters(c: dict[str, int]) -> str:
    """One line for a counter delta."""
    text = (f"waits {c.get('waits_enqueued', 0)} enqueued, elided "
            f"{c.get('waits_elided_same_stream', 0)} same-stream / "
            f"{c.get('waits_elided_observed', 0)} observed")
    if c.get("waits_elided_legacy"):
        text += f" / {c['waits_elided_legacy']} LEGACY"
    text += (f"; ops {c.get('ops_submitted', 0)}, races {c.get('race_findings', 0)}, "
             f"backpressure {c.get('backpressure_events', 0)}")
    return text


class _Reporter:
    """Collects counter deltas from teardown reports (on the xdist controller, they
    arrive from the workers) and prints them with -v."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.counters: dict[str, dict[str, int]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        counters = getattr(report, "sseq_counters", None)
        if report.when == "teardown" and counters:
            self.counters[report.nodeid] = counters

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.config.getoption("verbose") <= 0 or not self.counters:
            return
        terminalreporter.write_sep("-", "sseq counters per test (daemon-wide deltas)")
        for nodeid, c in self.counters.items():
            terminalreporter.write_line(f"{nodeid}: {format_counters(c)}")
