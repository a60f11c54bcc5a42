"""Launch attributes on a real GPU (tests/gpu/launch-attrs.sh): launch-attrs.cu's kernels
through sseqd, each result checked with numpy, each refusal by its status and text.
Prints one PASS or FAIL line a check; exits 1 if any failed.
Usage: launch_attrs.py SOCKET"""

from __future__ import annotations

import sys

import numpy as np

import sseq

failed = 0


def check(name: str, ok: bool, detail: str = "") -> None:
    global failed
    print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail and not ok else ''}")
    failed += 0 if ok else 1


def refused(name: str, status: str, text: str, fn) -> None:  # type: ignore[no-untyped-def]
    try:
        fn()
    except sseq.Error as e:
        check(name, e.name == status and text in str(e), f"{e.name}: {e}")
        return
    check(name, False, "was not refused")


s = sseq.connect(sys.argv[1])
m = s.load_module("launch-attrs.fatbin")

# Cooperative: one 256-thread block per multiprocessor of an H200 (132), all of them
# adding to one counter before grid.sync(), reading it after.
blocks, threads = 132, 256
counter = s.alloc(1, np.uint32, label="counter")
out = s.alloc(blocks * threads, np.uint32, label="out")
valid = s.alloc(1, np.uint32, label="valid")
counter.upload(np.zeros(1, np.uint32))
out.upload(np.zeros(blocks * threads, np.uint32))
valid.upload(np.full(1, 7, np.uint32))
s.execute_function(m, "coop_sum", sseq.InOut(counter), sseq.Out(out), sseq.Out(valid),
                   grid=(blocks,), block=(threads,), cooperative=True).wait()
v, got = valid.download()[0], out.download()
check("cooperative: grid group valid", v == 1, f"valid={v}")
check("cooperative: every thread saw the whole grid's count after grid.sync()",
      bool(np.all(got == blocks * threads)),
      f"{np.count_nonzero(got != blocks * threads)} of {got.size} differ, e.g. {got[:4]}")

# Not checked: that a plain launch's grid group is invalid. On the H200 (CUDA 13)
# grid_group::is_valid() is true in a plain launch too (seen 2026-12-01), so a kernel
# cannot tell; the co-residency refusal below shows the daemon acts on the flag.

refused("cooperative: a grid that cannot be co-resident refused with the numbers",
        "INVALID_ARGUMENT", "blocks is over the",
        lambda: s.execute_function(m, "coop_sum", sseq.InOut(counter), sseq.Out(out),
                                   sseq.Out(valid), grid=(100000,), block=(threads,),
                                   cooperative=True).wait())

# Clusters of 2 along x: dims 2,1,1, ranks 0,1, rank 0 sums 1+2 over distributed shared
# memory.
n = 8
info = s.alloc(4 * n, np.uint32, label="info")
info.upload(np.zeros(4 * n, np.uint32))
s.execute_function(m, "cluster_info", sseq.Out(info), grid=(n,), block=(32,),
                   cluster=(2,)).wait()
got = info.download().reshape(n, 4)
want = np.array([[211, b % 2, 3 if b % 2 == 0 else 0, 1] for b in range(n)], np.uint32)
check("cluster (2,1,1): shape, ranks and the DSMEM sum", bool(np.array_equal(got, want)),
      f"got {got.tolist()}")

# Clusters of 4 x 2: each cluster's 8 blocks have ranks 0..7, rank 0 sums 1..8 = 36.
gx, gy = 8, 4
info2 = s.alloc(4 * gx * gy, np.uint32, label="info2")
info2.upload(np.zeros(4 * gx * gy, np.uint32))
s.execute_function(m, "cluster_info", sseq.Out(info2), grid=(gx, gy), block=(32,),
                   cluster=(4, 2)).wait()
got = info2.download().reshape(gy, gx, 4)
ok = bool(np.all(got[:, :, 0] == 421) and np.all(got[:, :, 3] == 1))
for cy in range(gy // 2):
    for cx in range(gx // 4):
        c = got[2 * cy:2 * cy + 2, 4 * cx:4 * cx + 4]
        ok = ok and sorted(c[:, :, 1].ravel().tolist()) == list(range(8))
        ok = ok and int(c[:, :, 2].sum()) == 36
check("cluster (4,2,1): shape, ranks 0..7 in each cluster, the DSMEM sum", ok,
      f"got {got[:, :, :3].tolist()}")

# __cluster_dims__(2,1,1) in the code: clusters of 2 without the attribute.
fixed = s.alloc(n, np.uint32, label="fixed")
fixed.upload(np.zeros(n, np.uint32))
s.execute_function(m, "cluster_fixed", sseq.Out(fixed), grid=(n,), block=(32,)).wait()
got = fixed.download()
check("__cluster_dims__(2,1,1) kernel", bool(np.array_equal(got, 200 + np.arange(n) % 2)),
      f"got {got.tolist()}")

refused("cluster not dividing the grid refused", "INVALID_ARGUMENT", "is not a multiple",
        lambda: s.execute_function(m, "cluster_info", sseq.Out(info), grid=(5,),
                                   block=(32,), cluster=(2,)).wait())
refused("cluster over the portable 8 blocks refused", "INVALID_ARGUMENT",
        "portable limit of 8",
        lambda: s.execute_function(m, "cluster_info", sseq.Out(info2), grid=(16,),
                                   block=(32,), cluster=(16,)).wait())
refused("cooperative and cluster together refused", "NOT_SUPPORTED",
        "cooperative launch of thread-block clusters",
        lambda: s.execute_function(m, "coop_sum", sseq.InOut(counter), sseq.Out(out),
                                   sseq.Out(valid), grid=(2,), block=(threads,),
                                   cooperative=True, cluster=(2,)).wait())

# Still serving, and the audit and the checker found nothing.
s.sync()
st = s.stats()
check("no audit or checker findings", st.race_findings == 0 and st.audit_findings == 0,
      f"race_findings={st.race_findings} audit_findings={st.audit_findings}")
s.close()
print(f"launch-attrs: {'FAIL' if failed else 'PASS'} ({failed} failed)")
sys.exit(1 if failed else 0)
