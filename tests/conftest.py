"""Shared fixtures: small inline tasks with real data files, run in the real sandbox.

Also the rule that a skipped test proves nothing: under CI (``CI`` set, as ``.ci/run``
does), where ``make test`` has installed every requirement (bubblewrap, Chromium, torch,
Ray), a test that would skip for a missing requirement fails instead, so a broken
install can never pass as green.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vera_env.tasks import Task
from vera_env.verification.strength.reference import Contents, Reference

_STRICT = bool(os.environ.get("CI"))


def _fail_skip(report: pytest.BaseReport) -> None:
    if _STRICT and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = (f"skipped under CI, where every requirement is installed: "
                           f"{report.longrepr}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    outcome = yield
    _fail_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> object:
    outcome = yield
    _fail_skip(outcome.get_result())

ALCOHOL = "id\tgroup\tdrinks\n1\ta\t3\n2\tb\t5\n3\ta\t7\n4\tb\t-999\n"


def alcohol_mean(contents: Contents) -> str:
    """The answer of `alcohol_task` recomputed from its file (its reference's solver)."""
    rows = [line.split("\t") for line in contents["alcohol.txt"].decode().splitlines()[1:]
            if line.strip()]
    values = [float(row[2]) for row in rows if row[2] != "-999"]
    return f"{sum(values) / len(values):.1f}"


@pytest.fixture
def alcohol_task(tmp_path: Path) -> Task:
    """A tab-separated table whose mean of 'drinks' is 5 once the sentinel is dropped,
    with a reference (a task without one pays nothing for its checks)."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "alcohol.txt").write_text(ALCOHOL)
    return Task(id="alcohol-mean", question="Mean drinks, ignoring -999? One decimal.",
                answer="5.0", grader={"kind": "numeric", "abs_tol": 0.05}, data_dir=data,
                ).with_reference(Reference(solve=alcohol_mean))
