"""Writes every test's `call` duration (seconds, full precision, one a line) to
$SHORT_DURATIONS once the run ends: pytest's --durations rounds to 10 ms."""
import os

import pytest

_calls: list[float] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and report.passed:
        _calls.append(report.duration)


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get("SHORT_DURATIONS")
    if path and not hasattr(session.config, "workerinput"):  # xdist's controller, or no xdist
        with open(path, "w") as f:
            f.writelines(f"{d:.6f}\n" for d in _calls)
