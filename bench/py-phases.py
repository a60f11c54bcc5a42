"""Where one download-only test's time goes, from Python: the test body of
bench/short-tests/test_short.py (alloc 1 KiB, fill, download, free) looped outside pytest,
each step timed on its own. Prints the median and p90 of each step in microseconds, and of
the whole, so that a per-test figure from pytest can be split into the session's calls.
Usage: python3 bench/py-phases.py [ROUNDS]   (SSEQ_SOCKET / SSEQ_LIBRARY as for the tests)"""
import sys
import time

import numpy as np

import sseq

N = 256  # 1 KiB of float32
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
steps = ("alloc", "fill", "download", "free", "whole")
t = {k: [] for k in steps}
now = time.perf_counter_ns
with sseq.connect(name="py-phases") as s:
    for case in range(rounds + 200):
        t0 = now()
        b = s.alloc(N, np.float32, label=f"case{case}")
        t1 = now()
        s.execute("fill", sseq.Out(b), float(case), N)
        t2 = now()
        got = b.download()
        t3 = now()
        b.free()
        t4 = now()
        assert got[0] == np.float32(case) and got[-1] == np.float32(case), got[:4]
        if case >= 200:  # after the warm-up
            for k, a, z in (("alloc", t0, t1), ("fill", t1, t2), ("download", t2, t3),
                            ("free", t3, t4), ("whole", t0, t4)):
                t[k].append((z - a) / 1000)
print("py-phases rounds=%d " % rounds + " ".join(
    "%s_med_us=%.1f %s_p90_us=%.1f" % (k, sorted(v)[len(v) // 2], k, sorted(v)[int(len(v) * 0.9)])
    for k, v in t.items()))
