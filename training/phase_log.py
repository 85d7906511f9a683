"""Phase lines: what a training script is doing now, with the seconds since it started.

Why. ``vera-env train grpo --tiny`` showed nothing for seven minutes of a 471 s run on
the shared 2-core machine but TRL's bar at 0/2: the bar appears once training
starts and moves only when an optimizer step ends, and the first step's rollout -- every
episode of the generation batch, played turn by turn by a CPU model -- is most of the
run. A user cannot tell that from a hang. So every phase of a script that can last more
than about ten seconds (loading a model, starting the environments, each step's
rollout, each optimizer step, each batch of collected episodes) announces itself in
one line::

    [grpo +12s] step 1/2: rolling out 8 episodes

On stderr, because stdout carries the scripts' results (``collect``'s summary, TRL's
metric dicts, ``throughput``'s JSON), and a pipe of them must stay clean. Flushed lines,
no logging configuration: a line must appear the moment it is written, from a terminal
or a job log alike. Written through ``tqdm.write``, because the trainer's bar is drawn
on the same stream: a plain print landed after the bar's text, mid-line. With several
processes only the main one speaks (``main_process``), or a line would come once per GPU.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from tqdm import tqdm

__all__ = ["PhaseLog", "batch_label", "main_process", "trainer_callback"]


def main_process() -> bool:
    """Whether this is the first (or only) process of a launch (``RANK`` unset or 0).

    Read from the environment ``accelerate launch`` and ``torchrun`` set, so a script can
    decide before torch is imported.
    """
    return os.environ.get("RANK", "0") == "0"


class PhaseLog:
    """Writes ``[script +Ns] message`` lines; ``every`` writes only after a quiet spell.

    Args:
        script: The name in every line's prefix (``grpo``, ``sft``, ``collect``).
        stream: Where to write; None: ``sys.stderr`` as it is at each write (so a test's
            capture sees it).
        enabled: False writes nothing (a process other than the main one).
        clock: Seconds, monotonic (a test gives a fake one).

    Example:
        >>> import io
        >>> out = io.StringIO()
        >>> log = PhaseLog("grpo", stream=out, clock=lambda: 0.0)
        >>> log("starting 8 environments")
        >>> out.getvalue()
        '[grpo +0s] starting 8 environments\\n'
    """

    def __init__(self, script: str, *, stream: TextIO | None = None, enabled: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.script, self.enabled = script, enabled
        self._stream, self._clock = stream, clock
        self._started = self._last = clock()

    @property
    def elapsed_s(self) -> float:
        """Seconds since the log was made (the script started)."""
        return self._clock() - self._started

    def __call__(self, message: str) -> None:
        """Write one line now."""
        if not self.enabled:
            return
        self._last = self._clock()
        stream = self._stream or sys.stderr
        tqdm.write(f"[{self.script} +{self.elapsed_s:.0f}s] {message}", file=stream)
        stream.flush()

    def every(self, interval_s: float, message: str) -> None:
        """Write the line only when the last one is ``interval_s`` seconds old.

        For what happens many times a phase (a rollout's rounds): the log stays one
        line per quiet spell, not one per event.
        """
        if self._clock() - self._last >= interval_s:
            self(message)


def batch_label(mode: str, global_step: int, max_steps: int, per_batch: int = 1,
                processes: int = 1) -> str:
    """Which optimizer steps a generation batch feeds: ``step 3/8``, or ``steps 3-4/8``
    when one batch feeds several (``steps_per_generation`` over the accumulation).

    Args:
        mode: ``train``, or anything else for an evaluation batch.
        global_step: Optimizer steps done (the batch feeds the next ones).
        max_steps: Optimizer steps in the run.
        per_batch: Optimizer steps one generation batch feeds.
        processes: Training processes (each plays its own share of the batch).

    Example:
        >>> batch_label("train", 2, 8, per_batch=2, processes=4)
        'steps 3-4/8 (each of 4 processes)'
    """
    if mode != "train":
        where = f"evaluation at step {global_step}"
    else:
        first, last = global_step + 1, min(max_steps, global_step + per_batch)
        where = f"step {first}/{max_steps}" if last <= first else f"steps {first}-{last}/{max_steps}"
    return where if processes == 1 else f"{where} (each of {processes} processes)"


def trainer_callback(log: PhaseLog) -> Any:
    """A ``TrainerCallback`` announcing the start, each logged step and each checkpoint.

    The loss line comes when the trainer logs (every ``--logging-steps`` steps); the
    rollout lines between come from the rollout itself.
    """
    from transformers import TrainerCallback  # noqa: PLC0415 - the training extra

    class PhaseLines(TrainerCallback):  # type: ignore[misc]
        def on_train_begin(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            if state.is_world_process_zero:
                log(f"training: {state.max_steps} optimizer steps")

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None,
                   **_: Any) -> None:
            if state.is_world_process_zero and logs and "loss" in logs:
                reward = f", reward {logs['reward']:.3g}" if "reward" in logs else ""
                if logs.get("reward_default", logs.get("reward")) != logs.get("reward"):
                    # --reward-weights other than the env's: its own reward beside
                    reward += f", default reward {logs['reward_default']:.3g}"
                log(f"step {state.global_step}/{state.max_steps}: optimizer step done "
                    f"(loss {logs['loss']:.4g}{reward})")

        def on_save(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            if state.is_world_process_zero:
                log(f"saved checkpoint-{state.global_step}")

    return PhaseLines()
