"""The package as a user gets it: a built wheel, installed away from the clone (issue 21).

Every other test imports ``vera_env`` from the clone, so a file the wheel leaves out, a
console script that does not resolve, or a dependency only the dev extra brings in
would pass them all. ``test_wheel_in_fresh_venv_sets_up_and_plays_outside_the_clone``
is the one that sees the package as ``pip install vera-env`` delivers it: the slow test
of this file (three to four minutes: a build, a fresh venv whose dependencies come from
the package index, ``vera-env setup``, ``vera-env demo`` and one eval episode). It runs in
CI, never skipped.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from vera_env import __version__
from vera_env.cli import main
from vera_env.cli.machine import run_checks
from vera_env.tasks.builtin import TASK_TYPES
from vera_env.tasks.real import REAL_TYPES

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_version_flag_prints_the_version_the_build_resolves(capsys: pytest.CaptureFixture[str]) -> None:
    from setuptools.config.pyprojecttoml import read_configuration

    assert "version" not in PYPROJECT["project"]  # one source: vera_env.__version__
    assert "version" in PYPROJECT["project"]["dynamic"]
    resolved = read_configuration(ROOT / "pyproject.toml", expand=True)["project"]["version"]
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out == f"vera-env {resolved}\n"
    assert resolved == __version__


def test_license_file_is_the_apache_2_text_pyproject_names() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]
    assert re.search(r"Apache License\s+Version 2\.0, January 2004", text)
    assert "END OF TERMS AND CONDITIONS" in text
    assert "Copyright 2026 The vera_env authors" in text
    assert "[yyyy]" not in text


def test_changelog_has_a_dated_section_for_this_version_and_unreleased() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## {re.escape(__version__)} - \d{{4}}-\d\d-\d\d$", text, re.MULTILINE)
    assert text.index("## Unreleased") < text.index(f"## {__version__}")


def _run(command: list[str | Path], cwd: Path, env: dict[str, str], timeout_s: float = 300,
         ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout_s, check=False)
    if ok:
        assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _build(out: Path, env: dict[str, str]) -> Path:
    """The sdist and the wheel built from it, checked by twine; returns the wheel."""
    _run([sys.executable, "-m", "build", "--outdir", out, ROOT], ROOT, env)
    built = sorted(out.iterdir())
    assert [p.name for p in built] == [f"vera_env-{__version__}-py3-none-any.whl",
                                       f"vera_env-{__version__}.tar.gz"]
    _run([sys.executable, "-m", "twine", "check", "--strict", *built], out, env)
    return built[0]


def _assert_wheel_ships_the_package(wheel: Path) -> None:
    """Every file of the vera_env folder (not bytecode) is in the wheel, data files included."""
    names = set(zipfile.ZipFile(wheel).namelist())
    package = [p.relative_to(ROOT).as_posix() for p in (ROOT / "vera_env").rglob("*")
               if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]
    assert "vera_env/py.typed" in package
    assert sorted(set(package) - names) == []
    assert f"vera_env-{__version__}.dist-info/licenses/LICENSE" in names


def _doctor(venv: Path, cwd: Path, env: dict[str, str]) -> tuple[int, dict[str, bool]]:
    done = _run([venv / "bin" / "vera-env", "doctor", "--json"], cwd, env, ok=False)
    report = json.loads(done.stdout)
    assert report["version"] == __version__
    assert done.returncode == (0 if report["ok"] else 1)
    return done.returncode, {c["name"]: c["ok"] for c in report["checks"]}


@pytest.mark.timeout(900)
def test_wheel_in_fresh_venv_sets_up_and_plays_outside_the_clone(tmp_path: Path) -> None:
    # The machine must already be set up (CI's `make test` runs scripts/install.sh), so
    # the wheel's `setup` has only its own interpreter to complete and never runs apt-get.
    clone = {c.name: c for c in run_checks()}
    not_set_up = [f"{c.name}: {c.fix}" for c in clone.values() if not c.ok and not c.pip_requirement]
    assert not not_set_up, f"set this machine up first (make install): {not_set_up}"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    wheel = _build(tmp_path / "dist", env)
    _assert_wheel_ships_the_package(wheel)

    venv, away = tmp_path / "venv", tmp_path / "elsewhere"
    away.mkdir()
    _run([sys.executable, "-m", "venv", venv], away, env)  # no --system-site-packages
    _run([venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
          wheel], away, env)
    located = _run([venv / "bin" / "python", "-c", "import vera_env; print(vera_env.__file__)"], away, env)
    assert Path(located.stdout.strip()).is_relative_to(venv)
    assert _run([venv / "bin" / "vera-env", "--version"], away, env).stdout == f"vera-env {__version__}\n"

    # A bare wheel lacks h5py for the harness (the `real` extra); doctor says so, setup fixes it.
    code, before = _doctor(venv, away, env)
    assert (code, before["this python: h5py"]) == (1, False)
    assert {k: v for k, v in before.items() if k != "this python: h5py"} == {
        k: c.ok for k, c in clone.items() if k != "this python: h5py"}
    _run([venv / "bin" / "vera-env", "setup"], away, env)
    assert _doctor(venv, away, env) == (0, dict.fromkeys(before, True))

    # The main job, as the README's wheel route runs it: every builtin and real type,
    # oracle and careless policy, through the installed sandbox and data.
    demo = _run([venv / "bin" / "vera-env", "demo"], away, env, timeout_s=420)
    assert ("oracle correct on every task: yes; careless policy wrong on every trap: yes"
            in demo.stdout), demo.stdout[-3000:]
    rows = [line.split() for line in demo.stdout.splitlines()]
    played = [row[:2] for row in rows if len(row) == 10 and row[0] in ("oracle", "careless")]
    assert len(played) == 2 * (len(TASK_TYPES) + len(REAL_TYPES))
    assert {t for _, t in played if t.startswith("real.")} == {f"real.{t}.s0" for t in REAL_TYPES}

    # One real-data episode, played by the oracle through the installed sandbox and data.
    out = tmp_path / "run"
    _run([venv / "bin" / "vera-env", "eval", "--policy", "oracle", "--tasks", "real", "--limit", "1",
          "--attempts", "1", "--max-steps", "10", "--out", out], away, env)
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["attempts"], summary["accuracy"], summary["statuses"]["ok"]) == (1, 1.0, 1)
