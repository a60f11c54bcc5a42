"""XLA's batching_test.py::testConvGeneralDilated as an sseq workload.

The seed flake: a convolution computed for a whole batch agreed with numpy, the same
convolution computed example by example (vmap's per-example loop) read inputs whose
host-to-device copy had not landed. Here each case runs conv2d both ways through
sseqd and compares both with a float64 numpy reference:

- batch: one H2D for the batch, one execute;
- per example: a slice per example of one batch buffer, each with its own H2D, then
  zeroed per-example outputs (fills: unrelated compute work that moves the compute
  stream on, as XLA's did), an execute per slice, and a D2D gather of each result into
  a slice of the output.

Inputs are small integers, so float32 sums are exact and any difference is a real one.
"""

from __future__ import annotations

import dataclasses
import itertools
import zlib
from typing import Optional

import numpy as np

import sseq


@dataclasses.dataclass(frozen=True)
class Case:
    n: int
    c: int
    h: int
    w: int
    o: int
    kh: int
    kw: int
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)  # top, bottom, left, right
    lhs_dil: tuple[int, int] = (1, 1)
    rhs_dil: tuple[int, int] = (1, 1)
    groups: int = 1

    @property
    def id(self) -> str:
        pt, pb, pl, pr = self.padding
        return (f"n{self.n}c{self.c}h{self.h}w{self.w}-o{self.o}k{self.kh}x{self.kw}"
                f"-s{self.stride[0]}x{self.stride[1]}-p{pt},{pb},{pl},{pr}"
                f"-ld{self.lhs_dil[0]}x{self.lhs_dil[1]}-rd{self.rhs_dil[0]}x{self.rhs_dil[1]}"
                f"-g{self.groups}")

    @property
    def seed(self) -> int:
        """A stable seed for the case's inputs."""
        return zlib.crc32(self.id.encode())

    def scalars(self, n: Optional[int] = None) -> list[sseq.i32]:
        """conv2d's 18 i32 arguments (for a batch of n, default the case's)."""
        values = (n or self.n, self.c, self.h, self.w, self.o, self.kh, self.kw,
                  *self.stride, *self.padding, *self.lhs_dil, *self.rhs_dil, self.groups)
        return [sseq.i32(v) for v in values]

    @property
    def w_shape(self) -> tuple[int, int, int, int]:
        return (self.o, self.c // self.groups, self.kh, self.kw)


def _extent(size: int, k: int, stride: int, lo: int, hi: int, ldil: int, rdil: int) -> int:
    return ((size - 1) * ldil + 1 + lo + hi - ((k - 1) * rdil + 1)) // stride + 1


def cases() -> list[Case]:
    """The parametrised cases: shapes, strides, padding (negative too), lhs/rhs
    dilation and feature groups, like XLA's test; only those with an output."""
    shapes = [
        # n, c, h, w, o, kh, kw
        (4, 2, 7, 6, 3, 3, 2),
        (5, 4, 9, 9, 4, 3, 3),
        (3, 6, 8, 5, 6, 2, 3),
        (6, 3, 6, 7, 6, 1, 2),
        (2, 4, 5, 5, 8, 4, 4),
    ]
    strides = [(1, 1), (2, 1), (2, 3)]
    paddings = [(0, 0, 0, 0), (1, 2, 0, 1), (-1, 1, 2, -1)]
    lhs_dils = [(1, 1), (2, 1), (1, 3)]
    rhs_dils = [(1, 1), (2, 2), (1, 2)]
    out = []
    for i, (shape, stride, pad, ld, rd) in enumerate(
            itertools.product(shapes, strides, paddings, lhs_dils, rhs_dils)):
        # A fixed, spread-out subset of the product: every 8th combination, shifted
        # per shape so each shape meets every option.
        if (i + i // 81) % 8:
            continue
        n, c, h, w, o, kh, kw = shape
        valid = sorted({g for g in (1, 2, c) if c % g == 0 and o % g == 0})
        groups = valid[i % len(valid)]
        case = Case(n, c, h, w, o, kh, kw, stride, pad, ld, rd, groups)
        if (_extent(h, kh, stride[0], pad[0], pad[1], ld[0], rd[0]) >= 1
                and _extent(w, kw, stride[1], pad[2], pad[3], ld[1], rd[1]) >= 1):
            out.append(case)
    return out


def conv_reference(x: np.ndarray, w: np.ndarray, case: Case) -> np.ndarray:
    """lax.conv_general_dilated (NCHW, OIHW) in float64: dilate, pad, correlate."""
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (ldh, ldw), (rdh, rdw), (sh, sw) = case.lhs_dil, case.rhs_dil, case.stride
    # lhs dilation: ldh - 1 zeros between input rows (and columns).
    xd = np.zeros((n, c, (h - 1) * ldh + 1, (wd - 1) * ldw + 1))
    xd[:, :, ::ldh, ::ldw] = x
    # padding; a negative pad crops.
    pt, pb, pl, pr = case.padding
    xd = np.pad(xd, ((0, 0), (0, 0), (max(pt, 0), max(pb, 0)), (max(pl, 0), max(pr, 0))))
    xd = xd[:, :, max(-pt, 0):xd.shape[2] - max(-pb, 0), max(-pl, 0):xd.shape[3] - max(-pr, 0)]
    # rhs dilation.
    wdil = np.zeros((o, cg, (kh - 1) * rdh + 1, (kw - 1) * rdw + 1))
    wdil[:, :, ::rdh, ::rdw] = w
    khd, kwd = wdil.shape[2:]
    oh = (xd.shape[2] - khd) // sh + 1
    ow = (xd.shape[3] - kwd) // sw + 1
    og = o // case.groups
    y = np.zeros((n, o, oh, ow))
    for g in range(case.groups):
        xg = xd[:, g * cg:(g + 1) * cg]
        wg = wdil[g * og:(g + 1) * og]
        for i in range(khd):
            for j in range(kwd):
                patch = xg[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]
                y[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, wg[:, :, i, j])
    return y


def inputs(case: Case, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Small nonzero integers as float32: exact sums, and zeros only where unwritten."""
    rng = np.random.default_rng(seed)
    vals = np.array([-3, -2, -1, 1, 2, 3], np.float32)
    x = rng.choice(vals, size=(case.n, case.c, case.h, case.w))
    w = rng.choice(vals, size=case.w_shape)
    return x, w


@dataclasses.dataclass
class Result:
    reference: np.ndarray
    batch: np.ndarray
    per_example: np.ndarray

    def mismatches(self, which: str) -> int:
        """Elements of ``which`` ("batch", "per_example") off by more than rtol 1e-5."""
        got = getattr(self, which)
        return int(np.count_nonzero(~np.isclose(got, self.reference, rtol=1e-5, atol=0)))


def run(s: sseq.Session, case: Case, seed: Optional[int] = None) -> Result:
    """Run the case both ways on session ``s``; frees everything it allocated."""
    x_host, w_host = inputs(case, case.seed if seed is None else seed)
    ref = conv_reference(x_host, w_host, case)
    y_shape = ref.shape
    row = y_shape[1:]

    # Zero-copy staging: the inputs live in the session's staging arena.
    x = s.host_array(x_host.shape)
    x[...] = x_host
    w = s.host_array(w_host.shape)
    w[...] = w_host

    with s.alloc(w.shape, np.float32, label="w") as wb, \
            s.alloc(x.shape, np.float32, label="x-batch") as xb, \
            s.alloc(y_shape, np.float32, label="y-batch") as yb, \
            s.alloc(x.shape, np.float32, label="x-examples") as xe, \
            s.alloc(y_shape, np.float32, label="y-gathered") as ye:
        # The whole batch in one launch.
        wb.upload(w)
        xb.upload(x)
        s.execute("conv2d", sseq.In(xb), sseq.In(wb), sseq.Out(yb), *case.scalars())
        batch = yb.download()

        # Example by example: its own H2D into a slice of one buffer ...
        x_slices = [xe[i] for i in range(case.n)]
        for i, xs in enumerate(x_slices):
            xs.upload(x[i])
        # ... outputs zeroed (unrelated compute work: the compute stream moves on) ...
        y_parts = [s.alloc((1,) + row, np.float32, label=f"y-example-{i}")
                   for i in range(case.n)]
        count = int(np.prod(row))
        s.execute("fill", sseq.Out(ye), 0.0, case.n * count)
        for yp in y_parts:
            s.execute("fill", sseq.Out(yp), 0.0, count)
        # ... a launch per example slice ...
        for xs, yp in zip(x_slices, y_parts):
            s.execute("conv2d", sseq.In(xs), sseq.In(wb), sseq.Out(yp), *case.scalars(1))
        # ... and a D2D gather of each result into a slice of the output.
        y_slices = [ye[i] for i in range(case.n)]
        for yp, ys in zip(y_parts, y_slices):
            yp.copy_to(ys)
        per_example = ye.download()
        for b in x_slices + y_parts + y_slices:
            b.free()
    s.sync()
    return Result(ref, batch, per_example)


# The flaking test's own case: XLA's testConvGeneralDilated with N=10, C=1, a 5x5 input,
# a 3x3 kernel, O=5, stride 1 and SAME padding, in NHWC / HWIO as JAX writes it.
SEED_CASE = Case(10, 1, 5, 5, 5, 3, 3, stride=(1, 1), padding=(1, 1, 1, 1))

# transpose4 permutations (y's dimension k is x's dimension p[k]).
NHWC_TO_NCHW = (0, 3, 1, 2)
HWIO_TO_OIHW = (3, 2, 0, 1)
NCHW_TO_NHWC = (0, 2, 3, 1)


def _transpose(s: sseq.Session, x: sseq.Buffer, y: sseq.Buffer, dims: tuple[int, ...],
               perm: tuple[int, ...]) -> None:
    s.execute("transpose4", sseq.In(x), sseq.Out(y), *(sseq.i32(v) for v in dims + perm))


def run_seed(s: sseq.Session, seed: int, case: Case = SEED_CASE) -> Result:
    """The seed test as it runs: NHWC input and HWIO kernel uploaded once, layouts changed
    on the device (transpose4, as XLA inserts), then

    - batch: one conv2d over the whole batch and a transpose back to NHWC;
    - per example (vmap's loop): for each example, a chain on device-side slices of the
      one uploaded input: transpose its slice to NCHW, conv2d, transpose the result back
      into its slice of the gathered output. No H2D per example.

    With two lanes the per-example chain runs on the second, so its first reads of the
    input cross streams; the kernel is uploaded before the input, so a wait for the
    kernel's transpose does not cover the input's copy (the wait the legacy bug drops).
    Both come back in NHWC and are compared with the float64 reference."""
    assert case.groups == 1 and case.stride == (1, 1)
    x_nchw, w_oihw = inputs(case, seed)
    ref_nchw = conv_reference(x_nchw, w_oihw, case)
    n, c, h, w = x_nchw.shape
    o, _, kh, kw = w_oihw.shape
    _, _, oh, ow = ref_nchw.shape
    x_host = s.host_array((n, h, w, c))
    x_host[...] = x_nchw.transpose(0, 2, 3, 1)
    w_host = s.host_array((kh, kw, c, o))
    w_host[...] = w_oihw.transpose(2, 3, 1, 0)

    with s.alloc((n, h, w, c), np.float32, label="x-nhwc") as x, \
            s.alloc((kh, kw, c, o), np.float32, label="w-hwio") as wh, \
            s.alloc((o, c, kh, kw), np.float32, label="w-oihw") as wt, \
            s.alloc((n, c, h, w), np.float32, label="x-nchw") as xt, \
            s.alloc((n, o, oh, ow), np.float32, label="y-nchw") as yt, \
            s.alloc((n, oh, ow, o), np.float32, label="y-batch") as yb, \
            s.alloc((n, oh, ow, o), np.float32, label="y-examples") as ye:
        wh.upload(w_host)
        x.upload(x_host)
        _transpose(s, wh, wt, (kh, kw, c, o), HWIO_TO_OIHW)

        _transpose(s, x, xt, (n, h, w, c), NHWC_TO_NCHW)
        s.execute("conv2d", sseq.In(xt), sseq.In(wt), sseq.Out(yt), *case.scalars())
        _transpose(s, yt, yb, (n, o, oh, ow), NCHW_TO_NHWC)

        # Queued behind the batch, not after waiting for it.
        parts = []
        if len(s.lanes) > 1:
            s.set_lane(1)
        for i in range(n):
            xs, ys = x[i], ye[i]
            xi = s.alloc((1, c, h, w), np.float32, label=f"x-example-{i}")
            yi = s.alloc((1, o, oh, ow), np.float32, label=f"y-example-{i}")
            _transpose(s, xs, xi, (1, h, w, c), NHWC_TO_NCHW)
            s.execute("conv2d", sseq.In(xi), sseq.In(wt), sseq.Out(yi), *case.scalars(1))
            _transpose(s, yi, ys, (1, o, oh, ow), NCHW_TO_NHWC)
            parts += [xs, ys, xi, yi]
        per_example = ye.download()
        s.set_lane(0)
        batch = yb.download()
        for b in parts:
            b.free()
    s.sync()
    return Result(ref_nchw.transpose(0, 2, 3, 1), batch, per_example)
