"""Session, Buffer and Op: the libsseq connection, device buffers and queued requests.

A Session is one connection to sseqd (one libsseq ``struct sseq``). Copies and kernel
launches are queued and return an :class:`Op` at once; errors surface from
``Op.wait()``, ``Session.sync()`` or any later waiting call, never lost. Calls that
return a handle (alloc, slice) or data (download) wait for the daemon.

Every Buffer a session makes, slices included, stays registered with it until freed,
whether or not Python still references it: a buffer dropped without ``free()`` is a
leak the session (and the pytest plugin's leak check) can name by label. ``close()``
and the context manager release everything.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import threading
from typing import Any, Optional, Sequence, Union

import numpy as np

from . import _lib
from .args import pack_args
from .errors import Error

__all__ = ["Session", "Buffer", "Op", "Info", "Stats", "connect"]

Shape = Union[int, Sequence[int]]
DTypeLike = Any  # anything np.dtype() takes
PathLike = Union[str, "os.PathLike[str]"]


def _shape(shape: Shape) -> tuple[int, ...]:
    t = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    t = tuple(int(d) for d in t)
    if any(d < 0 for d in t):
        raise ValueError(f"negative dimension in shape {t}")
    return t


def _nbytes(shape: tuple[int, ...], dtype: np.dtype) -> int:
    n = dtype.itemsize
    for d in shape:
        n *= d
    return n


def _text(b: Optional[bytes]) -> str:
    return b.decode("utf-8", "replace") if b else ""


@dataclasses.dataclass(frozen=True)
class Info:
    """What the daemon said when the session connected (``struct sseq_info``)."""

    session: int
    protocol: tuple[int, int]
    daemon_version: str
    device_index: int
    device_name: str
    backend: str
    arch: str
    memory_total: int


@dataclasses.dataclass(frozen=True)
class Stats:
    """The daemon's counters (``struct sseq_stats``). They are daemon-wide: every
    session's work counts, not only this one's. ``a - b`` is the change from b to a."""

    waits_enqueued: int = 0
    waits_elided_same_stream: int = 0
    waits_elided_observed: int = 0
    waits_elided_legacy: int = 0
    backpressure_events: int = 0
    race_findings: int = 0
    ops_submitted: int = 0
    ops_completed: int = 0
    ops_failed: int = 0
    events_recorded: int = 0
    frees_deferred: int = 0
    releases: int = 0
    double_definitions: int = 0
    audit_findings: int = 0
    sessions_total: int = 0
    frames_in: int = 0
    frames_bad: int = 0
    placed_by_affinity: int = 0

    def __sub__(self, other: "Stats") -> "Stats":
        if not isinstance(other, Stats):
            return NotImplemented
        return Stats(**{f: getattr(self, f) - getattr(other, f) for f in _lib.STATS_FIELDS})

    def as_dict(self) -> dict[str, int]:
        """The counters as a plain dict (field order kept)."""
        return dataclasses.asdict(self)


assert tuple(f.name for f in dataclasses.fields(Stats)) == _lib.STATS_FIELDS


class Op:
    """A queued request (copy or launch). ``wait()`` blocks until it finished and raises
    its error, if any."""

    __slots__ = ("session", "tag", "what")

    def __init__(self, session: "Session", tag: int, what: str) -> None:
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
    """A device buffer, or a slice (a view) of one. Create with :meth:`Session.alloc`
    or :meth:`Buffer.slice`. ``shape``/``dtype`` are optional typing used as defaults
    by :meth:`download` and by indexing; the daemon only knows bytes.

    Lives until :meth:`free` (or the ``with`` block, or the session's close). A slice
    keeps its base's memory alive on the daemon and must be freed too."""

    def __init__(self, session: "Session", handle: int, nbytes: int, label: str,
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

    def free(self) -> None:
        """Release the handle. The daemon defers the actual free until work already
        submitted on the buffer is done, so this is safe right after a launch."""
        self._check_live()
        s = self.session
        with s._lock:
            r = _lib.lib().sseq_free(s._ptr, self.handle)
            # The handle is gone either way: a refusal means it was never valid.
            self.freed = True
            s._live.pop(self.handle, None)
            if r < 0:
                raise s._error(r, f"free {self.describe()}")

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
        dt = np.dtype(dtype) if dtype is not None else self.dtype
        shp = _shape(shape) if shape is not None else None
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

    def upload(self, array: np.ndarray, offset: int = 0) -> Op:
        """Queue a host-to-device copy of ``array`` into this buffer at byte ``offset``.

        ``array`` must be C-contiguous (others are copied to a contiguous temporary).
        An array from :meth:`Session.host_array` is read in place from the staging
        arena, with no copy at all: do not modify it until the Op (or ``sync``)
        finished. Any other array is copied into staging before this returns and may
        be reused at once."""
        self._check_live()
        a = np.ascontiguousarray(array)
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
        return Op(s, tag.value, f"upload to {self.describe()}")

    def download(self, shape: Optional[Shape] = None, dtype: DTypeLike = None, *,
                 out: Optional[np.ndarray] = None, offset: int = 0) -> np.ndarray:
        """Copy the buffer's contents (from byte ``offset``) to the host and return them,
        waiting for the copy. Into ``out`` (C-contiguous, writable; its size decides the
        length) or a new array of ``shape``/``dtype`` (default: the buffer's own, else
        float32 for all its bytes)."""
        self._check_live()
        if out is None:
            dt = np.dtype(dtype) if dtype is not None else (self.dtype or np.dtype(np.float32))
            if shape is not None:
                shp = _shape(shape)
            elif self.shape is not None and dtype is None:
                shp = self.shape
            else:
                shp = ((self.nbytes - offset) // dt.itemsize,)
            out = np.empty(shp, dt)
        elif not (out.flags.c_contiguous and out.flags.writeable):
            raise ValueError("download(out=...) needs a C-contiguous writable array")
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
            r = lib.sseq_wait(s._ptr, tag.value)
            if r < 0:
                raise s._error(r, what, tag=tag.value)
        return out

    def copy_to(self, dst: "Buffer", src_offset: int = 0, dst_offset: int = 0,
                nbytes: Optional[int] = None) -> Op:
        """Queue a device-to-device copy of ``nbytes`` (default: all from src_offset)
        into ``dst`` at ``dst_offset``. Both may be views of one base if the ranges do
        not overlap."""
        self._check_live()
        dst._check_live()
        if dst.session is not self.session:
            raise ValueError("copy_to between buffers of different sessions")
        if nbytes is None:
            nbytes = self.nbytes - src_offset
        s = self.session
        what = f"copy {self.describe()} -> {dst.describe()}"
        tag = ctypes.c_uint64()
        with s._lock:
            r = _lib.lib().sseq_copy_d2d(s._ptr, self.handle, src_offset, dst.handle,
                                         dst_offset, nbytes, ctypes.byref(tag))
            if r < 0:
                raise s._error(r, what)
        return Op(s, tag.value, what)

    # -- naming --

    def describe(self) -> str:
        """The label (or ``#handle``) for messages."""
        return repr(self.label) if self.label else f"#{self.handle}"

    def __repr__(self) -> str:
        kind = "slice" if self.base is not None else "buffer"
        typed = f" {self.shape} {self.dtype}" if self.shape is not None else ""
        state = " freed" if self.freed else ""
        return f"<sseq {kind} {self.describe()} #{self.handle} {self.nbytes}B{typed}{state}>"


class _HostAllocation:
    """Owner of one sseq_host_alloc range; the base of the ndarray over it."""

    def __init__(self, session: "Session", ptr: int, nbytes: int, shape: tuple[int, ...],
                 dtype: np.dtype) -> None:
        self.session = session  # keeps the connection (and its arenas) open
        self.ptr = ptr
        self.__array_interface__ = {
            "shape": shape,
            "typestr": dtype.str,
            "descr": dtype.descr,
            "data": (ptr, False),
            "version": 3,
        }

    def __del__(self) -> None:
        s = getattr(self, "session", None)
        if s is None or s.closed:
            return
        try:
            with s._lock:
                _lib.lib().sseq_host_free(s._ptr, self.ptr)
        except Exception:  # interpreter shutdown
            pass


class Session:
    """A connection to sseqd. Make one with :func:`sseq.connect`. Use it from one
    thread at a time (calls are serialised with a lock)."""

    def __init__(self, ptr: int, socket: Optional[str], name: Optional[str],
                 worker_id: Optional[str]) -> None:
        self._ptr: Optional[int] = ptr
        self._lock = threading.RLock()
        self._live: dict[int, Buffer] = {}
        self._alloc_scope: Optional[str] = None
        self.socket = socket
        self.name = name
        self.worker_id = worker_id
        info = _lib.SseqInfo()
        _lib.lib().sseq_get_info(ptr, ctypes.byref(info))
        self.info = Info(
            session=info.session,
            protocol=(info.protocol_major, info.protocol_minor),
            daemon_version=_text(info.daemon_version),
            device_index=info.device_index,
            device_name=_text(info.device_name),
            backend=_text(info.backend),
            arch=_text(info.arch),
            memory_total=info.memory_total,
        )

    # -- plumbing --

    @property
    def closed(self) -> bool:
        return self._ptr is None

    def _check_open(self) -> None:
        if self._ptr is None:
            raise ValueError("the sseq session is closed")

    def _error(self, code: int, what: str, tag: int = 0) -> Error:
        lib = _lib.lib()
        return Error(code, _text(lib.sseq_strerror(code)),
                     _text(lib.sseq_last_error_message(self._ptr)), what,
                     tag or lib.sseq_last_error_tag(self._ptr))

    # -- life --

    def close(self) -> None:
        """Close the connection. Queued requests are sent; nothing is waited for (call
        :meth:`sync` first to learn how they ended). The daemon frees every buffer of
        the session once its work is done; Buffer objects become unusable, and arrays
        from :meth:`host_array` must no longer be touched (their memory is unmapped).
        Closing twice is a no-op."""
        with self._lock:
            if self._ptr is None:
                return
            for buf in self._live.values():
                buf.freed = True
            self._live.clear()
            ptr, self._ptr = self._ptr, None
            _lib.lib().sseq_close(ptr)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def fileno(self) -> int:
        """The connection's socket."""
        self._check_open()
        return _lib.lib().sseq_get_fd(self._ptr)

    # -- buffers --

    def alloc(self, size: Shape, dtype: DTypeLike = None, *,
              label: Optional[str] = None) -> Buffer:
        """Allocate device memory: ``alloc(nbytes)``, or ``alloc(shape, dtype)`` for a
        typed buffer of ``prod(shape) * itemsize`` bytes. Contents are undefined until
        written. ``label`` names it in ``sseqctl buffers`` and in leak reports."""
        self._check_open()
        if dtype is None:
            if not isinstance(size, (int, np.integer)):
                raise TypeError("alloc(shape) needs a dtype; alloc(nbytes) takes an int")
            shp, dt, nbytes = None, None, int(size)
        else:
            dt = np.dtype(dtype)
            shp = _shape(size)
            nbytes = _nbytes(shp, dt)
        label = label or ""
        out = ctypes.c_uint64()
        with self._lock:
            r = _lib.lib().sseq_alloc(self._ptr, nbytes, label.encode(), ctypes.byref(out))
            if r < 0:
                raise self._error(r, f"alloc {nbytes} bytes" + (f" {label!r}" if label else ""))
            buf = Buffer(self, out.value, nbytes, label, shp, dt)
            self._live[buf.handle] = buf
        return buf

    def buffers(self) -> list[Buffer]:
        """Buffers and slices made through this session and not freed, oldest first."""
        with self._lock:
            return list(self._live.values())

    def host_array(self, shape: Shape, dtype: DTypeLike = np.float32) -> np.ndarray:
        """A new, uninitialised numpy array living in the session's staging arena
        (``sseq_host_alloc``): uploads from it and downloads into it move no bytes in
        Python or the library. The memory goes back when the array (and every view of
        it) is garbage collected. Valid until the session closes."""
        self._check_open()
        dt = np.dtype(dtype)
        shp = _shape(shape)
        nbytes = _nbytes(shp, dt)
        if nbytes == 0:
            return np.empty(shp, dt)
        ptr = ctypes.c_void_p()
        with self._lock:
            r = _lib.lib().sseq_host_alloc(self._ptr, nbytes, ctypes.byref(ptr))
            if r < 0:
                raise self._error(r, f"host_array of {nbytes} bytes")
            owner = _HostAllocation(self, ptr.value, nbytes, shp, dt)
        return np.asarray(owner)

    # -- work --

    def execute(self, kernel: str, *args: Any, elements: int = 0,
                grid: Optional[Sequence[int]] = None, block: Optional[Sequence[int]] = None,
                shared_mem: int = 0) -> Op:
        """Queue the built-in kernel ``kernel``. Buffers are passed as ``sseq.In(b)``,
        ``sseq.Out(b)`` or ``sseq.InOut(b)``; scalars typed (``sseq.f32(x)``,
        ``sseq.u64(n)``, numpy scalars), or as plain numbers for built-in kernels (see
        :mod:`sseq.args`). The daemon orders the launch after whatever wrote the
        buffers it reads and read or wrote the buffers it writes. ``elements`` or
        ``grid``/``block`` override the launch shape the daemon derives."""
        self._check_open()
        packed = pack_args(kernel, args)
        return self._launch(kernel, None, packed, len(args),
                            self._shape_of(elements, grid, block, shared_mem))

    def load_module(self, path: str) -> int:
        """Load a code object from the daemon's ``--module-dir`` (HIP backend only);
        returns the module handle for :meth:`execute_function`."""
        self._check_open()
        out = ctypes.c_uint64()
        with self._lock:
            r = _lib.lib().sseq_load_module(self._ptr, path.encode(), ctypes.byref(out))
            if r < 0:
                raise self._error(r, f"load_module {path!r}")
        return out.value

    def execute_function(self, module: int, name: str, *args: Any, elements: int = 0,
                         grid: Optional[Sequence[int]] = None,
                         block: Optional[Sequence[int]] = None, shared_mem: int = 0) -> Op:
        """Like :meth:`execute` for function ``name`` of a loaded module. Its signature
        is not known here, so every scalar must be typed."""
        self._check_open()
        packed = pack_args(name, args, builtin=False)
        return self._launch(name, module, packed, len(args),
                            self._shape_of(elements, grid, block, shared_mem))

    @staticmethod
    def _shape_of(elements: int, grid: Optional[Sequence[int]],
                  block: Optional[Sequence[int]], shared_mem: int) -> Optional[_lib.SseqLaunch]:
        if not elements and grid is None and block is None and not shared_mem:
            return None
        launch = _lib.SseqLaunch()
        launch.elements = elements
        for field, dims in (("grid", grid), ("block", block)):
            if dims is not None:
                if not 1 <= len(dims) <= 3:
                    raise ValueError(f"{field} takes 1 to 3 dimensions")
                arr = getattr(launch, field)
                for i, d in enumerate(list(dims) + [1] * (3 - len(dims))):
                    arr[i] = d
        launch.shared_mem = shared_mem
        return launch

    def _launch(self, name: str, module: Optional[int], packed: Any, nargs: int,
                launch: Optional[_lib.SseqLaunch]) -> Op:
        what = f"execute {name}"
        tag = ctypes.c_uint64()
        shape = ctypes.byref(launch) if launch is not None else None
        with self._lock:
            lib = _lib.lib()
            if module is None:
                r = lib.sseq_execute(self._ptr, name.encode(), packed, nargs, shape,
                                     ctypes.byref(tag))
            else:
                r = lib.sseq_execute_function(self._ptr, module, name.encode(), packed, nargs,
                                              shape, ctypes.byref(tag))
            if r < 0:
                raise self._error(r, what)
        return Op(self, tag.value, what)

    # -- waiting --

    def flush(self) -> None:
        """Send every queued request without waiting for them."""
        self._check_open()
        with self._lock:
            r = _lib.lib().sseq_flush(self._ptr)
            if r < 0:
                raise self._error(r, "flush")

    def await_(self, buf: Buffer) -> None:
        """Wait until ``buf``'s contents are defined (its producer completed); raise the
        producer's error if it failed. (``await`` is a Python keyword.)"""
        buf._check_live()
        with self._lock:
            r = _lib.lib().sseq_await(self._ptr, buf.handle)
            if r < 0:
                raise self._error(r, f"await {buf.describe()}")

    def sync(self) -> None:
        """Wait until everything submitted is complete. Raises the oldest error not yet
        reported (each error is raised once; call again for the next)."""
        self._check_open()
        with self._lock:
            r = _lib.lib().sseq_sync(self._ptr)
            if r < 0:
                raise self._error(r, "sync")

    def outstanding(self) -> int:
        """Requests submitted and not yet finished."""
        self._check_open()
        return _lib.lib().sseq_outstanding(self._ptr)

    def stats(self) -> Stats:
        """The daemon's counters now (one round trip); daemon-wide, see :class:`Stats`."""
        self._check_open()
        st = _lib.SseqStats()
        st.size = ctypes.sizeof(st)
        with self._lock:
            r = _lib.lib().sseq_stats(self._ptr, ctypes.byref(st))
            if r < 0:
                raise self._error(r, "stats")
        return Stats(**{f: getattr(st, f) for f in _lib.STATS_FIELDS})

    def __repr__(self) -> str:
        if self._ptr is None:
            return "<sseq.Session closed>"
        return (f"<sseq.Session {self.info.session} on {self.socket or '$SSEQ_SOCKET'} "
                f"({self.info.backend} device {self.info.device_index}), "
                f"{len(self._live)} live buffers>")


def connect(socket: Optional[PathLike] = None, *, name: Optional[str] = None,
            worker_id: Optional[str] = None, staging_size: int = 0) -> Session:
    """Connect to sseqd and return a :class:`Session` (a context manager that closes).

    ``socket``: the daemon's socket; default ``$SSEQ_SOCKET``, else
    ``/run/sseq/gpu0.sock``. ``name`` is shown by ``sseqctl clients`` (default: the
    program's name); ``worker_id`` groups clients there (default:
    ``$PYTEST_XDIST_WORKER``). ``staging_size``: bytes of the first staging arena
    (default 64 MiB). Raises :class:`sseq.Error` (``ENOENT``/``ECONNREFUSED`` when no
    daemon answers) or :class:`sseq.LibraryNotFoundError`."""
    lib = _lib.lib()
    path = os.fspath(socket) if socket is not None else None
    opts = _lib.SseqConnectOptions()
    opts.size = ctypes.sizeof(opts)
    opts.client_name = name.encode() if name else None
    opts.worker_id = worker_id.encode() if worker_id else None
    opts.staging_size = staging_size
    ptr = ctypes.c_void_p()
    r = lib.sseq_connect(path.encode() if path else None, ctypes.byref(opts),
                         ctypes.byref(ptr))
    if r < 0:
        # libsseq's message already names the socket.
        raise Error(r, _text(lib.sseq_strerror(r)), _text(lib.sseq_last_error_message(None)))
    return Session(ptr.value, path, name, worker_id or os.environ.get("PYTEST_XDIST_WORKER"))
