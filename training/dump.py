"""``--dump-rollouts FILE``: one JSON line per turn the trainer saw, to read what it learned from.

A training curve says that something changed; only the samples say what. Each line is
one step-wise sample: which episode and group it belongs to (``episode`` counts every
episode of the run, ``group`` every group), the task, the turn index, the env's
observation text, the prompt as the decoded prompt tokens (so "the prompt is exactly
the observation" can be checked from the file), the completion as sampled, the
advantage it was trained with (``null`` for an episode excluded as unscorable, with
``trained: false``), its weight, and the step's reward parts. ``format_episode`` renders
an episode for ``--print-samples``. A resumed run appends to the file
(``vera_env.training.resume``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["RolloutDump", "format_episode"]


class RolloutDump:
    """Appends sample records to a JSONL file.

    Args:
        path: The file; its folder is created.
        resume_from: 0: the file starts empty. A resumed run's global step: the file
            keeps the records of earlier steps (a killed run's later ones are played
            again, so they go) and numbering goes on after its last episode.
    """

    def __init__(self, path: str | Path, *, resume_from: int = 0) -> None:
        from vera_env.training.resume import keep_until  # noqa: PLC0415 - torch-free, no cycle

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        kept = keep_until(self.path, resume_from) if resume_from else []
        if not resume_from:
            self.path.write_text("", encoding="utf-8")
        self.episodes = max((int(r["episode"]) + 1 for r in kept if r.get("episode") is not None),
                            default=0)

    def write(self, records: Sequence[dict[str, Any]]) -> None:
        """Append records (already numbered)."""
        with self.path.open("a", encoding="utf-8") as out:
            for record in records:
                out.write(json.dumps(record, ensure_ascii=False) + "\n")


def format_episode(records: Sequence[dict[str, Any]], *, observation_chars: int = 600) -> str:
    """A readable transcript of one episode's records (the tail of each observation)."""
    if not records:
        return "(no turns)"
    head = records[0]
    lines = [f"=== episode {head['episode']} (group {head['group']}, {head['task_id']}, "
             f"advantage {head['advantage']}) ==="]
    for record in records:
        observation = record["observation"]
        if len(observation) > observation_chars:
            observation = "..." + observation[-observation_chars:]
        parts = record["reward_parts"]
        lines += [f"--- turn {record['turn']}: observation (tail) ---", observation,
                  f"--- turn {record['turn']}: model (prefill {record['prefill']!r}) ---",
                  record["completion"],
                  f"--- reward {record['reward']:+.4f} (verification "
                  f"{parts.get('verification', 0.0):.4f}, correctness "
                  f"{parts.get('correctness')}, penalty {parts.get('penalty', 0.0):.2f})"
                  + (f" rejected: {record['error']}" if record["error"] else "")]
    return "\n".join(lines)
