"""EpisodeLog: the transcript of one eval attempt, in the folder the run chose for it.

``RecordEpisode`` numbers its episode folders itself, which suits one long-lived
environment; an evaluation needs ``transcripts/<task>/<k>/`` so that a transcript can be
found from its row in ``results.jsonl`` and a resumed attempt overwrites the partial
transcript of the killed one instead of leaving a second folder beside it. The files
are the ones ``RecordEpisode`` writes, plus the observation after every step — exactly
what the model was shown, which is what a person debugging a bad episode asks first.

Put it outermost, so it records what the policy sees (forced prompts included).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import IO, Any, Callable

import gymnasium as gym

from vera_env import info as keys

__all__ = ["EpisodeLog"]

_FULL_GRAPH_TOKENS = 10**9
_STEP_KEYS = (keys.STEP, keys.ERROR, keys.NUDGE, keys.COMMAND_OUTPUT, keys.NODE,
              keys.CHECKS, keys.REWARD_PARTS, keys.ANSWER, keys.CORRECT, keys.FORCING,
              keys.PREFILL, keys.UNSCORABLE, keys.GRADE_DETAIL)


class EpisodeLog(gym.Wrapper):
    """Write ``transcript.jsonl``, ``graph.txt`` and ``final_answer.txt`` per episode.

    Args:
        env: A ``VeraEnv``, possibly wrapped.
        folder_for: Maps (task id, reset seed) to the episode's folder; an existing
            folder there is replaced.
    """

    def __init__(self, env: gym.Env, folder_for: Callable[[str, int | None], Path]) -> None:
        super().__init__(env)
        self._folder_for = folder_for
        self._folder: Path | None = None
        self._file: IO[str] | None = None
        self._answer = ""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[str, dict[str, Any]]:
        self._finish()
        obs, info = self.env.reset(seed=seed, options=options)
        folder = self._folder_for(info[keys.TASK_ID], seed)
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        self._folder, self._answer = folder, ""
        self._file = (folder / "transcript.jsonl").open("w", encoding="utf-8")
        self._write({"event": "reset", "seed": seed, keys.TASK_ID: info[keys.TASK_ID],
                     "observation": obs, keys.PREFILL: info[keys.PREFILL]})
        return obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._answer = info[keys.ANSWER]
        self._write({"event": "step", "action": action, "reward": reward,
                     "terminated": terminated, "truncated": truncated,
                     **{k: info[k] for k in _STEP_KEYS}, "observation": obs})
        if terminated or truncated:
            self._finish()
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        self._finish()
        super().close()

    def _write(self, record: dict[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._file.flush()

    def _finish(self) -> None:
        if self._file is None or self._folder is None:
            return
        self._file.close()
        self._file = None
        try:
            graph = self.env.unwrapped.state.render(_FULL_GRAPH_TOKENS)
        except Exception as exc:  # noqa: BLE001 - the episode is gone; say so in the file
            graph = f"(graph unavailable: {type(exc).__name__}: {exc})"
        (self._folder / "graph.txt").write_text(graph + "\n", encoding="utf-8")
        (self._folder / "final_answer.txt").write_text(self._answer, encoding="utf-8")
