"""The project's own user kernels (user-kernels.cu) through sseqd on the GPU, each result
against numpy: templated and overloaded names, a struct and narrow scalars by value, a
constant-memory filter set between launches (module globals), a __device__ counter the
kernels write, more than 48 KiB of dynamic shared memory and a 3-D launch.

Run by tests/gpu/user-kernels.sh (sseqd --audit --verify, ``pytest -n 8 -p
sseq.pytest_plugin``). Every test loads the module on its worker's own session, so the
module's globals are that session's alone and xdist workers never share them."""
import os

import numpy as np
import pytest

import sseq

MODULE = os.environ.get("SSEQ_USER_MODULE", "user-kernels.fatbin")

pytestmark = pytest.mark.sseq


@pytest.fixture
def mod(sseq_session: sseq.Session) -> int:
    return sseq_session.load_module(MODULE)


def close(s: sseq.Session, *bufs: sseq.Buffer) -> None:
    """Free bufs once everything issued is complete (a global opens again only once its
    last use is complete)."""
    s.sync()
    for b in bufs:
        b.free()


@pytest.mark.parametrize("n", [1, 255, 256, 1000, 65536])
@pytest.mark.parametrize("name,threads", [("reduce_sum<128>", 128), ("reduce_sum<256>", 256)])
def test_templated_reduction(sseq_session: sseq.Session, mod: int, name: str, threads: int,
                             n: int) -> None:
    s = sseq_session
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    dx = s.alloc(n, np.float32, label="x")
    out = s.alloc(1, np.float32, label="sum")
    dx.upload(x)
    s.execute_function(mod, name, sseq.In(dx), sseq.Out(out), sseq.i32(n), grid=(1,),
                       block=(threads,))
    got = out.download()
    np.testing.assert_allclose(got[0], x.astype(np.float64).sum(), rtol=1e-4, atol=1e-3)
    close(s, dx, out)


@pytest.mark.parametrize("sig,dtype,a", [("scale(float*, int, float)", np.float32, 2.5),
                                         ("scale(double*, int, double)", np.float64, -0.25)])
def test_overloaded_scale(sseq_session: sseq.Session, mod: int, sig: str, dtype: type,
                          a: float) -> None:
    s = sseq_session
    n = 10000
    x = np.arange(n, dtype=dtype) - 17
    d = s.alloc(n, dtype, label="x")
    d.upload(x)
    scalar = sseq.f32(a) if dtype == np.float32 else sseq.f64(a)
    s.execute_function(mod, sig, sseq.InOut(d), sseq.i32(n), scalar,
                       grid=((n + 255) // 256,), block=(256,))
    np.testing.assert_array_equal(d.download(), (x * dtype(a)).astype(dtype))
    close(s, d)


def test_struct_and_narrow_scalars_by_value(sseq_session: sseq.Session, mod: int) -> None:
    s = sseq_session
    n = 3000
    params = np.zeros((), dtype=np.dtype([("a", "<f4"), ("b", "<f4"), ("n", "<i4")],
                                         align=True))
    params["a"], params["b"], params["n"] = 1.5, -4.0, n - 100  # the last 100 untouched
    x = np.linspace(-1, 1, n, dtype=np.float32)
    dx = s.alloc(n, np.float32, label="x")
    dy = s.alloc(n, np.float32, label="y")
    dx.upload(x)
    dy.upload(np.full(n, 7.0, np.float32))
    s.execute_function(mod, "affine", sseq.InOut(dy), sseq.In(dx), sseq.struct(params),
                       sseq.i8(-3), sseq.u16(1000), grid=((n + 127) // 128,), block=(128,))
    want = np.full(n, 7.0, np.float32)
    m = n - 100
    want[:m] = np.float32(1.5) * x[:m] + np.float32(-4.0) + np.float32(-3 * 1000)
    np.testing.assert_allclose(dy.download(), want, rtol=1e-6)
    close(s, dx, dy)


def conv3x3(img: np.ndarray, f: np.ndarray) -> np.ndarray:
    h, w = img.shape
    p = np.pad(img.astype(np.float64), 1)
    out = np.zeros((h, w))
    for dy in range(3):
        for dx in range(3):
            out += f[dy, dx] * p[dy:dy + h, dx:dx + w]
    return out


def test_constant_filter_set_between_launches(sseq_session: sseq.Session, mod: int) -> None:
    """The filter is set by H2D into the module's __constant__ c_filter, a launch reads
    it, it is set again and the next launch reads that: each launch sees the filter set
    before it and none set after (the launch waits for the set, the set for the launch
    still reading the old value), over many rounds with nothing else in between."""
    s = sseq_session
    h, w = 61, 97
    rng = np.random.default_rng(5)
    img = rng.standard_normal((h, w)).astype(np.float32)
    filt = s.module_global(mod, "c_filter", dtype=np.float32, shape=(3, 3))
    assert filt.nbytes == 36
    din = s.alloc((h, w), np.float32, label="img")
    din.upload(img)
    rounds = 16
    outs = [s.alloc((h, w), np.float32, label=f"out{i}") for i in range(rounds)]
    filters = [rng.standard_normal((3, 3)).astype(np.float32) for _ in range(rounds)]
    for f, o in zip(filters, outs):
        filt.upload(f)
        s.execute_function(mod, "conv3x3", sseq.In(din), sseq.Out(o), sseq.i32(w), sseq.i32(h),
                           grid=((w + 15) // 16, (h + 15) // 16), block=(16, 16))
    for f, o in zip(filters, outs):
        np.testing.assert_allclose(o.download(), conv3x3(img, f), rtol=1e-4, atol=1e-4)
    # The global reads back what was set last, and copies into another buffer (D2D).
    np.testing.assert_array_equal(filt.download(), filters[-1])
    copy = s.alloc((3, 3), np.float32, label="filter copy")
    filt.copy_to(copy)
    np.testing.assert_array_equal(copy.download(), filters[-1])
    close(s, filt, din, copy, *outs)


def test_device_counter_written_by_kernels(sseq_session: sseq.Session, mod: int) -> None:
    """d_launches, a __device__ variable every conv3x3 launch increments, opened
    writable: zeroed by H2D, read back after n launches by D2H."""
    s = sseq_session
    counter = s.module_global(mod, "d_launches", writable=True, dtype=np.uint32)
    filt = s.module_global(mod, "c_filter", dtype=np.float32)
    counter.upload(np.zeros(1, np.uint32))
    filt.upload(np.ones(9, np.float32))
    img = s.alloc((8, 8), np.float32, label="img")
    out = s.alloc((8, 8), np.float32, label="out")
    img.upload(np.ones((8, 8), np.float32))
    for _ in range(25):
        s.execute_function(mod, "conv3x3", sseq.In(img), sseq.Out(out), sseq.i32(8),
                           sseq.i32(8), grid=(1, 1), block=(8, 8))
    assert counter.download()[0] == 25
    np.testing.assert_allclose(out.download(), conv3x3(np.ones((8, 8)), np.ones((3, 3))))
    close(s, counter, filt, img, out)


def test_unknown_global_is_refused(sseq_session: sseq.Session, mod: int) -> None:
    with pytest.raises(sseq.Error, match="no_such_global"):
        sseq_session.module_global(mod, "no_such_global")


def test_over_48k_dynamic_shared_memory(sseq_session: sseq.Session, mod: int) -> None:
    s = sseq_session
    n = 30000  # 120,000 bytes of dynamic shared memory
    x = np.arange(n, dtype=np.float32)
    d = s.alloc(n, np.float32, label="x")
    d.upload(x)
    s.execute_function(mod, "reverse_big", sseq.InOut(d), sseq.i32(n), grid=(1,),
                       block=(1024,), shared_mem=n * 4)
    np.testing.assert_array_equal(d.download(), x[::-1])
    close(s, d)


def test_3d_launch(sseq_session: sseq.Session, mod: int) -> None:
    s = sseq_session
    nx, ny, nz = 37, 19, 11
    d = s.alloc((nz, ny, nx), np.float32, label="grid")
    s.execute_function(mod, "fill3d", sseq.Out(d), sseq.i32(nx), sseq.i32(ny), sseq.i32(nz),
                       grid=((nx + 7) // 8, (ny + 3) // 4, (nz + 1) // 2), block=(8, 4, 2))
    z, y, x = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    want = (x + 1000.0 * y + 1000000.0 * z).astype(np.float32)
    np.testing.assert_array_equal(d.download(), want)
    close(s, d)
