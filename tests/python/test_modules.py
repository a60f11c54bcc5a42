"""Session.module_functions, function_attributes, device_limits and names in
execute_function, against a private ``sseqd --backend hip`` on the fake CUDA runtime
(whose fake modules are text files naming functions as nvcc would). Skipped where the
daemon has no hip backend that loads them (a sim-only build, a real GPU); the sim
refusing the questions runs everywhere."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

import sseq

FAKE_MODULE = (
    "@FAKE-MODULE@\n"
    "function _Z6reduceILi256EEvPKfPfi 8 8 4 maxthreads=256 regs=32 shared=1024 ptx=86\n"
    "function _Z5scalePfif 8 4 4 behavior=echo regs=16\n"
    "function _Z5scalePdid 8 4 8 behavior=echo regs=20\n")
SIG_REDUCE = "void reduce<256>(float const*, float*, int)"


@pytest.fixture
def hip_module(start_daemon, tmp_path):  # type: ignore[no-untyped-def]
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "names.fatbin").write_text(FAKE_MODULE)
    try:
        d = start_daemon("--backend", "hip", "--module-dir", str(mods))
    except RuntimeError as e:
        pytest.skip(f"no hip backend here: {str(e)[-200:]}")
    s = sseq.connect(d.socket)
    try:
        module = s.load_module("names.fatbin")
    except sseq.Error as e:
        s.close()
        pytest.skip(f"the fake module does not load (not the fake CUDA runtime): {e}")
    yield s, module
    s.close()


def test_module_functions_have_demangled_names_and_attributes(hip_module) -> None:  # type: ignore[no-untyped-def]
    s, module = hip_module
    fns = {f.name: f for f in s.module_functions(module)}
    assert set(fns) == {"_Z6reduceILi256EEvPKfPfi", "_Z5scalePfif", "_Z5scalePdid"}
    r = fns["_Z6reduceILi256EEvPKfPfi"]
    assert r.demangled == SIG_REDUCE
    assert (r.max_threads_per_block, r.num_regs, r.shared_size_bytes, r.ptx_version) == (
        256, 32, 1024, 86)
    assert fns["_Z5scalePdid"].demangled == "scale(double*, int, double)"
    one = s.function_attributes(module, "reduce<256>")
    assert one.name == "_Z6reduceILi256EEvPKfPfi" and one.num_regs == 32
    lim = s.device_limits()
    assert lim.max_threads_per_block == 1024 and lim.max_grid[1] == 65535
    assert lim.shared_optin == 227 << 10


def test_execute_function_takes_a_signature_and_refuses_an_ambiguous_name(hip_module) -> None:  # type: ignore[no-untyped-def]
    s, module = hip_module
    buf = s.alloc(6, np.float32, label="x")
    buf.upload(np.zeros(6, np.float32))
    s.execute_function(module, "scale(double*, int, double)", sseq.InOut(buf), sseq.i32(7),
                       sseq.f64(0.25), grid=(1,), block=(32,), shared_mem=64 << 10).wait()
    raw = buf.download().tobytes()
    assert struct.unpack_from("<i", raw, 8)[0] == 7
    assert struct.unpack_from("<d", raw, 16)[0] == 0.25
    with pytest.raises(sseq.Error) as e:
        s.execute_function(module, "scale", sseq.InOut(buf), sseq.i32(7), sseq.f32(1),
                           grid=(1,), block=(32,)).wait()
    assert e.value.name == "UNKNOWN_KERNEL"
    assert "scale(float*, int, float)" in str(e.value)
    assert "scale(double*, int, double)" in str(e.value)
    with pytest.raises(sseq.Error) as e:
        s.execute_function(module, "_Z5scalePfif", sseq.InOut(buf), sseq.i32(7), sseq.f32(1),
                           grid=(1,), block=(1025,)).wait()
    assert e.value.name == "INVALID_ARGUMENT" and "block_x 1025" in str(e.value)
    buf.free()


def test_sim_refuses_module_questions(start_daemon) -> None:  # type: ignore[no-untyped-def]
    d = start_daemon()
    with sseq.connect(d.socket) as s:
        with pytest.raises(sseq.Error) as e:
            s.module_functions(1)
        assert e.value.name == "INVALID_ARGUMENT"
        assert "a backend that loads code modules" in str(e.value)
        assert s.device_limits().max_threads_per_block == 0


LAUNCH_MODULE = (
    "@FAKE-MODULE@\n"
    "function launchinfo 8 behavior=launchinfo\n"
    "function coop_small 8 behavior=launchinfo blocks_per_sm=4\n")


def test_execute_function_cooperative_and_cluster(start_daemon, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """cooperative= and cluster= reach their launch calls (fakecuda's launchinfo writes
    the cooperative flag, the cluster's and the grid's dimensions); what does not fit is
    refused with the numbers."""
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "launch.txt").write_text(LAUNCH_MODULE)
    try:
        d = start_daemon("--backend", "hip", "--module-dir", str(mods))
    except RuntimeError as e:
        pytest.skip(f"no hip backend here: {str(e)[-200:]}")
    s = sseq.connect(d.socket)
    try:
        try:
            module = s.load_module("launch.txt")
        except sseq.Error as e:
            pytest.skip(f"the fake module does not load (not the fake CUDA runtime): {e}")
        buf = s.alloc(10, np.uint32, label="how")

        def launch(fn: str, gx: int, **kw: object) -> np.ndarray:
            buf.upload(np.full(10, 0xFFFFFFFF, np.uint32))
            s.execute_function(module, fn, sseq.InOut(buf), grid=(gx,), block=(64,),
                               **kw).wait()  # type: ignore[arg-type]
            return buf.download()

        how = launch("launchinfo", 8, cooperative=True)
        assert list(how[:5]) == [1, 0, 0, 0, 8]
        how = launch("launchinfo", 4, cluster=(2,))
        assert list(how[:5]) == [0, 2, 1, 1, 4]
        how = launch("launchinfo", 4)
        assert list(how[:5]) == [0, 0, 0, 0, 4]
        with pytest.raises(sseq.Error) as ei:
            launch("coop_small", 529, cooperative=True)
        assert ei.value.name == "INVALID_ARGUMENT"
        assert "529 blocks is over the 528" in str(ei.value)
        with pytest.raises(sseq.Error) as ei:
            launch("launchinfo", 4, cooperative=True, cluster=(2, 1, 1))
        assert ei.value.name == "NOT_SUPPORTED"
        with pytest.raises(ValueError):
            launch("launchinfo", 4, cluster=(1, 1, 1, 1))
    finally:
        s.close()
