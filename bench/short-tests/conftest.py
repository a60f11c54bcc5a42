"""Writes every test's `call` duration (seconds, full precision, one a line) to
$SHORT_DURATIONS once the run ends: pytest's --durations rounds to 10 ms. After the
duration, each line names the worker that ran the test (gw0..., "-" without xdist) and
the test's place in that worker's order (1 is the worker's first test)."""
import os

import pytest

_calls: list[tuple[float, str, int]] = []
_order: dict[str, int] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and report.passed:
        node = getattr(report, "node", None)  # xdist's controller sets it
        worker = getattr(getattr(node, "gateway", None), "id", "-")
        _order[worker] = _order.get(worker, 0) + 1
        _calls.append((report.duration, worker, _order[worker]))


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get("SHORT_DURATIONS")
    if path and not hasattr(session.config, "workerinput"):  # xdist's controller, or no xdist
        with open(path, "w") as f:
            f.writelines(f"{d:.6f} {w} {i}\n" for d, w, i in _calls)
