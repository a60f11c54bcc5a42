"""pytest plugin for tests that run work through sseqd.

Load it with ``-p sseq.pytest_plugin`` (an installed package also registers it as a
``pytest11`` entry point under that name). It gives every pytest(-xdist) worker one
connection, checks each test for leaked buffers and unreported errors, and measures
the daemon's sequencing counters over each test.

- ``--sseq-socket PATH`` (or ``$SSEQ_SOCKETS``, else ``$SSEQ_SOCKET``, else the sockets
  ``sseq-enable-gpus`` made, ``$SSEQ_SOCKET_DIR/gpu*.sock`` with ``/run/sseq`` the
  default directory, else libsseq's default ``/run/sseq/gpu0.sock``): the daemon.
  Several sockets, colon- or comma-separated, are one per GPU: xdist worker ``gwN``
  uses socket ``N mod count``. Each worker decides on its own machine, so remote
  workers (``--tx ssh=...``) use their own node's daemons.
- Failover: a worker whose daemon does not answer uses the next one of the list that
  does, and the terminal summary says so.
- Required mode (``--sseq-require``, ini ``sseq_require = true`` or
  ``SSEQ_REQUIRE=1``): a test that cannot reach sseqd (no daemon, a socket the user
  may not open, no libsseq, one of the listed daemons down) is an error, not a skip,
  and there is no failover. Without it such tests are skipped with the reason, and the
  terminal summary counts them.
- Fixture ``sseq_session`` (session scope, one per worker): the :class:`sseq.Session`,
  connected with name ``pytest`` and the xdist worker id (``sseqctl clients`` shows
  ``gw3``).
- Staging: right after connecting, during the ``sseq_session`` fixture's setup, the
  worker's session makes its staging arena (:meth:`sseq.Session.prepare_staging`: a
  memfd registered with the daemon, which pins it before it answers), so its first
  test that uploads or downloads does not pay for that. ``--sseq-lazy-staging`` (ini
  ``sseq_lazy_staging = true``) leaves the arena to that first copy, as libsseq does.
- Fixture ``sseq_socket`` (session scope): the socket path this worker uses, after the
  choice among several and any failover (None when none was configured and libsseq's
  default applies): for tests that open connections of their own next to the
  worker's, ``sseq.connect(sseq_socket)``. It does not connect; a test that needs the
  daemon takes ``sseq_session`` too (or the marker), so that it is skipped when none
  answers.
- Marker ``@pytest.mark.sseq``: the test needs sseqd (skipped with the reason when none
  answers) even without the fixture. ``@pytest.mark.sseq(check_leaks=False)`` turns the
  leak check off, ``check_errors=False`` the error check.
- Leak check: buffers and slices allocated through the session during a test (by the
  test or its function-scoped fixtures) and not freed by the end of its teardown fail
  the test, listed by label; the plugin then frees them. Buffers made by fixtures of a
  wider scope (module, class, session) are not counted.
- Error check: at teardown, an error nobody collected (a failed copy or launch whose Op
  was never waited on) fails the test. The session is synced only when requests are
  still in flight; otherwise the errors already received are all there is.
- Daemon restarts: a test in flight when its daemon goes away fails with "sseqd at PATH
  went away"; before the next test the plugin drops the old session (and the wider
  fixtures built on it) and connects again, waiting up to ``$SSEQ_RECONNECT_WAIT``
  seconds (default 10) for the daemon to come back.
- Device resets: a test that fails with a DEVICE_ERROR from a device reset (a kernel
  poisoned the GPU context and the daemon built it again) gets a section saying which
  kernel caused it and whether this test did or was a bystander.
- Counters: fixture ``sseq_counters`` gives ``.start`` and ``.delta()`` during the test;
  after it, ``item.sseq_counters`` (and the teardown report's ``sseq_counters``) hold
  the change over the test as a dict. They are fetched (two round trips) only for tests
  that use the fixture, or for every sseq test with ``-v`` (the terminal summary lists
  them) or ``--sseq-counters`` (ini ``sseq_counters = true``). The counters are the
  daemon's, daemon-wide: with several workers on one daemon a test's delta includes
  whatever the others ran meanwhile (the daemon keeps no per-session counters). The
  ``-v`` list says so on every line and gives, beside the daemon-wide ops, the copies
  and launches the worker's own session queued during the test (also the teardown
  report's ``sseq_own_ops``).
- A buffer's ``free()`` once its daemon went away for good (or the session closed) is a
  no-op, so fixture teardowns that free do not add errors to the test that lost it.
"""

from __future__ import annotations

import ctypes
import os
import time
from typing import Any, Generator, Optional

import pytest
from _pytest._code.code import ReprFileLocation
from _pytest.runner import runtestprotocol

import sseq
from sseq import _lib
from sseq._lib import default_socket
from sseq._plugin_report import _Reporter, describe_reset, format_counters
from sseq._plugin_sockets import (DEFAULT_SOCKET_DIR, SOCKET_GROUP, _RETRYABLE,
                                  _failover_order, _gone, _library_message, _peer_closed,
                                  _socket_spec, describe_connect_error, discover_sockets,
                                  socket_for_worker, split_sockets)
from sseq.session import Session, Stats

# Also the names that live in sseq._plugin_sockets and sseq._plugin_report: tests and
# users import them from here.
__all__ = ["split_sockets", "socket_for_worker", "discover_sockets", "describe_connect_error",
           "CounterProbe", "describe_reset", "DEFAULT_SOCKET_DIR", "SOCKET_GROUP",
           "format_counters"]

_FIXTURES = ("sseq_session", "sseq_counters")

_RECONNECT_WAIT_S = 10.0


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


class _Unavailable(Exception):
    def __init__(self, cause: str, retry: bool = False) -> None:
        super().__init__(cause)
        self.cause = cause
        self.retry = retry


class _WorkerState:
    """This process's connection, made on first use, and what the plugin collects."""

    def __init__(self, config: pytest.Config) -> None:
        self.worker_id: Optional[str] = getattr(config, "workerinput", {}).get("workerid")
        self.sockets, self.origin = _socket_spec(config)
        self.preferred = socket_for_worker(self.worker_id, self.sockets)
        self.socket: Optional[str] = self.preferred  # the one in use
        self.require = self._required(config)
        self.session: Optional[Session] = None
        self.failure: Optional[str] = None  # why this worker cannot connect, once known
        # The session went away (daemon restart) or was closed: reconnect before the
        # next test, waiting for the daemon when it went away.
        self.stale = False
        self.wait_for_daemon = False
        self.lost_at: Optional[str] = None
        self.notes: list[str] = []  # failovers, reconnects: for the next report
        self.probed = False
        # Make the session's staging arena when it connects (fixture setup), not in the
        # worker's first test that copies.
        self.prepare_staging = not (config.getoption("sseq_lazy_staging")
                                    or config.getini("sseq_lazy_staging"))
        self.counters_all = bool(config.getoption("sseq_counters")
                                 or config.getini("sseq_counters")
                                 or config.getoption("verbose") > 0)
        # The sseq_session fixture's definition and request, to drop its cached value.
        self.fixturedef: Any = None
        self.fixture_request: Any = None
        # The scope of the fixture being set up, when wider than a function.
        self.scope: Optional[str] = None

    @staticmethod
    def _required(config: pytest.Config) -> Optional[str]:
        if config.getoption("sseq_require"):
            return "--sseq-require"
        if config.getini("sseq_require"):
            return "ini sseq_require"
        if _env_true("SSEQ_REQUIRE"):
            return "SSEQ_REQUIRE=1"
        return None

    def who(self) -> str:
        return self.worker_id or "this run"

    def where(self, path: Optional[str] = None) -> str:
        return path or self.socket or os.environ.get("SSEQ_SOCKET") or default_socket()

    def _order(self) -> list[Optional[str]]:
        """The preferred socket, then the others of the list after it, wrapping."""
        return _failover_order(self.worker_id, self.sockets)

    def _open(self, path: Optional[str]) -> Session:
        return sseq.connect(path, name="pytest", worker_id=self.worker_id)

    def _connect(self) -> Session:
        try:
            _lib.lib()
        except sseq.LibraryNotFoundError as e:
            raise _Unavailable(_library_message(e)) from None
        causes: list[tuple[Optional[str], sseq.Error]] = []
        for path in self._order():
            try:
                session = self._open(path)
            except sseq.Error as e:
                causes.append((path, e))
                if self.require:
                    break  # required: the worker's own daemon or nothing
                continue
            if causes:
                p0, e0 = causes[0]
                self.notes.append(f"sseq: {self.who()}: sseqd at {self.where(p0)} does not "
                                  f"answer ({e0.name}): using {path} instead")
            self.socket = path
            if self.require and not self.probed:
                self.probed = True
                self._probe_others(session, path)
            return session
        text = "; ".join(describe_connect_error(self.where(p), e) for p, e in causes)
        retry = all(e.errno in _RETRYABLE for _, e in causes)
        raise _Unavailable(text, retry=retry)

    def _probe_others(self, session: Session, mine: Optional[str]) -> None:
        # Required mode: every daemon this run was given must answer, not only ours.
        for path in self.sockets:
            if path == mine:
                continue
            try:
                self._open(path).close()
            except sseq.Error as e:
                session.close()
                raise _Unavailable(f"{describe_connect_error(path, e)} (one of the "
                                   f"{len(self.sockets)} sockets of {self.origin})") from None

    def get(self) -> Session:
        if self.session is not None and not self.session.closed:
            return self.session
        if self.failure:
            self._refuse(self.failure)
        deadline = time.monotonic() + (self._wait_s() if self.wait_for_daemon else 0)
        while True:
            try:
                self.session = self._connect()
                break
            except _Unavailable as e:
                if e.retry and time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                failure = e.cause
            if self.lost_at:
                failure += (f" (it went away during {self.lost_at} and did not come back "
                            f"within {self._wait_s():g} s)")
            self.failure = failure
            self.wait_for_daemon = False
            self._refuse(failure)
        if self.wait_for_daemon:
            self.notes.append(f"sseq: {self.who()}: sseqd at {self.where()} went away during "
                              f"{self.lost_at}; reconnected")
            self.wait_for_daemon = False
            self.lost_at = None
        if self.prepare_staging:
            self._prepare_staging(self.session)
        self.session._alloc_scope = self.scope
        return self.session

    def _prepare_staging(self, session: Session) -> None:
        try:
            session.prepare_staging()
        except sseq.Error as e:
            # The first copy makes the arena then and fails with what it meets; a
            # daemon gone already fails the first test that uses the session.
            if not _gone(e):
                self.notes.append(f"sseq: {self.who()}: no staging arena made at connect "
                                  f"({e.name}: {e.message or e.description}); the first "
                                  f"copy makes it")

    @staticmethod
    def _wait_s() -> float:
        try:
            return float(os.environ.get("SSEQ_RECONNECT_WAIT", _RECONNECT_WAIT_S))
        except ValueError:
            return _RECONNECT_WAIT_S

    def _refuse(self, cause: str) -> None:
        # pytest's own skip and fail, marked for the terminal summary's count.
        e: BaseException
        if self.require:
            e = pytest.fail.Exception(f"sseq: {cause} [sseq is required here: {self.require}]",
                                      pytrace=False)
        else:
            e = pytest.skip.Exception(f"sseq: {cause}")
        e.sseq_unavailable = True  # type: ignore[attr-defined]
        raise e from None

    def went_away(self, nodeid: str) -> None:
        """The daemon went away during test ``nodeid``: reconnect before the next one."""
        self.stale = True
        self.wait_for_daemon = True
        self.lost_at = nodeid

    def refresh(self) -> None:
        """Before a test: drop a session that is closed or whose daemon went away (and
        the fixtures built on it), so that the test gets a new one."""
        s = self.session
        if s is not None and not self.stale and not self.wait_for_daemon:
            if not s.closed and not _peer_closed(s):
                return
            if not s.closed:  # the daemon went away between tests
                self.wait_for_daemon = True
                self.lost_at = self.lost_at or "a test that did not use it"
        elif not self.stale:
            return
        self.stale = False
        fd = self.fixturedef
        if fd is not None and getattr(fd, "cached_result", None) is not None:
            try:
                fd.finish(self.fixture_request)
            except Exception:
                pass  # the teardown of fixtures that used the lost connection
        self.close()

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None


_STATE = pytest.StashKey[_WorkerState]()
_START = pytest.StashKey[Stats]()
_RESULT = pytest.StashKey["_TestResult"]()


class _TestResult:
    def __init__(self, counters: Optional[dict[str, int]], problems: list[str],
                 leaked: list[str], gone: Optional[str] = None,
                 own_ops: Optional[int] = None) -> None:
        self.counters = counters
        self.own_ops = own_ops
        self.problems = problems
        self.leaked = leaked
        self.gone = gone


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
             "$SSEQ_SOCKET, else $SSEQ_SOCKET_DIR/gpu*.sock (default directory "
             f"{DEFAULT_SOCKET_DIR}), else {default_socket()}.")
    group.addoption(
        "--sseq-require", dest="sseq_require", action="store_true", default=False,
        help="a test that cannot reach sseqd is an error, not a skip, and workers do not "
             "fail over to another daemon (also ini sseq_require, $SSEQ_REQUIRE=1).")
    group.addoption(
        "--sseq-counters", dest="sseq_counters", action="store_true", default=False,
        help="measure the daemon's counters over every sseq test (default: only tests "
             "that use sseq_counters, or all with -v).")
    group.addoption(
        "--sseq-lazy-staging", dest="sseq_lazy_staging", action="store_true", default=False,
        help="do not make the worker's staging arena when it connects: its first test that "
             "copies makes it, as libsseq does by default (also ini sseq_lazy_staging).")
    parser.addini("sseq_require", type="bool", default=False,
                  help="sseq: fail, not skip, tests that cannot reach sseqd.")
    parser.addini("sseq_counters", type="bool", default=False,
                  help="sseq: measure the daemon's counters over every sseq test.")
    parser.addini("sseq_lazy_staging", type="bool", default=False,
                  help="sseq: leave the staging arena to the worker's first test that copies.")


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
    state = config.stash[_STATE]
    spec = ":".join(state.sockets) if state.sockets else (
        os.environ.get("SSEQ_SOCKET") or default_socket())
    lib = os.environ.get("SSEQ_LIBRARY") or "installed libsseq"
    text = f"sseq: socket(s) {spec} ({state.origin}); library {lib}"
    if state.require:
        text += f"; required ({state.require})"
    if any(spec.strip() != "popen" for spec in getattr(config.option, "tx", None) or ()):
        # --tx gateways with environments or on other machines: what a worker uses is
        # decided there, and may differ from the above.
        text += "; each --tx worker picks its own node's sockets"
    return text


# -- fixtures --


@pytest.fixture(scope="session")
def sseq_socket(pytestconfig: pytest.Config) -> Optional[str]:
    """The socket this worker uses, after the choice among several and any failover
    (None: none was configured, libsseq's default applies). For connections of the
    test's own: ``sseq.connect(sseq_socket)``. It does not connect or skip: take
    ``sseq_session`` (or the marker) too for that."""
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


_next_error_fn: Any = None


def _next_error(session: Session) -> Optional[sseq.Error]:
    """The oldest error the session received and nobody collected, without I/O."""
    global _next_error_fn
    if _next_error_fn is None:
        fn = _lib.lib().sseq_next_error
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64)]
        _next_error_fn = fn
    tag = ctypes.c_uint64()
    with session._lock:
        r = _next_error_fn(session._ptr, ctypes.byref(tag))
        return session._error(r, "sync", tag.value) if r < 0 else None


def _uncollected_errors(session: Session) -> list[str]:
    """Errors of this test's requests that nobody collected. Syncs (a round trip) only
    when requests are still in flight once the answers already here are read (a freed
    buffer's answer usually is: Buffer.free does not wait for it), or an error is
    already known. Raises the error when the daemon went away."""
    errors: list[str] = []
    if _peer_closed(session):
        session.sync()  # raises what the connection broke with, at once
    if session.outstanding() != 0:
        session._read_arrived()
    first = _next_error(session)
    if first is not None:
        if _gone(first):
            raise first
        errors.append(str(first))
    elif session.outstanding() == 0:
        return errors
    # Each sync reports one error; a few show the pattern without flooding.
    while len(errors) < 5:
        try:
            session.sync()
            break
        except sseq.Error as e:
            if _gone(e):
                raise
            errors.append(str(e))
    return errors


def _went_away_text(state: _WorkerState, e: sseq.Error) -> str:
    return (f"sseq: sseqd at {state.where()} went away during this test ({e.name}: "
            f"{e.message or e.description}); the next test connects again")


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
    own_start = session._ops
    start: Optional[Stats] = None
    if state.counters_all or "sseq_counters" in item.fixturenames:
        try:
            item.stash[_START] = start = session.stats()
        except sseq.Error as e:
            if not _gone(e):
                raise
            state.went_away(item.nodeid)
            pytest.fail(_went_away_text(state, e), pytrace=False)
    yield

    problems: list[str] = []
    leaked: list[str] = []
    if session.closed:
        problems.append("sseq: the test closed the shared sseq_session")
        state.stale = True
        item.stash[_RESULT] = _TestResult(None, problems, leaked)
        return
    try:
        errors = _uncollected_errors(session)
    except sseq.Error as e:
        # Its buffers went with the daemon: not leaks, nothing to free.
        state.went_away(item.nodeid)
        text = _went_away_text(state, e)
        item.stash[_RESULT] = _TestResult(None, [text], leaked, gone=text)
        return
    if errors and opts.get("check_errors", True):
        problems.append("sseq: errors nobody collected (an Op never waited on):\n"
                        + "\n".join(f"  {e}" for e in errors))
    left = [b for h, b in session._live.items()
            if h not in before and b.scope in (None, "function")]
    for b in left:
        leaked.append(f"{b.label or '<no label>'} (handle {b.daemon_handle}, {b.nbytes} bytes"
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
    counters = None
    own_ops = None
    if start is not None:
        own_ops = session._ops - own_start
        try:
            counters = (session.stats() - start).as_dict()
        except sseq.Error as e:
            if not _gone(e):
                raise
            state.went_away(item.nodeid)
            problems.append(_went_away_text(state, e))
        else:
            item.sseq_counters = counters
    item.stash[_RESULT] = _TestResult(counters, problems, leaked, own_ops=own_ops)


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: Any, request: pytest.FixtureRequest) -> Generator:
    # Allocations made while a wider-scoped fixture is set up belong to it, not to the
    # test that happened to trigger it.
    state = request.config.stash.get(_STATE, None)
    if state is not None and fixturedef.argname == "sseq_session":
        state.fixturedef, state.fixture_request = fixturedef, request
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
    state = item.config.stash[_STATE]
    state.refresh()
    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    reports = runtestprotocol(item, nextitem=nextitem, log=False)
    res = item.stash.get(_RESULT, None)
    if res is not None:
        if res.counters is not None:
            reports[-1].sseq_counters = res.counters
            reports[-1].sseq_own_ops = res.own_ops
        if res.problems:
            _report_problems(item, reports, res)
    if state.notes:
        reports[-1].sseq_notes, state.notes = state.notes, []
    for rep in reports:
        ihook.pytest_runtest_logreport(report=rep)
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def _report_problems(item: pytest.Item, reports: list[pytest.TestReport],
                     res: "_TestResult") -> None:
    text = "\n".join(res.problems)
    call = next((r for r in reports if r.when == "call"), None)
    target = call if call is not None else reports[-1]
    if target.passed or (res.gone and target.failed):
        # Shown like pytest.fail(text, pytrace=False): no traceback, and a
        # representation xdist knows how to send. A test that failed because the
        # daemon went away says that first; where it noticed follows as a section.
        if target.failed:
            target.sections.append(("sseq: where the test noticed", str(target.longrepr)))
        try:
            pytest.fail(text, pytrace=False)
        except pytest.fail.Exception:
            excinfo = pytest.ExceptionInfo.from_current()
        target.outcome = "failed"
        target.longrepr = item.repr_failure(excinfo)
        if getattr(target.longrepr, "reprcrash", False) is None:
            # For the short summary line (-rf), which a message without a traceback
            # lacks otherwise.
            path, lineno, _ = item.location
            target.longrepr.reprcrash = ReprFileLocation(path, (lineno or 0) + 1,
                                                         text.splitlines()[0])
    else:
        target.sections.append(("sseq", text))
    target.sseq_leaks = res.leaked
    target.sseq_problems = res.problems
    if res.gone:
        target.sseq_gone = res.gone


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Generator:
    outcome = yield
    rep = outcome.get_result()
    if call.excinfo is not None and getattr(call.excinfo.value, "sseq_unavailable", False):
        rep.sseq_unavailable = str(call.excinfo.value.msg)
        return
    if not rep.failed or call.excinfo is None or not isinstance(call.excinfo.value, sseq.Error):
        return
    state = item.config.stash.get(_STATE, None)
    mine = state.session.info.session if state is not None and state.session is not None \
        else None
    text = describe_reset(call.excinfo.value.message, mine)
    if text is not None:
        rep.sections.append(("sseq device reset", text))
