"""The red-team scenario format and its runner (imported by the red-team tests).

A red-team scenario is a golden scenario (``vera_env.evaluation.golden``: an inline task, scripted
turns, expectations) plus a ``redteam`` block saying which hack it plays and what
stopped it. The golden runner plays it through the real environment; this module adds
the assertions every hack must meet, whatever the file says:

* it earns no verification reward (``max_verification``, 0 unless the scenario mixes
  a legitimate node in; a ``(control)`` scenario must also earn ``min_verification``,
  so the defences are shown not to zero honest work);
* the task's source data is byte-identical afterwards;
* the workspace is byte-identical across each step in ``workspace_unchanged_at``
  (turns that only declare checks: checks must change nothing);
* no process whose command line matches ``no_process_matching`` survives;
* every observation and ``info`` is valid UTF-8 and strict JSON, the observation inside
  ``observation_space`` (issue 11: model text must never break what comes downstream);
* the same environment's next episode works.

The harness plays them from inside a session keyring, as systemd services, PAM logins
and runc/Kubernetes containers run (issue 11): where it has none, a keyring note
(``40-keyring-note``) cannot outlive its run whatever the sandbox does, and the
scenario would prove nothing.

``judge_replies`` scripts the judge of an ``llm`` task: its replies in order, ``null``
for a call that finds the judge unreachable (an outage).

Unknown keys are errors, as in the golden format: a typo'd assertion must not pass.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import math
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
from processes import processes_with

from vera_env import info as keys
from vera_env.errors import PolicyError
from vera_env.evaluation.golden import GoldenError, run_scenario, validate
from vera_env.sandbox.seccomp import syscall_number
from vera_env.verification.grading import RubricJudge

__all__ = ["SCENARIO_DIR", "join_session_keyring", "load", "play"]

SCENARIO_DIR = Path(__file__).parent / "scenarios"
_KEYCTL_JOIN_SESSION_KEYRING = 1
_REQUIRED = {"hack", "stopped_by"}
_OPTIONAL = {"max_verification", "min_verification", "workspace_unchanged_at",
             "no_process_matching", "checks_discriminating", "judge_replies"}


def load(path: Path) -> dict[str, Any]:
    """Read and validate one scenario file.

    Raises:
        GoldenError: The golden part or the ``redteam`` block is malformed.
    """
    scenario = json.loads(path.read_text(encoding="utf-8"))
    block = scenario.pop("redteam", None)
    if not isinstance(block, dict):
        raise GoldenError(f"{path.name}: a red-team scenario needs a 'redteam' object")
    missing, unknown = _REQUIRED - set(block), set(block) - _REQUIRED - _OPTIONAL
    if missing or unknown:
        raise GoldenError(f"{path.name}: redteam block missing {sorted(missing)}, "
                          f"unknown {sorted(unknown)}")
    validate(scenario, source=path.name)
    if scenario["name"] != path.stem:
        raise GoldenError(f"{path.name}: name {scenario['name']!r} differs from the file")
    scenario["redteam"] = block
    return scenario


class _Recorder(gym.Wrapper):
    """Watches the episode from outside: data hashes, workspace snapshots, infos."""

    def __init__(self, env: gym.Env, block: dict[str, Any]) -> None:
        super().__init__(env)
        self._unchanged_at = set(block.get("workspace_unchanged_at", []))
        self.infos: list[dict[str, Any]] = []
        self.failures: list[str] = []
        self._data: dict[str, str] = {}

    def reset(self, **kwargs: Any) -> Any:
        out = self.env.reset(**kwargs)
        self._data = _hashes(self.unwrapped.task.data_files())
        return out

    def step(self, action: str) -> Any:
        at = len(self.infos) + 1
        before = _snapshot(self.unwrapped.workspace.path) if at in self._unchanged_at else None
        out = self.env.step(action)
        self.infos.append(out[-1])
        self.failures += [f"turn {at}: {problem}" for problem in _text_problems(self, *out)]
        if before is not None and _snapshot(self.unwrapped.workspace.path) != before:
            self.failures.append(f"turn {at}: the workspace changed across the turn")
        return out

    def close(self) -> None:
        base = self.unwrapped
        if _hashes(base.task.data_files()) != self._data:
            self.failures.append("the task's source data changed")
        base.reset(seed=1)  # the next episode of the same environment
        info = base.step("<command>echo alive; ls</command>")[-1]
        if not info[keys.COMMAND_OUTPUT].startswith("alive"):
            self.failures.append(f"next episode broken: {info[keys.COMMAND_OUTPUT][:200]!r}")
        super().close()


def join_session_keyring() -> None:
    """Put this process in a named session keyring (idempotent; see the module docstring).

    Raises:
        OSError: The kernel refused.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(syscall_number("keyctl"), _KEYCTL_JOIN_SESSION_KEYRING,
                    b"vera-redteam-harness") < 0:
        raise OSError(ctypes.get_errno(), "cannot join a session keyring")


def play(scenario: dict[str, Any]) -> list[str]:
    """Run one scenario; return every failed expectation and invariant."""
    join_session_keyring()
    block = scenario["redteam"]
    recorders: list[_Recorder] = []

    def wrap(env: Any, names: list[str]) -> Any:
        from vera_env.wrappers import apply_wrappers

        recorders.append(_Recorder(apply_wrappers(env, names), block))
        return recorders[-1]

    golden = {k: v for k, v in scenario.items() if k != "redteam"}
    replies = block.get("judge_replies")
    judge = RubricJudge(_ScriptedJudge(replies)) if replies is not None else None
    failures = run_scenario(golden, wrap=wrap, judge=judge)
    recorder = recorders[0]
    failures += recorder.failures
    failures += _check_reward(block, recorder.infos)
    failures += _check_discriminating(block, recorder.infos)
    failures += [f"process left running: {m!r}" for m in block.get("no_process_matching", [])
                 if processes_with(m, settle_s=0)]
    return failures


def _check_reward(block: dict[str, Any], infos: list[dict[str, Any]]) -> list[str]:
    total = infos[-1][keys.VERIFICATION_TOTAL] if infos else 0.0
    cap = block.get("max_verification", 0.0)
    out = [f"earned {total} verification, more than {cap}"] if total > cap + 1e-9 else []
    floor = block.get("min_verification")
    if floor is not None and not math.isclose(total, floor, abs_tol=1e-9) and total < floor:
        out.append(f"control earned {total}, expected {floor}")
    return out


def _check_discriminating(block: dict[str, Any], infos: list[dict[str, Any]]) -> list[str]:
    out = []
    for at, want in block.get("checks_discriminating", {}).items():
        got = [c["discriminating"] for c in infos[int(at) - 1][keys.CHECKS]]
        if got != want:
            out.append(f"turn {at}: discriminating {got}, expected {want}")
    return out


class _ScriptedJudge:
    """A judge model replying from a list; ``None`` means the endpoint is down."""

    def __init__(self, replies: list[str | None]) -> None:
        self._replies = list(replies)

    def chat(self, messages: list[dict[str, str]]) -> Any:
        reply = self._replies.pop(0)
        if reply is None:
            raise PolicyError("judge endpoint unreachable (scripted outage)")
        return SimpleNamespace(text=reply)


def _text_problems(env: gym.Env, obs: Any, reward: float, terminated: bool, truncated: bool,
                   info: dict[str, Any]) -> list[str]:
    try:
        obs.encode("utf-8")
        json.dumps(info, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (AttributeError, UnicodeEncodeError, ValueError, TypeError) as exc:
        return [f"observation or info is not UTF-8 JSON: {exc}"]
    if not env.observation_space.contains(obs):
        return [f"observation of {len(obs)} characters is outside observation_space"]
    return []


def _hashes(files: dict[str, Path]) -> dict[str, str]:
    return {name: hashlib.sha256(Path(path).read_bytes()).hexdigest()
            for name, path in files.items()}


def _snapshot(root: Path) -> dict[str, tuple[str, int]]:
    found: dict[str, tuple[str, int]] = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory) / name
            st = path.lstat()
            if path.is_symlink():
                content = "link:" + os.readlink(path)
            elif path.is_dir():
                content = "dir"
            else:
                content = hashlib.sha256(path.read_bytes()).hexdigest()
            found[path.relative_to(root).as_posix()] = (content, st.st_mode)
    return found


