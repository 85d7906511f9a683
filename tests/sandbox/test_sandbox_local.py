"""The local backend: warns it is not isolation, yet times out, kills, caps and copies."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from processes import processes_with
from sandbox_helpers import FAST, data_files, snapshot

from vera_env.sandbox import LocalSandbox, LocalWorkspace, SandboxLimits


@pytest.fixture
def local() -> LocalSandbox:
    with pytest.warns(UserWarning, match="NO isolation"):
        return LocalSandbox(FAST)


@pytest.fixture
def ws(local: LocalSandbox, data_dir: Path) -> Iterator[LocalWorkspace]:
    with local.stage(data_files(data_dir)) as workspace:
        yield workspace


def test_local_sandbox_construction_warns_not_isolation() -> None:
    with pytest.warns(UserWarning, match="NO isolation.*Install bubblewrap"):
        LocalSandbox()


def test_local_stage_copies_so_writes_never_reach_source(ws: LocalWorkspace,
                                                         data_dir: Path) -> None:
    assert (ws.staged_by_copy, ws.staged_by_link) == (3, 0)
    assert ws.run("echo C 9 >> table.tsv && gunzip counts.txt.gz").exit_code == 0
    assert (data_dir / "table.tsv").read_text() == "gene\tcount\nA\t3\nB\t5\n"
    assert ws.listing() == ["counts.txt", "notes.txt", "table.tsv"]


def test_local_run_proxies_point_nowhere(ws: LocalWorkspace) -> None:
    result = ws.run('echo "$HTTP_PROXY $https_proxy $ALL_PROXY [$NO_PROXY]"')
    assert result.stdout == "http://127.0.0.1:9 http://127.0.0.1:9 http://127.0.0.1:9 []\n"


def test_local_run_environment_not_inherited(ws: LocalWorkspace,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERA_SECRET_TOKEN", "leak")
    assert ws.run("echo [$VERA_SECRET_TOKEN]").stdout == "[]\n"


def test_local_run_timeout_kills_group_and_setsid_escapee(ws: LocalWorkspace) -> None:
    result = ws.run("setsid nohup sleep 1010.5 >/dev/null 2>&1 & sleep 1011.5", timeout_s=0.5)
    assert result.status == "timeout" and result.duration_s < 3
    assert processes_with("sleep 1010.5") == [] and processes_with("sleep 1011.5") == []


def test_local_run_background_job_killed_when_command_returns(ws: LocalWorkspace) -> None:
    result = ws.run("sleep 1012.5 & echo started")
    assert (result.status, result.stdout) == ("ok", "started\n")
    assert result.duration_s < 2
    assert processes_with("sleep 1012.5") == []


def test_local_run_output_capped_head_and_tail() -> None:
    limits = SandboxLimits(timeout_s=10, max_output_chars=1000)
    with _quiet_local(limits).stage({}) as ws:
        result = ws.run("echo FIRST; seq 1 200000; echo LAST")
    assert result.stdout_truncated and len(result.stdout) <= 1000
    assert result.stdout.startswith("FIRST\n1\n2\n") and result.stdout.endswith("200000\nLAST\n")


def test_local_run_output_over_byte_limit_killed() -> None:
    with _quiet_local(SandboxLimits(timeout_s=10, max_output_bytes=2**20)).stage({}) as ws:
        result = ws.run("yes")
    assert result.status == "output_limit"


def test_local_run_check_on_throwaway_copy_changes_nothing(ws: LocalWorkspace) -> None:
    before = snapshot(ws.path)
    result = ws.run_check("echo x >> table.tsv; rm notes.txt; touch new; cat table.tsv")
    assert result.stdout.endswith("B\t5\nx\n")  # the check saw its own write...
    assert snapshot(ws.path) == before  # ...on a copy that is gone
    assert [p.name for p in ws.path.parent.iterdir() if p.name.startswith("check-")] == []


def test_local_workspace_close_removes_dir_and_is_idempotent(local: LocalSandbox) -> None:
    ws = local.stage({})
    root = ws.path.parent
    ws.run("mkdir -p a/b && chmod 000 a")
    ws.close()
    ws.close()
    assert not root.exists()


def _quiet_local(limits: SandboxLimits) -> LocalSandbox:
    with pytest.warns(UserWarning):
        return LocalSandbox(limits)
