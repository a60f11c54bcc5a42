"""The seed's failing test as a stress: conv2d for a whole batch and example by example
(see convcase.py), both against numpy, on the shared daemon; and the same workload on
a daemon with the legacy XLA bug injected, where the per-example path must go wrong."""

from __future__ import annotations

import os

import numpy as np
import pytest

import convcase
import sseq

CASES = convcase.cases()
# Each case runs this many times with different inputs: more chances to catch a race.
ROUNDS = int(os.environ.get("SSEQ_CONV_ROUNDS", "4"))


def test_enough_cases() -> None:
    assert len(CASES) >= 40
    for field in ("stride", "padding", "lhs_dil", "rhs_dil"):
        assert len({getattr(c, field) for c in CASES}) >= 3, field
    assert {c.groups for c in CASES} >= {1, 2}
    assert any(c.groups == c.c and c.c > 1 for c in CASES), "no depthwise case"
    assert any(min(c.padding) < 0 for c in CASES), "no negative padding"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_conv_general_dilated(sseq_session: sseq.Session, case: convcase.Case) -> None:
    for rnd in range(ROUNDS):
        r = convcase.run(sseq_session, case, seed=case.seed + rnd)
        np.testing.assert_allclose(r.batch, r.reference, rtol=1e-5, atol=0,
                                   err_msg=f"batch conv2d, round {rnd}")
        np.testing.assert_allclose(
            r.per_example, r.reference, rtol=1e-5, atol=0,
            err_msg=f"per-example conv2d (slices, H2D each, D2D gather), round {rnd}")


@pytest.mark.sseq
def test_seed_case_nhwc_per_example_chain(sseq_socket: str) -> None:
    """The flaking test's exact case and its per-example half as it really ran: one
    upload, then per example a chain of device ops on slices of it (transpose, conv2d,
    transpose into a slice of the output) on a second lane, against the batch and numpy."""
    case = convcase.SEED_CASE
    assert (case.n, case.c, case.h, case.w, case.o, case.kh, case.kw) == (10, 1, 5, 5, 5, 3, 3)
    with sseq.connect(sseq_socket, name="seed-case", lanes=2) as s:
        assert len(s.lanes) == 2
        for rnd in range(ROUNDS):
            _check_seed(convcase.run_seed(s, seed=case.seed + rnd), rnd)


def _check_seed(r: convcase.Result, rnd: int) -> None:
    assert r.batch.shape == (10, 5, 5, 5)  # SAME: NHWC out, O = 5
    np.testing.assert_allclose(r.batch, r.reference, rtol=1e-5, atol=0,
                               err_msg=f"batch, round {rnd}")
    np.testing.assert_allclose(r.per_example, r.batch, rtol=1e-5, atol=0,
                               err_msg=f"per example against the batch, round {rnd}")


def test_legacy_sync_window_is_caught(start_daemon) -> None:
    """With H2D readiness tied to a compute-stream window (the XLA bug) the per-example
    path reads inputs before their copies land: the comparison and the daemon's race
    detector both see it, while the batch path, which runs right after its copy, stays
    right. Proves the suite can see the bug it exists for. The copies are slowed to
    20 ms so that they land after the kernels even when the CPUs are busy (2 ms let a
    loaded machine's compute stream fall behind them, and the bug go unseen)."""
    d = start_daemon("--inject", "legacy-sync-window=4", "--sim-delay", "h2d=20ms")
    bad_cases = []
    batch_bad = []
    with sseq.connect(d.socket, name="legacy-check") as s:
        for case in CASES:
            r = convcase.run(s, case)
            if r.mismatches("per_example"):
                bad_cases.append(case.id)
            if r.mismatches("batch"):
                batch_bad.append(case.id)
        stats = s.stats()
    # The seed case's own shape: its per-example chain on a second lane reads the one
    # upload before it lands. Its copies take 500 ms, so that a loaded machine's client
    # still queues the chain (30 launches) before the upload lands.
    d2 = start_daemon("--inject", "legacy-sync-window=4", "--sim-delay", "h2d=500ms")
    with sseq.connect(d2.socket, name="legacy-seed", lanes=2) as s:
        seed = convcase.run_seed(s, seed=convcase.SEED_CASE.seed)
    assert seed.mismatches("per_example"), "the seed case's per-example chain stayed right"
    assert not seed.mismatches("batch"), "the seed case's batch went wrong too"
    assert bad_cases, "the injected legacy bug went unnoticed by the data checks"
    assert stats.waits_elided_legacy > 0
    assert stats.race_findings > 0, "the race detector saw nothing"
    assert not batch_bad, f"the batch path went wrong too: {batch_bad}"
    print(f"{len(bad_cases)}/{len(CASES)} cases wrong per example; "
          f"races={stats.race_findings} legacy-elided={stats.waits_elided_legacy}")


def test_reference_dilates_pads_and_crops() -> None:
    """The numpy reference against hand-computed values."""
    x = np.array([1, 2, 3], np.float32).reshape(1, 1, 1, 3)
    one = np.ones((1, 1, 1, 1), np.float32)
    c = convcase.Case(1, 1, 1, 3, 1, 1, 1, lhs_dil=(1, 2))
    assert convcase.conv_reference(x, one, c).ravel().tolist() == [1, 0, 2, 0, 3]
    c = convcase.Case(1, 1, 1, 3, 1, 1, 1, padding=(0, 0, 1, -1))
    assert convcase.conv_reference(x, one, c).ravel().tolist() == [0, 1, 2]
    k = np.array([1, 10], np.float32).reshape(1, 1, 1, 2)
    c = convcase.Case(1, 1, 1, 3, 1, 1, 2, rhs_dil=(1, 2))
    assert convcase.conv_reference(x, k, c).ravel().tolist() == [31]
    c = convcase.Case(1, 1, 1, 3, 1, 1, 2, stride=(1, 2), padding=(0, 0, 0, 1))
    assert convcase.conv_reference(x, k, c).ravel().tolist() == [21, 3]
    # Two groups: each output channel sees only its half of the input channels.
    x2 = np.array([1, 100], np.float32).reshape(1, 2, 1, 1)
    w2 = np.array([1, 1], np.float32).reshape(2, 1, 1, 1)
    c = convcase.Case(1, 2, 1, 1, 2, 1, 1, groups=2)
    assert convcase.conv_reference(x2, w2, c).ravel().tolist() == [1, 100]
