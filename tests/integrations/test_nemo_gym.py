"""The NeMo Gym adapter, against the real ``nemo-gym`` package in a Python 3.12 venv.

``nemo-gym`` needs Python 3.12 and the suite runs on 3.11, so the episodes run in a
second interpreter: a venv with ``nemo-gym`` and this repository's dependencies, built
once and cached (``tests/venvs.py``: uv, seconds; pip took 94 to 387 s on CI's machine
kind). The helper script
``nemo_gym_episode.py`` runs there with this checkout first on ``PYTHONPATH``, so the
code under test is the tree's, not the cached copy's. Its episodes go through NeMo Gym's
real FastAPI apps; each return is compared with the in-process environment's, computed
here.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from venvs import cached_venv

from vera_env.errors import ResetNeeded, TaskFileError
from vera_env.integrations import nemo_gym
from vera_env.policy import OraclePolicy
from vera_env.serve.session import Turn
from vera_env.serve.splits import Splits
from vera_env.spec import EnvSpec
from vera_env.tasks import load_tasks

REPO = Path(__file__).resolve().parents[2]
HELPER = Path(__file__).with_name("nemo_gym_episode.py")
NEMO_GYM = "nemo-gym==0.4.0"
MAX_STEPS = 12  # as in the helper
TASK, OTHER_TASK = "seq.motif_count.easy.s0", "seq.gc_content.easy.s0"


def python312() -> Path:
    """A working Python 3.12: pyenv's (this machine kind has one) or on PATH. pyenv's
    ``python3.12`` shim is on PATH but fails unless 3.12 is selected, so each is run."""
    found = shutil.which("python3.12")
    candidates = sorted(Path.home().glob(".pyenv/versions/3.12*/bin/python"))
    candidates += [Path(found)] if found else []
    for candidate in candidates:
        version = subprocess.run([str(candidate), "--version"], capture_output=True, text=True)
        if version.returncode == 0 and version.stdout.startswith("Python 3.12"):
            return candidate
    raise RuntimeError(f"nemo-gym needs Python 3.12; none works here (tried {candidates}): "
                       "install it (pyenv install 3.12)")


@pytest.fixture(scope="module")
def venv_python() -> Path:
    """The cached 3.12 venv's python (``tests/venvs.py``), built on first use."""
    return cached_venv("nemo-gym", python312(), [NEMO_GYM, str(REPO)]) / "bin" / "python"


def run_helper(venv_python: Path, *args: str) -> dict[str, Any]:
    """Run the helper in the 3.12 venv, this checkout first on its path; its last stdout
    line is the outcome."""
    done = subprocess.run([str(venv_python), str(HELPER), *args], capture_output=True,
                          text=True, timeout=600, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def play(venv_python: Path, mode: str, row: dict[str, Any], *, fault: bool = False
         ) -> dict[str, Any]:
    """One oracle episode on ``row`` through the server (``/reset``, ``/step``) or the
    agent (``/run``)."""
    return run_helper(venv_python, mode, json.dumps(row), *(["--fault"] if fault else []))


@functools.cache
def in_process_return(task_id: str) -> float:
    """The oracle's return on ``task_id`` in the environment built here, in-process."""
    tasks = load_tasks("builtin")
    env, oracle = EnvSpec(max_steps=MAX_STEPS).build(tasks=tasks), OraclePolicy(tasks)
    try:
        obs, info = env.reset(options={"task_id": task_id})
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, info = env.step(oracle.act(obs, info))
            total, done = total + float(reward), terminated or truncated
        return total
    finally:
        env.close()


# ----- through the real package (the 3.12 venv) -----

def test_server_reference_episode_same_return_as_in_process(venv_python: Path) -> None:
    result = play(venv_python, "server", {"task_id": TASK})
    assert result["task_id"] == TASK
    assert result["info"]["correct"] is True
    assert result["observation"] is None  # the episode ended: NeMo Gym stops asking
    assert result["return"] == pytest.approx(in_process_return(TASK), abs=1e-9)


def test_agent_reference_episode_same_return_as_in_process(venv_python: Path) -> None:
    result = play(venv_python, "agent", {"task_id": TASK})
    assert result["failure_class"] is None
    assert result["return"] == pytest.approx(in_process_return(TASK), abs=1e-9)


def test_row_with_other_task_id_plays_that_task(venv_python: Path) -> None:
    result = play(venv_python, "server", {"task_id": OTHER_TASK})
    assert result["task_id"] == OTHER_TASK
    assert result["return"] == pytest.approx(in_process_return(OTHER_TASK), abs=1e-9)


def test_row_with_split_and_index_plays_that_task(venv_python: Path) -> None:
    result = play(venv_python, "reset", {"split": "train", "index": 2})
    assert result["task_id"] == load_tasks("builtin").ids()[2]


def test_unscorable_step_fails_rollout_not_summed_as_zero(venv_python: Path) -> None:
    server = play(venv_python, "server", {"task_id": TASK}, fault=True)
    assert server["info"]["unscorable"] is True
    assert server["info"]["episode_return"] is None
    agent = play(venv_python, "agent", {"task_id": TASK}, fault=True)
    assert agent["failure_class"] == nemo_gym.FAILURE_CLASS  # NeMo Gym's failures sidecar
    assert agent["info"]["episode_return"] is None


def test_scaffolded_folder_loads_in_nemo_gym_and_first_row_resets(venv_python: Path,
                                                                  tmp_path: Path) -> None:
    nemo_gym.scaffold(tmp_path, env_spec={"max_steps": 7}, rows=2)
    result = run_helper(venv_python, "scaffold", str(tmp_path))
    assert result == {"row_task_id": TASK, "task_id": TASK, "steps_left": 7}


# ----- the parts that need no nemo-gym (this interpreter) -----

def test_task_for_row_without_task_raises_naming_fields() -> None:
    with pytest.raises(TaskFileError, match="names no task.*'prompt'"):
        nemo_gym.task_for_row({"prompt": "x"}, Splits({"train": "builtin"}))


def test_task_for_row_unknown_task_id_raises() -> None:
    with pytest.raises(TaskFileError, match="unknown task 'nope'"):
        nemo_gym.task_for_row({"task_id": "nope"}, Splits({"train": "builtin"}))


def test_task_for_row_index_out_of_range_raises() -> None:
    with pytest.raises(TaskFileError, match="out of range"):
        nemo_gym.task_for_row({"index": 10_000}, Splits({"train": "builtin"}))


def test_episodes_step_without_reset_raises_reset_needed() -> None:
    episodes = nemo_gym.VeraEpisodes(EnvSpec(), Splits({"train": "builtin"}))
    with pytest.raises(ResetNeeded, match="no episode"):
        asyncio.run(episodes.step("hello", "sid-1"))


def test_episodes_row_task_played_then_close_frees_session() -> None:
    episodes = nemo_gym.VeraEpisodes(EnvSpec(max_steps=3), Splits({"train": "builtin"}))

    async def episode() -> tuple[dict[str, Any], nemo_gym.NemoStep]:
        _, info = await episodes.reset({"split": "train", "index": 1}, "sid-1")
        step = await episodes.step("no command here", "sid-1")  # malformed: rejected, no end
        await episodes.close("sid-1")
        return info, step

    info, (obs, reward, terminated, truncated, step_info) = asyncio.run(episode())
    assert info["task_id"] == load_tasks("builtin").ids()[1]
    assert step_info["error"] and obs and not (terminated or truncated)
    assert step_info["episode_return"] == pytest.approx(reward)
    assert episodes.open_sessions == 0


def test_nemo_step_unscorable_keeps_return_null_and_ends() -> None:
    info = {"task_id": TASK, "unscorable": True}
    obs, reward, terminated, truncated, out = nemo_gym.nemo_step(
        Turn("obs", None, False, True, info, None))
    assert (obs, reward, truncated) == (None, 0.0, True)
    assert out["unscorable"] is True and out["episode_return"] is None


def test_mark_unscorable_scored_result_unchanged() -> None:
    result = {"reward": 1.0, "info": {"unscorable": False}}
    assert nemo_gym.mark_unscorable(result) == result
    assert nemo_gym.mark_unscorable({"reward": 0.0, "info": {"unscorable": True}})[
        nemo_gym.FAILURE_KEY] == "transient"


def test_scaffold_writes_server_agent_config_and_rows(tmp_path: Path) -> None:
    folder = nemo_gym.scaffold(tmp_path, env_spec={"max_steps": 5}, rows=3)
    config = json.loads((folder / "configs" / "vera.yaml").read_text())
    server = config["vera"]["resources_servers"]["vera"]
    agent = config["vera_gymnasium_agent"]["responses_api_agents"]["vera_agent"]
    assert server["env_spec"] == {"max_steps": 5} and agent["max_steps"] == 6
    assert "VeraGymnasiumAgent" in (tmp_path / "responses_api_agents/vera_agent/app.py").read_text()
    rows = [json.loads(line) for line in (folder / "data/example.jsonl").read_text().splitlines()]
    assert [r["task_id"] for r in rows] == list(load_tasks("builtin").ids()[:3])


@pytest.mark.parametrize("direct_url, requirement", [
    ({"url": "file:///src/vera-env", "dir_info": {"editable": True}},
     "vera-env @ file:///src/vera-env"),
    ({"url": "file:///dist/vera_env-0.1.0-py3-none-any.whl", "archive_info": {}},
     "vera-env @ file:///dist/vera_env-0.1.0-py3-none-any.whl"),
    ({"url": "https://github.com/o/vera-env", "vcs_info": {"vcs": "git", "commit_id": "abc123"}},
     "vera-env @ git+https://github.com/o/vera-env@abc123"),
])
def test_installed_requirement_direct_install_points_at_its_source(
        direct_url: dict[str, Any], requirement: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nemo_gym, "_direct_url", lambda: direct_url)
    assert nemo_gym.installed_requirement() == requirement


def test_installed_requirement_index_install_pins_version_with_a_note(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nemo_gym, "_direct_url", lambda: None)
    note, pin = nemo_gym.installed_requirement().splitlines()
    assert pin == f"vera-env=={nemo_gym.__version__}"
    assert note.startswith("#") and "not on the package index" in note and "file://" in note


def test_direct_url_reads_pep_610_of_the_distribution_that_has_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    class Dist:
        def __init__(self, text: str | None) -> None:
            self.text = text

        def read_text(self, name: str) -> str | None:
            assert name == "direct_url.json"
            return self.text

    found = [Dist(None), Dist('{"url": "file:///src/vera-env", "dir_info": {}}')]
    monkeypatch.setattr(nemo_gym.metadata, "distributions", lambda name: found)
    assert nemo_gym.installed_requirement() == "vera-env @ file:///src/vera-env"


def test_scaffold_requirements_name_the_installed_vera_env(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nemo_gym, "_direct_url", lambda: {"url": "file:///src/vera-env",
                                                           "dir_info": {"editable": True}})
    folder = nemo_gym.scaffold(tmp_path, rows=1)
    agent = tmp_path / "responses_api_agents" / "vera_agent"
    for written in (folder / "requirements.txt", agent / "requirements.txt"):
        assert written.read_text() == "vera-env @ file:///src/vera-env\n"


def test_scaffold_bad_env_spec_raises_before_writing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_steps"):
        nemo_gym.scaffold(tmp_path, env_spec={"max_steps": 0})
    assert not (tmp_path / "resources_servers").exists()


def test_module_unknown_attribute_raises() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        getattr(nemo_gym, "Nope")  # noqa: B009 - the module's __getattr__ is the unit


def test_main_scaffold_prints_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert nemo_gym.main(["scaffold", str(tmp_path), "--rows", "1"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "resources_servers" / "vera")
