"""checks.py: the harness reads each check's verdict; anything but a clean True fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from vera_env.records import NodeRecord
from vera_env.sandbox import ExecResult, SandboxLimits, make_sandbox
from vera_env.verification.checks import (
    MAX_CHECKS_PER_NODE,
    CheckResult,
    result_from_exec,
    run_checks,
)
from vera_env.wire.protocol import CheckSpec

SPEC = CheckSpec(kind="range", name="mean is 5", command="test 1 -eq 1 && echo True")


def _exec(stdout: str = "", stderr: str = "", exit_code: int = 0, *, status: str = "ok",
          timed_out: bool = False, duration_s: float = 0.25) -> ExecResult:
    return ExecResult(stdout=stdout, stderr=stderr, exit_code=exit_code, timed_out=timed_out,
                      duration_s=duration_s, status=status)  # type: ignore[arg-type]


def test_result_from_exec_true_last_line_passes_with_its_duration():
    result = result_from_exec(SPEC, _exec("computing...\n5\nTrue\n\n"))
    assert result.passed and result.detail == "" and result.duration_s == 0.25
    assert (result.name, result.kind, result.command) == (SPEC.name, SPEC.kind, SPEC.command)
    assert result.discriminating is None and not result.malformed


def test_result_from_exec_false_verdict_fails_and_says_so():
    result = result_from_exec(SPEC, _exec("False\n"))
    assert not result.passed and result.detail == "check evaluated False"
    assert not result.malformed


def test_result_from_exec_nonzero_exit_fails_even_when_it_printed_true():
    result = result_from_exec(SPEC, _exec("True\n", "awk: syntax error\n", exit_code=2))
    assert not result.passed and "exited 2" in result.detail and "syntax error" in result.detail


def test_result_from_exec_timeout_fails_never_skipped():
    result = result_from_exec(SPEC, _exec("True\n", status="timeout", timed_out=True,
                                          duration_s=30.0))
    assert not result.passed and "timed out after 30.0s" in result.detail
    assert (result.name, result.kind, result.command) == (SPEC.name, SPEC.kind, SPEC.command)
    assert result.duration_s == 30.0


@pytest.mark.parametrize("status", ["output_limit", "disk_limit", "killed", "error"])
def test_result_from_exec_abnormal_status_fails(status):
    result = result_from_exec(SPEC, _exec("True\n", status=status))
    assert not result.passed and status in result.detail


def test_result_from_exec_measurement_instead_of_verdict_is_malformed():
    result = result_from_exec(SPEC, _exec("5.0\n"))
    assert not result.passed and result.malformed
    assert "no True/False verdict" in result.detail and "'5.0'" in result.detail


def test_result_from_exec_shows_the_last_120_characters_of_a_non_verdict():
    result = result_from_exec(SPEC, _exec("True\n" + "z" * 300 + "\n"))
    assert result.malformed and "(last line: '" + "z" * 120 + "')" in result.detail
    silent = result_from_exec(SPEC, _exec("\n  \n"))
    assert silent.malformed and silent.detail.endswith("(last line: '')")


def test_result_from_exec_detail_is_bounded():
    result = result_from_exec(SPEC, _exec("x" * 10_000 + "\n"))
    assert len(result.detail) <= 200


def test_earns_needs_a_pass_not_shown_non_discriminating():
    assert CheckResult("c", "range", "cmd", True).earns
    assert CheckResult("c", "range", "cmd", True, discriminating=True).earns
    assert not CheckResult("c", "range", "cmd", True, discriminating=False).earns
    assert not CheckResult("c", "range", "cmd", False, discriminating=True).earns


def test_a_nodes_rho_is_the_pass_fraction_and_zero_without_checks():
    passed, failed = CheckResult("a", "range", "x", True), CheckResult("b", "range", "y", False)
    assert NodeRecord("n1", "qc", "s").rho == 0.0
    assert NodeRecord("n1", "qc", "s", checks=(passed, failed, failed, passed)).rho == 0.5
    assert NodeRecord("n1", "qc", "s", checks=(passed,)).rho == 1.0


def test_to_dict_is_json_ready_with_every_field():
    result = CheckResult("c", "type", "cmd", True, discriminating=True,
                         killed_by=("drop_lines:x",), duration_s=0.5)
    data = result.to_dict()
    assert data["killed_by"] == ["drop_lines:x"] and data["discriminating"] is True
    assert set(data) == {"name", "kind", "command", "passed", "detail", "discriminating",
                         "killed_by", "evidence", "malformed", "duration_s"}


@pytest.fixture
def workspace(tmp_path: Path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "alcohol.txt").write_text("id\tdrinks\n1\t3\n2\t7\n")
    sandbox = make_sandbox("auto", SandboxLimits(check_timeout_s=5))
    ws = sandbox.stage({"alcohol.txt": data / "alcohol.txt"})
    yield ws
    ws.close()
    sandbox.close()


def test_run_checks_reads_each_verdict_in_order(workspace):
    specs = (CheckSpec("range", "two rows", "test $(wc -l < alcohol.txt) -eq 3 && echo True"),
             CheckSpec("range", "three rows", "test $(wc -l < alcohol.txt) -eq 4 && echo True "
                                               "|| echo False"),
             CheckSpec("type", "measurement", "wc -l < alcohol.txt"))
    results = run_checks(specs, workspace)
    assert [r.passed for r in results] == [True, False, False]
    assert [r.malformed for r in results] == [False, False, True]


def test_run_checks_cannot_write_the_workspace(workspace):
    spec = CheckSpec("type", "writes", "echo x > made.txt; test -f made.txt && echo True")
    (result,) = run_checks((spec,), workspace)
    assert not result.passed
    assert not (workspace.path / "made.txt").exists()


def test_run_checks_times_out_a_slow_check(workspace):
    """The caller's timeout is the one applied (the workspace's own default is 5 s)."""
    (result,) = run_checks((CheckSpec("type", "slow", "sleep 3; echo True"),), workspace,
                           timeout_s=0.5)
    assert not result.passed and "timed out" in result.detail
    assert result.duration_s < 2.5


def test_run_checks_fails_checks_past_the_cap_without_running_them(workspace):
    specs = tuple(CheckSpec("type", f"c{i}", f"touch /tmp/ran{i}; echo True")
                  for i in range(MAX_CHECKS_PER_NODE + 2))
    results = run_checks(specs, workspace, max_checks=2)
    assert [r.passed for r in results] == [True, True] + [False] * MAX_CHECKS_PER_NODE
    assert all("at most 2 checks" in r.detail for r in results[2:])
    assert results[-1].name == f"c{MAX_CHECKS_PER_NODE + 1}" and results[-1].kind == "type"
