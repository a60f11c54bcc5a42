"""One client that launches a faulting kernel from gpu-faults (through --module-dir),
then the next client's first kernel: prints how long the culprit waited for its error
and how long from the fault to a new client's first kernel completing with right data.
Usage: fault_client.py KERNEL [MODULE]   (KERNEL: oob_write, trap_now, assert_nonzero)"""

import sys
import time

import sseq

kernel = sys.argv[1]
module = sys.argv[2] if len(sys.argv) > 2 else "gpu-faults.fatbin"

with sseq.connect(name="fault-client", worker_id="culprit") as s:
    m = s.load_module(module)
    b = s.alloc(1024, "f4", label="culprit")
    args = {"oob_write": (sseq.Out(b), sseq.u64(1)),
            "trap_now": (sseq.Out(b),),
            "assert_nonzero": (sseq.i32(0),)}[kernel]
    t0 = time.monotonic()
    try:
        s.execute_function(m, kernel, *args, grid=(1,), block=(32,)).wait()
        print(f"fault {kernel}: NO FAULT reported")
        sys.exit(1)
    except sseq.Error as e:
        t_err = time.monotonic()
        print(f"fault {kernel}: culprit_error_ms={(t_err - t0) * 1e3:.1f} status={e.name} "
              f"message={e.message!r}")
        if "device reset" not in e.message:
            print(f"fault {kernel}: the error does not name a device reset")
            sys.exit(1)

attempts = 0
last = None
while time.monotonic() - t0 < 30:
    attempts += 1
    try:
        with sseq.connect(name="after-fault") as s2:
            x = s2.alloc(256, "f4")
            s2.execute("fill", sseq.Out(x), 5.0, 256).wait()
            ok = bool((x.download() == 5.0).all())
            x.free()
        if ok:
            break
        last = "wrong data"
    except sseq.Error as e:
        last = str(e)
        time.sleep(0.005)
else:
    print(f"fault {kernel}: NO RECOVERY in 30 s (last: {last})")
    sys.exit(1)
print(f"fault {kernel}: fault_to_next_first_kernel_ms={(time.monotonic() - t0) * 1e3:.1f} "
      f"attempts={attempts}")
