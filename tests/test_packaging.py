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
from sources import python_files

from vera_env import __version__
from vera_env.cli import main
from vera_env.cli.machine import run_checks

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
    """Every module of vera_env, its linked policies and training included, and its data
    files are in the wheel, under the one import name: nothing else is top-level."""
    names = set(zipfile.ZipFile(wheel).namelist())
    package = [p.relative_to(ROOT).as_posix() for p in python_files()]
    assert {"vera_env/training/scripts/grpo.py", "vera_env/policies/openai.py"} <= set(package)
    assert sorted({*package, "vera_env/py.typed"} - names) == []
    assert {name.split("/")[0] for name in names} == {"vera_env", f"vera_env-{__version__}.dist-info"}
    assert f"vera_env-{__version__}.dist-info/licenses/LICENSE" in names


def _doctor(venv: Path, cwd: Path, env: dict[str, str]) -> tuple[int, dict[str, bool]]:
    done = _run([venv / "bin" / "vera-env", "doctor", "--json"], cwd, env, ok=False)
    report = json.loads(done.stdout)
    assert report["version"] == __version__
    assert done.returncode == (0 if report["ok"] else 1)
    return done.returncode, {c["name"]: c["ok"] for c in report["checks"]}


def _assert_optional_parts_name_their_extra(venv: Path, wheel: Path, cwd: Path, env: dict[str, str]) -> None:
    """A bare wheel: the training scripts and the light client each say which extra they
    need; the ``client`` extra then makes the light client importable."""
    (cwd / "training").mkdir()  # a user's own package of that name shadows nothing of ours
    (cwd / "training" / "__init__.py").write_text("")
    train = _run([venv / "bin" / "vera-env", "train", "grpo", "--tiny", "--output-dir", cwd / "grpo"],
                 cwd, env, ok=False)
    assert train.returncode == 2 and "needs the training extra" in train.stderr, train.stderr
    client = [venv / "bin" / "python", "-c", "from vera_env.serve import VeraRemoteEnv"]
    bare = _run(client, cwd, env, ok=False)
    assert bare.returncode == 1 and "the 'client' extra installs" in bare.stderr, bare.stderr
    _run([venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
          f"{wheel}[client]"], cwd, env)
    _run(client, cwd, env)


def test_train_command_runs_from_a_folder_with_its_own_training_package(tmp_path: Path) -> None:
    # Documented as `python -m training.grpo` before, which a user's own training/ package
    # shadowed ("No module named training.checkpoint"); the scripts are vera_env.training.scripts now.
    (tmp_path / "training").mkdir()
    (tmp_path / "training" / "__init__.py").write_text("raise ImportError('the user package')\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = _run([sys.executable, "-m", "vera_env.cli", "train", "checkpoint", "--help"], tmp_path, env)
    assert done.stdout.startswith("usage: vera-env train checkpoint")
    assert "--source" in done.stdout


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
    _assert_optional_parts_name_their_extra(venv, wheel, away, env)

    # A bare wheel lacks h5py for the harness (the `real` extra); doctor says so, setup fixes it.
    code, before = _doctor(venv, away, env)
    assert (code, before["this python: h5py"]) == (1, False)
    assert {k: v for k, v in before.items() if k != "this python: h5py"} == {
        k: c.ok for k, c in clone.items() if k != "this python: h5py"}
    _run([venv / "bin" / "vera-env", "setup"], away, env)
    assert _doctor(venv, away, env) == (0, dict.fromkeys(before, True))

    # The main job, as the README's wheel route runs it, on one builtin and one real type:
    # every type's oracle-right / careless-wrong is proven in the clone, faster
    # (tests/tasks/test_builtin_env.py, test_real_env.py); here the wheel's own files,
    # console script, sandbox and fetched data play it.
    demo = _run([venv / "bin" / "vera-env", "demo", "--task-ids",
                 "seq.motif_count.easy.s0,real.csv.penguin_mass.s0"], away, env, timeout_s=420)
    assert ("oracle correct on every task: yes; careless policy wrong on every trap: yes"
            in demo.stdout), demo.stdout[-3000:]
    rows = [line.split() for line in demo.stdout.splitlines()]
    played = [row[:2] for row in rows if len(row) == 10 and row[0] in ("oracle", "careless")]
    assert played == [["oracle", "seq.motif_count.easy.s0"], ["oracle", "real.csv.penguin_mass.s0"],
                      ["careless", "seq.motif_count.easy.s0"], ["careless", "real.csv.penguin_mass.s0"]]

    # One real-data episode, played by the oracle through the installed sandbox and data.
    out = tmp_path / "run"
    _run([venv / "bin" / "vera-env", "eval", "--policy", "oracle", "--tasks", "real", "--limit", "1",
          "--attempts", "1", "--max-steps", "10", "--out", out], away, env)
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["attempts"], summary["accuracy"], summary["statuses"]["ok"]) == (1, 1.0, 1)


@pytest.mark.timeout(900)
def test_make_install_with_debian_python_makes_its_own_venv_and_a_rerun_installs_nothing(tmp_path: Path) -> None:
    # The README's first command failed in one second on a stock Debian python3:
    # "externally-managed-environment" (PEP 668). make now installs into a venv of its own.
    debian = Path("/usr/bin/python3")
    assert debian.exists() and list(Path("/usr/lib").glob("python3*/EXTERNALLY-MANAGED")), \
        "this test needs a Debian machine, as CI's is: its python3 refuses pip installs"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = "/usr/sbin:/usr/bin:/sbin:/bin"  # Debian's python3 first: no pyenv, no venv
    venv = tmp_path / "venv"
    make = ["make", "--no-print-directory", "install", f"PYTHON={debian}", f"VENV={venv}"]
    first = _run(make, ROOT, env, timeout_s=840)
    assert f"virtual environment {venv}" in first.stdout
    assert "pip install -e . into" in first.stdout and "vera-env setup" in first.stdout
    base = _run([venv / "bin" / "python", "-c", "import sys, vera_env; print(sys.base_prefix, vera_env.__file__)"],
                tmp_path, env).stdout.split()
    assert base == ["/usr", str(ROOT / "vera_env" / "__init__.py")]
    again = _run(make, ROOT, env, timeout_s=300)
    assert "python packages: already installed" in again.stdout and "pip install -e" not in again.stdout
