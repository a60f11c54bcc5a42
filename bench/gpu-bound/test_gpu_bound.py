"""A GPU-bound pytest suite, for bench/gpu-bound.sh: 48 tests, each keeping the GPU
busy for about 100 ms with five one-block 20 ms spin kernels on its worker's session,
then filling a buffer and checking what comes back. Its wall time is set by the GPU
work, so `-n 8` against `-n 1` shows whether workers sharing a GPU run side by side.
GPU_BOUND_SPIN_US sets each kernel's time (default 20000 us); GPU_BOUND_SPIN_ONLY=1
leaves out the fill and its download (a sync instead)."""
import os

import numpy as np
import pytest

import sseq

SPIN_US = int(os.environ.get("GPU_BOUND_SPIN_US", "20000"))
N = 4096


@pytest.mark.parametrize("case", range(48))
def test_gpu_bound(sseq_session: sseq.Session, case: int) -> None:
    s = sseq_session
    for _ in range(5):
        s.execute("spin", sseq.u64(SPIN_US))
    if os.environ.get("GPU_BOUND_SPIN_ONLY"):
        s.sync()
        return
    with s.alloc(N, np.float32, label=f"case{case}") as b:
        s.execute("fill", sseq.Out(b), float(case), N)
        got = b.download()
    assert np.all(got == np.float32(case)), got[:8]
