"""RecordEpisode: keep what each episode did, as files a person or a script can read.

Per episode, in ``<directory>/<index>-<task_id>/``:

* ``transcript.jsonl`` — one line per step: the step's record
  (``vera_env.records.StepRecord``: the action, the command output, the node, the
  checks, the reward and its parts, the nudge, the error, ...);
* ``graph.txt`` — the full analysis graph (no budget);
* ``final_answer.txt`` — the released answer ("" if none).

Each step's line also holds the observation returned after it: exactly what the model
was shown next, which is what a person debugging a bad episode asks first. The graph and
answer are written whenever a step ends the episode, and again on ``close`` / the next
``reset``: inside ``ForcedAnswer`` the budget's end is reported as truncation and then
the extra ask brings the answer, which once left ``final_answer.txt`` empty (the record
had closed at the truncation). Put this wrapper outermost to record what the model saw
(forced prompts too); in any order it records every step and the released answer.

``folder_for`` lets a caller choose each episode's folder: an evaluation keeps
``transcripts/<task>/<k>/`` so a transcript can be found from its results row, and a
resumed attempt replaces the partial folder of the killed one instead of adding another.

Example:
    >>> from vera_env import VeraEnv
    >>> from vera_env.wrappers import RecordEpisode
    >>> env = RecordEpisode(VeraEnv("builtin"), "runs/demo")
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, SupportsFloat

import gymnasium as gym

from vera_env import info as keys
from vera_env.env import vera_base
from vera_env.errors import VeraError
from vera_env.records import StepRecord
from vera_env.wire.text import json_line, safe_text

__all__ = ["RecordEpisode"]

_FULL_GRAPH_TOKENS = 10**9


class RecordEpisode(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Write a transcript, the graph and the final answer of every episode.

    Args:
        env: A ``VeraEnv``, possibly wrapped.
        directory: Where episode folders are created (made if missing).
        folder_for: Maps (task id, reset seed) to an episode's folder, replacing any
            folder already there; None numbers folders under ``directory``.
    """

    def __init__(self, env: gym.Env, directory: str | Path,
                 folder_for: Callable[[str, int | None], Path] | None = None) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, directory=str(directory))
        super().__init__(env)
        self.directory = Path(directory)
        self._folder_for = folder_for
        self.directory.mkdir(parents=True, exist_ok=True)
        self._index = len(list(self.directory.iterdir()))
        self._folder: Path | None = None
        self._transcript: IO[str] | None = None
        self._answer = ""

    @property
    def episode_dir(self) -> Path | None:
        """The current (or last) episode's folder."""
        return self._folder

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[str, dict[str, Any]]:
        self._finish()
        obs, info = self.env.reset(seed=seed, options=options)
        self._folder = self._next_folder(info[keys.TASK_ID], seed)
        self._transcript = (self._folder / "transcript.jsonl").open("w", encoding="utf-8")
        self._answer = ""
        self._write({"event": "reset", "seed": seed, "observation": obs,
                     keys.TASK_ID: info[keys.TASK_ID], keys.PREFILL: info[keys.PREFILL]})
        return obs, info

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        record = StepRecord.from_info(info, reward, terminated, truncated, action=action)
        self._answer = record.answer
        self._write({"event": "step", **record.to_dict(), "observation": obs})
        if terminated or truncated:  # a later grant_extra_ask may still ask once more
            self._write_outcome()
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        self._finish()
        super().close()

    def _next_folder(self, task_id: str, seed: int | None) -> Path:
        if self._folder_for is not None:
            folder = self._folder_for(task_id, seed)
            if folder.exists():
                shutil.rmtree(folder)
        else:
            safe = re.sub(r"[^A-Za-z0-9._-]+", "_", task_id)[:80]
            folder = self.directory / f"{self._index:05d}-{safe}"
            self._index += 1
        folder.mkdir(parents=True)
        return folder

    def _write(self, record: dict[str, Any]) -> None:
        if self._transcript is not None:
            # The action is the policy's raw text: what UTF-8 cannot hold is escaped.
            self._transcript.write(json_line(record) + "\n")
            self._transcript.flush()

    def _finish(self) -> None:
        if self._transcript is None:
            return
        self._transcript.close()
        self._transcript = None
        self._write_outcome()

    def _write_outcome(self) -> None:
        if self._folder is None:
            return
        try:
            graph = vera_base(self.env).state.render(_FULL_GRAPH_TOKENS)
        except VeraError as exc:  # the episode never started (reset failed): say so
            graph = f"(graph unavailable: {type(exc).__name__}: {exc})"
        (self._folder / "graph.txt").write_text(graph + "\n", encoding="utf-8")
        (self._folder / "final_answer.txt").write_text(safe_text(self._answer),
                                                      encoding="utf-8")
