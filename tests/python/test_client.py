"""The sseq package over libsseq: buffers, copies, zero-copy staging, slices, kernels
and their argument typing, errors, waiting, context managers, counters."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import sseq
from sseq import _lib
from sseq.args import pack_args


def test_upload_download_roundtrip(sseq_session: sseq.Session) -> None:
    s = sseq_session
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    with s.alloc(data.shape, np.float32, label="roundtrip") as b:
        assert (b.nbytes, b.shape, b.dtype) == (96, (2, 3, 4), np.dtype(np.float32))
        b.upload(data)
        np.testing.assert_array_equal(b.download(), data)
        # The raw bytes, viewed as another dtype, and into a caller's array.
        np.testing.assert_array_equal(b.download(dtype=np.uint8).view(np.int32),
                                      data.view(np.int32).ravel())
        out = np.zeros(4, np.float32)
        assert b.download(out=out, offset=8 * 4) is out
        np.testing.assert_array_equal(out, [8, 9, 10, 11])
        # Partial upload at a byte offset; a non-contiguous source is made contiguous.
        b.upload(np.array([[100, 0], [101, 0]], np.float32)[:, 0], offset=4)
        assert b.download((3,), np.float32).tolist() == [0, 100, 101]
        with pytest.raises(ValueError):
            b.upload(np.zeros(25, np.float32))
        with pytest.raises(ValueError):
            b.download(out=np.zeros(2, np.float32), offset=90)


def test_untyped_alloc_is_bytes(sseq_session: sseq.Session) -> None:
    with sseq_session.alloc(10, label="bytes") as b:
        assert (b.nbytes, b.shape, b.dtype) == (10, None, None)
        b.upload(np.frombuffer(b"0123456789", np.uint8))
        assert b.download((10,), np.uint8).tobytes() == b"0123456789"
    with pytest.raises(TypeError):
        sseq_session.alloc((2, 2))


def test_host_array_is_staging_memory_uploaded_in_place(
        sseq_session: sseq.Session, monkeypatch: pytest.MonkeyPatch) -> None:
    s = sseq_session
    x = s.host_array((4, 256), np.float32)
    assert x.shape == (4, 256) and x.dtype == np.float32 and x.flags.c_contiguous
    assert x.ctypes.data % 64 == 0, "sseq_host_alloc memory is 64-byte aligned"
    x[...] = np.arange(x.size, dtype=np.float32).reshape(x.shape)
    lib = _lib.lib()
    real = lib.sseq_copy_h2d
    seen = []

    def spy(conn, dst, off, src, length, tag):  # type: ignore[no-untyped-def]
        seen.append((src, length))
        return real(conn, dst, off, src, length, tag)

    monkeypatch.setattr(lib, "sseq_copy_h2d", spy)
    with s.alloc(x.shape, np.float32, label="from-staging") as b:
        b.upload(x).wait()
        monkeypatch.setattr(lib, "sseq_copy_h2d", real)
        # The pointer handed to libsseq is the array's own: no copy in Python.
        assert seen == [(x.ctypes.data, x.nbytes)]
        y = s.host_array(x.shape, np.float32)
        b.download(out=y)
        np.testing.assert_array_equal(y, x)
    assert s.host_array((0, 3)).shape == (0, 3)


def test_slices_by_bytes_and_by_index(sseq_session: sseq.Session) -> None:
    s = sseq_session
    with s.alloc((4, 3), np.float32, label="rows") as b:
        b.upload(np.zeros((4, 3), np.float32))
        with b.slice(12, 12, "row1") as r1:
            assert (r1.base, r1.offset, r1.shape, r1.label) == (b, 12, (3,), "row1")
            r1.upload(np.array([1, 2, 3], np.float32))
        with b[2] as r2, b[-1] as r3, b[1:3] as mid:
            assert r2.shape == (3,) and r2.offset == 24 and r3.offset == 36
            r3.upload(np.array([7, 8, 9], np.float32))
            assert mid.shape == (2, 3)
            np.testing.assert_array_equal(mid.download(), [[1, 2, 3], [0, 0, 0]])
            # A slice of a slice (I6: still views of the one base).
            with mid[1] as inner:
                inner.upload(np.array([4, 5, 6], np.float32))
        np.testing.assert_array_equal(b.download(),
                                      [[0, 0, 0], [1, 2, 3], [4, 5, 6], [7, 8, 9]])
        with pytest.raises(IndexError):
            b[4]
        with pytest.raises(ValueError):
            b[::2]
        with pytest.raises(sseq.Error) as e:
            b.slice(40, 16)
        assert e.value.status == sseq.Status.OUT_OF_RANGE
    with s.alloc(16) as raw, pytest.raises(TypeError):
        raw[0]


def test_copy_to_device_to_device(sseq_session: sseq.Session) -> None:
    s = sseq_session
    with s.alloc(8, np.float32, label="src") as a, s.alloc(8, np.float32, label="dst") as b:
        a.upload(np.arange(8, dtype=np.float32))
        b.upload(np.zeros(8, np.float32))
        a.copy_to(b, src_offset=4, dst_offset=8, nbytes=12).wait()
        assert b.download().tolist() == [0, 0, 1, 2, 3, 0, 0, 0]
        a.copy_to(b)
        assert b.download().tolist() == list(range(8))


def test_execute_typed_numpy_and_plain_scalars(sseq_session: sseq.Session) -> None:
    s = sseq_session
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    with s.alloc(64, np.float32, label="x") as a, s.alloc(64, np.float32, label="y") as b:
        a.upload(x)
        s.execute("scale", sseq.In(a), sseq.Out(b), sseq.f32(3), sseq.u64(64))
        np.testing.assert_array_equal(b.download(), 3 * x)
        s.execute("scale", sseq.In(a), sseq.Out(b), np.float32(-2), np.uint64(64))
        np.testing.assert_array_equal(b.download(), -2 * x)
        # Plain numbers take the built-in signature's types (f32 alpha, u64 n).
        s.execute("axpy", 2, sseq.In(a), sseq.InOut(b), 64)
        np.testing.assert_array_equal(b.download(), 0 * x)
        s.execute("iota", sseq.Out(b), 1.5, 0.5, 64, elements=64)
        np.testing.assert_array_equal(b.download(), 1.5 + 0.5 * np.arange(64, dtype=np.float32))


def test_plain_numbers_rejected_with_the_expected_type(sseq_session: sseq.Session) -> None:
    s = sseq_session
    with s.alloc(64, np.float32, label="t") as b:
        before = s.outstanding()  # the alloc's answer may still be on its way
        with pytest.raises(TypeError, match=r"fill: argument 2 \(n\) expects u64"):
            s.execute("fill", sseq.Out(b), 0.0, 16.0)
        with pytest.raises(TypeError, match=r"signature is not known.*sseq\.u64"):
            s.execute("not_builtin", sseq.Out(b), 3)
        with pytest.raises(TypeError, match=r"bare buffer.*sseq\.Out\(buf\)"):
            s.execute("fill", b, 0.0, 16)
        with pytest.raises(TypeError, match=r"argument 0 \(y\) must be a buffer"):
            s.execute("fill", 1, 0.0, 16)
        with pytest.raises(TypeError):
            s.execute("fill", sseq.Out(b), True, 16)
        with pytest.raises(OverflowError, match="u64"):
            s.execute("fill", sseq.Out(b), 0.0, -1)
        with pytest.raises(OverflowError):
            sseq.i32(1 << 31)
        with pytest.raises(TypeError):
            sseq.u64(1.0)
        with pytest.raises(OverflowError):
            sseq.f32(1e39)
        with pytest.raises(TypeError):
            sseq.In(np.zeros(3))  # type: ignore[arg-type]
        assert sseq.f32(1) == sseq.f32(1.0) and sseq.f32(1) != sseq.f64(1)
        assert s.outstanding() == before, "a refused argument list must send nothing"


_SCALAR = {"f32": sseq.f32(0), "u64": sseq.u64(0), "i32": sseq.i32(1)}
_MARK = {"in": sseq.In, "out": sseq.Out, "inout": sseq.InOut}


def _args_from_table(sig, buf):  # type: ignore[no-untyped-def]
    return [_MARK[k](buf) if k in _MARK else _SCALAR[k] for _, k in sig]


@pytest.mark.parametrize("kernel", sorted(sseq.BUILTIN_KERNELS))
def test_builtin_signature_table_matches_the_daemon(sseq_session: sseq.Session,
                                                    kernel: str) -> None:
    """Arguments built from sseq.BUILTIN_KERNELS pass the daemon's type and access
    checks (a value may still be refused, e.g. conv2d with 1x1x1x1 shapes and 64-byte
    buffers is fine, but nothing may be the wrong type or count)."""
    s = sseq_session
    sig = sseq.BUILTIN_KERNELS[kernel]
    with s.alloc(64, label=f"sig-{kernel}") as b:
        try:
            s.execute(kernel, *_args_from_table(sig, b)).wait()
        except sseq.Error as e:
            assert e.status != sseq.Status.BAD_ARGUMENT_TYPE, e
            assert e.status != sseq.Status.UNKNOWN_KERNEL, e
        # The check itself can fail: one argument more is refused by the daemon as a
        # type error (sent past the binding's own count check, below).
        extra = _args_from_table(sig, b) + [sseq.u32(0)]
        packed = pack_args(kernel, extra, builtin=False, session=s)
        with pytest.raises(sseq.Error) as e:
            s._launch(kernel, None, packed, len(extra), None).wait()
        assert e.value.status == sseq.Status.BAD_ARGUMENT_TYPE


@pytest.mark.parametrize("kernel", sorted(sseq.BUILTIN_KERNELS))
def test_builtin_kernel_argument_count_refused_at_the_call(sseq_session: sseq.Session,
                                                          kernel: str) -> None:
    """A built-in kernel given one argument too many or too few is a TypeError at the
    execute call naming the kernel and both counts; it used to reach the daemon and
    surface only at a later sync, with no call site."""
    s = sseq_session
    sig = sseq.BUILTIN_KERNELS[kernel]
    with s.alloc(64, label=f"count-{kernel}") as b:
        before = s.outstanding()  # the alloc's answer may still be on its way
        full = _args_from_table(sig, b)
        for args in (full + [sseq.u32(0)], full[:-1]):
            with pytest.raises(TypeError) as e:
                s.execute(kernel, *args)
            text = str(e.value)
            assert text.startswith(f"{kernel} takes {len(sig)} argument"), text
            assert f"{len(args)} given" in text and sig[0][0] in text, text
        assert s.outstanding() == before, "a refused launch must send nothing"
    s.sync()
    assert s.outstanding() == 0


def test_error_names_number_message_and_tag(sseq_session: sseq.Session) -> None:
    s = sseq_session
    op = s.execute("no_such_kernel", sseq.u64(1))
    with pytest.raises(sseq.Error) as e:
        op.wait()
    err = e.value
    assert (err.name, err.number, err.code) == ("UNKNOWN_KERNEL", 4006, -4006)
    assert err.status is sseq.Status.UNKNOWN_KERNEL and err.errno is None
    assert "no_such_kernel" in err.message and err.tag == op.tag
    assert str(err).startswith("execute no_such_kernel: UNKNOWN_KERNEL (4006): ")
    # Not waited on: the error reaches the next sync, once.
    s.execute("no_such_kernel", sseq.u64(2))
    with pytest.raises(sseq.Error, match="UNKNOWN_KERNEL"):
        s.sync()
    s.sync()


def test_connect_without_daemon_is_an_errno_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(sseq.Error) as e:
        sseq.connect(tmp_path / "nobody.sock")
    assert e.value.name == "ENOENT" and e.value.errno == 2 and e.value.status is None
    assert "nobody.sock" in str(e.value)


def test_context_managers_free_and_close(sseq_session: sseq.Session) -> None:
    with sseq.connect(sseq_session.socket, name="ctx-check") as s:
        with s.alloc(32, label="scoped") as b:
            assert s.buffers() == [b]
        assert b.freed and s.buffers() == []
        with pytest.raises(ValueError, match="already freed"):
            b.download()
        kept = s.alloc(32, label="kept")
    assert s.closed and kept.freed
    with pytest.raises(ValueError, match="closed"):
        s.alloc(8)
    s.close()  # twice is fine


def _sync_errors(s: sseq.Session, most: int = 5) -> list[sseq.Error]:
    """What sync() raises, one error a call, until it returns (at most `most`)."""
    errors = []
    for _ in range(most):
        try:
            s.sync()
            break
        except sseq.Error as err:
            errors.append(err)
    return errors


def test_await_and_failures_flow_forward(start_daemon) -> None:  # type: ignore[no-untyped-def]
    """I9 through the Python API: an injected failure reaches await_ and sync, and an
    operation depending on its output fails with DEPENDENCY_FAILED."""
    d = start_daemon("--inject", "fail-op=2")
    with sseq.connect(d.socket) as s:
        x, y, z = (s.alloc(16, np.float32, label=n) for n in "xyz")
        x.upload(np.ones(16, np.float32))  # op 1
        s.await_(x)
        s.execute("scale", sseq.In(x), sseq.Out(y), 2.0, 16)  # op 2: fails
        with pytest.raises(sseq.Error) as e:
            s.await_(y)
        assert e.value.status == sseq.Status.INJECTED_FAULT
        dep = s.execute("scale", sseq.In(y), sseq.Out(z), 2.0, 16)
        with pytest.raises(sseq.Error) as e:
            dep.wait()
        assert e.value.status == sseq.Status.DEPENDENCY_FAILED
        # The failed launch was never waited on: sync reports it (and a Sync over a
        # failed point fails too), one error per call, until none is left.
        errors = _sync_errors(s)
        assert errors and all(e.status == sseq.Status.INJECTED_FAULT for e in errors)
        assert len(errors) < 5
        for b in (x, y, z):
            b.free()


def test_stats_counts_work(sseq_session: sseq.Session) -> None:
    s = sseq_session
    before = s.stats()
    with s.alloc(16, np.float32, label="counted") as b:
        for _ in range(3):
            s.execute("fill", sseq.Out(b), 1.0, 16)
        s.sync()
    delta = s.stats() - before
    # Daemon-wide counters: other workers only add to them.
    assert delta.ops_submitted >= 3 and delta.ops_completed >= 3
    assert delta.waits_elided_same_stream >= 2
    assert set(delta.as_dict()) == set(_lib.STATS_FIELDS)


def test_sseq_stats_respects_a_smaller_struct(sseq_session: sseq.Session) -> None:
    """An older caller's struct: fields beyond .size stay untouched; too small is EINVAL."""
    s = sseq_session
    s.execute("spin", 1)
    s.sync()
    st = _lib.SseqStats()
    ctypes.memset(ctypes.byref(st), 0xAB, ctypes.sizeof(st))
    st.size = 16  # .size and waits_enqueued
    assert _lib.lib().sseq_stats(s._ptr, ctypes.byref(st)) == 0
    assert st.size == 16 and st.waits_enqueued != 0xABABABABABABABAB
    assert st.ops_submitted == 0xABABABABABABABAB
    st.size = 8
    assert _lib.lib().sseq_stats(s._ptr, ctypes.byref(st)) == -22
    st.size = 0
    assert _lib.lib().sseq_stats(s._ptr, ctypes.byref(st)) == 0
    assert st.size == ctypes.sizeof(st) and st.ops_submitted >= 1


def test_library_not_found_is_reported_on_use(tmp_path) -> None:  # type: ignore[no-untyped-def]
    code = ("import sseq\n"
            "try:\n"
            "    sseq.connect()\n"
            "except sseq.LibraryNotFoundError as e:\n"
            "    print('NOTFOUND', e)\n")
    env = dict(os.environ, SSEQ_LIBRARY=str(tmp_path / "libsseq.so"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=60)
    assert "NOTFOUND" in out.stdout and "SSEQ_LIBRARY" in out.stdout, out.stderr


def test_worker_id_and_name_reach_sseqctl(sseq_session: sseq.Session) -> None:
    ctl = os.environ.get("SSEQCTL")
    if not ctl:
        pytest.skip("SSEQCTL is not set: it names the sseqctl binary")
    with sseq.connect(sseq_session.socket, name="wid-check", worker_id="gw77") as s:
        argv = [ctl, "clients", "--json"]
        if s.socket:
            argv[1:1] = ["--socket", s.socket]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
        clients = json.loads(out.stdout)["clients"]
        mine = {c["session"]: c for c in clients}
        assert mine[s.info.session]["worker_id"] == "gw77"
        assert mine[s.info.session]["name"] == "wid-check"
        # The plugin's own session says which xdist worker it is.
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        if worker:
            assert mine[sseq_session.info.session]["worker_id"] == worker
            assert mine[sseq_session.info.session]["name"] == "pytest"


def test_lanes_distinct_ordered_and_shown(start_daemon) -> None:  # type: ignore[no-untyped-def]
    """Compute lanes: a session asking for two gets two of its own, distinct from
    another's; work named on lane 1 lands on the second (sseqctl streams says which
    session holds it); a kernel on lane 1 reading what lane 0 wrote sees the data."""
    d = start_daemon("--compute-streams", "4", "--sim-delay", "h2d=3ms",
                     "--sim-delay", "compute=script:5ms,0")
    with pytest.raises(ValueError):
        sseq.connect(d.socket, lanes=9)
    with sseq.connect(d.socket) as s1, sseq.connect(d.socket, lanes=2) as s2:
        assert s1.lanes == (0,)
        assert s2.lanes == (1, 2)
        assert s2.current_lane == 0
        with pytest.raises(ValueError):
            s2.set_lane(2)
        with pytest.raises(ValueError):
            s1.set_lane(1)
        n = 4096
        x = np.arange(n, dtype=np.float32)
        a, b, c = (s2.alloc(n, np.float32, label=l) for l in "abc")
        before = s2.stats()
        a.upload(x)  # lane 0
        s2.execute("scale", sseq.In(a), sseq.Out(b), 2.0, n)  # lane 0, 5 ms
        with s2.lane(1):
            assert s2.current_lane == 1
            s2.execute("scale", sseq.In(b), sseq.Out(c), 3.0, n)  # lane 1, after lane 0's
            got = c.download()
        assert s2.current_lane == 0
        np.testing.assert_array_equal(got, 6 * x)
        delta = s2.stats() - before
        assert delta.race_findings == 0
        assert delta.waits_enqueued > 0
        ctl = os.environ.get("SSEQCTL")
        if ctl:
            out = subprocess.run([ctl, "--socket", d.socket, "--json", "streams"],
                                 check=True, capture_output=True, text=True).stdout
            streams = {st["id"]: st for st in json.loads(out)["streams"]}
            assert streams[1]["sessions"] == [s2.info.session]
            assert streams[2]["sessions"] == [s2.info.session]
            assert streams[2]["last_issued"] == 1  # the one kernel named on lane 1
            assert streams[0]["sessions"] == [s1.info.session]
            assert streams[0]["last_issued"] == 0


# ---- regressions: dtypes, prompt submission, stale messages, repr ----

# Run in a subprocess: without the check, download(..., object) makes numpy read device
# bytes as PyObject pointers and the interpreter dies, which must not take the test
# runner with it. Each entry point prints what it did with each dtype.
_DTYPE_PROBE = r"""
import sys
import numpy as np
import sseq

REFUSED = ["object", "V8", [("a", "f4"), ("b", "O")], [("a", "f4"), ("b", "i4")],
           "M8[ns]", "m8[s]", "S4", "U2", ("f4", (2,))]
s = sseq.connect(sys.argv[1], name="dtype-probe")
buf = s.alloc(64, label="probe")
buf.upload(np.full(64, 0x41, np.uint8))  # not pointers to anything
def entries(dt):
    yield "host_array", lambda: s.host_array((4,), dt)
    yield "alloc", lambda: s.alloc((4,), dt, label="typed")
    yield "slice", lambda: buf.slice(0, 32, dtype=dt)
    yield "download", lambda: buf.download((4,), dt)
    if np.dtype(dt).subdtype is None:  # an array of a subarray dtype is of its base
        yield "download_out", lambda: buf.download(out=np.zeros((4,), dt))
        yield "upload", lambda: buf.upload(np.zeros((4,), dt))
for dt in REFUSED:
    for where, call in entries(dt):
        try:
            got = call()
        except (TypeError, ValueError) as e:
            print("REFUSED", where, repr(dt), type(e).__name__, str(e).replace("\n", " "),
                  flush=True)
            continue
        print("ACCEPTED", where, repr(dt), flush=True)
        repr(got)  # an object array of device bytes crashes here
s.sync()
print("DONE", flush=True)
"""


def test_non_numeric_dtypes_refused_everywhere(sseq_session: sseq.Session) -> None:
    """Only fixed-size numeric and bool dtypes may describe device or staging bytes:
    object (pointers), structured and void records, datetimes, strings and subarrays
    are refused by every entry point with an error naming the dtype and what is
    allowed. Before the check download(..., object) killed the interpreter."""
    out = subprocess.run([sys.executable, "-c", _DTYPE_PROBE, sseq_session.socket or ""],
                         capture_output=True, text=True, timeout=120, env=os.environ)
    lines = out.stdout.splitlines()
    accepted = [l for l in lines if l.startswith("ACCEPTED")]
    assert out.returncode == 0, (f"probe died with status {out.returncode} "
                                 f"after:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    assert not accepted, "\n".join(accepted)
    refused = [l for l in lines if l.startswith("REFUSED")]
    assert len(refused) == 9 * 6 - 2 and lines[-1] == "DONE"
    for l in refused:
        assert "allowed" in l and "bool" in l, l
    assert any("object" in l for l in refused)


def test_numeric_and_bool_dtypes_round_trip(sseq_session: sseq.Session) -> None:
    s = sseq_session
    for dt in (np.bool_, np.int8, np.uint16, np.int64, np.float16, np.float64,
               np.complex64, np.dtype(">i4")):
        data = (np.arange(6) % 2 == 1) if dt is np.bool_ else np.arange(6).astype(dt)
        h = s.host_array(data.shape, dt)
        h[...] = data
        with s.alloc(data.shape, dt, label=f"rt-{np.dtype(dt)}") as b:
            b.upload(h)
            np.testing.assert_array_equal(b.download(), data)
            with b.slice(0, b.nbytes, dtype=dt) as v:
                assert v.download().dtype == np.dtype(dt)


def test_execute_reaches_the_daemon_without_a_wait(start_daemon) -> None:  # type: ignore[no-untyped-def]
    """Nagle's rule: with nothing in flight a request leaves at once, so the daemon
    starts on it while the application does host work. Watched from a second
    connection: the op is counted without any wait, flush or poll on the first."""
    d = start_daemon()
    with sseq.connect(d.socket, name="prompt") as s, \
            sseq.connect(d.socket, name="watcher") as w:
        b = s.alloc(16, np.float32, label="prompt", wait=True)  # nothing in flight after
        before = w.stats().ops_submitted
        s.execute("fill", sseq.Out(b), 1.0, 16)
        deadline = time.monotonic() + 5
        while w.stats().ops_submitted == before and time.monotonic() < deadline:
            time.sleep(0.01)
        assert w.stats().ops_submitted == before + 1, "the execute never left the client"
        # The same after an upload whose reply the client has not read yet: the
        # execute may wait for that reply, but leaves as soon as it is read.
        b.upload(np.zeros(16, np.float32))
        s.execute("fill", sseq.Out(b), 2.0, 16)
        s.execute("fill", sseq.Out(b), 3.0, 16)
        s.flush()  # documented: sends what was held back
        deadline = time.monotonic() + 5
        while w.stats().ops_submitted < before + 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert w.stats().ops_submitted == before + 4
        np.testing.assert_array_equal(b.download(), np.full(16, 3, np.float32))
        b.free()


def test_local_refusal_does_not_carry_the_daemon_message(sseq_session: sseq.Session) -> None:
    """A call libsseq refuses before sending must not report the previous request's
    daemon message (the daemon's verdict on another request)."""
    s = sseq_session
    with pytest.raises(sseq.Error) as daemon_err:
        s.load_module("no-such-module.hsaco")  # refused by the daemon
    assert daemon_err.value.status is not None and daemon_err.value.message
    with pytest.raises(sseq.Error) as local:
        s.load_module("")  # refused by libsseq: empty path
    assert local.value.name == "EINVAL" and local.value.status is None
    assert local.value.message != daemon_err.value.message
    assert daemon_err.value.message not in str(local.value)
    # Every other local refusal too.
    op = s.execute("no_such_kernel", sseq.u64(1))
    with pytest.raises(sseq.Error) as daemon_err:
        op.wait()
    with pytest.raises(sseq.Error) as local:
        s.execute("", sseq.u64(1))
    assert local.value.name == "EINVAL"
    assert daemon_err.value.message not in str(local.value)


class _NoSession:
    _alloc_scope = None


def test_repr_shows_the_handle_once() -> None:
    h = 4294967297
    for label in ("", "x"):
        b = sseq.Buffer(_NoSession(), h, 96, label, (2, 3, 4), np.dtype(np.float32))  # type: ignore[arg-type]
        r = repr(b)
        assert r.count(str(h)) == 1, r
        assert str(h) in r and "0x" not in r, r
        assert ("'x'" in r) == bool(label), r
        assert "96" in r and "float32" in r, r


def test_narrow_and_half_scalars_convert_without_a_daemon() -> None:
    from sseq.args import bf16_bits, pack_args
    assert sseq.f16(1.0).bits == 0x3C00 and sseq.f16(-2.5).bits == 0xC100
    assert sseq.f16(np.float16(0.5)).bits == 0x3800
    # bfloat16 rounds float32 to nearest, ties to even: 1 + 2^-8 is a tie (down to 1.0),
    # 1 + 3 * 2^-8 a tie up to the even 1 + 2^-6; just past a tie goes up.
    assert bf16_bits(1.0) == 0x3F80
    assert bf16_bits(1.00390625) == 0x3F80
    assert bf16_bits(1.01171875) == 0x3F82
    assert bf16_bits(1.004) == 0x3F81
    assert bf16_bits(float("nan")) & 0x7FC0 == 0x7FC0
    assert sseq.bf16.from_bits(0x3F80).value == 1.0
    for cls, lo, hi in ((sseq.i8, -128, 127), (sseq.u8, 0, 255), (sseq.i16, -32768, 32767),
                        (sseq.u16, 0, 65535)):
        assert cls(lo).value == lo and cls(hi).value == hi
        with pytest.raises(OverflowError, match=cls.type_name):
            cls(hi + 1)
    with pytest.raises(OverflowError, match="f16"):
        sseq.f16(1e5)
    p = pack_args("k", [sseq.i8(-5), sseq.u16(65000), sseq.bf16(1.0), np.int8(3)],
                  builtin=False)
    assert [a.type for a in p] == [_lib.ARG_I8, _lib.ARG_U16, _lib.ARG_BF16, _lib.ARG_I8]
    assert (p[0].v.i32, p[1].v.u32, p[2].v.u32, p[3].v.i32) == (-5, 65000, 0x3F80, 3)


def test_struct_takes_the_size_and_alignment_of_its_value() -> None:
    from sseq.args import pack_args

    class Vec12(ctypes.Structure):
        _fields_ = [("a", ctypes.c_int32), ("b", ctypes.c_int32), ("c", ctypes.c_int32)]

    class Mixed(ctypes.Structure):
        _fields_ = [("x", ctypes.c_double), ("n", ctypes.c_int8)]

    s = sseq.struct(Vec12(1, 2, 3))
    assert (s.size, s.align) == (12, 4) and s.data[:4] == b"\x01\0\0\0"
    assert (sseq.struct(Mixed()).size, sseq.struct(Mixed()).align) == (16, 8)
    rec = np.dtype([("a", "<i4"), ("b", "<f4"), ("c", "<i2")], align=True)
    assert (sseq.struct(np.zeros((), rec)).size, sseq.struct(np.zeros(1, rec)[0]).align) == \
        (12, 4)
    f4 = sseq.struct(np.array([1, 2, 3, 4], np.float32), align=16)
    assert (f4.size, f4.align) == (16, 16)
    assert sseq.struct(b"abcd").align == 1
    for bad, match in ((b"", "0 bytes"), (bytes(4097), "4097 bytes")):
        with pytest.raises(ValueError, match=match):
            sseq.struct(bad)
    with pytest.raises(ValueError, match="multiple of its alignment 4"):
        sseq.struct(b"abcdef", align=4)
    with pytest.raises(ValueError, match="power of two"):
        sseq.struct(b"abcdef", align=3)
    # Passed as they are, with the argument named in errors; the bytes stay alive with
    # the packed array.
    p = pack_args("k", [Vec12(7, 8, 9), b"xy"], builtin=False)
    assert (p[0].type, p[0].v.bytes.size, p[0].v.bytes.align) == (_lib.ARG_BYTES, 12, 4)
    assert bytes(p[1].v.bytes.data[:2]) == b"xy"
    with pytest.raises(ValueError, match=r"k: argument 1: sseq\.struct\(\): 0 bytes"):
        pack_args("k", [sseq.u8(1), b""], builtin=False)


class _LibWithout:
    """libsseq as a release that lacks one function: that attribute is missing."""

    def __init__(self, real: object, missing: str) -> None:
        self._real, self._missing = real, missing

    def __getattr__(self, name: str) -> object:
        if name == self._missing:
            raise AttributeError(name)
        return getattr(self._real, name)


def test_prepare_staging_with_a_libsseq_before_1_7(sseq_session: sseq.Session,
                                                   sseq_socket: str | None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # The package with an older libsseq (no sseq_prepare_staging): the arena is still
    # made, through a host allocation, and copies go through it.
    real = _lib.lib()
    monkeypatch.setattr(_lib, "lib", lambda: _LibWithout(real, "sseq_prepare_staging"))
    with sseq.connect(sseq_socket, name="older-libsseq") as s:
        s.prepare_staging()
        s.prepare_staging()
        with s.alloc(16, np.float32, label="after-prepare") as b:
            b.upload(np.arange(16, dtype=np.float32))
            assert np.array_equal(b.download(), np.arange(16, dtype=np.float32))


def test_free_does_not_wait_and_the_name_is_taken_again(sseq_session: sseq.Session) -> None:
    """free() returns before the daemon answers, as a native asynchronous free does; the
    next waits read the answer; wait=True waits for it; the freed buffers' names serve
    the next allocations, whose contents are their own. (Each fill is waited for too: a
    download answered in its done word says nothing of the fill's Completion, which may
    still be on its way.)"""
    s = sseq_session
    a = s.alloc(16, np.float32, label="a")
    fill = s.execute("fill", sseq.Out(a), 1.0, 16)
    np.testing.assert_array_equal(a.download(), np.full(16, 1.0, np.float32))
    fill.wait()
    assert s.outstanding() == 0
    a.free()
    assert a.freed and s.outstanding() == 1  # its answer not yet waited for
    b = s.alloc(16, np.float32, label="b")
    fill = s.execute("fill", sseq.Out(b), 2.0, 16)
    np.testing.assert_array_equal(b.download(), np.full(16, 2.0, np.float32))
    fill.wait()
    assert s.outstanding() == 0
    b.free(wait=True)
    assert s.outstanding() == 0
    with pytest.raises(ValueError, match="already freed"):
        a.free()
    s.sync()


def test_alloc_does_not_wait_and_its_refusal_reaches_what_uses_it(start_daemon) -> None:  # type: ignore[no-untyped-def]
    """alloc returns before the daemon answers (protocol 1.9): the kernel and download
    that follow leave with it, and the download is the one wait. An alloc the daemon
    refuses (here past --client-memory-limit) fails whatever uses the buffer with
    DEPENDENCY_FAILED quoting the refusal; the refusal itself comes from the next sync;
    the refused buffer frees cleanly; wait=True raises the refusal at the alloc."""
    d = start_daemon("--client-memory-limit", "64k")
    with sseq.connect(d.socket) as s:
        ok = s.alloc(16, np.float32, label="ok")
        assert s.outstanding() == 1  # its answer not yet waited for
        s.execute("fill", sseq.Out(ok), 3.0, 16)
        np.testing.assert_array_equal(ok.download(), np.full(16, 3.0, np.float32))
        big = s.alloc(128 << 10, label="too big")
        s.execute("fill", sseq.Out(big), 1.0, 16)
        with pytest.raises(sseq.Error) as e:
            big.download(shape=(16,), dtype=np.float32)
        assert e.value.status == sseq.Status.DEPENDENCY_FAILED
        assert "refused" in str(e.value) and "131072" in str(e.value), str(e.value)
        errors = _sync_errors(s)
        assert [x.status for x in errors] == [sseq.Status.RESOURCE_EXHAUSTED,
                                             sseq.Status.DEPENDENCY_FAILED], errors
        big.free()
        s.sync()
        with pytest.raises(sseq.Error) as e:
            s.alloc(128 << 10, wait=True)
        assert e.value.status == sseq.Status.RESOURCE_EXHAUSTED
        again = s.alloc(16, np.float32)
        s.execute("fill", sseq.Out(again), 5.0, 16)
        np.testing.assert_array_equal(again.download(), np.full(16, 5.0, np.float32))
        for b in (ok, again):
            b.free()
