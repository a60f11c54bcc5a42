"""The pytest plugin, run on inner test files through pytester (in subprocesses, with
-p sseq.pytest_plugin): skipping, the leak and error checks, counters, and the
worker-to-daemon mapping."""

from __future__ import annotations

import errno
import os
import pathlib
import re

import pytest

import sseq

from sseq.pytest_plugin import socket_for_worker, split_sockets

pytestmark = pytest.mark.usefixtures("inner_env")


def run_inner(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "sseq.pytest_plugin", "-p", "no:cacheprovider",
                                         *args, timeout=120)


def test_a_reset_first_seen_on_a_copy_is_not_called_a_kernel() -> None:
    # The daemon's message when the first op to fail was a copy (an H200 run, 2026-12-07).
    from sseq._plugin_report import describe_reset
    msg = ("the operation was in flight when device reset 1 at 2026-12-07T18:06:53Z failed "
           "it; the reset was caused by session 23 (gw5, pid 4878), an operation at point "
           "(1, 85); also running then: (loop 1) session 49 (culprit, pid 5357), kernel "
           "oob_write at point (0, 42)")
    mine = describe_reset(msg, 23)
    assert mine is not None and "its kernel an operation" not in mine, mine
    assert "its operation was the first to fail on the poisoned GPU context" in mine, mine
    assert "kernel oob_write at point (0, 42)" in mine, mine
    other = describe_reset(msg, 49)
    assert other is not None and "caused by session 23 (gw5, pid 4878)" in other, other
    kernel = describe_reset(msg.replace("an operation at point (1, 85)",
                                        "kernel oob_write at point (1, 85)"), 23)
    assert kernel is not None and "its kernel oob_write poisoned the GPU context" in kernel


def test_split_and_map_sockets() -> None:
    assert split_sockets("/a.sock:/b.sock,/c.sock") == ["/a.sock", "/b.sock", "/c.sock"]
    assert split_sockets("/a.sock::") == ["/a.sock"] and split_sockets(None) == []
    socks = ["/g0.sock", "/g1.sock", "/g2.sock"]
    assert [socket_for_worker(f"gw{n}", socks) for n in range(5)] == socks + socks[:2]
    assert socket_for_worker(None, socks) == "/g0.sock"
    assert socket_for_worker("master", socks) == "/g0.sock"
    assert socket_for_worker("gw3", []) is None


def test_leaked_buffers_fail_the_test_by_label(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner="""
        import pytest

        @pytest.fixture(scope="module")
        def shared(sseq_session):
            b = sseq_session.alloc(64, label="module-owned")
            yield b
            b.free()

        @pytest.fixture
        def scratch(sseq_session):
            with sseq_session.alloc(64, label="fixture-freed") as b:
                yield b

        def test_leaks(sseq_session, shared, scratch):
            b = sseq_session.alloc(128, label="left-behind")
            b.slice(0, 64, "its-slice")

        def test_clean(sseq_session, shared, scratch):
            with sseq_session.alloc(16, label="freed") as b:
                b.slice(0, 8, "freed-slice").free()

        @pytest.mark.sseq(check_leaks=False)
        def test_allowed(sseq_session):
            sseq_session.alloc(16, label="allowed")

        def test_after(sseq_session):
            # The plugin freed what test_leaks left; the module fixture's buffer is kept.
            labels = sorted(b.label for b in sseq_session.buffers())
            assert labels == ["module-owned"], labels
    """)
    r = run_inner(pytester, "-rf")
    r.assert_outcomes(passed=3, failed=1)
    r.stdout.fnmatch_lines(["FAILED test_inner.py::test_leaks*"])
    out = r.stdout.str()
    assert "the test leaked 2 buffers" in out
    assert "left-behind (handle" in out and "its-slice (handle" in out
    for ok in ("module-owned (", "fixture-freed (", "freed (", "allowed ("):
        assert ok not in out, ok


def test_uncollected_error_fails_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner="""
        import pytest, sseq

        def test_lost_error(sseq_session):
            sseq_session.execute("no_such_kernel", sseq.u64(1))

        def test_collected_error(sseq_session):
            with pytest.raises(sseq.Error):
                sseq_session.execute("no_such_kernel", sseq.u64(1)).wait()

        @pytest.mark.sseq(check_errors=False)
        def test_allowed_error(sseq_session):
            sseq_session.execute("no_such_kernel", sseq.u64(1))
    """)
    r = run_inner(pytester)
    r.assert_outcomes(passed=2, failed=1)
    r.stdout.fnmatch_lines(["*errors nobody collected*", "*UNKNOWN_KERNEL (4006)*"])


def test_skips_with_the_reason_when_no_daemon(pytester: pytest.Pytester,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSEQ_SOCKETS", raising=False)
    monkeypatch.setenv("SSEQ_SOCKET", str(pytester.path / "no-daemon.sock"))
    pytester.makepyfile(test_inner="""
        import pytest

        def test_fixture(sseq_session):
            pass

        @pytest.mark.sseq
        def test_marker():
            pass

        def test_unrelated():
            pass
    """)
    r = run_inner(pytester, "-rs")
    r.assert_outcomes(passed=1, skipped=2)
    r.stdout.fnmatch_lines(["*SKIPPED*sseq: no sseqd answers at *no-daemon.sock: ENOENT*"])


def test_counters_per_test_and_in_verbose_summary(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner="""
        import numpy as np, pytest, sseq

        def test_work(sseq_session, sseq_counters):
            with sseq_session.alloc(16, np.float32, label="c") as b:
                for _ in range(3):
                    sseq_session.execute("fill", sseq.Out(b), 1.0, 16)
                sseq_session.sync()
            d = sseq_counters.delta()
            assert d.ops_submitted >= 3 and d.waits_elided_same_stream >= 2
            assert sseq_counters.start.ops_submitted <= sseq_counters.now().ops_submitted

        def test_plain():
            pass
    """)
    pytester.makeconftest("""
        import pytest

        @pytest.hookimpl(trylast=True)
        def pytest_runtest_logreport(report):
            if report.when == "teardown" and report.nodeid.endswith("test_work"):
                print("DELTA-OPS", report.sseq_counters["ops_submitted"])
    """)
    r = run_inner(pytester, "-v", "-s")
    r.assert_outcomes(passed=2)
    out = r.stdout.str()
    # Labelled daemon-wide (the header and every line), with the worker's own ops: the
    # three fills, whatever else the daemon ran.
    assert "sseq counters per test (daemon-wide deltas: every session" in out
    r.stdout.fnmatch_lines(["*test_inner.py::test_work: daemon-wide waits * enqueued, elided"
                            " * same-stream / * observed; ops * (3 by this worker's session),"
                            " races 0, backpressure *"])
    assert "test_inner.py::test_plain:" not in out
    ops = [int(n) for n in re.findall(r"DELTA-OPS (\d+)", out)]
    assert ops and ops[0] >= 3
    quiet = run_inner(pytester, "-q")
    assert "sseq counters per test" not in quiet.stdout.str()


def test_item_carries_counters_after_the_test(pytester: pytest.Pytester) -> None:
    # Counters cost two round trips a test: measured for every test with --sseq-counters
    # (or -v), else only for tests that take sseq_counters.
    pytester.makeconftest("""
        import pytest
        seen = {}

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_teardown(item):
            yield
            seen[item.name] = getattr(item, "sseq_counters", None)

        def pytest_sessionfinish(session):
            c = seen.get("test_one")
            print("ITEM-COUNTERS", None if c is None else c["ops_submitted"])
    """)
    pytester.makepyfile(test_inner="""
        import sseq
        def test_one(sseq_session):
            sseq_session.execute("spin", 1)
    """)
    r = run_inner(pytester, "-s", "--sseq-counters")
    r.assert_outcomes(passed=1)
    ops = re.findall(r"ITEM-COUNTERS (\S+)", r.stdout.str())
    assert ops and ops[0] != "None" and int(ops[0]) >= 1, r.stdout.str()
    ini = pytester.makeini("[pytest]\nsseq_counters = true\n")
    r = run_inner(pytester, "-s")
    ops = re.findall(r"ITEM-COUNTERS (\S+)", r.stdout.str())
    assert ops and ops[0] != "None" and int(ops[0]) >= 1, r.stdout.str()
    ini.unlink()
    r = run_inner(pytester, "-s")
    r.assert_outcomes(passed=1)
    assert re.findall(r"ITEM-COUNTERS (\S+)", r.stdout.str()) == ["None"]


def test_sseq_sockets_spread_xdist_workers(pytester: pytest.Pytester,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSEQ_SOCKETS", "/gpu0.sock,/gpu1.sock")
    out = pytester.path / "seen"
    pytester.makepyfile(test_inner=f"""
        import os, time, pytest

        @pytest.mark.parametrize("i", range(12))
        def test_where(sseq_socket, i):
            time.sleep(0.05)
            with open({str(out)!r}, "a") as f:
                f.write(os.environ.get("PYTEST_XDIST_WORKER", "none") + " "
                        + str(sseq_socket) + "\\n")
    """)
    r = run_inner(pytester, "-n", "3")
    r.assert_outcomes(passed=12)
    pairs = {tuple(line.split()) for line in out.read_text().splitlines()}
    expect = {"gw0": "/gpu0.sock", "gw1": "/gpu1.sock", "gw2": "/gpu0.sock"}
    assert pairs and all(expect[w] == s for w, s in pairs), pairs
    # --sseq-socket wins over the environment.
    out.unlink()
    r = run_inner(pytester, "--sseq-socket", "/chosen.sock", "-k", "where[0]")
    r.assert_outcomes(passed=1)
    assert out.read_text().split() == ["none", "/chosen.sock"]


def test_xdist_worker_id_reaches_the_daemon(pytester: pytest.Pytester) -> None:
    if not os.environ.get("SSEQCTL"):
        pytest.skip("SSEQCTL is not set: it names the sseqctl binary")
    pytester.makepyfile(test_inner="""
        import json, os, subprocess

        def test_me(sseq_session, sseq_socket):
            argv = [os.environ["SSEQCTL"], "clients", "--json"]
            if sseq_socket:
                argv[1:1] = ["--socket", sseq_socket]
            clients = json.loads(subprocess.run(argv, capture_output=True, check=True,
                                                text=True).stdout)["clients"]
            me = [c for c in clients if c["session"] == sseq_session.info.session]
            assert me[0]["worker_id"] == os.environ["PYTEST_XDIST_WORKER"]
            assert me[0]["name"] == "pytest"
    """)
    run_inner(pytester, "-n", "2").assert_outcomes(passed=1)


def test_device_reset_names_the_culprit_and_the_bystander(
        pytester: pytest.Pytester, start_daemon, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    # Launch 2 (another connection's) and launch 4 (this worker's own) each poison the
    # sim's context: a bystander, then a culprit, each told which it was.
    d = start_daemon("--inject", "device-lost-op=2", "--inject", "device-lost-op=4")
    monkeypatch.setenv("SSEQ_SOCKET", d.socket)
    monkeypatch.delenv("SSEQ_SOCKETS", raising=False)
    pytester.makepyfile(test_inner="""
        import pytest, sseq

        @pytest.mark.sseq(check_leaks=False, check_errors=False)
        def test_bystander(sseq_session):
            b = sseq_session.alloc(256, "f4", label="mine")
            sseq_session.execute("fill", sseq.Out(b), 1.0, 256).wait()
            with sseq.connect(name="culprit") as other:
                c = other.alloc(256, "f4")
                with pytest.raises(sseq.Error) as e:
                    other.execute("fill", sseq.Out(c), 2.0, 256).wait()
                assert e.value.name == "DEVICE_ERROR", e.value
            b.download()  # lost in the reset: DEVICE_ERROR naming the culprit

        @pytest.mark.sseq(check_leaks=False, check_errors=False)
        def test_culprit(sseq_session):
            b = sseq_session.alloc(256, "f4")
            sseq_session.execute("fill", sseq.Out(b), 1.0, 256).wait()
            sseq_session.execute("fill", sseq.Out(b), 2.0, 256).wait()

        def test_after(sseq_session):
            b = sseq_session.alloc(256, "f4")
            sseq_session.execute("fill", sseq.Out(b), 3.0, 256).wait()
            assert (b.download() == 3.0).all()
            b.free()
    """)
    r = run_inner(pytester)
    r.assert_outcomes(passed=1, failed=2)
    r.stdout.fnmatch_lines([
        "*sseq: this test was a bystander of device reset 1 (*), caused by session *"
        "(culprit*kernel fill at point*",
        "*sseq: this test caused device reset 2 (*): its kernel fill poisoned the GPU context*",
    ])


def test_late_error_is_found_by_the_teardown_sync(
        pytester: pytest.Pytester, start_daemon, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    # The kernel fails on the device 300 ms after the test returned: the teardown must
    # wait for what is still in flight, not only look at what already arrived.
    d = start_daemon("--sim-delay", "compute=300ms", "--inject", "device-fail-op=1")
    monkeypatch.setenv("SSEQ_SOCKET", d.socket)
    monkeypatch.delenv("SSEQ_SOCKETS", raising=False)
    pytester.makepyfile(test_inner="""
        import sseq

        def test_fails_later(sseq_session):
            b = sseq_session.alloc(64, "f4", label="late")
            sseq_session.execute("fill", sseq.Out(b), 1.0, 16)
            b.free()
            assert sseq_session.outstanding() > 0

        def test_next(sseq_session):
            pass
    """)
    r = run_inner(pytester)
    r.assert_outcomes(passed=1, failed=1)
    r.stdout.fnmatch_lines(["*errors nobody collected*", "*DEVICE_ERROR (4009)*"])


def test_tests_without_work_cost_no_round_trip(
        pytester: pytest.Pytester, start_daemon, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    # The daemon counts the frames it reads: 50 tests that take the session and do
    # nothing (or wait for their own work) add none beyond the connection's own.
    d = start_daemon()
    monkeypatch.setenv("SSEQ_SOCKET", d.socket)
    monkeypatch.delenv("SSEQ_SOCKETS", raising=False)
    pytester.makepyfile(test_inner="""
        import pytest, sseq

        @pytest.mark.parametrize("i", range(50))
        def test_nothing(sseq_session, i):
            pass

        @pytest.mark.parametrize("i", range(10))
        def test_waited(sseq_session, i):
            sseq_session.execute("spin", 1).wait()
    """)
    with sseq.connect(d.socket) as probe:
        before = probe.stats().frames_in
        r = run_inner(pytester)
        r.assert_outcomes(passed=60)
        frames = probe.stats().frames_in - before
    # The stats request itself, the worker's hello (+ lanes), 10 executes: far below the
    # 3 a test (stats, sync, stats) the plugin once spent.
    assert frames <= 1 + 4 + 10, frames
    # The same count sees the two stats requests a test that asks for counters costs.
    with sseq.connect(d.socket) as probe:
        before = probe.stats().frames_in
        r = run_inner(pytester, "--sseq-counters", "-k", "nothing")
        r.assert_outcomes(passed=50)
        frames = probe.stats().frames_in - before
    assert frames >= 2 * 50, frames


def test_an_answered_free_costs_no_teardown_wait(
        pytester: pytest.Pytester, start_daemon, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    # Buffer.free does not wait for the daemon's answer; the teardown's check reads the
    # answers already here before it decides to wait, so a test that ends by freeing its
    # buffer pays no round trip for it (the old check waited for the free's answer).
    d = start_daemon()
    monkeypatch.setenv("SSEQ_SOCKET", d.socket)
    monkeypatch.delenv("SSEQ_SOCKETS", raising=False)
    count = pytester.path / "syncs.txt"
    monkeypatch.setenv("SYNC_COUNT", str(count))
    pytester.makeconftest("""
        import os, sseq

        calls = []
        _sync = sseq.Session.sync

        def counting_sync(self):
            calls.append(1)
            return _sync(self)

        sseq.Session.sync = counting_sync

        def pytest_sessionfinish(session):
            with open(os.environ["SYNC_COUNT"], "w") as f:
                f.write(str(len(calls)))
    """)
    pytester.makepyfile(test_inner="""
        import select, time
        import numpy as np, pytest, sseq

        @pytest.mark.parametrize("i", range(10))
        def test_download_then_free(sseq_session, i):
            with sseq_session.alloc(16, np.float32, label="t") as b:
                sseq_session.execute("fill", sseq.Out(b), float(i), 16)
                assert b.download()[0] == i
            # The free's answer, not waited for; the fill's Completion may be on its way
            # too (a download answered in its done word comes before it: libsseq(3)).
            assert sseq_session.outstanding() in (1, 2)
            p = select.poll()
            p.register(sseq_session.fileno(), select.POLLIN)
            assert p.poll(10000), "no answer to the free"
            time.sleep(0.05)  # both answers here, unread, for the teardown to find
    """)
    r = run_inner(pytester)
    r.assert_outcomes(passed=10)
    assert count.read_text() == "0"


def test_worker_has_its_staging_arena_before_its_first_test(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # The staging arena (a memfd the daemon maps and pins) is made while the worker's
    # session fixture is set up, so the worker's first test that downloads does not pay
    # for it; with --sseq-lazy-staging (or the ini) that first download makes it.
    if not os.environ.get("SSEQCTL"):
        pytest.skip("SSEQCTL is not set: it names the sseqctl binary")
    pytester.makepyfile(test_inner="""
        import json, os, subprocess
        import numpy as np, pytest

        copied = False

        def arenas(session, socket):
            argv = [os.environ["SSEQCTL"], "clients", "--json"]
            if socket:
                argv[1:1] = ["--socket", socket]
            clients = json.loads(subprocess.run(argv, capture_output=True, check=True,
                                                text=True).stdout)["clients"]
            # A session that writes its requests into a ring ($SSEQ_REQUEST_RING) holds
            # one arena more, the ring's, from its start: not a staging arena's.
            ring = os.environ.get("SSEQ_REQUEST_RING", "0") not in ("", "0", "no", "off")
            return [c["staging_arenas"] for c in clients
                    if c["session"] == session.info.session][0] - ring

        @pytest.mark.parametrize("i", range(4))
        def test_download(sseq_session, sseq_socket, i):
            global copied
            lazy = os.environ.get("INNER_LAZY") == "1"
            assert arenas(sseq_session, sseq_socket) == (0 if lazy and not copied else 1)
            with sseq_session.alloc(16, np.float32) as b:
                b.download()
            copied = True
            sseq_session.prepare_staging()  # the arena exists: no second one
            assert arenas(sseq_session, sseq_socket) == 1
    """)
    run_inner(pytester, "-n", "2").assert_outcomes(passed=4)
    monkeypatch.setenv("INNER_LAZY", "1")
    run_inner(pytester, "-n", "2", "--sseq-lazy-staging").assert_outcomes(passed=4)
    pytester.makeini("[pytest]\nsseq_lazy_staging = true\n")
    run_inner(pytester, "-n", "2").assert_outcomes(passed=4)


def test_staging_refused_at_connect_is_a_note(
        pytester: pytest.Pytester, start_daemon, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    # A daemon that refuses the arena: tests that copy nothing still pass, the summary
    # says why there is no arena, and a copy meets the refusal itself.
    d = start_daemon("--client-staging-limit", "1M")
    monkeypatch.setenv("SSEQ_SOCKET", d.socket)
    monkeypatch.delenv("SSEQ_SOCKETS", raising=False)
    pytester.makepyfile(test_inner="""
        import numpy as np, pytest, sseq

        def test_kernel(sseq_session):
            sseq_session.execute("spin", 1).wait()

        def test_download(sseq_session):
            with sseq_session.alloc(16, np.float32) as b:
                with pytest.raises(sseq.Error) as e:
                    b.download()
            assert e.value.name == "RESOURCE_EXHAUSTED", e.value
    """)
    r = run_inner(pytester)
    r.assert_outcomes(passed=2)
    r.stdout.fnmatch_lines(["*sseq: this run: no staging arena made at connect "
                            "(RESOURCE_EXHAUSTED: *); the first copy makes it*"])


def test_daemon_gone_is_told_from_other_errors() -> None:
    from sseq.errors import Status
    from sseq.pytest_plugin import _gone

    for code in (errno.ECONNRESET, errno.EPIPE, errno.ENOTCONN):
        assert _gone(sseq.Error(-code)), code
    assert _gone(sseq.Error(-int(Status.SHUTTING_DOWN)))
    for code in (-errno.ENOENT, -errno.EACCES, -int(Status.UNKNOWN_KERNEL),
                 -int(Status.DEVICE_ERROR)):
        assert not _gone(sseq.Error(code)), code
    assert not _gone(ValueError("closed"))


def test_sseq_socket_fixture_is_documented() -> None:
    """The sseq_socket fixture is described where the plugin is: its docstring, the
    README's plugin table and sseq(7)."""
    import sseq.pytest_plugin as plugin

    root = pathlib.Path(__file__).resolve().parents[2]
    assert "``sseq_socket``" in (plugin.__doc__ or "")
    assert "sseq.connect(sseq_socket)" in (plugin.sseq_socket.__doc__ or "")
    readme = (root / "README.md").read_text()
    assert "| fixture `sseq_socket` |" in readme
    man = (root / "man" / "sseq.7.scd").read_text()
    assert "*sseq_socket*\n" in man
