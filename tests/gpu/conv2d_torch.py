"""conv2d through sseqd (hip backend) against PyTorch's torch.nn.functional.conv2d on the
same GPU, for random shapes with strides, padding (asymmetric and negative), lhs and rhs
dilation and feature groups, in float32. lhs dilation and asymmetric or negative padding
are expressed in torch the way lax.conv_general_dilated defines them: the input is
dilated with zeros and padded (or cropped) first, then torch's conv2d runs with the
strides, rhs dilation and groups.

Usage: SSEQ_SOCKET=... SSEQ_LIBRARY=... PYTHONPATH=client/python \
       python3 tests/gpu/conv2d_torch.py [CASES] [SEED]
Prints one line per failing case and a summary; exits 1 if any case's relative error
is 1e-5 or more.
"""

from __future__ import annotations

import random
import sys

import numpy as np
import torch
import torch.nn.functional as F

import sseq


def torch_reference(x, w, stride, pad, lhs, rhs, groups):
    dev = torch.device("cuda")
    xt = torch.from_numpy(x).to(dev)
    wt = torch.from_numpy(w).to(dev)
    n, c, h, wd = xt.shape
    if lhs != (1, 1):
        dil = torch.zeros((n, c, (h - 1) * lhs[0] + 1, (wd - 1) * lhs[1] + 1),
                          dtype=xt.dtype, device=dev)
        dil[:, :, ::lhs[0], ::lhs[1]] = xt
        xt = dil
    top, bottom, left, right = pad
    xt = F.pad(xt, (left, right, top, bottom))  # negative values crop
    y = F.conv2d(xt, wt, stride=stride, dilation=rhs, groups=groups)
    torch.cuda.synchronize()
    return y.cpu().numpy()


def out_extent(size, k, stride, lo, hi, ldil, rdil):
    return ((size - 1) * ldil + 1 + lo + hi - ((k - 1) * rdil + 1)) // stride + 1


def random_case(rng: random.Random):
    while True:
        groups = rng.choice([1, 1, 2, 3, 4])
        c = groups * rng.randint(1, 4)
        o = groups * rng.randint(1, 4)
        n = rng.randint(1, 4)
        h, w = rng.randint(3, 24), rng.randint(3, 24)
        kh, kw = rng.randint(1, 5), rng.randint(1, 5)
        stride = (rng.randint(1, 3), rng.randint(1, 3))
        pad = tuple(rng.randint(-1, 3) for _ in range(4))
        lhs = (rng.choice([1, 1, 2, 3]), rng.choice([1, 1, 2]))
        rhs = (rng.choice([1, 1, 2, 3]), rng.choice([1, 2]))
        oh = out_extent(h, kh, stride[0], pad[0], pad[1], lhs[0], rhs[0])
        ow = out_extent(w, kw, stride[1], pad[2], pad[3], lhs[1], rhs[1])
        # torch needs the padded input to hold the dilated kernel, as lax does.
        if oh >= 1 and ow >= 1:
            return n, c, h, w, o, kh, kw, stride, pad, lhs, rhs, groups, oh, ow


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    rng = random.Random(seed)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    worst = 0.0
    bad = 0
    with sseq.connect(name="conv2d-torch") as s:
        for i in range(count):
            n, c, h, w, o, kh, kw, stride, pad, lhs, rhs, groups, oh, ow = random_case(rng)
            nrng = np.random.default_rng(seed * 100003 + i)
            x = nrng.standard_normal((n, c, h, w), dtype=np.float32)
            wt = nrng.standard_normal((o, c // groups, kh, kw), dtype=np.float32)
            with s.alloc(x.shape, np.float32) as xb, s.alloc(wt.shape, np.float32) as wb, \
                    s.alloc((n, o, oh, ow), np.float32) as yb:
                xb.upload(x)
                wb.upload(wt)
                s.execute("conv2d", sseq.In(xb), sseq.In(wb), sseq.Out(yb),
                          *[sseq.i32(v) for v in (n, c, h, w, o, kh, kw, *stride, *pad,
                                                  *lhs, *rhs, groups)])
                got = yb.download((n, o, oh, ow), np.float32)
            ref = torch_reference(x, wt, stride, pad, lhs, rhs, groups)
            if ref.shape != got.shape:
                print(f"case {i}: shape {got.shape} vs torch {ref.shape}")
                bad += 1
                continue
            scale = max(float(np.abs(ref).max()), 1e-30)
            rel = float(np.abs(got - ref).max()) / scale
            worst = max(worst, rel)
            if rel >= 1e-5:
                bad += 1
                print(f"case {i}: n{n} c{c} {h}x{w} o{o} k{kh}x{kw} s{stride} p{pad} "
                      f"ld{lhs} rd{rhs} g{groups}: max relative error {rel:.3g}")
    print(f"conv2d vs torch.nn.functional.conv2d: cases={count} seed={seed} failing={bad} "
          f"max_relative_error={worst:.3g} (torch {torch.__version__}, "
          f"{torch.cuda.get_device_name(0)})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
