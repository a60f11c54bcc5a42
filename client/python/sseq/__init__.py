"""sseq: the Python client of sseqd, the per-GPU event-sequencing daemon.

A thin ctypes layer over libsseq (no compiled extension). The library is found from
``$SSEQ_LIBRARY``, else the installed ``libsseq.so.0``. Example::

    import numpy as np, sseq

    with sseq.connect() as s:                       # $SSEQ_SOCKET or /run/sseq/gpu0.sock
        x = s.host_array(1024)                      # float32, in the staging arena
        x[:] = np.arange(1024)
        with s.alloc(1024, np.float32, label="x") as a, \\
             s.alloc(1024, np.float32, label="y") as b:
            a.upload(x)                             # zero-copy H2D, queued
            s.execute("scale", sseq.In(a), sseq.Out(b), sseq.f32(2), sseq.u64(1024))
            y = b.download()                        # waits; ordered after the kernel
        assert (y == 2 * x).all()

The pytest plugin is :mod:`sseq.pytest_plugin` (``-p sseq.pytest_plugin``).
"""

from ._lib import LibraryNotFoundError, library_path
from .args import (BUILTIN_KERNELS, In, InOut, Out, Scalar, bf16, f16, f32, f64, i8, i16, i32,
                   i64, struct, u8, u16, u32, u64)
from .buffer import Buffer, Op
from .errors import Error, Status
from .session import DeviceLimits, FunctionInfo, Info, Session, Stats, connect

__all__ = [
    "connect",
    "Session",
    "Buffer",
    "Op",
    "Info",
    "Stats",
    "FunctionInfo",
    "DeviceLimits",
    "Error",
    "Status",
    "LibraryNotFoundError",
    "library_path",
    "In",
    "Out",
    "InOut",
    "Scalar",
    "i32",
    "u32",
    "i64",
    "u64",
    "f32",
    "f64",
    "i8",
    "u8",
    "i16",
    "u16",
    "f16",
    "bf16",
    "struct",
    "BUILTIN_KERNELS",
]

__version__ = "0.1.0"
