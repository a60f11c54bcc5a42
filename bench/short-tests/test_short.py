"""The short tests users have, for bench/short-tests.sh: 48 tests ($SHORT_TESTS), each of the shape
SHORT_KIND names, through the worker's sseq session:

  spin      alloc 1 KiB, five one-block SHORT_SPIN_US spin kernels, fill, download, free
  download  alloc 1 KiB, fill, download, free (no long kernels)
  sync      five one-block SHORT_SPIN_US spin kernels, then sync (nothing read back)
  none      nothing (the session fixture only): pytest's and xdist's own floor, the control

Per-test time is pytest's own `call` duration (--durations)."""
import os

import numpy as np
import pytest

import sseq

KIND = os.environ.get("SHORT_KIND", "spin")
SPIN_US = int(os.environ.get("SHORT_SPIN_US", "2000"))
N = 256  # 1 KiB of float32


@pytest.mark.parametrize("case", range(int(os.environ.get("SHORT_TESTS", "48"))))
def test_short(sseq_session: sseq.Session, case: int) -> None:
    s = sseq_session
    if KIND == "none":
        assert not s.closed
        return
    if KIND == "sync":
        for _ in range(5):
            s.execute("spin", sseq.u64(SPIN_US))
        s.sync()
        return
    with s.alloc(N, np.float32, label=f"case{case}") as b:
        if KIND == "spin":
            for _ in range(5):
                s.execute("spin", sseq.u64(SPIN_US))
        s.execute("fill", sseq.Out(b), float(case), N)
        got = b.download()
    assert np.all(got == np.float32(case)), got[:8]
