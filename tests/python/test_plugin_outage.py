"""The pytest plugin never hides an outage: a missing daemon, a socket the user may not
open, a missing libsseq and one of two daemons down are skips counted in the terminal
summary, or errors in required mode; a worker whose daemon is down fails over to a live
one and says so; sockets are found in $SSEQ_SOCKET_DIR. Inner runs go through pytester
(subprocesses with -p sseq.pytest_plugin) and are judged by exit code and text."""

from __future__ import annotations

import grp
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
from typing import Iterator

import pytest

from sseq.pytest_plugin import discover_sockets

pytestmark = pytest.mark.usefixtures("inner_env")


@pytest.fixture
def short_tmp() -> Iterator[pathlib.Path]:
    """A directory with a short path: a Unix socket's path must fit in 108 bytes, and
    pytester's directories under xdist come close."""
    d = tempfile.mkdtemp(prefix="sseq-t-")
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)

TWO_TESTS = """
    import pytest

    def test_fixture(sseq_session):
        pass

    @pytest.mark.sseq
    def test_marker():
        pass

    def test_unrelated():
        pass
"""


def run_inner(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "sseq.pytest_plugin", "-p", "no:cacheprovider",
                                         *args, timeout=120)


def no_sockets(monkeypatch: pytest.MonkeyPatch, sock: str) -> None:
    monkeypatch.delenv("SSEQ_SOCKETS", raising=False)
    monkeypatch.delenv("SSEQ_REQUIRE", raising=False)
    monkeypatch.setenv("SSEQ_SOCKET", sock)


@pytest.mark.parametrize("how", ["option", "ini", "env"])
def test_no_daemon_skips_counted_or_fails_when_required(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, short_tmp: pathlib.Path,
        how: str) -> None:
    sock = str(short_tmp / "no-daemon.sock")
    no_sockets(monkeypatch, sock)
    pytester.makepyfile(test_inner=TWO_TESTS)
    r = run_inner(pytester)
    assert r.ret == 0
    r.assert_outcomes(passed=1, skipped=2)
    r.stdout.fnmatch_lines([f"sseq: 2 tests skipped: no sseqd answers at {sock}: ENOENT "
                            "(No such file or directory) (--sseq-require makes this an error)"])

    args: list[str] = []
    if how == "option":
        args = ["--sseq-require"]
    elif how == "ini":
        pytester.makeini("[pytest]\nsseq_require = true\n")
    else:
        monkeypatch.setenv("SSEQ_REQUIRE", "1")
    r = run_inner(pytester, *args)
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.assert_outcomes(passed=1, errors=2)
    want = {"option": "--sseq-require", "ini": "ini sseq_require", "env": "SSEQ_REQUIRE=1"}[how]
    r.stdout.fnmatch_lines([f"*sseq: no sseqd answers at {sock}: ENOENT*"
                            f"[[]sseq is required here: {want}]*"])
    r.stdout.fnmatch_lines([f"sseq: 2 tests could not run: no sseqd answers at {sock}: "
                            "ENOENT*"])
    assert "skipped" not in r.stdout.str()


def test_refused_connection_names_the_socket(pytester: pytest.Pytester,
                                             monkeypatch: pytest.MonkeyPatch,
                                             short_tmp: pathlib.Path) -> None:
    # A socket file nobody listens on (a daemon that died without removing it).
    sock = str(short_tmp / "stale.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(sock)
    s.close()
    no_sockets(monkeypatch, sock)
    pytester.makepyfile(test_inner=TWO_TESTS)
    r = run_inner(pytester, "--sseq-require")
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.assert_outcomes(passed=1, errors=2)
    r.stdout.fnmatch_lines([f"*sseq: no sseqd answers at {sock}: ECONNREFUSED "
                            "(Connection refused)*"])


def test_missing_library_names_the_path_once(pytester: pytest.Pytester,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    lib = str(pytester.path / "nowhere" / "libsseq.so")
    monkeypatch.setenv("SSEQ_LIBRARY", lib)
    pytester.makepyfile(test_inner=TWO_TESTS)
    r = run_inner(pytester)
    assert r.ret == 0
    r.assert_outcomes(passed=1, skipped=2)
    line = [ln for ln in r.stdout.lines if ln.startswith("sseq: 2 tests skipped:")]
    assert len(line) == 1, r.stdout.str()
    assert f"libsseq not found: tried SSEQ_LIBRARY={lib}: cannot open shared object file" \
        in line[0], line
    assert line[0].count(lib) == 1, line
    r = run_inner(pytester, "--sseq-require")
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.assert_outcomes(passed=1, errors=2)
    r.stdout.fnmatch_lines([f"*libsseq not found: tried SSEQ_LIBRARY={lib}: *"
                            "[[]sseq is required here: --sseq-require]*"])


def _other_group() -> grp.struct_group:
    """A group the unprivileged user (nobody) is not in: sseq when the machine has it."""
    for name in ("sseq", "daemon", "sys", "adm"):
        try:
            g = grp.getgrnam(name)
        except KeyError:
            continue
        if "nobody" not in g.gr_mem:
            return g
    pytest.skip("no group to give the socket")


def test_permission_denied_names_the_group(start_daemon, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    if os.geteuid() != 0:
        pytest.skip("needs root to run the inner suite as another user (nobody)")
    d = start_daemon()
    g = _other_group()
    os.chmod(d.dir, 0o755)
    os.chown(d.socket, 0, g.gr_gid)
    os.chmod(d.socket, 0o660)
    # The inner suite runs as nobody, in a directory nobody can read.
    work = tempfile.mkdtemp(prefix="sseq-eacces-")
    try:
        os.chmod(work, 0o777)
        with open(os.path.join(work, "test_inner.py"), "w") as f:
            f.write("import pytest\n\ndef test_fixture(sseq_session):\n    pass\n\n"
                    "def test_unrelated():\n    pass\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("SSEQ_REQUIRE")}
        env.update(SSEQ_SOCKET=d.socket, HOME=work)
        env.pop("SSEQ_SOCKETS", None)

        def inner(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run(
                [sys.executable, "-m", "pytest", "-p", "sseq.pytest_plugin", "-p",
                 "no:cacheprovider", "-p", "no:xdist", *args, "test_inner.py"],
                cwd=work, env=env, user=65534, group=65534, extra_groups=[],
                capture_output=True, text=True, timeout=120)

        want = (f"permission denied on {d.socket} (owner root, group {g.gr_name}, mode 0660): "
                f"join group '{g.gr_name}' (sudo usermod -aG {g.gr_name} $USER")
        r = inner()
        assert r.returncode == 0, r.stdout + r.stderr
        assert "1 passed, 1 skipped" in r.stdout, r.stdout
        assert f"sseq: 1 test skipped: {want}" in r.stdout, r.stdout
        r = inner("--sseq-require")
        assert r.returncode == 1, r.stdout + r.stderr
        assert "1 passed, 1 error" in r.stdout, r.stdout
        assert f"sseq: 1 test could not run: {want}" in r.stdout, r.stdout
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_failover_to_a_live_daemon_says_so(pytester: pytest.Pytester,
                                           monkeypatch: pytest.MonkeyPatch,
                                           start_daemon, short_tmp) -> None:  # type: ignore[no-untyped-def]
    live = start_daemon()
    dead = str(short_tmp / "down.sock")
    monkeypatch.delenv("SSEQ_REQUIRE", raising=False)
    monkeypatch.setenv("SSEQ_SOCKETS", f"{dead}:{live.socket}")
    out = pytester.path / "seen"
    pytester.makepyfile(test_inner=f"""
        import os, time, pytest

        @pytest.mark.parametrize("i", range(8))
        def test_where(sseq_session, sseq_socket, i):
            time.sleep(0.05)
            sseq_session.execute("spin", 1).wait()
            with open({str(out)!r}, "a") as f:
                f.write(os.environ.get("PYTEST_XDIST_WORKER", "none") + " "
                        + str(sseq_socket) + "\\n")
    """)
    r = run_inner(pytester, "-n", "2")
    assert r.ret == 0
    r.assert_outcomes(passed=8)
    # gw0's own daemon (the first) is down: it used the second, and said so.
    r.stdout.fnmatch_lines([f"sseq: gw0: sseqd at {dead} does not answer (ENOENT): using "
                            f"{live.socket} instead"])
    assert "gw1: sseqd at" not in r.stdout.str()
    pairs = {tuple(line.split()) for line in out.read_text().splitlines()}
    assert pairs and all(s == live.socket for _, s in pairs), pairs

    # Required: no failover, gw0's tests fail naming the dead socket; gw1 (the live
    # daemon's) fails too, since one of the daemons it was given is down.
    r = run_inner(pytester, "-n", "2", "--sseq-require")
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.assert_outcomes(errors=8)
    r.stdout.fnmatch_lines([f"*no sseqd answers at {dead}: ENOENT*"])
    assert "instead" not in r.stdout.str()


def test_required_checks_every_daemon_of_the_list(pytester: pytest.Pytester,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  start_daemon, short_tmp) -> None:  # type: ignore[no-untyped-def]
    live = start_daemon()
    dead = str(short_tmp / "down.sock")
    monkeypatch.delenv("SSEQ_REQUIRE", raising=False)
    monkeypatch.setenv("SSEQ_SOCKETS", f"{live.socket},{dead}")
    pytester.makepyfile(test_inner=TWO_TESTS)
    # Without xdist only the first daemon is used: fine without required mode...
    r = run_inner(pytester)
    assert r.ret == 0
    r.assert_outcomes(passed=3)
    # ...but required mode wants them all.
    r = run_inner(pytester, "--sseq-require")
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.assert_outcomes(passed=1, errors=2)
    r.stdout.fnmatch_lines([f"*no sseqd answers at {dead}: ENOENT (No such file or directory)"
                            " (one of the 2 sockets of $SSEQ_SOCKETS)*"])


def test_discover_sockets_in_gpu_order(short_tmp: pathlib.Path) -> None:
    tmp_path = short_tmp
    made = []
    for n in (10, 2, 0):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(str(tmp_path / f"gpu{n}.sock"))
        made.append(s)
    (tmp_path / "gpu3.sock").write_text("not a socket")
    (tmp_path / "other.sock").write_text("")
    try:
        assert discover_sockets(str(tmp_path)) == [str(tmp_path / f"gpu{n}.sock")
                                                   for n in (0, 2, 10)]
        assert discover_sockets(str(tmp_path / "missing")) == []
    finally:
        for s in made:
            s.close()


def test_discovered_sockets_spread_workers(pytester: pytest.Pytester,
                                           monkeypatch: pytest.MonkeyPatch,
                                           start_daemon, short_tmp) -> None:  # type: ignore[no-untyped-def]
    if not os.environ.get("SSEQCTL"):
        pytest.skip("SSEQCTL is not set: it names the sseqctl binary")
    # What sseq-enable-gpus leaves in /run/sseq: gpu0.sock, gpu1.sock.
    run_dir = short_tmp / "run-sseq"
    run_dir.mkdir()
    daemons = [start_daemon(), start_daemon()]
    for n, d in enumerate(daemons):
        os.symlink(d.socket, run_dir / f"gpu{n}.sock")
    for name in ("SSEQ_SOCKET", "SSEQ_SOCKETS", "SSEQ_REQUIRE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SSEQ_SOCKET_DIR", str(run_dir))
    out = pytester.path / "seen"
    pytester.makepyfile(test_inner=f"""
        import json, os, subprocess, time, pytest

        @pytest.mark.parametrize("i", range(6))
        def test_where(sseq_session, sseq_socket, i):
            time.sleep(0.05)
            clients = json.loads(subprocess.run(
                [os.environ["SSEQCTL"], "--socket", sseq_socket, "clients", "--json"],
                capture_output=True, check=True, text=True).stdout)["clients"]
            me = [c for c in clients if c["session"] == sseq_session.info.session
                  and c["pid"] == os.getpid()]
            with open({str(out)!r}, "a") as f:
                f.write(f"{{os.environ['PYTEST_XDIST_WORKER']}} {{sseq_socket}} {{len(me)}}\\n")
    """)
    r = run_inner(pytester, "-n", "2")
    assert r.ret == 0, r.stdout.str()
    r.assert_outcomes(passed=6)
    r.stdout.fnmatch_lines([f"sseq: socket(s) {run_dir}/gpu0.sock:{run_dir}/gpu1.sock "
                            f"(found in {run_dir})*"])
    seen = {tuple(line.split()) for line in out.read_text().splitlines()}
    want = {("gw0", str(run_dir / "gpu0.sock"), "1"), ("gw1", str(run_dir / "gpu1.sock"), "1")}
    assert seen <= want and {w for w, _, _ in seen} == {"gw0", "gw1"}, seen
