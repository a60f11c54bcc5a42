"""Several nodes: pytest-xdist's own remote workers (--tx), each using its own node's
daemon. Two popen gateways with different environments stand in for two nodes, each
with its own sim sseqd; every inner test asks both daemons (sseqctl clients) which
clients they serve and records whether its own process is among them."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import tempfile
from typing import Iterator

import pytest

pytestmark = pytest.mark.usefixtures("inner_env")


@pytest.fixture
def short_tmp() -> Iterator[pathlib.Path]:
    """A directory with a short path: a Unix socket's path must fit in 108 bytes, and
    pytester's directories under xdist come close."""
    d = tempfile.mkdtemp(prefix="sseq-t-")
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)

INNER = """
    import json, os, subprocess, time, pytest

    def clients(sock):
        out = subprocess.run([os.environ["SSEQCTL"], "--socket", sock, "clients", "--json"],
                             capture_output=True, check=True, text=True).stdout
        return json.loads(out)["clients"]

    @pytest.mark.parametrize("i", range(8))
    def test_where(sseq_session, sseq_socket, i):
        time.sleep(0.05)
        sseq_session.execute("spin", 1).wait()
        me = (sseq_session.info.session, os.getpid())
        served_by = [n for n, sock in enumerate(os.environ["NODE_SOCKETS"].split(":"))
                     if any((c["session"], c["pid"]) == me
                            and c["worker_id"] == os.environ["PYTEST_XDIST_WORKER"]
                            for c in clients(sock))]
        with open(os.environ["NODE_OUT"], "a") as f:
            f.write(json.dumps({"worker": os.environ["PYTEST_XDIST_WORKER"],
                                "socket": sseq_socket, "served_by": served_by}) + "\\n")
"""


@pytest.mark.parametrize("how", ["SSEQ_SOCKET", "SSEQ_SOCKET_DIR"])
def test_each_node_uses_its_own_daemon(pytester: pytest.Pytester,
                                       monkeypatch: pytest.MonkeyPatch,
                                       start_daemon, short_tmp: pathlib.Path,
                                       how: str) -> None:  # type: ignore[no-untyped-def]
    if not os.environ.get("SSEQCTL"):
        pytest.skip("SSEQCTL is not set: it names the sseqctl binary")
    nodes = [start_daemon(), start_daemon()]
    socks = [d.socket for d in nodes]
    out = pytester.path / "seen.jsonl"
    for name in ("SSEQ_SOCKET", "SSEQ_SOCKETS", "SSEQ_REQUIRE", "SSEQ_SOCKET_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NODE_SOCKETS", ":".join(socks))
    monkeypatch.setenv("NODE_OUT", str(out))
    if how == "SSEQ_SOCKET":
        # Each node told its socket.
        specs = [f"popen//env:SSEQ_SOCKET={s}" for s in socks]
        expect = socks
    else:
        # Each node's own /run/sseq, found by the plugin on that node.
        specs, expect = [], []
        for n, s in enumerate(socks):
            run_dir = short_tmp / f"node{n}-run-sseq"
            run_dir.mkdir()
            os.symlink(s, run_dir / "gpu0.sock")
            specs.append(f"popen//env:SSEQ_SOCKET_DIR={run_dir}")
            expect.append(str(run_dir / "gpu0.sock"))
    pytester.makepyfile(test_inner=INNER)
    r = pytester.runpytest_subprocess(
        "-p", "sseq.pytest_plugin", "-p", "no:cacheprovider", "--sseq-require",
        "--tx", specs[0], "--tx", specs[1], "--dist", "load", timeout=180)
    assert r.ret == 0, r.stdout.str()
    r.assert_outcomes(passed=8)
    seen = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(seen) == 8
    by_worker: dict[str, set] = {}
    for rec in seen:
        by_worker.setdefault(rec["worker"], set()).add((rec["socket"], tuple(rec["served_by"])))
    # gw0 ran on "node" 0 and only its daemon served it; gw1 likewise on node 1.
    assert by_worker == {"gw0": {(expect[0], (0,))}, "gw1": {(expect[1], (1,))}}, by_worker
