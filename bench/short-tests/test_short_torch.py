"""The same tests as test_short.py written natively with PyTorch, for the MPS baseline
of bench/short-tests.sh: torch.cuda._sleep calibrated to SHORT_SPIN_US (the script
measures SHORT_CYCLES_PER_US once), torch.full, .cpu(). Each worker uses CUDA itself."""
import os

import pytest
import torch

KIND = os.environ.get("SHORT_KIND", "spin")
SPIN_US = int(os.environ.get("SHORT_SPIN_US", "2000"))
CYCLES = int(float(os.environ.get("SHORT_CYCLES_PER_US", "1980")) * SPIN_US)
N = 256


@pytest.fixture(scope="session")
def cuda() -> torch.device:
    d = torch.device("cuda")
    torch.zeros(1, device=d).cpu()  # the context, outside the timed calls
    return d


@pytest.mark.parametrize("case", range(int(os.environ.get("SHORT_TESTS", "48"))))
def test_short(cuda: torch.device, case: int) -> None:
    if KIND == "none":
        assert cuda.type == "cuda"
        return
    if KIND == "sync":
        for _ in range(5):
            torch.cuda._sleep(CYCLES)
        torch.cuda.synchronize()
        return
    b = torch.empty(N, dtype=torch.float32, device=cuda)
    if KIND == "spin":
        for _ in range(5):
            torch.cuda._sleep(CYCLES)
    b.fill_(float(case))
    got = b.cpu()
    del b
    assert bool((got == float(case)).all()), got[:8]
