"""A daemon restart under the pytest plugin, for real: a sim sseqd that an inner test
kills (SIGKILL, like a reset after a GPU fault, or SIGTERM, like systemctl restart) and
starts again on the same socket. The test in flight fails with "sseqd at PATH went
away"; the next one reconnects (a new session, module fixtures built again) and
passes."""

from __future__ import annotations

import inspect
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Iterator

import pytest

pytestmark = pytest.mark.usefixtures("inner_env")

# Shared by the inner suites: stop the daemon whose pid is in PIDFILE and, unless told
# not to, start a new one on the same socket, recording its pid.
_HELPERS = '''
import os, signal, socket, subprocess, time

SOCK, PIDFILE = os.environ["RESTART_SOCK"], os.environ["RESTART_PIDFILE"]

def accepts():
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(SOCK)
        except OSError:
            return False
    return True

{alive}
{daemon_env}

def restart(sig, again=True):
    pid = int(open(PIDFILE).read())
    os.kill(pid, sig)
    deadline = time.monotonic() + 20
    while alive(pid):
        assert time.monotonic() < deadline, "sseqd did not exit"
        time.sleep(0.02)
    if not again:
        return
    p = subprocess.Popen([os.environ["SSEQD"], "--backend", "sim", "--socket", SOCK,
                          "--log-level", "warning"], start_new_session=True, env=daemon_env(),
                         stdout=subprocess.DEVNULL, stderr=open(PIDFILE + ".log", "a"))
    with open(PIDFILE, "w") as f:
        f.write(str(p.pid))
    while not accepts():
        assert time.monotonic() < deadline, "sseqd did not start again"
        time.sleep(0.02)
'''


def alive(pid: int) -> bool:
    # Any thread not yet a zombie: the leader turns zombie before the other threads
    # (which hold the listening socket) are gone.
    # A task that vanishes while it is looked at (ENOENT, or ESRCH from reading its stat
    # as it dies) is gone.
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except (FileNotFoundError, ProcessLookupError):
        return False
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    return True
        except (FileNotFoundError, ProcessLookupError):
            pass
    return False


def daemon_env() -> dict:
    # As conftest's Daemon: python may run with the ASan runtime preloaded (run.sh);
    # sseqd links it itself and keeps its own options.
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if "SSEQD_ASAN_OPTIONS" in env:
        env["ASAN_OPTIONS"] = env["SSEQD_ASAN_OPTIONS"]
    return env


HELPERS = _HELPERS.replace("{alive}", inspect.getsource(alive)).replace(
    "{daemon_env}", inspect.getsource(daemon_env))


@pytest.fixture
def restartable(sseqd_exe: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A sim sseqd the inner suite may restart; its socket. The last one is stopped at
    the end, and must still be running then (no crash after the restarts)."""
    # A short path: a Unix socket's must fit in 108 bytes.
    tmp_path = pathlib.Path(tempfile.mkdtemp(prefix="sseq-t-"))
    sock = str(tmp_path / "restart.sock")
    pidfile = tmp_path / "sseqd.pid"
    first = subprocess.Popen([sseqd_exe, "--backend", "sim", "--socket", sock,
                              "--log-level", "warning"], env=daemon_env(),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pidfile.write_text(str(first.pid))
    deadline = time.monotonic() + 10
    while True:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            try:
                s.connect(sock)
                break
            except OSError:
                assert time.monotonic() < deadline, "sseqd did not start"
                time.sleep(0.02)
    for name in ("SSEQ_SOCKETS", "SSEQ_REQUIRE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SSEQ_SOCKET", sock)
    monkeypatch.setenv("RESTART_SOCK", sock)
    monkeypatch.setenv("COLUMNS", "400")  # the short summary line whole
    monkeypatch.setenv("RESTART_PIDFILE", str(pidfile))
    yield sock
    first.poll()  # reap it if the inner suite killed it
    last = int(pidfile.read_text())
    running = alive(last)
    if running:
        os.kill(last, signal.SIGTERM)
        while alive(last):
            time.sleep(0.02)
    if first.poll() is None:
        first.kill()
        first.wait()
    log = pidfile.with_suffix(".pid.log")
    logged = log.read_text() if log.exists() else ""
    stayed_down = pidfile.read_text() == str(first.pid) and first.returncode is not None
    shutil.rmtree(tmp_path, ignore_errors=True)
    assert running or stayed_down, f"the last sseqd is gone: {logged}"


def run_inner(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "sseq.pytest_plugin", "-p", "no:cacheprovider",
                                         *args, timeout=180)


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM"])
def test_restart_fails_the_test_in_flight_and_the_next_reconnects(
        pytester: pytest.Pytester, restartable: str, sig: str) -> None:
    pytester.makepyfile(helpers=HELPERS)
    pytester.makepyfile(test_inner=f"""
        import signal, pytest, sseq
        from helpers import restart

        seen = []

        @pytest.fixture(scope="module")
        def shared(sseq_session):
            b = sseq_session.alloc(64, "f4", label="module-owned")
            yield b
            b.free()

        def test_before(sseq_session, shared):
            seen.append(sseq_session.info.session)
            sseq_session.execute("fill", sseq.Out(shared), 1.0, 16).wait()

        def test_in_flight(sseq_session, shared):
            b = sseq_session.alloc(64, "f4", label="lost-with-the-daemon")
            restart(signal.{sig})
            sseq_session.execute("fill", sseq.Out(b), 2.0, 16).wait()

        def test_after(sseq_session, shared):
            # A new session on the new daemon; the module fixture was built again on it.
            assert sseq_session is not None and not sseq_session.closed
            seen.append(sseq_session.info.session)
            sseq_session.execute("fill", sseq.Out(shared), 3.0, 16).wait()
            assert (shared.download((16,), "f4") == 3.0).all()

        def test_plain_restart_between_tests():
            restart(signal.{sig})

        @pytest.mark.sseq
        def test_marker_after_quiet_restart(sseq_session, shared):
            # The daemon went away while nothing was in flight: found before the test.
            sseq_session.execute("fill", sseq.Out(shared), 4.0, 16).wait()
            assert (shared.download((16,), "f4") == 4.0).all()

        def test_counters_survive(sseq_session, sseq_counters):
            sseq_session.execute("spin", 1).wait()
            assert sseq_counters.delta().ops_submitted >= 1
    """)
    r = run_inner(pytester, "-rf", "-p", "no:xdist")
    assert r.ret == pytest.ExitCode.TESTS_FAILED, r.stdout.str()
    r.assert_outcomes(passed=5, failed=1)
    r.stdout.fnmatch_lines([
        f"*sseq: sseqd at {restartable} went away during this test (E*); the next test "
        "connects again*",
    ])
    r.stdout.fnmatch_lines(["FAILED test_inner.py::test_in_flight - *went away*"])
    out = r.stdout.str()
    assert "stats: ECONNRESET" not in out
    assert "1 test failed because sseqd went away: test_inner.py::test_in_flight" in out
    assert f"sseq: this run: sseqd at {restartable} went away during test_inner.py::" \
        "test_in_flight; reconnected" in out
    assert "went away during a test that did not use it; reconnected" in out


def test_daemon_that_stays_away_is_named(pytester: pytest.Pytester, restartable: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSEQ_RECONNECT_WAIT", "0.5")
    pytester.makepyfile(helpers=HELPERS)
    pytester.makepyfile(test_inner="""
        import signal, sseq
        from helpers import restart

        def test_gone(sseq_session):
            restart(signal.SIGKILL, again=False)
            sseq_session.sync()

        def test_next(sseq_session):
            pass
    """)
    r = run_inner(pytester, "-rs", "-p", "no:xdist")
    r.assert_outcomes(failed=1, skipped=1)
    r.stdout.fnmatch_lines([f"*sseq: no sseqd answers at {restartable}: ECONNREFUSED*"
                            "(it went away during test_inner.py::test_gone and did not come "
                            "back within 0.5 s)*"])
    r = run_inner(pytester, "-p", "no:xdist", "--sseq-require")
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.assert_outcomes(errors=2)


def test_fixture_free_after_the_daemon_is_gone_is_quiet(pytester: pytest.Pytester,
                                                        restartable: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A fixture that frees its buffer at teardown, under a test whose daemon went away
    for good: the test fails for the outage, once; the free adds no teardown error."""
    monkeypatch.setenv("SSEQ_RECONNECT_WAIT", "0.5")
    pytester.makepyfile(helpers=HELPERS)
    pytester.makepyfile(test_inner="""
        import signal
        import numpy as np, pytest
        from helpers import restart

        @pytest.fixture
        def buf(sseq_session):
            b = sseq_session.alloc(16, np.float32, label="fixture-buf")
            yield b
            b.free()

        def test_gone(buf):
            restart(signal.SIGTERM, again=False)
    """)
    r = run_inner(pytester, "-p", "no:xdist")
    r.assert_outcomes(failed=1)
    out = r.stdout.str()
    assert "went away during this test" in out, out
    assert "free 'fixture-buf'" not in out, out


def test_alive_takes_a_thread_dying_under_its_look_as_gone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Reading a dying thread's stat fails with ESRCH (ProcessLookupError), not ENOENT:
    # the restart helper used to raise there and leave the daemon down for the tests
    # after it.
    real_open = open

    def dying(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if str(path).endswith("/stat"):
            raise ProcessLookupError(3, "No such process")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", dying)
    assert alive(os.getpid()) is False
    monkeypatch.undo()
    assert alive(os.getpid()) is True
