"""``vera_env.integrations.verifiers`` through the real verifiers 0.4 rollout API.

verifiers cannot share the main test env (its ``mcp==2.0.0`` pin clashes with the serve
extra's ``openenv`` 0.10, which needs ``mcp<2``), so these tests build a virtualenv of
their own once, cached under ``~/.cache/vera-env/`` by a hash of its requirements, and
play each episode there with ``verifiers_episode.py``: the env's own ``run_episode``
with verifiers' ``null`` harness, against a fake OpenAI-compatible endpoint on
127.0.0.1 that replies with the oracle's turns. The reference is computed here, in the
plain env, the same way. The recipe's blocks (``docs/integrations/verifiers.md``: the Python
ones and the ``vf-eval`` command, which the docs runner cannot run without verifiers)
run here, in that virtualenv, against the same scripted endpoint.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from venvs import cached_venv

from vera_env.policy import OraclePolicy
from vera_env.spec import EnvSpec
from vera_env.tasks import load_tasks

ROOT = Path(__file__).resolve().parents[2]
HELPER = Path(__file__).with_name("verifiers_episode.py")
RECIPE = ROOT / "docs" / "integrations" / "verifiers.md"
REQUIREMENTS = ("verifiers==0.4.0", "uv", "gymnasium>=1.0", "numpy>=1.24", "httpx>=0.27",
                "pydantic>=2.6", "tqdm>=4.66", "pyahocorasick>=2.1")
TASK_ID = "seq.motif_count.easy.s0"
SPEC = {"max_steps": 8}


@pytest.fixture(scope="module")
def verifiers_venv() -> Path:
    """A virtualenv with verifiers and vera's core dependencies (vera from this tree),
    cached (``tests/venvs.py``)."""
    return cached_venv("verifiers-venv", sys.executable, REQUIREMENTS)


def _play(venv_dir: Path, request: dict[str, Any], tmp_path: Path,
          mode: str = "episode") -> dict[str, Any]:
    request_file = tmp_path / "request.json"
    request_file.write_text(json.dumps(request))
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           "PATH": f"{venv_dir / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([str(venv_dir / "bin" / "python"), str(HELPER), mode,
                           str(request_file)],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _in_process(task_id: str) -> tuple[float, list[str]]:
    """The oracle's return and the observations it was shown, in the plain env."""
    tasks = load_tasks("builtin")
    env = EnvSpec(**SPEC).build(tasks=tasks)
    policy = OraclePolicy(tasks)
    obs, info = env.reset(options={"task_id": task_id})
    shown, total, done = [], 0.0, False
    while not done:
        shown.append(obs)
        obs, reward, terminated, truncated, info = env.step(policy.act(obs, info))
        total, done = total + reward, terminated or truncated
    env.close()
    return total, shown


def test_verifiers_oracle_episode_return_equals_in_process_env(verifiers_venv, tmp_path):
    expected, shown = _in_process(TASK_ID)
    turns = list(load_tasks("builtin").get(TASK_ID).solution)
    result = _play(verifiers_venv, {"task_id": TASK_ID, "turns": turns, "spec": SPEC},
                   tmp_path)
    assert result["ok"] is True and expected > 1.0
    assert result["rewards"] == [pytest.approx(expected)] * len(turns)
    assert sum(result["step_rewards"]) == pytest.approx(expected)
    # One user message per turn, holding exactly what the plain env shows.
    assert result["requests"] == [[{"role": "user", "content": obs}] for obs in shown]


def test_verifiers_unscorable_episode_has_no_reward_and_is_not_ok(verifiers_venv, tmp_path,
                                                                  judged_suite):
    spec = {"source": str(judged_suite), "wrappers": []}
    result = _play(verifiers_venv, {"task_id": "judged", "spec": spec,
                                    "turns": ["FINAL ANSWER: Escherichia coli"]}, tmp_path)
    assert result["rewards"] == [None]  # not 0: scoring did not run
    assert result["step_rewards"] == [None]
    assert result["ok"] is False and result["trace_ok"] == [False]
    assert result["trace_errors"] == [["EnvError"]]


def _recipe_blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", RECIPE.read_text(encoding="utf-8"),
                      flags=re.MULTILINE | re.DOTALL)


def test_verifiers_recipe_blocks_run_and_print_the_in_process_return(verifiers_venv,
                                                                      tmp_path):
    episode_block, config_block = _recipe_blocks("python")
    expected, shown = _in_process(TASK_ID)
    turns = list(load_tasks("builtin").get(TASK_ID).solution)
    played = _play(verifiers_venv, {"turns": turns, "code": episode_block}, tmp_path,
                   mode="recipe")
    assert played["returncode"] == 0, played["stderr"]
    name, ok, _, value, _, steps = played["stdout"].split()
    assert (name, ok, int(steps)) == (TASK_ID, "ok", len(shown))
    assert float(value) == pytest.approx(expected)
    built = _play(verifiers_venv, {"turns": [], "code": config_block}, tmp_path,
                  mode="recipe")
    assert built["returncode"] == 0, built["stderr"]
    assert built["stdout"].strip() == f"VeraEnvironment ['{TASK_ID}']"


def test_verifiers_recipe_vf_eval_command_records_the_in_process_return(verifiers_venv,
                                                                        tmp_path):
    _, command = _recipe_blocks("bash")  # the first installs verifiers
    expected, shown = _in_process(TASK_ID)
    turns = list(load_tasks("builtin").get(TASK_ID).solution)
    ran = _play(verifiers_venv, {"turns": turns, "code": command, "lang": "bash",
                                 "cwd": str(tmp_path)}, tmp_path, mode="recipe")
    assert ran["returncode"] == 0, ran["stderr"]
    (traces_file,) = tmp_path.glob("outputs/*/traces.jsonl")
    episodes = [json.loads(line) for line in traces_file.read_text().splitlines()]
    (episode,) = episodes
    rewards = [t["rewards"]["vera_return"]["score"] for t in episode["traces"]]
    assert episode["ok"] is True
    assert rewards == [pytest.approx(expected)] * len(shown)
