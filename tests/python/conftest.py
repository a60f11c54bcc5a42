"""Shared fixtures for the Python tests: private sseqd instances (for tests that need a
daemon of their own: injected bugs, exact counters) and pytester for plugin tests.

Run with ``-p sseq.pytest_plugin`` (tests/python/run.sh does); private daemons need
``$SSEQD``, the path to sseqd, and are skipped with the reason without it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Callable, Generator, Iterator

import pytest

pytest_plugins = ["pytester"]


class Daemon:
    """An sseqd on a private socket. ``stop()`` checks it exited with status 0."""

    def __init__(self, exe: str, args: list[str]) -> None:
        self.dir = tempfile.mkdtemp(prefix="sseq-py-")
        self.socket = os.path.join(self.dir, "sseqd.sock")
        self.log_path = os.path.join(self.dir, "sseqd.log")
        env = dict(os.environ)
        # Under ASan the python side runs with the runtime preloaded (see run.sh);
        # the daemon links it itself and keeps its own leak checking.
        env.pop("LD_PRELOAD", None)
        if "SSEQD_ASAN_OPTIONS" in env:
            env["ASAN_OPTIONS"] = env["SSEQD_ASAN_OPTIONS"]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [exe, "--backend", "sim", "--socket", self.socket, "--log-level", "warning",
                 *args], stdout=log, stderr=subprocess.STDOUT, env=env)
        # Ready once it accepts: the socket file appears before listen().
        deadline = time.monotonic() + 10
        while not self._accepts():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError(f"sseqd did not start: {self.log()}")
            time.sleep(0.02)

    def _accepts(self) -> bool:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(self.socket)
            except OSError:
                return False
        return True

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


@pytest.fixture(scope="session")
def sseqd_exe() -> str:
    exe = os.environ.get("SSEQD")
    if not exe:
        pytest.skip("SSEQD is not set: it names the sseqd binary for private daemons")
    return exe


@pytest.fixture
def start_daemon(sseqd_exe: str) -> Iterator[Callable[..., Daemon]]:
    """Start private daemons with extra arguments; each must exit cleanly at the end."""
    started: list[Daemon] = []

    def start(*args: str) -> Daemon:
        d = Daemon(sseqd_exe, list(args))
        started.append(d)
        return d

    yield start
    failures = []
    for d in started:
        rc = d.stop()
        if rc != 0:
            failures.append(f"sseqd {d.socket} exited with status {rc}:\n{d.log()[-3000:]}")
        shutil.rmtree(d.dir, ignore_errors=True)
    assert not failures, "\n".join(failures)


@pytest.fixture
def inner_env(monkeypatch: pytest.MonkeyPatch) -> Generator[None, None, None]:
    """For pytester runs: absolute PYTHONPATH and no inherited xdist worker id."""
    pp = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(os.path.abspath(p) for p in pp.split(os.pathsep) if p))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    yield
