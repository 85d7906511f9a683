"""Episodes of any policy played through the environment and recorded as rows.

The library half of ``vera_env.training.scripts.collect`` (the script): the script picks the
policy and writes the file; this module plays the episodes, records what the policy
saw and answered (``Recording``) and lays each episode out as one row
(``episode_row``), so tests and benchmarks collect without the script's flags.

What a policy offers beyond ``act`` is found through protocols (``EpisodeAware``,
``ReportsUsage``, ``MarksMistakes``), never by probing attributes: a recording that
forwarded every attribute to its policy also forwarded ``aact``, so an async rollout
would have played the policy past the recording.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from vera_env import info as keys
from vera_env.policy import EpisodeAware, Policy, ReportsUsage
from vera_env.rollout import Attempt, map_episodes, run_episode
from vera_env.tasks import TaskSource
from vera_env.training.starts import Start
from vera_env.training.transcripts import ChatFormat, tokenize_transcript

__all__ = ["MarksMistakes", "Recording", "collect", "episode_row", "write_rows"]


@runtime_checkable
class MarksMistakes(Protocol):
    """A teacher that makes deliberate mistakes and says which turns they are
    (``vera_env.training.analyst.AnalystTeacher`` with ``repair``): those turns are
    context to learn from, never turns to imitate."""

    def deliberate_mistake(self, action: str, info: dict[str, Any]) -> bool:
        """Whether ``action``, just returned for ``info``, was a deliberate mistake."""
        ...


class Recording:
    """Wraps a policy for one episode, keeping each observation it answered.

    It offers what the rollout asks of a policy (``Policy``, ``EpisodeAware``,
    ``ReportsUsage``) and passes each on to the policy when the policy offers it, so
    the rollout treats the recorded policy as it would the policy alone.
    """

    def __init__(self, policy: Policy) -> None:
        self._policy = policy
        self.observations: list[str] = []
        self.actions: list[str] = []
        self.prefills: list[str] = []
        self.learn: list[bool] = []

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """The policy's turn, recorded with what it answered."""
        action = self._policy.act(observation, info)
        self.observations.append(observation)
        self.actions.append(action)
        self.prefills.append(str(info.get(keys.PREFILL) or ""))
        mistaken = isinstance(self._policy, MarksMistakes) and self._policy.deliberate_mistake(
            action, info)
        self.learn.append(not mistaken)
        return action

    def begin_episode(self, info: dict[str, Any]) -> None:
        """Tell the policy a new episode began, when it keeps per-episode state."""
        if isinstance(self._policy, EpisodeAware):
            self._policy.begin_episode(info)

    def last_usage(self) -> tuple[int | None, int | None]:
        """What the policy's last call cost; ``(None, None)`` when it does not say."""
        if isinstance(self._policy, ReportsUsage):
            return self._policy.last_usage()
        return None, None


def episode_row(attempt: Attempt, recording: Recording, question: str, policy: str,
                fmt: ChatFormat | None) -> dict[str, Any]:
    """One output row (see ``vera_env.training.scripts.collect``'s docstring)."""
    row: dict[str, Any] = {
        "task_id": attempt.task_id, "seed": attempt.seed, "attempt_index": attempt.attempt_index,
        "policy": policy, "question": question, "status": attempt.status,
        "correct": attempt.correct, "unscorable": attempt.unscorable, "score": attempt.score,
        "verification_reward": attempt.verification_reward, "answer": attempt.answer,
        "n_steps": attempt.n_steps, "actions": recording.actions,
        "observations": recording.observations, "prefills": recording.prefills,
        "learn": recording.learn,
        "rewards": [step.reward for step in attempt.steps],
        "attempt": attempt.to_json(),
    }
    if fmt is not None and recording.actions:
        ((ids, labels),) = tokenize_transcript(fmt, recording.observations, recording.actions,
                                               learn=recording.learn)
        row["input_ids"], row["labels"] = ids, labels
    elif fmt is not None:
        row["input_ids"], row["labels"] = [], []
    return row


def collect(tasks: TaskSource, policy: Policy, starts: Sequence[Start], *, attempts: int = 1,
            make_env_fn: Callable[[], Any], concurrency: int = 4, policy_name: str = "",
            fmt: ChatFormat | None = None,
            on_row: Callable[[dict[str, Any]], None] | None = None,
            on_step: Callable[[Attempt], None] | None = None) -> list[dict[str, Any]]:
    """Play ``attempts`` episodes per start, ``concurrency`` at a time; one row each.

    Args:
        tasks: The source the starts' task ids come from.
        policy: Anything with ``act(observation, info)``; shared by all episodes.
        starts: Task ids and reset seeds.
        attempts: Episodes per start.
        make_env_fn: Builds an env (one per worker thread).
        concurrency: Episodes in flight.
        policy_name: Recorded in each row.
        fmt: When given, rows get ``input_ids`` and ``labels``.
        on_row: Called with each row as its episode ends (in a worker thread, serialised).
        on_step: Called with an episode's attempt after each of its steps (in a worker
            thread, serialised with ``on_row``).

    Returns:
        The rows, in the order of (start, attempt).
    """
    if attempts < 1:
        raise ValueError(f"attempts must be >= 1, got {attempts}")
    lock = threading.Lock()
    jobs = [(start, k) for start in starts for k in range(attempts)]

    def stepped(attempt: Attempt) -> None:
        if on_step is not None:
            with lock:
                on_step(attempt)

    def play(env: Any, job: tuple[Start, int]) -> dict[str, Any]:
        start, k = job
        recording = Recording(policy)
        attempt = run_episode(env, recording, seed=start.seed + k, task_id=start.task_id,
                              on_step=stepped)
        attempt.attempt_index = k
        row = episode_row(attempt, recording, tasks.get(start.task_id).question, policy_name,
                          fmt)
        if on_row is not None:
            with lock:
                on_row(row)
        return row

    return map_episodes(make_env_fn, jobs, play, concurrency=concurrency)


def write_rows(rows: list[dict[str, Any]], path: str | Path) -> Path:
    """Write rows as JSONL (one JSON object a line) or Parquet, by the file's suffix.

    Raises:
        ValueError: The suffix is neither ``.jsonl`` nor ``.parquet``.
    """
    path = Path(path)
    if path.suffix not in (".jsonl", ".parquet"):
        raise ValueError(f"output must end in .jsonl or .parquet, got {path.name!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".jsonl":
        with path.open("w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
    else:
        from datasets import Dataset  # noqa: PLC0415

        Dataset.from_list(rows).to_parquet(str(path))
    return path
