"""Misuse that used to do the wrong thing without an error: a buffer of one session used
through another (the daemon's handle numbers are per session, so the same number named
this session's own buffer), a dtype that is not the buffer's (its bytes reinterpreted),
sizes that are not integers or are negative (truncated, or wrapped to 2^64 - 1), and a
buffer freed after its daemon went away for good."""

from __future__ import annotations

import ctypes
import errno

import numpy as np
import pytest

import sseq
from sseq import _lib


@pytest.fixture
def two_sessions(sseq_session: sseq.Session):  # type: ignore[no-untyped-def]
    """Two fresh connections to this worker's daemon, each with one float32 buffer of
    eight zeros: their first handles are the same number on the daemon."""
    with sseq.connect(sseq_session.socket, name="misuse-a") as a, \
            sseq.connect(sseq_session.socket, name="misuse-b") as b:
        ba = a.alloc(8, np.float32, label="a-buf")
        bb = b.alloc(8, np.float32, label="b-buf")
        ba.upload(np.zeros(8, np.float32)).wait()
        bb.upload(np.zeros(8, np.float32)).wait()
        yield a, b, ba, bb


def _names_both(text: str, a: sseq.Session, b: sseq.Session) -> None:
    assert f"session {a.info.session}" in text and f"session {b.info.session}" in text, text


def test_buffer_of_another_session_refused(two_sessions) -> None:  # type: ignore[no-untyped-def]
    a, b, ba, bb = two_sessions
    a.sync()
    b.sync()
    with bb[2:4] as view:
        calls = {
            "execute": lambda: a.execute("fill", sseq.Out(bb), 7.0, 8),
            "execute slice": lambda: a.execute("fill", sseq.Out(view), 7.0, 2),
            "execute input": lambda: a.execute("scale", sseq.In(bb), sseq.Out(ba), 2.0, 8),
            "await": lambda: a.await_(bb),
            "copy_to dst": lambda: ba.copy_to(bb),
            "copy_to src": lambda: bb.copy_to(ba),
        }
        for what, call in calls.items():
            with pytest.raises(ValueError) as e:
                call()
            _names_both(str(e.value), a, b)
            assert "b-buf" in str(e.value), (what, str(e.value))
        assert a.outstanding() == 0 and b.outstanding() == 0  # nothing was sent
    a.sync()
    b.sync()
    # Neither buffer was written.
    assert ba.download().tolist() == [0] * 8
    assert bb.download().tolist() == [0] * 8
    # The daemon's numbers alone cannot tell the buffers apart; libsseq's handles can.
    assert ba.daemon_handle == bb.daemon_handle
    assert ba.handle != bb.handle


def test_libsseq_refuses_another_connections_handle(two_sessions) -> None:  # type: ignore[no-untyped-def]
    """The C library tells too: a handle of connection B given to connection A fails
    with EINVAL before anything is sent, naming both sessions."""
    a, b, ba, bb = two_sessions
    lib = _lib.lib()
    x = np.arange(8, dtype=np.float32)
    tag = ctypes.c_uint64()
    r = lib.sseq_copy_h2d(a._ptr, bb.handle, 0, x.ctypes.data, x.nbytes, ctypes.byref(tag))
    assert r == -errno.EINVAL
    text = lib.sseq_last_error_message(a._ptr).decode()
    assert "another connection" in text, text
    _names_both(text, a, b)
    r = lib.sseq_free(a._ptr, bb.handle)
    assert r == -errno.EINVAL
    a.sync()
    assert ba.download().tolist() == [0] * 8
    assert bb.download().tolist() == [0] * 8


def test_dtype_mismatch_refused_cast_converts_uint8_is_raw(sseq_session: sseq.Session) -> None:
    s = sseq_session
    with s.alloc(6, np.float32, label="f32") as b:
        b.upload(np.zeros(6, np.float32)).wait()
        with pytest.raises(TypeError) as e:
            b.upload(np.arange(3, dtype=np.float64))  # 24 bytes: they would fit
        assert "float64" in str(e.value) and "float32" in str(e.value), e.value
        assert b.download().tolist() == [0] * 6  # nothing was written
        b.upload(np.arange(6, dtype=np.float64), cast=True).wait()
        assert b.download().tolist() == [0, 1, 2, 3, 4, 5]
        # Raw bytes go either way as uint8.
        raw = np.full(6, 2.5, np.float32).view(np.uint8)
        b.upload(raw).wait()
        assert b.download().tolist() == [2.5] * 6
        assert b.download(dtype=np.uint8).tobytes() == raw.tobytes()

        with pytest.raises(TypeError) as e:
            b.download(dtype=np.float64)
        assert "float64" in str(e.value) and "float32" in str(e.value), e.value
        with pytest.raises(TypeError):
            b.download((3,), np.int32)
        with pytest.raises(TypeError):
            b.download(out=np.zeros(6, np.float64))
        got = b.download(dtype=np.float64, cast=True)
        assert got.dtype == np.float64 and got.tolist() == [2.5] * 6
        out = np.zeros(6, np.int32)
        assert b.download(out=out, cast=True) is out and out.tolist() == [2] * 6
    # An untyped buffer is bytes: any dtype goes, as it is.
    with s.alloc(8, label="bytes") as u:
        u.upload(np.array([1.5], np.float64)).wait()
        assert u.download((1,), np.float64).tolist() == [1.5]
        with pytest.raises(TypeError):
            u.upload(np.zeros(2, np.float32), cast=True)


def test_sizes_refused_as_numpy_refuses_them(sseq_session: sseq.Session) -> None:
    s = sseq_session
    # numpy's own verdicts, the model.
    with pytest.raises(TypeError):
        np.empty((2.5,))
    with pytest.raises(ValueError):
        np.empty((-1,))
    for size, exc in (((2.5,), TypeError), (2.5, TypeError), ((-1,), ValueError),
                      ((2, -3), ValueError), ("4", TypeError)):
        with pytest.raises(exc):
            s.alloc(size, np.float32)
    for size, exc in ((-1, ValueError), (2.5, TypeError), (np.float32(8), TypeError)):
        with pytest.raises(exc) as e:
            s.alloc(size)
        if exc is TypeError:
            assert "cannot be interpreted as an integer" in str(e.value), e.value
        else:
            assert "negative" in str(e.value), e.value
    with pytest.raises(ValueError):
        s.host_array((-2,))
    assert s.buffers() == [] or all(b.label != "" for b in s.buffers())
    with s.alloc(16, label="sliced") as b:
        before = s.outstanding()  # the alloc's answer may still be on its way
        with pytest.raises(ValueError):
            b.slice(-4, 4)
        with pytest.raises(ValueError):
            b.slice(0, -4)
        with pytest.raises(TypeError):
            b.slice(0.5, 4)  # type: ignore[arg-type]
        assert s.outstanding() == before  # nothing was sent
    s.sync()
    assert s.outstanding() == 0


def test_free_after_the_daemon_is_gone_is_a_no_op(start_daemon) -> None:  # type: ignore[no-untyped-def]
    d = start_daemon()
    s = sseq.connect(d.socket, name="gone")
    b = s.alloc(16, label="outlived")
    assert d.stop() == 0  # SIGTERM, as systemctl stop
    b.free()  # the buffer went with the daemon: nothing to do, nothing to report
    assert b.freed
    with pytest.raises(sseq.Error):
        s.sync()  # the loss itself is still reported where it matters
    s.close()
    b.free()  # and after the session closed
