"""Module functions by name on a real GPU: what tests/gpu/names.sh runs against
``sseqd --backend hip`` with names.fatbin in its --module-dir. Prints one line per
check and exits non-zero on the first failure."""

import sys

import numpy as np

import sseq

s = sseq.connect(sys.argv[1])
m = s.load_module("names.fatbin")
fns = {f.name: f for f in s.module_functions(m)}
for f in fns.values():
    print(f"function {f.name} = {f.demangled!r}: threads {f.max_threads_per_block} "
          f"regs {f.num_regs} shared {f.shared_size_bytes} maxdyn "
          f"{f.max_dynamic_shared_size_bytes} const {f.const_size_bytes} local "
          f"{f.local_size_bytes} ptx {f.ptx_version} binary {f.binary_version}")
want = {"_Z6reduceILi256EEvPKfPfi": "void reduce<256>(float const*, float*, int)",
        "_Z5scalePfif": "scale(float*, int, float)",
        "_Z5scalePdid": "scale(double*, int, double)",
        "reverse_shared": ""}
assert {k: fns[k].demangled for k in want if k in fns} == want, fns.keys()
r = fns["_Z6reduceILi256EEvPKfPfi"]
assert r.max_threads_per_block == 256 and r.shared_size_bytes == 1024, r
print("ok: listing, demangled names, reduce<256>'s launch bounds and static shared")
lim = s.device_limits()
print(f"limits: {lim}")

n = 1000
x = s.alloc(n, np.float32, label="x")
x.upload(np.arange(n, dtype=np.float32))
s.execute_function(m, "scale(float*, int, float)", sseq.InOut(x), sseq.i32(n), sseq.f32(2),
                   grid=((n + 255) // 256,), block=(256,)).wait()
assert (x.download() == 2 * np.arange(n, dtype=np.float32)).all()
d = s.alloc(n, np.float64, label="d")
d.upload(np.ones(n))
s.execute_function(m, "scale(double *, int, double)", sseq.InOut(d), sseq.i32(n),
                   sseq.f64(0.5), grid=(4,), block=(256,)).wait()
assert (d.download() == 0.5).all()
out = s.alloc(1, np.float32, label="out")
s.execute_function(m, "reduce<256>", sseq.In(x), sseq.Out(out), sseq.i32(n), grid=(1,),
                   block=(256,)).wait()
assert out.download()[0] == 2 * n * (n - 1) / 2, out.download()
s.execute_function(m, "_Z6reduceILi256EEvPKfPfi", sseq.In(x), sseq.Out(out), sseq.i32(n),
                   grid=(1,), block=(256,)).wait()
print("ok: launches by signature, short name and mangled name")
try:
    s.execute_function(m, "scale", sseq.InOut(x), sseq.i32(n), sseq.f32(1), grid=(1,),
                       block=(32,)).wait()
    raise AssertionError("ambiguous name accepted")
except sseq.Error as e:
    assert e.name == "UNKNOWN_KERNEL" and "scale(double*, int, double)" in str(e), e
    print(f"ok: ambiguous: {e}")
for grid, block, what in (((1,), (1025,), "block_x 1025"), ((1, 65536), (32,), "grid_y 65536"),
                          ((1,), (512,), "limit of 256")):
    try:
        s.execute_function(m, "reduce<256>" if what == "limit of 256" else "_Z5scalePfif",
                           sseq.In(x) if what == "limit of 256" else sseq.InOut(x),
                           *((sseq.Out(out), sseq.i32(n)) if what == "limit of 256"
                             else (sseq.i32(n), sseq.f32(1))),
                           grid=grid, block=block).wait()
        raise AssertionError(f"{what} accepted")
    except sseq.Error as e:
        assert e.name == "INVALID_ARGUMENT" and what in str(e), e
        print(f"ok: refused: {e}")
# Dynamic shared memory: 64 KiB raises the maximum (a real launch over 48 KiB fails
# without cudaFuncSetAttribute), the opt-in is the limit.
y = s.alloc(1024, np.float32, label="y")
y.upload(np.arange(1024, dtype=np.float32))
s.execute_function(m, "reverse_shared", sseq.InOut(y), sseq.i32(1024), grid=(1,),
                   block=(1024,), shared_mem=64 << 10).wait()
assert (y.download() == np.arange(1024, dtype=np.float32)[::-1]).all()
after = s.function_attributes(m, "reverse_shared")
assert after.max_dynamic_shared_size_bytes == 64 << 10, after
s.execute_function(m, "reverse_shared", sseq.InOut(y), sseq.i32(1024), grid=(1,),
                   block=(1024,), shared_mem=lim.shared_optin).wait()
print(f"ok: shared_mem 64 KiB and {lim.shared_optin} (the opt-in) ran; maximum now "
      f"{s.function_attributes(m, 'reverse_shared').max_dynamic_shared_size_bytes}")
try:
    s.execute_function(m, "reverse_shared", sseq.InOut(y), sseq.i32(1024), grid=(1,),
                       block=(1024,), shared_mem=lim.shared_optin + 1).wait()
    raise AssertionError("shared_mem over the opt-in accepted")
except sseq.Error as e:
    assert e.name == "INVALID_ARGUMENT", e
    print(f"ok: refused: {e}")
s.close()
print("names: all ok")
