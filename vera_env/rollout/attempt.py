"""The record of one episode, built by one lifecycle that every runner shares.

The ``Attempt`` record and its status taxonomy come from the reference harness, so a run
here and a baseline run stay comparable. Statuses attribute every ending to one
boundary — "a bad rollout is data, not a crash":

* ``ok``: an answer was released (right or wrong);
* ``max_steps``: the budget ended with no usable answer;
* ``format``: the budget ended and not one turn was well-formed (the model never
  produced a parseable block);
* ``provider``: the policy's transport failed (``PolicyError``) — an exclusion, never a
  wrong answer;
* ``sandbox``: the sandbox failed (staging or execution) — an exclusion;
* ``error``: anything else raised -- a bug in the harness or the policy, never the
  model's text; its type, message and the line that raised are kept, and
  ``vera-env eval`` reports it loudly (``vera_env.evaluation.metrics``).

``score`` is ``None`` for exclusions and unscorable grades: an infrastructure fault must
not become a reward of 0.

The lifecycle is the same wherever an episode is played (``run_episode``, vector envs,
Ray workers, training, task validation, golden replay)::

    attempt = Attempt.start(seed=seed)
    with attempt.capturing():            # a fault becomes the attempt's status
        obs, info = env.reset(seed=seed)
        attempt.begin(info, policy)
        while not attempt.add_step(action, *env.step(action)):
            ...
    attempt.finish()                     # summarised from the recorded steps alone

Because ``finish`` reads only the steps, an Attempt is the same whoever played it, and
a transcript stored as JSON can be summarised again without the environment. Each step
is a ``vera_env.records.StepRecord``, parsed once from the step's ``info``.
"""

from __future__ import annotations

import contextlib
import json
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, SupportsFloat, get_args

from vera_env import info as keys
from vera_env.errors import PolicyError, SandboxError
from vera_env.policy import EpisodeAware, ReportsUsage
from vera_env.records import StepRecord, recorded_nodes
from vera_env.wire.text import json_line, safe_text

__all__ = ["STATUSES", "Attempt", "Status"]

Status = Literal["ok", "max_steps", "format", "provider", "sandbox", "error"]
STATUSES: tuple[str, ...] = get_args(Status)


@dataclass(slots=True)
class Attempt:
    """One episode: its transcript (``steps``) and the summary ``finish`` derives."""

    task_id: str
    status: Status = "ok"
    answer: str = ""
    correct: bool | None = None
    score: float | None = None
    verification_reward: float = 0.0
    n_steps: int = 0
    n_nodes: int = 0
    n_checks: int = 0
    n_discriminating: int = 0
    mean_rho: float = 0.0
    answer_forced: bool = False           # the answer came from the extra ask
    answer_phase: str = ""                # "open", "forced" (under forcing), "extra"; ""
    gated: int = 0
    unscorable: bool = False
    wall_s: float = 0.0
    error: str = ""
    seed: int | None = None
    attempt_index: int = 0                # which of the K attempts at this task (0-based)
    prompt_tokens: int | None = None      # summed over the episode; None: not reported
    completion_tokens: int | None = None
    steps: list[StepRecord] = field(default_factory=list)
    _started: float = field(default=0.0, repr=False, compare=False)
    _faulted: bool = field(default=False, repr=False, compare=False)

    # ----- the lifecycle -----

    @classmethod
    def start(cls, task_id: str | None = None, *, seed: int | None = None,
              attempt_index: int = 0) -> Attempt:
        """A new, empty attempt; its clock starts now."""
        return cls(task_id=task_id or "", seed=seed, attempt_index=attempt_index,
                   _started=time.perf_counter())

    def begin(self, info: dict[str, Any], policy: object = None) -> None:
        """The episode started: take the task id from the reset's ``info``, and tell
        ``policy`` when it keeps per-episode state (``EpisodeAware``)."""
        self.task_id = info[keys.TASK_ID]
        if isinstance(policy, EpisodeAware):
            policy.begin_episode(info)

    def add_step(self, action: str, obs: Any, reward: SupportsFloat, terminated: bool,
                 truncated: bool, info: dict[str, Any]) -> bool:
        """Record one step (the arguments of ``env.step``'s return, after the action).

        Returns:
            Whether the episode ended with this step.
        """
        del obs  # the observation is the env's, not the episode's record
        # The action is the policy's text, unchecked: it may hold a lone surrogate (a
        # server's JSON can encode one), which would make ``to_json`` unwritable.
        self.steps.append(StepRecord.from_info(info, reward, bool(terminated), bool(truncated),
                                               action=safe_text(action)))
        return bool(terminated or truncated)

    @contextlib.contextmanager
    def capturing(self) -> Iterator[None]:
        """Record what ended the episode early as its status, attributed to one boundary.

        A policy fault is ``provider``, a sandbox fault ``sandbox`` (unscorable), anything
        else ``error`` with its type and message: never raised, so one bad episode cannot
        take down a batch.
        """
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - recorded as data with its type
            self.fail(exc)

    def fail(self, exc: BaseException) -> None:
        """Mark the attempt as ended by ``exc`` (see ``capturing``)."""
        self._faulted = True
        if isinstance(exc, PolicyError):
            self.status, self.error = "provider", safe_text(str(exc))
        elif isinstance(exc, SandboxError):
            self.status, self.error, self.unscorable = "sandbox", safe_text(str(exc)), True
        else:
            self.status, self.error = "error", safe_text(f"{type(exc).__name__}: {exc}"
                                                         f"{_raised_at(exc)}")

    def finish(self) -> Attempt:
        """Summarise the recorded steps into the attempt's fields; returns ``self``."""
        if self._started:
            self.wall_s = time.perf_counter() - self._started
        self._summarise_graph()
        if self._faulted or not self.steps:
            if not self._faulted:
                self.status, self.error = "error", "the episode recorded no step"
            self.score = None
            return self
        last = self.steps[-1]
        self.answer = last.answer
        self.correct = last.correct
        self.unscorable = last.unscorable
        self.answer_forced = any(step.answer_forced for step in self.steps)
        self.answer_phase = last.answer_phase
        self.gated = last.gated
        self.verification_reward = last.verification_total
        self.score = None if self.unscorable else sum(s.reward for s in self.steps)
        self.status, self.error = self._ending(last)
        return self

    def _ending(self, last: StepRecord) -> tuple[Status, str]:
        if self.unscorable and not self.answer:
            return "sandbox", last.error or last.grade_detail
        if self.answer:
            return "ok", ""
        if not last.terminated and not last.truncated:
            return "max_steps", f"stopped after {len(self.steps)} turns; the episode went on"
        if all(step.error for step in self.steps):
            return "format", f"no well-formed turn: {last.error}"
        return "max_steps", "no usable answer within the budget"

    def _summarise_graph(self) -> None:
        nodes = recorded_nodes(self.steps)
        self.n_steps = max((s.step for s in self.steps), default=0)
        self.n_nodes = len(nodes)
        self.n_checks = sum(len(n.checks) for n in nodes)
        self.n_discriminating = sum(n.n_earning for n in nodes)
        self.mean_rho = round(sum(n.rho for n in nodes) / len(nodes), 4) if nodes else 0.0

    # ----- usage and serialisation -----

    def count_usage(self, policy: object) -> None:
        """Add what ``policy``'s last call cost, if it reports it (``ReportsUsage``).

        Call it in the thread (or task) that made the call: policies keep it per thread.
        """
        if isinstance(policy, ReportsUsage):
            self.add_usage(*policy.last_usage())

    def add_usage(self, prompt_tokens: int | None, completion_tokens: int | None) -> None:
        """Add one model call's token counts (None: the server did not report them)."""
        if prompt_tokens is not None:
            self.prompt_tokens = (self.prompt_tokens or 0) + prompt_tokens
        if completion_tokens is not None:
            self.completion_tokens = (self.completion_tokens or 0) + completion_tokens

    def to_dict(self) -> dict[str, Any]:
        """The public fields, JSON-ready (each step by ``StepRecord.to_dict``)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)
                if not f.name.startswith("_")}
        data["steps"] = [step.to_dict() for step in self.steps]
        return data

    def to_json(self) -> str:
        """One JSON line."""
        return json_line(self.to_dict())

    @classmethod
    def from_json(cls, line: str) -> Attempt:
        """Parse a line written by ``to_json`` (each step by ``StepRecord.from_dict``).

        Raises:
            ValueError: The line is not an Attempt (unknown fields or status, or a step
                that is not a JSON object).
        """
        data = json.loads(line)
        if not isinstance(data, dict) or data.get("status") not in STATUSES:
            status = data.get("status") if isinstance(data, dict) else None
            raise ValueError(f"unknown attempt status {status!r}")
        if any(str(name).startswith("_") for name in data):
            raise ValueError("not an Attempt record: private fields in the line")
        try:
            steps = [StepRecord.from_dict(step) for step in data.pop("steps", None) or []]
            return cls(**data, steps=steps)
        except TypeError as exc:
            raise ValueError(f"not an Attempt record: {exc}") from exc


def _raised_at(exc: BaseException) -> str:
    """`` (at file.py:123 in fn)`` for the innermost frame, so a bug report points at it."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f" (at {Path(last.filename).name}:{last.lineno} in {last.name})"
