"""``vera-env doctor`` and its checks, against a staged machine that lacks things.

The machine is faked through the checks' own inputs (a PATH folder, an interpreter, the
store named by ``VERA_ENV_SOURCES``, a probe) wherever they have one, so a check that
stopped looking would fail here; only the harness's own import of h5py is patched.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from vera_env import __version__
from vera_env.cli import doctor, main
from vera_env.cli.machine import Check, missing_packages, missing_requirements, run_checks, userns_fix

NO_PROBE = "the bwrap probe must not run when bwrap is not on PATH"


def _never() -> str:
    raise AssertionError(NO_PROBE)


def _executable(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _by_name(checks: tuple[Check, ...]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def test_run_checks_binaries_missing_from_path_each_name_their_debian_package(tmp_path: Path) -> None:
    checks = _by_name(run_checks(path=str(tmp_path), probe=_never, sources=False))
    for name, package in (("bwrap", "bubblewrap"), ("gawk", "gawk"), ("samtools", "samtools")):
        assert not checks[name].ok
        assert checks[name].detail == "not on PATH"
        assert checks[name].apt_package == package
        assert checks[name].fix.endswith(f"apt-get install -y {package}")


def test_run_checks_bwrap_present_but_refused_reports_reason_without_a_package(tmp_path: Path) -> None:
    _executable(tmp_path, "bwrap", "exit 1")
    reason = "bwrap: setting up uid map: Permission denied"
    check = _by_name(run_checks(path=str(tmp_path), probe=lambda: reason, sources=False))["bwrap"]
    assert not check.ok
    assert reason in check.detail
    assert check.apt_package == ""  # installing bubblewrap again would not help
    assert check.fix and "apt-get" not in check.fix


def test_run_checks_bwrap_probe_passes_is_ok(tmp_path: Path) -> None:
    _executable(tmp_path, "bwrap", "exit 0")
    check = _by_name(run_checks(path=str(tmp_path), probe=lambda: "", sources=False))["bwrap"]
    assert check == Check("bwrap", True, f"{tmp_path / 'bwrap'}: a sandbox ran `true`")


def test_run_checks_sandbox_python_without_module_names_python3_package(tmp_path: Path) -> None:
    python = _executable(tmp_path, "python3", "echo \"ModuleNotFoundError: No module named 'x'\" >&2; exit 1")
    checks = _by_name(run_checks(path=str(tmp_path), python=str(python), probe=_never, sources=False))
    numpy, h5py = checks["sandbox python3: numpy"], checks["sandbox python3: h5py"]
    assert (numpy.ok, numpy.apt_package, h5py.ok, h5py.apt_package) == (
        False, "python3-numpy", False, "python3-h5py")
    assert "No module named 'x'" in numpy.detail


def test_run_checks_sandbox_python_absent_is_missing(tmp_path: Path) -> None:
    checks = _by_name(run_checks(path=str(tmp_path), python=str(tmp_path / "nope"), probe=_never,
                                 sources=False))
    assert not checks["sandbox python3: numpy"].ok
    assert checks["sandbox python3: numpy"].detail == f"{tmp_path / 'nope'} not found"


def test_run_checks_sandbox_python_with_modules_is_ok(tmp_path: Path) -> None:
    python = _executable(tmp_path, "python3", "echo 9.9")
    checks = _by_name(run_checks(path=str(tmp_path), python=str(python), probe=_never, sources=False))
    assert checks["sandbox python3: numpy"] == Check("sandbox python3: numpy", True, f"{python}: numpy 9.9")


def test_run_checks_empty_store_reports_sources_missing_with_setup_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERA_ENV_SOURCES", str(tmp_path / "store"))
    check = _by_name(run_checks(path=str(tmp_path), probe=_never))["real-data sources"]
    assert not check.ok
    assert check.detail.startswith(f"0/9 in {tmp_path / 'store'}; missing palmerpenguins")
    assert check.fix == "vera-env setup"


def test_run_checks_harness_without_h5py_asks_pip_for_this_interpreter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    check = _by_name(run_checks(path=str(tmp_path), probe=_never, sources=False))["this python: h5py"]
    assert not check.ok
    assert check.fix == f"{sys.executable} -m pip install 'h5py>=3.8'"
    assert missing_requirements([check]) == ["h5py>=3.8"]


def test_missing_packages_lists_each_package_once_skipping_ok_and_packageless() -> None:
    checks = [Check("a", False, "", "fix", "gawk"), Check("b", True, "", "", "samtools"),
              Check("c", False, "", "fix", "gawk"), Check("d", False, "", "sysctl", "")]
    assert missing_packages(checks) == ["gawk"]


def test_doctor_cli_binary_missing_exits_1_with_fix_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("VERA_ENV_SOURCES", str(tmp_path / "store"))
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    gawk_row = next(line for line in out.splitlines() if line.startswith("gawk "))
    assert gawk_row.split()[1] == "missing"
    assert gawk_row.endswith("apt-get install -y gawk")
    assert "`vera-env setup` installs" in out


def test_doctor_cli_json_lists_every_check_and_the_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("VERA_ENV_SOURCES", str(tmp_path / "store"))
    assert main(["doctor", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["ok"], report["version"]) == (False, __version__)
    names = [c["name"] for c in report["checks"]]
    assert names == ["bwrap", "gawk", "samtools", "sandbox python3: numpy", "sandbox python3: h5py",
                     "this python: h5py", "real-data sources"]
    assert {c["name"]: c["ok"] for c in report["checks"]}["real-data sources"] is False


def test_doctor_cli_every_check_ok_exits_0(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    healthy = (Check("bwrap", True, "/usr/bin/bwrap"), Check("gawk", True, "/usr/bin/gawk"))
    monkeypatch.setattr(doctor, "run_checks", lambda: healthy)
    assert main(["doctor"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("2/2 ok")


def test_format_checks_failed_row_shows_fix_ok_row_shows_dash() -> None:
    table = doctor.format_checks([Check("gawk", False, "not on PATH", "apt-get install -y gawk", "gawk"),
                                  Check("samtools", True, "/usr/bin/samtools")]).splitlines()
    assert table[0].split() == ["check", "status", "found", "fix"]
    assert table[2].split() == ["gawk", "missing", "not", "on", "PATH", "apt-get", "install", "-y", "gawk"]
    assert table[3].split() == ["samtools", "ok", "/usr/bin/samtools", "-"]


@pytest.mark.parametrize(("key", "refusing", "allowing"), [
    ("apparmor_restrict_unprivileged_userns", "1", "0"),
    ("unprivileged_userns_clone", "0", "1"),
    ("max_user_namespaces", "0", "15000"),
])
def test_userns_fix_kernel_refusing_namespaces_names_its_sysctl(
        tmp_path: Path, key: str, refusing: str, allowing: str) -> None:
    (tmp_path / key).write_text(f"{refusing}\n")
    assert userns_fix(tmp_path).endswith(f"sysctl -w kernel.{key}={allowing}")


def test_userns_fix_kernel_allowing_namespaces_points_at_the_container(tmp_path: Path) -> None:
    (tmp_path / "max_user_namespaces").write_text("63000\n")
    (tmp_path / "apparmor_restrict_unprivileged_userns").write_text("0\n")
    assert "docker run --security-opt seccomp=unconfined" in userns_fix(tmp_path)
