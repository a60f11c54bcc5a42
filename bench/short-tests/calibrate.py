"""Prints torch.cuda._sleep's cycles per microsecond on this GPU (the median of five)."""
import torch

torch.cuda._sleep(1000)
torch.cuda.synchronize()
rates = []
for _ in range(5):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    torch.cuda._sleep(20_000_000)
    b.record()
    b.synchronize()
    rates.append(20_000_000 / (a.elapsed_time(b) * 1000.0))
print(f"{sorted(rates)[2]:.1f}")
