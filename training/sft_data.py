"""The data of expert iteration: collected rows, the ones worth imitating, as examples.

The library half of ``vera_env.training.scripts.sft`` (the script): rows written by
``vera_env.training.scripts.collect`` are loaded (``load_rollouts``), kept on the env's own
verdicts (``select_rows``: never an unscorable row or a fault, since nobody knows
whether it went well) and tokenized with the trained model's chat template, the loss on
the model's turns only (``to_examples``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from vera_env.training.transcripts import IGNORE, ChatFormat, Layout, tokenize_transcript

__all__ = ["Selection", "load_rollouts", "select_rows", "to_examples"]

Selection = Literal["correct", "verified", "either"]
"""Which collected episodes are kept: graded correct, verified enough, or either."""


def load_rollouts(paths: Sequence[str | Path]) -> list[dict[str, Any]]:
    """Rows of collected rollout files (JSONL or Parquet), in file order.

    Raises:
        FileNotFoundError: A file is missing.
        ValueError: A file is neither .jsonl nor .parquet.
    """
    from datasets import load_dataset  # noqa: PLC0415

    rows: list[dict[str, Any]] = []
    for path in map(Path, paths):
        if not path.is_file():
            raise FileNotFoundError(f"no rollout file {path}")
        kinds = {".jsonl": "json", ".parquet": "parquet"}
        if path.suffix not in kinds:
            raise ValueError(f"rollout files are .jsonl or .parquet, got {path.name!r}")
        rows.extend(load_dataset(kinds[path.suffix], data_files=str(path), split="train"))
    return rows


def select_rows(rows: Sequence[dict[str, Any]], select: Selection = "correct",
                min_verification: float = 0.1) -> list[dict[str, Any]]:
    """The rows worth imitating (never unscorable rows, never faults).

    Raises:
        ValueError: Unknown ``select``.
    """
    if select not in ("correct", "verified", "either"):
        raise ValueError(f"select must be correct, verified or either, got {select!r}")
    kept = []
    for row in rows:
        if row["unscorable"] or row["status"] in ("provider", "sandbox", "error"):
            continue
        correct = row["correct"] is True
        verified = row["verification_reward"] >= min_verification
        if {"correct": correct, "verified": verified, "either": correct or verified}[select]:
            kept.append(row)
    return kept


def to_examples(rows: Sequence[dict[str, Any]], fmt: ChatFormat, *, layout: Layout = "turns",
                max_length: int = 8192, system_prompt: str = "") -> list[dict[str, list[int]]]:
    """``{"input_ids", "labels"}`` examples of the rows, cut to ``max_length`` tokens.

    Sequences whose every label is masked after the cut (nothing left to learn) are dropped.
    """
    examples = []
    for row in rows:
        if not row["actions"]:
            continue
        for ids, labels in tokenize_transcript(fmt, row["observations"], row["actions"], layout,
                                               prefills=row.get("prefills") or (),
                                               system_prompt=system_prompt,
                                               learn=row.get("learn") or ()):
            ids, labels = ids[:max_length], labels[:max_length]
            if any(label != IGNORE for label in labels):
                examples.append({"input_ids": ids, "labels": labels})
    return examples
