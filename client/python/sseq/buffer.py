"""Buffer and Op: a device buffer (or a slice of one) and a queued request.

A Buffer is a handle the daemon gave its session, with optional shape and dtype used
as defaults for downloads and indexing. An Op is the tag of a queued copy or launch.
Both act through the session that made them (:mod:`sseq.session`), which this module
sees only through :class:`_Owner`, so that the kernel-argument packing in
:mod:`sseq.args` can recognise buffers without importing the session module.
"""

from __future__ import annotations

import ctypes
import errno as _errno
import operator
from typing import Any, Optional, Protocol, Sequence, Union

import numpy as np

from . import _lib
from .errors import Error, Status

__all__ = ["Buffer", "Op"]

Shape = Union[int, Sequence[int]]
DTypeLike = Any  # anything np.dtype() takes


class _Owner(Protocol):
    """What a Buffer and an Op use of the :class:`sseq.Session` that made them."""

    _ptr: Optional[int]
    _lock: Any  # a threading.RLock serialising calls into libsseq
    _live: dict[int, "Buffer"]
    _alloc_scope: Optional[str]
    _ops: int

    @property
    def closed(self) -> bool: ...

    def _check_open(self) -> None: ...

    def _error(self, code: int, what: str, tag: int = 0) -> Error: ...


def _index(value: Any, what: str) -> int:
    """``value`` as an exact integer, refused as numpy refuses a dimension: TypeError
    for a float (2.5 is not 2) or anything else that is not an integer."""
    if isinstance(value, bool):
        raise TypeError(f"{what}: 'bool' object cannot be interpreted as an integer")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what}: {type(value).__name__!r} object cannot be interpreted as "
                        f"an integer ({value!r})") from None


def _size(value: Any, what: str) -> int:
    """A byte count or offset: an integer (see _index) that is not negative."""
    n = _index(value, what)
    if n < 0:
        raise ValueError(f"{what}: {n} is negative")
    return n


def _shape(shape: Shape, what: str = "shape") -> tuple[int, ...]:
    try:
        dims = tuple(shape)  # type: ignore[arg-type]
    except TypeError:
        dims = (shape,)
    t = tuple(_index(d, what) for d in dims)
    if any(d < 0 for d in t):
        raise ValueError(f"{what}: negative dimensions are not allowed (shape {t})")
    return t


# libsseq returns handles with its connection's tag in the top 16 bits (libsseq(3));
# below is the daemon's number, the one sseqctl shows.
_DAEMON_HANDLE_MASK = (1 << 48) - 1

# How a connection whose daemon went away fails every later call.
_GONE_ERRNOS = (_errno.ECONNRESET, _errno.EPIPE, _errno.ENOTCONN, _errno.ECONNABORTED,
                _errno.ESHUTDOWN)


def _session_name(s: Any) -> str:
    info = getattr(s, "info", None)
    sid = info.session if info is not None else "?"
    where = getattr(s, "socket", None) or "$SSEQ_SOCKET"
    return f"session {sid} ({where})"


def _check_owner(buf: "Buffer", session: Any, what: str) -> None:
    """Refuse a buffer of another session: handles are per-session numbers, and the
    same number names some other buffer (or none) in this one."""
    if buf.session is not session:
        raise ValueError(f"{what}: {buf.describe()} belongs to {_session_name(buf.session)}, "
                         f"not to this {_session_name(session)}; a buffer works only "
                         f"through the session that allocated it")


# numpy kinds whose every bit pattern is a valid value of a fixed size: bool, signed and
# unsigned integers, floats, complex. Everything else is refused where a dtype enters:
# object arrays hold PyObject pointers (device bytes read as pointers crash the
# interpreter), records and void may hold them too, and strings and datetimes are not
# data a kernel works on (view the bytes as uint8 to move them).
_KINDS = "biufc"
_ALLOWED = "bool, signed or unsigned integers, floats or complex (numpy kinds b, i, u, f, c)"


def _dtype(dtype: DTypeLike, what: str) -> np.dtype:
    """``np.dtype(dtype)`` if it is fixed-size numeric or bool, else TypeError naming it
    and what is allowed. ``what`` says where it was given, for the message."""
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"{what}: {dtype!r} is not a dtype ({e}); allowed: {_ALLOWED}") from None
    if dt.kind not in _KINDS or dt.hasobject:
        raise TypeError(f"{what}: dtype {dt} (kind {dt.kind!r}) is not allowed; allowed: "
                        f"{_ALLOWED}")
    return dt


def _nbytes(shape: tuple[int, ...], dtype: np.dtype) -> int:
    n = dtype.itemsize
    for d in shape:
        n *= d
    return n


class Op:
    """A queued request (copy or launch). ``wait()`` blocks until it finished and raises
    its error, if any."""

    __slots__ = ("session", "tag", "what")

    def __init__(self, session: _Owner, tag: int, what: str) -> None:
        self.session = session
        self.tag = tag
        self.what = what

    def wait(self) -> None:
        """Wait until the request finished; raise :class:`sseq.Error` if it failed."""
        s = self.session
        with s._lock:
            s._check_open()
            r = _lib.lib().sseq_wait(s._ptr, self.tag)
            if r < 0:
                raise s._error(r, self.what, tag=self.tag)

    def __repr__(self) -> str:
        return f"<sseq.Op {self.what} tag={self.tag}>"


class Buffer:
    """A device buffer, or a slice (a view) of one. Create with
    :meth:`sseq.Session.alloc` or :meth:`Buffer.slice`. ``shape``/``dtype`` are
    optional typing used as defaults by :meth:`download` and by indexing; the daemon
    only knows bytes.

    Lives until :meth:`free` (or the ``with`` block, or the session's close). A slice
    keeps its base's memory alive on the daemon and must be freed too."""

    def __init__(self, session: _Owner, handle: int, nbytes: int, label: str,
                 shape: Optional[tuple[int, ...]], dtype: Optional[np.dtype],
                 base: Optional["Buffer"] = None, offset: int = 0) -> None:
        self.session = session
        self.handle = handle
        self.nbytes = nbytes
        self.label = label
        self.shape = shape
        self.dtype = dtype
        self.base = base
        self.offset = offset  # bytes from the start of `base`
        self.freed = False
        # Which pytest fixture scope made it (the plugin's leak check uses this).
        self.scope: Optional[str] = session._alloc_scope

    # -- life --

    def _check_live(self) -> None:
        if self.freed:
            raise ValueError(f"{self!r} was already freed")
        self.session._check_open()

    def free(self, *, wait: bool = False) -> None:
        """Release the handle. The daemon defers the actual free until work already
        submitted on the buffer is done, so this is safe right after a launch.

        It returns without waiting for the daemon's answer (as a native asynchronous
        free does): the answer is read with whatever waits next. A refusal (the daemon
        lost the buffer in a device reset) is raised by the next ``sync()``; the pytest
        plugin reports it as an error nobody collected. ``wait=True`` waits for the
        answer, so that a refusal raises here.

        A no-op once the buffer is gone with its session: after the session was closed,
        or when its daemon went away (the daemon's buffers went with it), so that a
        fixture's teardown does not fail for what the test already reported."""
        s = self.session
        if s.closed:
            self.freed = True
            return
        self._check_live()
        with s._lock:
            fn = _lib.lib().sseq_free if wait else _lib.lib().sseq_free_async
            r = fn(s._ptr, self.handle)
            # The handle is gone either way: a refusal means it was never valid.
            self.freed = True
            s._live.pop(self.handle, None)
            if r < 0:
                e = s._error(r, f"free {self.describe()}")
                if e.errno in _GONE_ERRNOS or e.status == Status.SHUTTING_DOWN:
                    return
                raise e

    def __enter__(self) -> "Buffer":
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.freed and not self.session.closed:
            self.free()

    # -- views --

    def slice(self, offset: int, length: int, label: Optional[str] = None,
              *, shape: Optional[Shape] = None, dtype: DTypeLike = None) -> "Buffer":
        """A view of bytes ``[offset, offset + length)``. Its ordering and contents are
        its base's. ``shape``/``dtype`` type the view (by default: this buffer's dtype
        as a flat array when the length divides evenly)."""
        self._check_live()
        offset, length = _size(offset, "slice offset"), _size(length, "slice length")
        dt = _dtype(dtype, "slice") if dtype is not None else self.dtype
        shp = _shape(shape, "slice") if shape is not None else None
        if shp is None and dt is not None and length % dt.itemsize == 0:
            shp = (length // dt.itemsize,)
        if shp is not None and dt is not None and _nbytes(shp, dt) != length:
            raise ValueError(f"shape {shp} of {dt} is {_nbytes(shp, dt)} bytes, "
                             f"slice length is {length}")
        if label is None:
            label = f"{self.label or 'buffer'}[{offset}:{offset + length}]"
        s = self.session
        out = ctypes.c_uint64()
        with s._lock:
            r = _lib.lib().sseq_slice(s._ptr, self.handle, offset, length,
                                      label.encode(), ctypes.byref(out))
            if r < 0:
                raise s._error(r, f"slice {self.describe()} at {offset}+{length}")
            buf = Buffer(s, out.value, length, label, shp, dt, base=self, offset=offset)
            s._live[buf.handle] = buf
        return buf

    def __getitem__(self, index: Union[int, slice]) -> "Buffer":
        """Slice by element index along the first axis: ``buf[i]`` is row i (for a 1-D
        buffer a single element), ``buf[i:j]`` rows i..j-1. Needs shape and dtype.
        Returns a new slice handle, to be freed like any buffer."""
        if self.shape is None or self.dtype is None or len(self.shape) == 0:
            raise TypeError(f"{self!r} has no shape/dtype: use slice(offset, length)")
        rows = self.shape[0]
        row_shape = self.shape[1:]
        row_bytes = _nbytes(row_shape, self.dtype)
        if isinstance(index, slice):
            start, stop, step = index.indices(rows)
            if step != 1:
                raise ValueError("a buffer slice must be contiguous (step 1)")
            stop = max(stop, start)
            return self.slice(start * row_bytes, (stop - start) * row_bytes,
                              f"{self.label or 'buffer'}[{start}:{stop}]",
                              shape=(stop - start,) + row_shape, dtype=self.dtype)
        i = int(index)
        if i < 0:
            i += rows
        if not 0 <= i < rows:
            raise IndexError(f"index {index} out of range for {rows} rows")
        return self.slice(i * row_bytes, row_bytes, f"{self.label or 'buffer'}[{i}]",
                          shape=row_shape, dtype=self.dtype)

    # -- copies --

    def upload(self, array: np.ndarray, offset: int = 0, *, cast: bool = False) -> Op:
        """Queue a host-to-device copy of ``array`` into this buffer at byte ``offset``.

        ``array`` must be C-contiguous (others are copied to a contiguous temporary).
        An array from :meth:`sseq.Session.host_array` is read in place from the staging
        arena, with no copy at all: do not modify it until the Op (or ``sync``)
        finished. Any other array is copied into staging before this returns and may
        be reused at once.

        Into a typed buffer the array's dtype must be the buffer's (TypeError naming
        both otherwise): ``cast=True`` converts the values to the buffer's dtype first
        (numpy's ``astype``), and a ``uint8`` array (``array.view(np.uint8)``) is taken
        as raw bytes. An untyped buffer takes any array's bytes."""
        self._check_live()
        a = np.ascontiguousarray(array)
        _dtype(a.dtype, "upload")
        offset = _index(offset, "upload offset")
        if cast and self.dtype is None:
            raise TypeError(f"upload(cast=True): {self.describe()} has no dtype to convert "
                            f"to (allocate it with one, or upload without cast)")
        if self.dtype is not None and a.dtype != self.dtype:
            if cast:
                a = np.ascontiguousarray(a.astype(self.dtype))
            elif a.dtype != np.uint8:
                raise TypeError(f"upload: array dtype {a.dtype} does not match buffer "
                                f"{self.describe()}, which holds {self.dtype}: pass "
                                f"cast=True to convert the values, or array.view(np.uint8) "
                                f"to copy the bytes as they are")
        if offset < 0 or offset + a.nbytes > self.nbytes:
            raise ValueError(f"upload of {a.nbytes} bytes at offset {offset} does not fit "
                             f"{self.describe()} ({self.nbytes} bytes)")
        s = self.session
        tag = ctypes.c_uint64()
        with s._lock:
            r = _lib.lib().sseq_copy_h2d(s._ptr, self.handle, offset, a.ctypes.data,
                                         a.nbytes, ctypes.byref(tag))
            if r < 0:
                raise s._error(r, f"upload to {self.describe()}")
            s._ops += 1
        return Op(s, tag.value, f"upload to {self.describe()}")

    def download(self, shape: Optional[Shape] = None, dtype: DTypeLike = None, *,
                 out: Optional[np.ndarray] = None, offset: int = 0,
                 cast: bool = False) -> np.ndarray:
        """Copy the buffer's contents (from byte ``offset``) to the host and return them,
        waiting for the copy. Into ``out`` (C-contiguous, writable; its size decides the
        length) or a new array of ``shape``/``dtype`` (default: the buffer's own, else
        float32 for all its bytes). Either dtype must be fixed-size numeric or bool
        (TypeError otherwise).

        From a typed buffer that dtype must be the buffer's (TypeError naming both
        otherwise), ``uint8`` (the raw bytes), or ``cast=True``: the buffer's elements
        are read as its dtype and converted (numpy's ``astype``). An untyped buffer's
        bytes land in any dtype as they are."""
        self._check_live()
        offset = _index(offset, "download offset")
        if cast and self.dtype is None:
            raise TypeError(f"download(cast=True): {self.describe()} has no dtype to "
                            f"convert from (download its bytes in the dtype they hold)")
        final: Optional[np.ndarray] = None  # where converted values go, with cast
        if out is None:
            dt = (_dtype(dtype, "download") if dtype is not None
                  else (self.dtype or np.dtype(np.float32)))
            read = self._read_dtype(dt, cast, "download")
            if shape is not None:
                shp = _shape(shape, "download")
            elif self.shape is not None and (dtype is None or read != dt):
                shp = self.shape
            else:
                shp = ((self.nbytes - offset) // read.itemsize,)
            out = np.empty(shp, read)
            if read != dt:
                final = np.empty(shp, dt)
        elif not (out.flags.c_contiguous and out.flags.writeable):
            raise ValueError("download(out=...) needs a C-contiguous writable array")
        else:
            _dtype(out.dtype, "download(out=...)")
            read = self._read_dtype(out.dtype, cast, "download(out=...)")
            if read != out.dtype:
                final, out = out, np.empty(out.shape, read)
        if offset < 0 or offset + out.nbytes > self.nbytes:
            raise ValueError(f"download of {out.nbytes} bytes at offset {offset} does not "
                             f"fit {self.describe()} ({self.nbytes} bytes)")
        if out.nbytes == 0:
            return out
        s = self.session
        what = f"download from {self.describe()}"
        tag = ctypes.c_uint64()
        with s._lock:
            lib = _lib.lib()
            r = lib.sseq_copy_d2h(s._ptr, self.handle, offset, out.ctypes.data, out.nbytes,
                                  ctypes.byref(tag))
            if r < 0:
                raise s._error(r, what)
            s._ops += 1
            r = lib.sseq_wait(s._ptr, tag.value)
            if r < 0:
                raise s._error(r, what, tag=tag.value)
        if final is not None:
            np.copyto(final, out, casting="unsafe")
            return final
        return out

    def _read_dtype(self, dt: np.dtype, cast: bool, what: str) -> np.dtype:
        """The dtype the device's bytes are read as for a download as ``dt``: ``dt``
        itself for an untyped buffer, its own dtype, or uint8 (raw bytes); the
        buffer's dtype with ``cast`` (converted afterwards); else TypeError."""
        if self.dtype is None or dt == self.dtype or (dt == np.uint8 and not cast):
            return dt
        if cast:
            return self.dtype
        raise TypeError(f"{what}: dtype {dt} does not match buffer {self.describe()}, "
                        f"which holds {self.dtype}: pass cast=True to convert the values, "
                        f"or download as np.uint8 for the bytes as they are")

    def copy_to(self, dst: "Buffer", src_offset: int = 0, dst_offset: int = 0,
                nbytes: Optional[int] = None) -> Op:
        """Queue a device-to-device copy of ``nbytes`` (default: all from src_offset)
        into ``dst`` at ``dst_offset``. Both may be views of one base if the ranges do
        not overlap."""
        self._check_live()
        if not isinstance(dst, Buffer):
            raise TypeError(f"copy_to takes an sseq.Buffer, not {type(dst).__name__}")
        _check_owner(dst, self.session, f"copy {self.describe()} -> {dst.describe()}")
        dst._check_live()
        src_offset = _size(src_offset, "copy_to src_offset")
        dst_offset = _size(dst_offset, "copy_to dst_offset")
        if nbytes is None:
            nbytes = self.nbytes - src_offset
        nbytes = _size(nbytes, "copy_to nbytes")
        s = self.session
        what = f"copy {self.describe()} -> {dst.describe()}"
        tag = ctypes.c_uint64()
        with s._lock:
            r = _lib.lib().sseq_copy_d2d(s._ptr, self.handle, src_offset, dst.handle,
                                         dst_offset, nbytes, ctypes.byref(tag))
            if r < 0:
                raise s._error(r, what)
            s._ops += 1
        return Op(s, tag.value, what)

    # -- naming --

    @property
    def daemon_handle(self) -> int:
        """The daemon's number for the handle: what ``sseqctl buffers`` shows (libsseq
        marks ``handle`` with its connection in the top bits, see libsseq(3))."""
        return self.handle & _DAEMON_HANDLE_MASK

    def describe(self) -> str:
        """The label (or ``#handle``, the daemon's number in decimal) for messages."""
        return repr(self.label) if self.label else f"#{self.daemon_handle}"

    def __repr__(self) -> str:
        kind = "slice" if self.base is not None else "buffer"
        label = f" {self.label!r}" if self.label else ""
        typed = f" {self.shape} {self.dtype}" if self.shape is not None else ""
        state = " freed" if self.freed else ""
        return f"<sseq {kind} #{self.daemon_handle}{label} {self.nbytes}B{typed}{state}>"
