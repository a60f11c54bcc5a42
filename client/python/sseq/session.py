"""Session: the libsseq connection, and what it hands out (device buffers and queued
requests are :mod:`sseq.buffer`'s Buffer and Op; host arrays live here).

A Session is one connection to sseqd (one libsseq ``struct sseq``). Copies and kernel
launches are queued and return an :class:`Op` at once; errors surface from
``Op.wait()``, ``Session.sync()`` or any later waiting call, never lost. ``alloc``
returns its Buffer at once (libsseq names the handle; a refusal surfaces where the
buffer is used and at the next sync); calls that return a slice or data (download)
wait for the daemon.

Every Buffer a session makes, slices included, stays registered with it until freed,
whether or not Python still references it: a buffer dropped without ``free()`` is a
leak the session (and the pytest plugin's leak check) can name by label. ``close()``
and the context manager release everything.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import threading
from typing import Any, Iterator, Optional, Sequence, Union

import numpy as np

from . import _lib
from .args import pack_args
from .buffer import (Buffer, DTypeLike, Op, Shape, _check_owner, _dtype, _index, _nbytes,
                     _shape)
from ._schema import Stats
from .errors import Error

__all__ = ["Session", "Buffer", "Op", "Info", "Stats", "FunctionInfo", "DeviceLimits",
           "connect"]

PathLike = Union[str, "os.PathLike[str]"]


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
class FunctionInfo:
    """A loaded module's function as the device reports it (``struct
    sseq_function_info``): ``name`` is its symbol (mangled for C++), ``demangled`` its
    signature ("" for a name that is no C++ name); the rest is what picking a block
    size needs. Versions are major * 10 + minor."""

    name: str
    demangled: str
    max_threads_per_block: int
    num_regs: int
    shared_size_bytes: int
    max_dynamic_shared_size_bytes: int
    const_size_bytes: int
    local_size_bytes: int
    ptx_version: int
    binary_version: int

    @classmethod
    def _of(cls, fi: _lib.SseqFunctionInfo) -> "FunctionInfo":
        return cls(_text(fi.name), _text(fi.demangled),
                   **{f: getattr(fi, f) for f, _ in _lib.FUNCTION_FIELDS})


@dataclasses.dataclass(frozen=True)
class DeviceLimits:
    """The device's launch limits for module functions (all 0 on the sim): threads per
    block, block and grid dimensions (x, y, z), shared memory per block by default and
    at most (``shared_optin``, a function's static and dynamic together)."""

    max_threads_per_block: int
    max_block: tuple[int, int, int]
    max_grid: tuple[int, int, int]
    shared_per_block: int
    shared_optin: int


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
        # The first staging arena exists (libsseq keeps it until close): set by
        # prepare_staging and host_array, so that prepare_staging is free after them.
        self._staging_ready = False
        # Copies and launches this session queued: its own share of the daemon-wide
        # ops_submitted (the pytest plugin's per-test counters show both).
        self._ops = 0
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
        n = _lib.lib().sseq_get_lanes(ptr, None, 0)
        ids = (ctypes.c_uint32 * n)()
        _lib.lib().sseq_get_lanes(ptr, ids, n)
        #: The daemon's stream number of each lane, in lane order (``sseqctl streams``
        #: and ``Op`` points show these).
        self.lanes: tuple[int, ...] = tuple(ids)

    # -- lanes --

    @property
    def current_lane(self) -> int:
        """The lane (an index into :attr:`lanes`) that copies and kernels go on now."""
        self._check_open()
        return _lib.lib().sseq_get_lane(self._ptr)

    def set_lane(self, lane: int) -> None:
        """Put the copies and kernels queued from now on (uploads and downloads
        included) on lane ``lane``, 0 .. ``len(lanes) - 1``. Work on different lanes may
        overlap on the GPU; work on the same buffers is still ordered across lanes.
        Raises ValueError for a lane the session does not have."""
        self._check_open()
        if not isinstance(lane, (int, np.integer)) or lane < 0 or lane >= len(self.lanes):
            raise ValueError(f"lane {lane!r}: this session has {len(self.lanes)} lane(s) "
                             f"(connect(lanes=N) asks for more)")
        with self._lock:
            r = _lib.lib().sseq_set_lane(self._ptr, int(lane))
            if r < 0:
                raise self._error(r, f"set_lane {lane}")

    @contextlib.contextmanager
    def lane(self, lane: int) -> Iterator["Session"]:
        """``with s.lane(1): ...`` queues the block's work on lane 1 and puts the lane
        that was current back afterwards."""
        before = self.current_lane
        self.set_lane(lane)
        try:
            yield self
        finally:
            if not self.closed:
                self.set_lane(before)

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
              label: Optional[str] = None, wait: bool = False) -> Buffer:
        """Allocate device memory: ``alloc(nbytes)``, or ``alloc(shape, dtype)`` for a
        typed buffer of ``prod(shape) * itemsize`` bytes (``dtype`` fixed-size numeric
        or bool: numpy kinds b, i, u, f, c; anything else is a TypeError). Sizes are
        refused as numpy refuses them: one that is not an integer (``2.5``) is a
        TypeError, a negative one a ValueError. Contents are undefined until written.
        ``label`` names it in ``sseqctl buffers`` and in leak reports.

        It returns without waiting for the daemon (with a daemon of protocol 1.9 or
        later): the uploads, kernels and download that follow leave with it. If the
        daemon refuses it (out of device memory, a limit), whatever uses the buffer
        raises ``DEPENDENCY_FAILED`` quoting the refusal, and the refusal itself is
        raised by the next ``sync()``. ``wait=True`` waits for the daemon's answer, so
        that a refusal raises here."""
        self._check_open()
        if dtype is None:
            if isinstance(size, (tuple, list)):
                raise TypeError("alloc(shape) needs a dtype; alloc(nbytes) takes an int")
            shp, dt, nbytes = None, None, _index(size, "alloc")
            if nbytes < 0:
                raise ValueError(f"alloc: negative size {nbytes} (negative dimensions are "
                                 f"not allowed)")
        else:
            dt = _dtype(dtype, "alloc")
            shp = _shape(size, "alloc")
            nbytes = _nbytes(shp, dt)
        label = label or ""
        out = ctypes.c_uint64()
        with self._lock:
            fn = _lib.lib().sseq_alloc if wait else _lib.lib().sseq_alloc_async
            r = fn(self._ptr, nbytes, label.encode(), ctypes.byref(out))
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
        it) is garbage collected. Valid until the session closes. ``dtype`` must be
        fixed-size numeric or bool (TypeError otherwise): an object array over these
        bytes would read them as pointers."""
        self._check_open()
        dt = _dtype(dtype, "host_array")
        shp = _shape(shape, "host_array")
        nbytes = _nbytes(shp, dt)
        if nbytes == 0:
            return np.empty(shp, dt)
        ptr = ctypes.c_void_p()
        with self._lock:
            r = _lib.lib().sseq_host_alloc(self._ptr, nbytes, ctypes.byref(ptr))
            if r < 0:
                raise self._error(r, f"host_array of {nbytes} bytes")
            owner = _HostAllocation(self, ptr.value, nbytes, shp, dt)
            self._staging_ready = True
        return np.asarray(owner)

    def prepare_staging(self) -> None:
        """Make the session's first staging arena now, registered with the daemon, so
        that later uploads and downloads move through an arena that exists.

        libsseq otherwise makes it inside the session's first upload, download or
        :meth:`host_array`: a memfd of ``connect(staging_size=)`` bytes (4 MiB by
        default) with its pages populated, then a round trip registering it (the daemon
        maps it). That first call pays this one-time setup. This returns once the
        daemon has the arena ready (``sseq_prepare_staging``; pinned, where the daemon
        pins arenas as they register: ``sseqd --small-copy-pool 0``), so no copy waits
        for it. The pytest plugin calls
        this when a worker connects.

        Idempotent and cheap: once the arena exists (after this, :meth:`host_array` or
        a copy) it does nothing. Raises :class:`sseq.Error` as :meth:`host_array` does
        (``RESOURCE_EXHAUSTED`` at a staging limit of the daemon's)."""
        self._check_open()
        with self._lock:
            if self._staging_ready:
                return
            lib = _lib.lib()
            if hasattr(lib, "sseq_prepare_staging"):
                r = lib.sseq_prepare_staging(self._ptr)
            else:  # a libsseq before 1.7: the arena made, its pin not waited for
                ptr = ctypes.c_void_p()
                r = lib.sseq_host_alloc(self._ptr, 1, ctypes.byref(ptr))
                if r == 0:
                    lib.sseq_host_free(self._ptr, ptr.value)
            if r < 0:
                raise self._error(r, "prepare_staging")
            self._staging_ready = True

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
        packed = pack_args(kernel, args, session=self)
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

    def module_global(self, module: int, name: str, *, writable: bool = False,
                      shape: Optional[Shape] = None, dtype: DTypeLike = None) -> Buffer:
        """A module's ``__constant__`` or ``__device__`` variable ``name`` (its symbol:
        mangled for C++, as written for ``extern "C"``) as a :class:`Buffer` over the
        variable's own memory: copy into and out of it, slice it, free it to close it.
        While it is open every launch of a function of ``module`` counts as reading it
        (read-write when ``writable``, for variables kernels write), so a launch waits
        for the copy that set it and the next copy waits for launches still reading
        it. ``dtype`` types it (``shape`` defaults to the whole variable; a shape
        whose size differs from the variable's is a ValueError)."""
        self._check_open()
        out, size = ctypes.c_uint64(), ctypes.c_uint64()
        label = f"global {name}"
        with self._lock:
            r = _lib.lib().sseq_module_global(self._ptr, module, name.encode(), int(writable),
                                               ctypes.byref(out), ctypes.byref(size))
            if r < 0:
                raise self._error(r, f"module_global {name!r}")
            nbytes = size.value
            shp, dt = None, None
            if dtype is not None:
                dt = _dtype(dtype, "module_global")
                if shape is None:
                    shp = (nbytes // dt.itemsize,)
                else:
                    shp = _shape(shape, "module_global")
            buf = Buffer(self, out.value, nbytes, label, shp, dt)
            self._live[buf.handle] = buf
        if dt is not None and _nbytes(shp, dt) != nbytes:
            buf.free()
            raise ValueError(f"module_global {name!r}: {shp} of {dt} is {_nbytes(shp, dt)} "
                             f"bytes, the global {nbytes}")
        return buf

    def execute_function(self, module: int, name: str, *args: Any, elements: int = 0,
                         grid: Optional[Sequence[int]] = None,
                         block: Optional[Sequence[int]] = None, shared_mem: int = 0,
                         cooperative: bool = False,
                         cluster: Optional[Sequence[int]] = None) -> Op:
        """Like :meth:`execute` for function ``name`` of a loaded module. Its signature
        is not known here, so every scalar must be typed. ``name`` is the function's
        symbol (its mangled name for C++), its demangled signature
        (``"scale(float*, int, float)"``) or a short name only one function has
        (``"reduce<256>"``); the daemon resolves it and refuses one several functions
        match. ``grid`` and ``block`` must be within :meth:`device_limits`;
        ``shared_mem`` past the function's maximum (48 KiB on NVIDIA) raises it, up to
        the device's limit less the function's static shared memory.

        ``cooperative=True`` launches all blocks co-resident (cooperative_groups'
        ``grid.sync()``): NVIDIA only (:class:`Status` ``NOT_SUPPORTED`` elsewhere), and
        the grid must fit at once (``INVALID_ARGUMENT`` naming the limit). ``cluster``
        (1 to 3 dimensions) launches thread-block clusters: compute capability 9.0 and
        later only (``NOT_SUPPORTED``), each grid dimension a multiple of the cluster's,
        at most 8 blocks a cluster. Not both at once."""
        self._check_open()
        packed = pack_args(name, args, builtin=False, session=self)
        attrs = None
        if cooperative or cluster is not None:
            attrs = _lib.SseqLaunchAttrs()
            attrs.size = ctypes.sizeof(attrs)
            attrs.cooperative = 1 if cooperative else 0
            if cluster is not None:
                if not 1 <= len(cluster) <= 3:
                    raise ValueError("cluster takes 1 to 3 dimensions")
                for i, c in enumerate(list(cluster) + [1] * (3 - len(cluster))):
                    attrs.cluster[i] = c
        return self._launch(name, module, packed, len(args),
                            self._shape_of(elements, grid, block, shared_mem), attrs)

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
                launch: Optional[_lib.SseqLaunch],
                attrs: Optional[_lib.SseqLaunchAttrs] = None) -> Op:
        what = f"execute {name}"
        tag = ctypes.c_uint64()
        shape = ctypes.byref(launch) if launch is not None else None
        with self._lock:
            lib = _lib.lib()
            if module is None:
                r = lib.sseq_execute(self._ptr, name.encode(), packed, nargs, shape,
                                     ctypes.byref(tag))
            elif attrs is not None:
                r = lib.sseq_execute_function_attrs(self._ptr, module, name.encode(), packed,
                                                    nargs, shape, ctypes.byref(attrs),
                                                    ctypes.byref(tag))
            else:
                r = lib.sseq_execute_function(self._ptr, module, name.encode(), packed, nargs,
                                              shape, ctypes.byref(tag))
            if r < 0:
                raise self._error(r, what)
            self._ops += 1
        return Op(self, tag.value, what)

    # -- waiting --

    def flush(self) -> None:
        """Send every queued request now, waiting for nothing.

        Requests leave by Nagle's rule (libsseq(3)): at once when no answer to an
        earlier one is due, so the device starts while Python does other work; while
        answers are due they are held back, and leave together once one has come: at
        the next call into the session that finds it, or any wait. Call this when host
        work follows a burst of launches or uploads (an upload then an execute is one),
        so the held-back tail is not left waiting for it."""
        self._check_open()
        with self._lock:
            r = _lib.lib().sseq_flush(self._ptr)
            if r < 0:
                raise self._error(r, "flush")

    def await_(self, buf: Buffer) -> None:
        """Wait until ``buf``'s contents are defined (its producer completed); raise the
        producer's error if it failed. (``await`` is a Python keyword.)"""
        if not isinstance(buf, Buffer):
            raise TypeError(f"await_ takes an sseq.Buffer, not {type(buf).__name__}")
        _check_owner(buf, self, f"await {buf.describe()}")
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

    def _read_arrived(self) -> None:
        """Send what is buffered and process the answers already here, without waiting
        (a refusal among them is then known to ``sseq_next_error``); a broken
        connection is left for the next waiting call to raise."""
        with self._lock:
            _lib.lib().sseq_poll(self._ptr, 0)

    def module_functions(self, module: int) -> list[FunctionInfo]:
        """The functions of a loaded module with their demangled names and attributes
        (one round trip). Raises :class:`Error` (INVALID_ARGUMENT) where the platform
        cannot list them (HIP on AMD) or the daemon runs the sim."""
        self._check_open()
        count = ctypes.c_size_t()
        room = 64
        with self._lock:
            lib = _lib.lib()
            while True:
                fns = (_lib.SseqFunctionInfo * room)()
                r = lib.sseq_module_functions(self._ptr, module, fns, room,
                                              ctypes.byref(count))
                if r < 0:
                    raise self._error(r, f"module_functions {module}")
                if count.value <= room:
                    break
                room = count.value
        return [FunctionInfo._of(fns[i]) for i in range(count.value)]

    def function_attributes(self, module: int, name: str) -> FunctionInfo:
        """One function of a loaded module, ``name`` as :meth:`execute_function`
        takes it (symbol, signature or unique short name)."""
        self._check_open()
        fi = _lib.SseqFunctionInfo()
        with self._lock:
            r = _lib.lib().sseq_function_attributes(self._ptr, module, name.encode(),
                                                    ctypes.byref(fi))
            if r < 0:
                raise self._error(r, f"function_attributes {name!r}")
        return FunctionInfo._of(fi)

    def device_limits(self) -> DeviceLimits:
        """The device's launch limits for module functions (one round trip)."""
        self._check_open()
        lim = _lib.SseqDeviceLimits()
        with self._lock:
            r = _lib.lib().sseq_device_limits(self._ptr, ctypes.byref(lim))
            if r < 0:
                raise self._error(r, "device_limits")
        return DeviceLimits(lim.max_threads_per_block, tuple(lim.max_block),
                            tuple(lim.max_grid), lim.shared_per_block, lim.shared_optin)

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
            worker_id: Optional[str] = None, staging_size: int = 0,
            lanes: int = 1) -> Session:
    """Connect to sseqd and return a :class:`Session` (a context manager that closes).

    ``socket``: the daemon's socket; default ``$SSEQ_SOCKET``, else
    ``/run/sseq/gpu0.sock``. ``name`` is shown by ``sseqctl clients`` (default: the
    program's name); ``worker_id`` groups clients there (default:
    ``$PYTEST_XDIST_WORKER``). ``staging_size``: bytes of the first staging arena
    (default 4 MiB). ``lanes``: how many lanes (streams of the daemon's own for
    independent work, see :meth:`Session.lane`) to ask for, 1 to 8. Raises
    :class:`sseq.Error` (``ENOENT``/``ECONNREFUSED`` when no daemon answers) or
    :class:`sseq.LibraryNotFoundError`."""
    if not 1 <= lanes <= _lib.MAX_LANES:
        raise ValueError(f"lanes={lanes!r}: ask for 1 to {_lib.MAX_LANES}")
    lib = _lib.lib()
    path = os.fspath(socket) if socket is not None else None
    opts = _lib.SseqConnectOptions()
    opts.size = ctypes.sizeof(opts)
    opts.client_name = name.encode() if name else None
    opts.worker_id = worker_id.encode() if worker_id else None
    opts.staging_size = staging_size
    opts.lanes = lanes
    ptr = ctypes.c_void_p()
    r = lib.sseq_connect(path.encode() if path else None, ctypes.byref(opts),
                         ctypes.byref(ptr))
    if r < 0:
        # libsseq's message already names the socket.
        raise Error(r, _text(lib.sseq_strerror(r)), _text(lib.sseq_last_error_message(None)))
    return Session(ptr.value, path, name, worker_id or os.environ.get("PYTEST_XDIST_WORKER"))
