"""Lifecycle: close kills and cleans up, exactly once; infrastructure faults raise."""

from __future__ import annotations

import gc
import threading
import time
import warnings
from pathlib import Path

import pytest
from processes import processes_with
from sandbox_helpers import FAST, data_files, requires_bwrap

import vera_env.sandbox as sandbox_pkg
from vera_env.errors import SandboxError
from vera_env.sandbox import (
    BwrapSandbox,
    LocalSandbox,
    Sandbox,
    SandboxConfig,
    ServerSandbox,
    Workspace,
    make_sandbox,
    probe_bwrap,
    sandbox_refusal,
)
from vera_env.sandbox.workspace import remove_tree

MISSING = SandboxConfig(bwrap_path="/nonexistent/bwrap")


def run_in_thread(ws: Workspace, command: str) -> tuple[threading.Thread, list]:
    box: list = []
    thread = threading.Thread(target=lambda: box.append(ws.run(command, timeout_s=30)))
    thread.start()
    return thread, box


@requires_bwrap
def test_bwrap_workspace_close_removes_dir_and_is_idempotent(sandbox: BwrapSandbox,
                                                             data_dir: Path) -> None:
    ws = sandbox.stage(data_files(data_dir))
    root = ws.path.parent
    ws.run("echo x > made.txt && mkdir -p deep/er && chmod 000 deep")
    ws.close()
    assert not root.exists()
    ws.close()
    assert ws.closed
    assert data_dir.exists() and len(list(data_dir.iterdir())) == 3


@requires_bwrap
def test_bwrap_workspace_context_manager_closes(sandbox: BwrapSandbox) -> None:
    with sandbox.stage({}) as ws:
        assert isinstance(ws, Workspace)
        path = ws.path
    assert not path.exists()


@requires_bwrap
def test_bwrap_workspace_forgotten_is_cleaned_by_finalizer(sandbox: BwrapSandbox) -> None:
    ws = sandbox.stage({})
    root = ws.path.parent
    del ws
    gc.collect()
    assert not root.exists()


@requires_bwrap
def test_bwrap_workspace_run_after_close_raises(sandbox: BwrapSandbox) -> None:
    ws = sandbox.stage({})
    ws.close()
    with pytest.raises(SandboxError, match="closed"):
        ws.run("true")


@requires_bwrap
def test_bwrap_workspace_close_during_command_kills_it(sandbox: BwrapSandbox) -> None:
    ws = sandbox.stage({})
    thread, box = run_in_thread(ws, "sleep 1008.5 & sleep 1008.5")
    time.sleep(0.3)
    ws.close()
    thread.join(5)
    assert not thread.is_alive()
    assert box and box[0].status == "killed"
    assert "[killed: the command was aborted]" in box[0].as_tool_output()
    assert not ws.path.parent.exists()
    assert processes_with("sleep 1008.5") == []


@requires_bwrap
def test_bwrap_workspace_abort_kills_command_and_keeps_workspace(sandbox: BwrapSandbox) -> None:
    with sandbox.stage({}) as ws:
        thread, box = run_in_thread(ws, "sleep 1009.5")
        time.sleep(0.3)
        ws.abort()
        thread.join(5)
        assert box[0].status == "killed"
        assert ws.run("echo still here").stdout == "still here\n"


@requires_bwrap
def test_bwrap_sandbox_close_removes_root_and_refuses_stage() -> None:
    box = BwrapSandbox(FAST)
    root = box.root
    box.close()
    box.close()
    assert not root.exists()
    with pytest.raises(SandboxError, match="closed"):
        box.stage({})


def test_bwrap_sandbox_missing_executable_raises() -> None:
    with pytest.raises(SandboxError, match="bubblewrap not found"):
        BwrapSandbox(FAST, MISSING)


@requires_bwrap
def test_bwrap_sandbox_failing_to_start_raises_with_bwrap_message() -> None:
    config = SandboxConfig(ro_binds={"/nonexistent-vera-tools": "/opt/tools"})
    with (BwrapSandbox(FAST, config) as box, box.stage({}) as ws,
          pytest.raises(SandboxError, match=r"failed to start.*bwrap: Can't find source")):
        ws.run("true")


@requires_bwrap
def test_bwrap_command_failure_is_a_result_not_sandbox_error(sandbox: BwrapSandbox) -> None:
    with sandbox.stage({}) as ws:
        result = ws.run("echo 'bwrap: looks like an error' >&2; exit 1")
        assert (result.status, result.exit_code) == ("ok", 1)


def test_make_sandbox_unknown_backend_rejected() -> None:
    with pytest.raises(ValueError, match="backend must be"):
        make_sandbox("docker")  # type: ignore[arg-type]


def test_make_sandbox_bwrap_unavailable_raises() -> None:
    with pytest.raises(SandboxError, match=r"bwrap backend unavailable.*not found"):
        make_sandbox("bwrap", config=MISSING)


def test_make_sandbox_auto_without_bwrap_refuses_naming_setup_and_local() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no LocalSandbox was built: its warning would raise
        with pytest.raises(SandboxError, match="not found") as raised:
            make_sandbox("auto", config=MISSING)
    message = str(raised.value)
    assert "vera-env setup" in message and "NO isolation" in message
    assert "--sandbox local" in message and 'sandbox="local"' in message


def test_make_sandbox_auto_bwrap_that_cannot_start_refuses_with_its_reason(
        monkeypatch: pytest.MonkeyPatch) -> None:
    refused = "bwrap: setting up uid map: Permission denied"
    monkeypatch.setattr(sandbox_pkg, "probe_bwrap", lambda config=None: refused)
    with pytest.raises(SandboxError, match=f"{refused}.*vera-env setup.*--sandbox local"):
        make_sandbox("auto", FAST)


def test_make_sandbox_explicit_local_without_bwrap_runs_with_its_warning() -> None:
    with pytest.warns(UserWarning, match="NO isolation"):
        box = make_sandbox("local", FAST, config=MISSING)
    assert isinstance(box, LocalSandbox) and box.name == "local"
    with box.stage({}) as ws:
        assert ws.run("echo unisolated").stdout == "unisolated\n"


@requires_bwrap
def test_make_sandbox_auto_with_bwrap_returns_the_server_backend_without_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        box = make_sandbox("auto", FAST)
    assert isinstance(box, ServerSandbox) and box.name == "bwrap"
    box.close()


@requires_bwrap
def test_make_sandbox_bwrap_is_a_sandbox_per_command() -> None:
    box = make_sandbox("bwrap", FAST)
    assert type(box) is BwrapSandbox
    box.close()


def test_probe_bwrap_runs_once_per_config(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[SandboxConfig] = []
    monkeypatch.setattr(sandbox_pkg, "_probe", lambda config: calls.append(config) or "nope")
    config = SandboxConfig(bwrap_path="/nonexistent/probe-once")
    assert probe_bwrap(config) == "nope"
    assert probe_bwrap(config) == "nope"
    assert len(calls) == 1


@requires_bwrap
def test_bwrap_workspace_nonpositive_timeout_rejected(sandbox: BwrapSandbox) -> None:
    with sandbox.stage({}) as ws, pytest.raises(ValueError, match="timeout_s must be > 0"):
        ws.run("true", timeout_s=0)


@requires_bwrap
def test_bwrap_sandbox_close_closes_open_workspaces_first() -> None:
    box = BwrapSandbox(FAST)
    ws = box.stage({})
    thread, results = run_in_thread(ws, "sleep 1013.5")
    time.sleep(0.3)
    box.close()
    thread.join(5)
    assert ws.closed and results[0].status == "killed"
    assert not box.root.exists()
    assert processes_with("sleep 1013.5") == []


def test_remove_tree_unreadable_subdirs_removed_parent_untouched(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "b" / "f").write_text("x")
    (tree / "a").chmod(0)
    mode = tmp_path.stat().st_mode
    remove_tree(tree)
    assert not tree.exists() and tmp_path.stat().st_mode == mode


def test_local_sandbox_is_a_sandbox_whose_close_leaves_its_workspaces_usable(
        data_dir: Path) -> None:
    with pytest.warns(UserWarning, match="NO isolation"):
        box = make_sandbox("local", FAST)
    assert isinstance(box, Sandbox)
    ws = box.stage(data_files(data_dir))
    box.close()
    box.close()  # idempotent
    try:
        assert ws.run("echo still-here").stdout.strip() == "still-here"
    finally:
        ws.close()
    assert not ws.path.exists()


@requires_bwrap
@pytest.mark.parametrize("backend", ["bwrap", "bwrap-server"])
def test_bwrap_sandboxes_are_sandboxes_whose_close_closes_their_workspaces(
        backend: str, data_dir: Path) -> None:
    box = make_sandbox(backend, FAST)
    assert isinstance(box, Sandbox)
    ws = box.stage(data_files(data_dir))
    box.close()
    box.close()  # idempotent
    assert not ws.path.exists() and not box.root.exists()


def test_sandbox_protocol_without_close_is_not_a_sandbox() -> None:
    class StageOnly:
        name = "stage-only"

        def stage(self, files):
            raise AssertionError

    assert not isinstance(StageOnly(), Sandbox)


def test_sandbox_refusal_says_why_each_backend_would_refuse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_pkg, "probe_bwrap", lambda config=None: "bwrap: not found")
    assert sandbox_refusal("local") == ""
    assert sandbox_refusal("bwrap") == sandbox_refusal("bwrap-server") == \
        "bwrap backend unavailable: bwrap: not found"
    assert "(bwrap: not found): install it (`vera-env setup`)" in sandbox_refusal("auto")
    monkeypatch.setattr(sandbox_pkg, "probe_bwrap", lambda config=None: "")
    assert sandbox_refusal("auto") == ""
