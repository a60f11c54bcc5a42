"""Kernel arguments: buffer access markers, typed scalars, and the built-in kernels'
signatures used to type plain Python numbers.

A kernel argument is either a buffer marked with how the kernel uses it (the daemon
orders the launch from that: ``In`` waits for the buffer's producer, ``Out`` and
``InOut`` also for its pending readers) or a scalar with a C type. Typed scalars
(``f32(0.5)``, ``u64(n)``) and numpy scalars (``np.float32``, ``np.uint64``, ...)
always pass as they are; the daemon checks them against the kernel's signature.
Plain Python ``int``/``float`` values are accepted only for the built-in kernels,
whose signatures this module knows (see BUILTIN_KERNELS): each is converted to the
parameter's type, range-checked, and a float where an integer is expected is
refused. For any other kernel a plain number raises TypeError: give its type.

Module functions also take narrow scalars (``i8``, ``u8``, ``i16``, ``u16``), halves
(``f16``: IEEE binary16; ``bf16``: bfloat16, float32 rounded to nearest even) and
plain-old-data values by value (``struct(...)``: a numpy structured scalar or array, a
ctypes Structure, or bytes with their alignment), each passed with its own size. A
pointer at an offset into a buffer is a slice (``Buffer.slice``) marked like a buffer.
"""

from __future__ import annotations

import ctypes
import math
import numbers
from typing import Any, Optional, Sequence, Union

import numpy as np

from . import _lib
from ._schema import ARG_INFO
from .buffer import Buffer, _check_owner

__all__ = ["In", "Out", "InOut", "Scalar", "i32", "u32", "i64", "u64", "f32", "f64", "i8",
           "u8", "i16", "u16", "f16", "bf16", "struct", "BUILTIN_KERNELS", "Arg", "pack_args"]


class _Access:
    """A buffer argument with its access mode."""

    access: int = 0
    name: str = ""

    __slots__ = ("buffer",)

    def __init__(self, buffer: Buffer) -> None:
        if not isinstance(buffer, Buffer):
            raise TypeError(f"sseq.{self.name}() takes an sseq.Buffer, not "
                            f"{type(buffer).__name__}")
        self.buffer = buffer

    def __repr__(self) -> str:
        return f"sseq.{self.name}({self.buffer!r})"


class In(_Access):
    """A buffer the kernel only reads."""

    access = _lib.ACCESS_IN
    name = "In"
    __slots__ = ()


class Out(_Access):
    """A buffer the kernel only writes (its previous contents are not read)."""

    access = _lib.ACCESS_OUT
    name = "Out"
    __slots__ = ()


class InOut(_Access):
    """A buffer the kernel reads and writes."""

    access = _lib.ACCESS_INOUT
    name = "InOut"
    __slots__ = ()


class Scalar:
    """A scalar kernel argument with a C type. Use the subclasses: ``sseq.f32(0.5)``."""

    type_code: int = 0
    type_name: str = ""
    field: str = ""  # the member of struct sseq_arg's value that carries it
    __slots__ = ("value",)

    def __init__(self, value: Union[int, float, np.number]) -> None:
        self.value = self._convert(value)

    def _convert(self, value: Any) -> Union[int, float]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"sseq.{self.type_name}({self.value!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.value == self.value  # type: ignore

    def __hash__(self) -> int:
        return hash((self.type_name, self.value))


# Each type's code, name, carrying member and range: kernels/karg.h's table, through
# _schema.ARG_INFO.
def _int_type(t: str) -> tuple[int, str, str, int, int]:
    a = ARG_INFO[t]
    assert a.lo is not None and a.hi is not None, t
    return a.code, a.name, a.wide, a.lo, a.hi


def _float_type(t: str) -> tuple[int, str, str]:
    a = ARG_INFO[t]
    return a.code, a.name, a.wide


class _Int(Scalar):
    lo = 0
    hi = 0
    __slots__ = ()

    def _convert(self, value: Any) -> int:
        # type() first: the ABC check costs a microsecond a call on the launch path.
        if type(value) is not int and (isinstance(value, bool)
                                       or not isinstance(value, numbers.Integral)):
            raise TypeError(f"sseq.{self.type_name}() takes an integer, not "
                            f"{type(value).__name__} {value!r}")
        v = int(value)
        if not self.lo <= v <= self.hi:
            raise OverflowError(f"sseq.{self.type_name}({v}): out of range "
                                f"[{self.lo}, {self.hi}]")
        return v


class _Float(Scalar):
    __slots__ = ()

    def _convert(self, value: Any) -> float:
        if type(value) is not float and (isinstance(value, bool)
                                         or not isinstance(value, numbers.Real)):
            raise TypeError(f"sseq.{self.type_name}() takes a real number, not "
                            f"{type(value).__name__} {value!r}")
        return float(value)


class i32(_Int):
    """A signed 32-bit integer argument."""

    type_code, type_name, field, lo, hi = _int_type("I32")
    __slots__ = ()


class u32(_Int):
    """An unsigned 32-bit integer argument."""

    type_code, type_name, field, lo, hi = _int_type("U32")
    __slots__ = ()


class i64(_Int):
    """A signed 64-bit integer argument."""

    type_code, type_name, field, lo, hi = _int_type("I64")
    __slots__ = ()


class u64(_Int):
    """An unsigned 64-bit integer argument."""

    type_code, type_name, field, lo, hi = _int_type("U64")
    __slots__ = ()


_F32_MAX = float(np.finfo(np.float32).max)


class f32(_Float):
    """A 32-bit float argument (rounded to float32 when packed)."""

    type_code, type_name, field = _float_type("F32")
    __slots__ = ()

    def _convert(self, value: Any) -> float:
        v = super()._convert(value)
        if math.isfinite(v) and abs(v) > _F32_MAX:
            raise OverflowError(f"sseq.f32({v!r}): out of float32 range")
        return v


class f64(_Float):
    """A 64-bit float argument."""

    type_code, type_name, field = _float_type("F64")
    __slots__ = ()


# The narrow scalars (module functions only) travel widened, in the union's i32 or u32
# as in libsseq; the daemon checks the range again.
class i8(_Int):
    """A signed 8-bit integer argument."""

    type_code, type_name, field, lo, hi = _int_type("I8")
    __slots__ = ()


class u8(_Int):
    """An unsigned 8-bit integer argument."""

    type_code, type_name, field, lo, hi = _int_type("U8")
    __slots__ = ()


class i16(_Int):
    """A signed 16-bit integer argument."""

    type_code, type_name, field, lo, hi = _int_type("I16")
    __slots__ = ()


class u16(_Int):
    """An unsigned 16-bit integer argument."""

    type_code, type_name, field, lo, hi = _int_type("U16")
    __slots__ = ()


def f16_bits(value: float) -> int:
    """The IEEE binary16 bits of ``value`` (numpy's rounding: to nearest even)."""
    return int(np.array(value, dtype=np.float16).view(np.uint16))


def bf16_bits(value: float) -> int:
    """The bfloat16 bits of ``value``: float32's upper half, rounded to nearest even (a
    NaN stays a quiet NaN of its sign)."""
    x = int(np.array(value, dtype=np.float32).view(np.uint32))
    if (x & 0x7fffffff) > 0x7f800000:
        return (x >> 16) | 0x0040
    return ((x + 0x7fff + ((x >> 16) & 1)) >> 16) & 0xffff


class _Half(_Float):
    """A 16-bit float; ``value`` is the Python float, ``bits`` what is passed."""

    max = 0.0
    __slots__ = ("bits",)

    def __init__(self, value: Union[int, float, np.number]) -> None:
        super().__init__(value)
        self.bits = self._bits(self.value)

    def _convert(self, value: Any) -> float:
        v = super()._convert(value)
        if math.isfinite(v) and abs(v) > self.max:
            raise OverflowError(f"sseq.{self.type_name}({v!r}): out of {self.type_name} range")
        return v

    @staticmethod
    def _bits(value: float) -> int:
        raise NotImplementedError

    @classmethod
    def from_bits(cls, bits: int) -> "_Half":
        """The value whose 16 bits are ``bits``."""
        bits_range = ARG_INFO[cls.type_name.upper()]
        if isinstance(bits, bool) or not isinstance(bits, numbers.Integral) or \
                not bits_range.lo <= bits <= bits_range.hi:
            raise ValueError(f"sseq.{cls.type_name}.from_bits({bits!r}): not 16 bits")
        if cls is f16:
            v = float(np.array(bits, dtype=np.uint16).view(np.float16))
        else:
            v = float(np.array(bits << 16, dtype=np.uint32).view(np.float32))
        h = cls.__new__(cls)
        h.value, h.bits = v, int(bits)
        return h


class f16(_Half):
    """An IEEE half-precision (binary16) argument, from a Python float via numpy."""

    type_code, type_name, field = _float_type("F16")
    max = float(np.finfo(np.float16).max)
    __slots__ = ()
    _bits = staticmethod(f16_bits)


class bf16(_Half):
    """A bfloat16 argument: the float32 value rounded to nearest even to its upper half."""

    type_code, type_name, field = _float_type("BF16")
    max = float(np.finfo(np.float32).max)
    __slots__ = ()
    _bits = staticmethod(bf16_bits)


# What a bytes argument may be (the daemon's limits, proto/sseq.proto BytesArg).
STRUCT_MAX_SIZE = 4096
STRUCT_MAX_ALIGN = 256


class struct:
    """A plain-old-data value passed by value (a C struct, ``float4``, ``dim3``) as its
    bytes. ``value`` is a numpy structured scalar or array (its bytes; its dtype's
    alignment), a ctypes Structure, Union or Array (``ctypes.sizeof``,
    ``ctypes.alignment``) or bytes-like (alignment 1 unless given). ``align`` overrides
    the alignment: the kernel's, e.g. 16 for a ``float4`` given as four float32s."""

    __slots__ = ("data", "align")

    def __init__(self, value: Any, align: Optional[int] = None) -> None:
        if isinstance(value, struct):
            data, natural = value.data, value.align
        elif isinstance(value, (np.ndarray, np.generic)):
            arr = np.asarray(value)
            data, natural = np.ascontiguousarray(arr).tobytes(), arr.dtype.alignment
        elif isinstance(value, (ctypes.Structure, ctypes.Union, ctypes.Array)):
            data, natural = ctypes.string_at(ctypes.addressof(value), ctypes.sizeof(value)), \
                ctypes.alignment(value)
        elif isinstance(value, (bytes, bytearray, memoryview)):
            data, natural = bytes(value), 1
        else:
            raise TypeError(f"sseq.struct() takes a numpy value, a ctypes Structure or "
                            f"bytes, not {type(value).__name__}")
        a = natural if align is None else align
        if isinstance(a, bool) or not isinstance(a, numbers.Integral) or a < 1 or \
                a > STRUCT_MAX_ALIGN or a & (a - 1):
            raise ValueError(f"sseq.struct(): alignment {a!r} is not a power of two up to "
                             f"{STRUCT_MAX_ALIGN}")
        if not 1 <= len(data) <= STRUCT_MAX_SIZE:
            raise ValueError(f"sseq.struct(): {len(data)} bytes, must be 1 to "
                             f"{STRUCT_MAX_SIZE}")
        if len(data) % a:
            raise ValueError(f"sseq.struct(): {len(data)} bytes is not a multiple of its "
                             f"alignment {a} (pad it as C would)")
        self.data, self.align = data, int(a)

    @property
    def size(self) -> int:
        return len(self.data)

    def __repr__(self) -> str:
        return f"sseq.struct({self.data!r}, align={self.align})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, struct) and (other.data, other.align) == (self.data,
                                                                            self.align)

    def __hash__(self) -> int:
        return hash((self.data, self.align))


_SCALARS = {cls.type_name: cls for cls in (i32, u32, i64, u64, f32, f64)}
_NUMPY_SCALARS = {np.dtype(np.int32): i32, np.dtype(np.uint32): u32, np.dtype(np.int64): i64,
                  np.dtype(np.uint64): u64, np.dtype(np.float32): f32,
                  np.dtype(np.float64): f64, np.dtype(np.int8): i8, np.dtype(np.uint8): u8,
                  np.dtype(np.int16): i16, np.dtype(np.uint16): u16,
                  np.dtype(np.float16): f16}

Arg = Union[In, Out, InOut, Scalar, struct, np.number, int, float]

# The built-in kernels' signatures, as in kernels/kernels.c: (parameter, kind), kind
# one of "in", "out", "inout" (buffers) or a scalar type name. Used only to type plain
# Python numbers and to name parameters in errors; the daemon stays the judge
# (tests/python/test_client.py checks this table against it).
_CONV2D_INTS = ("N", "C", "H", "W", "O", "KH", "KW", "stride_h", "stride_w", "pad_top",
                "pad_bottom", "pad_left", "pad_right", "lhs_dil_h", "lhs_dil_w",
                "rhs_dil_h", "rhs_dil_w", "groups")
BUILTIN_KERNELS: dict[str, tuple[tuple[str, str], ...]] = {
    "fill": (("y", "out"), ("value", "f32"), ("n", "u64")),
    "iota": (("y", "out"), ("start", "f32"), ("step", "f32"), ("n", "u64")),
    "add": (("a", "in"), ("b", "in"), ("c", "out"), ("n", "u64")),
    "axpy": (("alpha", "f32"), ("x", "in"), ("y", "inout"), ("n", "u64")),
    "scale": (("x", "in"), ("y", "out"), ("alpha", "f32"), ("n", "u64")),
    "reduce_sum": (("x", "in"), ("y", "out"), ("n", "u64")),
    "spin": (("microseconds", "u64"),),
    "conv2d": (("x", "in"), ("w", "in"), ("y", "out"))
    + tuple((name, "i32") for name in _CONV2D_INTS),
    "transpose4": (("x", "in"), ("y", "out"))
    + tuple((name, "i32") for name in ("d0", "d1", "d2", "d3", "p0", "p1", "p2", "p3")),
}

_MARKERS = {"in": "In", "out": "Out", "inout": "InOut"}


def _describe(kernel: str, i: int, sig: Optional[Sequence[tuple[str, str]]]) -> str:
    if sig is not None and i < len(sig):
        return f"{kernel}: argument {i} ({sig[i][0]})"
    return f"{kernel}: argument {i}"


def _scalar_for(kernel: str, i: int, value: Any,
                sig: Optional[Sequence[tuple[str, str]]]) -> Scalar:
    """Type a plain Python number from the kernel's known signature. On the launch path:
    the argument's description is built only for a refusal, and an exact int passes the
    integer check without the abstract base class's."""
    if sig is None or i >= len(sig):
        raise TypeError(
            f"{_describe(kernel, i, sig)} is a plain {type(value).__name__} ({value!r}) and "
            f"the kernel's signature is not known here: give its type, e.g. "
            f"sseq.u64({value!r}) or sseq.f32({value!r})")
    kind = sig[i][1]
    if kind in _MARKERS:
        raise TypeError(f"{_describe(kernel, i, sig)} must be a buffer marked "
                        f"sseq.{_MARKERS[kind]}(...), got {type(value).__name__} {value!r}")
    cls = _SCALARS[kind]
    if issubclass(cls, _Int) and type(value) is not int and \
            not isinstance(value, numbers.Integral):
        raise TypeError(f"{_describe(kernel, i, sig)} expects {kind} (sseq.{kind}), got "
                        f"{type(value).__name__} {value!r}")
    try:
        return cls(value)
    except OverflowError as e:
        raise OverflowError(f"{_describe(kernel, i, sig)}: {e}") from None


def pack_args(kernel: str, args: Sequence[Any], *, builtin: bool = True,
              session: Any = None) -> "ctypes.Array[_lib.SseqArg]":
    """Build the ``struct sseq_arg`` array for a launch. ``builtin`` says whether the
    built-in signature table may type plain numbers and count the arguments (False for
    module functions). Buffers must be ``session``'s (when given)."""
    sig = BUILTIN_KERNELS.get(kernel) if builtin else None
    if sig is not None and len(args) != len(sig):
        # The daemon refuses it too, but only in a Reply that nobody waits for: the
        # error would surface at a later sync, far from this call.
        raise TypeError(f"{kernel} takes {len(sig)} argument{'s' if len(sig) != 1 else ''} "
                        f"({', '.join(name for name, _ in sig)}), {len(args)} given")
    packed = (_lib.SseqArg * max(len(args), 1))()
    for i, a in enumerate(args):
        out = packed[i]
        if isinstance(a, _Access):
            if session is not None and a.buffer.session is not session:
                _check_owner(a.buffer, session, _describe(kernel, i, sig))
            a.buffer._check_live()
            out.type = _lib.ARG_BUFFER
            out.access = a.access
            out.v.buffer = a.buffer.handle
            continue
        if isinstance(a, Buffer):
            hint = ""
            if sig is not None and i < len(sig) and sig[i][1] in _MARKERS:
                hint = f": sseq.{_MARKERS[sig[i][1]]}(buf)"
            raise TypeError(f"{_describe(kernel, i, sig)} is a bare buffer; mark how the "
                            f"kernel uses it with sseq.In, sseq.Out or sseq.InOut{hint}")
        if type(a) is int or type(a) is float:  # a plain number: the common case
            a = _scalar_for(kernel, i, a, sig)
        elif not isinstance(a, Scalar):
            try:
                if isinstance(a, np.generic) and a.dtype in _NUMPY_SCALARS:
                    a = _NUMPY_SCALARS[a.dtype](a.item())
                elif isinstance(a, (np.void, ctypes.Structure, ctypes.Union, bytes, bytearray,
                                    memoryview)) or (isinstance(a, np.ndarray) and a.dtype.names):
                    a = struct(a)
            except (TypeError, ValueError, OverflowError) as e:
                raise type(e)(f"{_describe(kernel, i, sig)}: {e}") from None
            if isinstance(a, (int, float)) and not isinstance(a, bool):  # their subclasses
                a = _scalar_for(kernel, i, a, sig)
        if isinstance(a, struct):
            data = (ctypes.c_ubyte * a.size).from_buffer_copy(a.data)
            out.type = _lib.ARG_BYTES
            out.access = 0
            # The cast keeps data alive, and the array keeps the cast.
            out.v.bytes.data = ctypes.cast(data, ctypes.POINTER(ctypes.c_ubyte))
            out.v.bytes.size = a.size
            out.v.bytes.align = a.align
            continue
        if not isinstance(a, Scalar):
            raise TypeError(f"{_describe(kernel, i, sig)}: cannot pass "
                            f"{type(a).__name__} {a!r} to a kernel")
        out.type = a.type_code
        out.access = 0
        setattr(out.v, a.field, a.bits if isinstance(a, _Half) else a.value)
    return packed
