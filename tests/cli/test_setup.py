"""``vera-env setup``: the plan it prints, the order it runs, and what it does when done.

No test runs apt-get or pip: the runner is replaced where a command would run, and every
test that reaches it asserts which commands it was given.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from vera_env.cli import machine, main, setup
from vera_env.cli.machine import Check, apt_commands


def _refuse(command: list[str]) -> int:
    raise AssertionError(f"--dry-run ran {command}")


def test_setup_dry_run_bare_machine_prints_apt_then_fetch_and_runs_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("VERA_ENV_SOURCES", str(tmp_path / "store"))
    python = tmp_path / "python3"  # a sandbox python3 that has every module
    python.write_text("#!/bin/sh\necho 1.0\n")
    python.chmod(0o755)
    monkeypatch.setattr(setup, "run_checks",
                        lambda probe=None: machine.run_checks(python=str(python), probe=probe))
    monkeypatch.setattr(setup, "_run", _refuse)
    assert main(["setup", "--dry-run", "--chromium"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    sudo = "" if machine.sudo_prefix() == [] else "sudo "
    assert lines == [
        f"{sudo}apt-get update -qq",
        f"{sudo}env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap gawk samtools chromium",
        f"{sys.executable} -m vera_env.tasks.real.fetch",
    ]
    assert "apt-get not found" in captured.err  # the fake PATH has no apt-get either


def test_setup_dry_run_nothing_missing_says_so(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(setup, "run_checks", lambda probe=None: (Check("gawk", True, "/usr/bin/gawk"),))
    monkeypatch.setattr(setup, "_run", _refuse)
    assert main(["setup", "--dry-run"]) == 0
    assert capsys.readouterr().out.strip() == "# nothing to install: every package and source is present"


def test_setup_runs_plan_in_order_and_exits_1_while_package_still_missing(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    still_missing = (Check("gawk", False, "not on PATH", "apt-get install -y gawk", "gawk"),)
    monkeypatch.setattr(setup, "run_checks", lambda probe=None: still_missing)
    ran: list[list[str]] = []
    monkeypatch.setattr(setup, "_run", lambda command: ran.append(command) or 0)
    assert main(["setup"]) == 1
    assert ran == apt_commands(["gawk"])
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [f"$ {shlex.join(c)}" for c in apt_commands(["gawk"])]
    assert out[-1].split()[:2] == ["gawk", "missing"]


def test_setup_everything_present_runs_nothing_and_exits_0(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(setup, "run_checks", lambda probe=None: (Check("gawk", True, "/usr/bin/gawk"),))
    monkeypatch.setattr(setup, "_run", _refuse)
    assert main(["setup"]) == 0


def test_setup_bwrap_refused_is_reported_but_not_a_failure(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    refused = (Check("bwrap", False, "uid map: Permission denied", "sysctl -w kernel.x=1"),)
    monkeypatch.setattr(setup, "run_checks", lambda probe=None: refused)
    monkeypatch.setattr(setup, "_run", _refuse)
    assert main(["setup"]) == 0
    err = capsys.readouterr().err
    assert "refuses --sandbox auto" in err and "--sandbox local runs without isolation" in err


def test_plan_setup_missing_harness_h5py_installs_it_into_this_interpreter() -> None:
    checks = [Check("this python: h5py", False, "no h5py", "pip", pip_requirement="h5py>=3.8")]
    assert setup.plan_setup(checks) == [
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "h5py>=3.8"]]


def test_run_setup_apt_update_fails_skips_install_still_fetches() -> None:
    fetch = [sys.executable, "-m", "vera_env.tasks.real.fetch"]
    commands = [*apt_commands(["gawk"]), fetch]
    ran: list[list[str]] = []

    def run(command: list[str]) -> int:
        ran.append(command)
        return 100 if "update" in command else 0

    failed = setup.run_setup(commands, run)
    assert ran == [commands[0], fetch]
    assert len(failed) == 1 and failed[0].endswith("apt-get update -qq: exit 100")


def test_apt_commands_not_root_go_through_sudo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert [c[0] for c in apt_commands(["gawk"])] == ["sudo", "sudo"]
    monkeypatch.setattr("os.geteuid", lambda: 0)
    assert [c[0] for c in apt_commands(["gawk"])] == ["apt-get", "env"]
    assert apt_commands([]) == []
