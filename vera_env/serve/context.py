"""What every protocol adapter of one app shares: the spec, the splits, the sessions.

Built once per app by ``build_context``; the protocol modules (``openenv_app``,
``ors_app``) only translate their wire into calls on it, so both protocols serve
exactly the same environment with the same limits and counts.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vera_env.serve.config import ServeConfig
from vera_env.serve.metrics import ServeMetrics
from vera_env.serve.registry import SessionRegistry, TokenBucket
from vera_env.serve.splits import Splits
from vera_env.spec import EnvSpec
from vera_env.tasks import TaskSource

if TYPE_CHECKING:
    from vera_env.verification.grading import Judge

__all__ = ["DESCRIPTION", "ENV_NAME", "ServeContext", "build_context"]

ENV_NAME = "vera"
"""The environment's name on the wire (ORS paths ``/vera/...``, OpenEnv's task API)."""

DESCRIPTION = ("Data-analysis tasks in a bubblewrap sandbox. Each action is the model's raw "
               "turn: a <command>, a NODE with CHECK lines the harness executes read-only, "
               "or a FINAL ANSWER. The reward is the executed verification score plus the "
               "graded answer; an infrastructure fault gives reward null and unscorable=true.")


@dataclass(frozen=True, slots=True)
class ServeContext:
    """The served environment and its sessions."""

    spec: EnvSpec
    config: ServeConfig
    splits: Splits
    registry: SessionRegistry
    metrics: ServeMetrics


def build_context(spec: EnvSpec, config: ServeConfig,
                  splits: Mapping[str, str | Path | TaskSource] | None = None,
                  judge: Judge | None = None) -> ServeContext:
    """Load the splits and set up the session registry.

    Args:
        spec: The environment every session gets; ``spec.tasks`` is the train split
            unless ``splits`` names one.
        config: Service settings.
        splits: Extra (or all) splits by name.
        judge: Grades ``llm`` tasks; without one their answers are unscorable.

    Raises:
        TaskFileError: A task source is broken.
        ValueError: An unknown split name.
    """
    loaded = Splits({"train": spec.tasks, **(splits or {})})
    metrics = ServeMetrics()
    registry = SessionRegistry(
        functools.partial(spec.build, tasks=loaded.tasks, judge=judge),
        max_sessions=config.max_sessions, idle_timeout_s=config.idle_timeout_s,
        bucket=TokenBucket(config.sandbox_rate_per_s, config.sandbox_burst),
        metrics=metrics)
    return ServeContext(spec=spec, config=config, splits=loaded, registry=registry,
                        metrics=metrics)
