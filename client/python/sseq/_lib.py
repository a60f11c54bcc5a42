"""Loading libsseq and declaring its C API for ctypes.

The library is found once, on first use, so that ``import sseq`` works (and the
pytest plugin can skip with a reason) on a machine without it. The structures here
mirror ``<sseq/sseq.h>`` field for field; keep them in step with it. The build's
python-schema test (client/python/test-schema.py) fails where they are not, and where
the ARG_* names or _ArgValue's members are not kernels/karg.h's rows and wide column.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno as _errno
import os
import threading
from typing import Optional

from ._schema import ARG_TYPES, STATS_FIELDS

__all__ = ["lib", "library_path", "default_socket", "default_socket_dir", "MAX_LANES",
           "SseqConnectOptions", "SseqInfo", "SseqArg", "SseqLaunch", "SseqStats",
           "ARG_BUFFER", "ARG_I32", "ARG_U32", "ARG_I64", "ARG_U64", "ARG_F32", "ARG_F64",
           "ARG_I8", "ARG_U8", "ARG_I16", "ARG_U16", "ARG_F16", "ARG_BF16", "ARG_BYTES",
           "ACCESS_IN", "ACCESS_OUT", "ACCESS_INOUT", "LibraryNotFoundError"]

# enum sseq_arg_type, numbered by kernels/karg.h's table (generated), and enum sseq_access
(ARG_BUFFER, ARG_I32, ARG_U32, ARG_I64, ARG_U64, ARG_F32, ARG_F64, ARG_I8, ARG_U8, ARG_I16,
 ARG_U16, ARG_F16, ARG_BF16, ARG_BYTES) = (ARG_TYPES[t] for t in (
    "BUFFER", "I32", "U32", "I64", "U64", "F32", "F64", "I8", "U8", "I16", "U16", "F16",
    "BF16", "BYTES"))
ACCESS_IN, ACCESS_OUT, ACCESS_INOUT = 1, 2, 3


class SseqConnectOptions(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("client_name", ctypes.c_char_p),
        ("worker_id", ctypes.c_char_p),
        ("staging_size", ctypes.c_uint64),
        ("lanes", ctypes.c_uint32),
    ]


# SSEQ_MAX_LANES: the most lanes a connection may ask for.
MAX_LANES = 8


class SseqInfo(ctypes.Structure):
    _fields_ = [
        ("session", ctypes.c_uint64),
        ("protocol_major", ctypes.c_uint32),
        ("protocol_minor", ctypes.c_uint32),
        ("daemon_version", ctypes.c_char_p),
        ("device_index", ctypes.c_uint32),
        ("device_name", ctypes.c_char_p),
        ("backend", ctypes.c_char_p),
        ("arch", ctypes.c_char_p),
        ("memory_total", ctypes.c_uint64),
    ]


class _ArgBytes(ctypes.Structure):
    # POINTER, not c_void_p: assigning a ctypes object keeps it alive with the struct.
    _fields_ = [
        ("data", ctypes.POINTER(ctypes.c_ubyte)),
        ("size", ctypes.c_uint32),
        ("align", ctypes.c_uint32),
    ]


class _ArgValue(ctypes.Union):
    _fields_ = [
        ("buffer", ctypes.c_uint64),
        ("i32", ctypes.c_int32),
        ("u32", ctypes.c_uint32),
        ("i64", ctypes.c_int64),
        ("u64", ctypes.c_uint64),
        ("f32", ctypes.c_float),
        ("f64", ctypes.c_double),
        ("bytes", _ArgBytes),
    ]


class SseqArg(ctypes.Structure):
    # enum members are ints in the C ABI used here (gcc, clang on Linux).
    _fields_ = [
        ("type", ctypes.c_int),
        ("access", ctypes.c_int),
        ("v", _ArgValue),
    ]


class SseqLaunch(ctypes.Structure):
    _fields_ = [
        ("elements", ctypes.c_uint64),
        ("grid", ctypes.c_uint32 * 3),
        ("block", ctypes.c_uint32 * 3),
        ("shared_mem", ctypes.c_uint32),
    ]


class SseqLaunchAttrs(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("cooperative", ctypes.c_uint32),
        ("cluster", ctypes.c_uint32 * 3),
    ]


# struct sseq_stats, counters in header order after .size (generated from sseq.h).


class SseqStats(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t)] + [(f, ctypes.c_uint64) for f in STATS_FIELDS]


# struct sseq_function_info's numbers, in order after name and demangled.
FUNCTION_FIELDS = (
    ("max_threads_per_block", ctypes.c_uint32),
    ("num_regs", ctypes.c_uint32),
    ("shared_size_bytes", ctypes.c_uint64),
    ("max_dynamic_shared_size_bytes", ctypes.c_uint64),
    ("const_size_bytes", ctypes.c_uint64),
    ("local_size_bytes", ctypes.c_uint64),
    ("ptx_version", ctypes.c_uint32),
    ("binary_version", ctypes.c_uint32),
)


class SseqFunctionInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 256), ("demangled", ctypes.c_char * 512)] + list(
        FUNCTION_FIELDS)


class SseqDeviceLimits(ctypes.Structure):
    _fields_ = [
        ("max_threads_per_block", ctypes.c_uint32),
        ("max_block", ctypes.c_uint32 * 3),
        ("max_grid", ctypes.c_uint32 * 3),
        ("shared_per_block", ctypes.c_uint64),
        ("shared_optin", ctypes.c_uint64),
    ]


class LibraryNotFoundError(OSError):
    """libsseq could not be loaded: neither ``$SSEQ_LIBRARY`` nor an installed copy."""


_P = ctypes.c_void_p
_U64 = ctypes.c_uint64
_PU64 = ctypes.POINTER(ctypes.c_uint64)

# name: (restype, argtypes)
_PROTOTYPES = {
    "sseq_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    "sseq_connect": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(SseqConnectOptions),
                                    ctypes.POINTER(_P)]),
    "sseq_close": (None, [_P]),
    "sseq_get_info": (ctypes.c_int, [_P, ctypes.POINTER(SseqInfo)]),
    "sseq_set_lane": (ctypes.c_int, [_P, ctypes.c_uint]),
    "sseq_get_lane": (ctypes.c_uint, [_P]),
    "sseq_get_lanes": (ctypes.c_int, [_P, ctypes.POINTER(ctypes.c_uint32), ctypes.c_size_t]),
    "sseq_last_error_message": (ctypes.c_char_p, [_P]),
    "sseq_last_error_tag": (_U64, [_P]),
    "sseq_alloc": (ctypes.c_int, [_P, _U64, ctypes.c_char_p, _PU64]),
    "sseq_free": (ctypes.c_int, [_P, _U64]),
    "sseq_slice": (ctypes.c_int, [_P, _U64, _U64, _U64, ctypes.c_char_p, _PU64]),
    "sseq_alloc_async": (ctypes.c_int, [_P, _U64, ctypes.c_char_p, _PU64]),
    "sseq_free_async": (ctypes.c_int, [_P, _U64]),
    "sseq_host_alloc": (ctypes.c_int, [_P, _U64, ctypes.POINTER(_P)]),
    "sseq_host_free": (ctypes.c_int, [_P, _P]),
    "sseq_copy_h2d": (ctypes.c_int, [_P, _U64, _U64, _P, _U64, _PU64]),
    "sseq_copy_d2h": (ctypes.c_int, [_P, _U64, _U64, _P, _U64, _PU64]),
    "sseq_copy_d2d": (ctypes.c_int, [_P, _U64, _U64, _U64, _U64, _U64, _PU64]),
    "sseq_execute": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.POINTER(SseqArg),
                                    ctypes.c_size_t, ctypes.POINTER(SseqLaunch), _PU64]),
    "sseq_load_module": (ctypes.c_int, [_P, ctypes.c_char_p, _PU64]),
    "sseq_module_global": (ctypes.c_int, [_P, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_int,
                                          _PU64, _PU64]),
    "sseq_execute_function": (ctypes.c_int, [_P, _U64, ctypes.c_char_p,
                                             ctypes.POINTER(SseqArg), ctypes.c_size_t,
                                             ctypes.POINTER(SseqLaunch), _PU64]),
    "sseq_execute_function_attrs": (ctypes.c_int, [_P, _U64, ctypes.c_char_p,
                                                   ctypes.POINTER(SseqArg), ctypes.c_size_t,
                                                   ctypes.POINTER(SseqLaunch),
                                                   ctypes.POINTER(SseqLaunchAttrs), _PU64]),
    "sseq_flush": (ctypes.c_int, [_P]),
    "sseq_wait": (ctypes.c_int, [_P, _U64]),
    "sseq_await": (ctypes.c_int, [_P, _U64]),
    "sseq_sync": (ctypes.c_int, [_P]),
    "sseq_outstanding": (_U64, [_P]),
    "sseq_poll": (ctypes.c_int, [_P, ctypes.c_int]),
    "sseq_get_fd": (ctypes.c_int, [_P]),
    "sseq_stats": (ctypes.c_int, [_P, ctypes.POINTER(SseqStats)]),
    "sseq_module_functions": (ctypes.c_int, [_P, _U64, ctypes.POINTER(SseqFunctionInfo),
                                             ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]),
    "sseq_function_attributes": (ctypes.c_int, [_P, _U64, ctypes.c_char_p,
                                                ctypes.POINTER(SseqFunctionInfo)]),
    "sseq_device_limits": (ctypes.c_int, [_P, ctypes.POINTER(SseqDeviceLimits)]),
}

# Functions a libsseq of an older release lacks, used where there (the caller checks
# hasattr): the package still runs with that libsseq.
_OPTIONAL = {
    "sseq_prepare_staging": (ctypes.c_int, [_P]),  # SSEQ_1.7
}

_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_path: Optional[str] = None


def _candidates() -> list[str]:
    env = os.environ.get("SSEQ_LIBRARY")
    if env:
        # An explicit choice is the only one tried: silently falling back to another
        # copy would test the wrong library.
        return [env]
    found = ctypes.util.find_library("sseq")
    names = [found] if found else []
    return names + ["libsseq.so.0"]


def lib() -> ctypes.CDLL:
    """The loaded libsseq, with prototypes declared. Raises LibraryNotFoundError."""
    global _lib, _path
    with _lock:
        if _lib is not None:
            return _lib
        errors = []
        for name in _candidates():
            try:
                handle = ctypes.CDLL(name)
            except OSError as e:
                errors.append(f"{name}: {e}")
                continue
            missing = [f for f in _PROTOTYPES if not hasattr(handle, f)]
            if missing:
                errors.append(f"{name}: too old, lacks {', '.join(missing)}")
                continue
            for fname, (restype, argtypes) in _PROTOTYPES.items():
                fn = getattr(handle, fname)
                fn.restype = restype
                fn.argtypes = argtypes
            for fname, (restype, argtypes) in _OPTIONAL.items():
                if hasattr(handle, fname):
                    fn = getattr(handle, fname)
                    fn.restype = restype
                    fn.argtypes = argtypes
            _lib, _path = handle, name
            return handle
        raise LibraryNotFoundError(
            _errno.ENOENT,
            "libsseq not found (set SSEQ_LIBRARY to the path of libsseq.so): "
            + "; ".join(errors))


def default_socket() -> str:
    """Where sseq_connect(NULL) goes when $SSEQ_SOCKET is unset or empty, as libsseq says
    (sseq_default_socket(), SSEQ_DEFAULT_SOCKET), for saying where: connecting passes None
    and lets libsseq decide. Without a libsseq that says, a description of it."""
    try:
        fn = lib().sseq_default_socket
    except (LibraryNotFoundError, AttributeError):  # none, or one from before the function
        return "libsseq's default socket"
    fn.restype, fn.argtypes = ctypes.c_char_p, []
    return fn().decode()


def default_socket_dir() -> Optional[str]:
    """The directory of the daemons' sockets, gpuN.sock for GPU N, as sseqd@N.socket
    listens (SSEQ_SOCKET_DIR): that of libsseq's default socket, its gpu0.sock. None
    without a libsseq that says."""
    path = default_socket()
    return os.path.dirname(path) if os.path.isabs(path) else None


def library_path() -> Optional[str]:
    """The name or path libsseq was loaded from, or None before the first use."""
    return _path
