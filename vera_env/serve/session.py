"""One served episode stream: an environment, its step results as wire fields, its clock.

Both protocols serve the same thing — reset, then raw turns, each answered by the
observation and every flag a trainer needs — so this module turns a Gymnasium step into
``Turn``, a protocol-neutral record, once. Why every flag is a field: OpenEnv's
``metadata`` is dropped by older clients and by TRL's wrappers, and OpenEnv has no
``truncated``; a trainer that cannot see ``unscorable`` on the wire reads an
infrastructure fault as a reward of 0, which corrupts GRPO advantages (verifiers'
legacy code scored any exception in a reward function as 0.0: a broken grader looked
like a failing model). So an unscorable step's ``reward`` is ``None`` and the episode's
return is ``None`` too, never 0.

A session is driven from one thread at a time (the protocols run each session's calls
in that session's own worker thread); ``expire`` and ``kill`` may come from others.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from vera_env import info as keys
from vera_env.errors import ResetNeeded, SessionClosed
from vera_env.records import StepRecord

__all__ = ["SessionClosed", "Turn", "VeraSession"]

StepHook = Callable[[float, "Turn"], None]
"""Called after every step with its duration (seconds) and result: the metrics."""


@dataclass(frozen=True, slots=True)
class Turn:
    """What one reset or step produced, in wire-ready form.

    ``reward`` is None after a reset and on an unscorable step; ``episode_return`` is the
    sum of the episode's rewards so far, None once the episode is unscorable.
    """

    text: str
    reward: float | None
    terminated: bool
    truncated: bool
    info: dict[str, Any]
    episode_return: float | None

    @property
    def done(self) -> bool:
        """The episode ended (terminated or truncated)."""
        return self.terminated or self.truncated

    @property
    def unscorable(self) -> bool:
        """An infrastructure fault made this episode unscorable."""
        return bool(self.info[keys.UNSCORABLE])

    def record(self) -> StepRecord:
        """The step as the one typed record (``vera_env.records``); after a reset, an
        empty step (``reward`` 0)."""
        return StepRecord.from_info(self.info, self.reward or 0.0, self.terminated,
                                    self.truncated)

    def fields(self) -> dict[str, Any]:
        """The observation fields of the wire: the text, every ``info`` key, and the flags."""
        return {"text": self.text, **{k: self.info.get(k) for k in keys.INFO_KEYS},
                "terminated": self.terminated, "truncated": self.truncated}


class VeraSession:
    """One environment behind a protocol session.

    Args:
        make_env: Builds the environment (called once, on the first reset, in the
            calling thread: bwrap ties a sandbox to the thread that spawned it).
        throttle: Called before every reset (a workspace is staged); may block to
            enforce the sandbox creation rate.
        on_step: Called after every step (metrics).
    """

    def __init__(self, make_env: Callable[[], gym.Env], *,
                 throttle: Callable[[], None] = lambda: None,
                 on_step: StepHook | None = None) -> None:
        self.id = uuid.uuid4().hex[:12]
        self._make_env = make_env
        self._throttle = throttle
        self._on_step = on_step
        self._env: gym.Env | None = None
        self._lock = threading.Lock()
        self._closed_why = ""
        self._return: float | None = 0.0
        self.last_active = time.monotonic()
        self.steps = 0
        self.task_id = ""
        self.done = False

    # ----- the episode -----

    def reset(self, *, task_id: str | None = None, seed: int | None = None) -> Turn:
        """Start an episode on ``task_id`` (or a task drawn with ``seed``).

        Raises:
            SessionClosed: The session was closed.
            UnknownTaskError, SandboxError: From the environment's reset.
        """
        with self._active():
            if self._env is None:
                self._env = self._make_env()
            self._throttle()
            options = {"task_id": task_id} if task_id else None
            obs, info = self._env.reset(seed=seed, options=options)
            self._return, self.steps, self.done = 0.0, 0, False
            self.task_id = info[keys.TASK_ID]
            return Turn(obs, None, False, False, info, 0.0)

    def step(self, text: str) -> Turn:
        """Play one raw turn.

        Raises:
            SessionClosed: The session was closed.
            ResetNeeded: No episode is running (never reset, or it ended).
            TypeError: ``text`` is not a string.
        """
        with self._active():
            if self._env is None or self.done:
                raise ResetNeeded("no episode is running in this session; reset first")
            started = time.perf_counter()
            obs, reward, terminated, truncated, info = self._env.step(text)
            unscorable = bool(info[keys.UNSCORABLE])
            step_reward = None if unscorable else float(reward)
            if unscorable or self._return is None:
                self._return = None
            else:
                self._return += float(reward)
            self.steps += 1
            self.done = bool(terminated or truncated)
            turn = Turn(obs, step_reward, bool(terminated), bool(truncated), info,
                        self._return)
        if self._on_step is not None:
            self._on_step(time.perf_counter() - started, turn)
        return turn

    # ----- lifetime -----

    @property
    def closed(self) -> bool:
        """Whether the session was closed."""
        return bool(self._closed_why)

    @property
    def busy(self) -> bool:
        """Whether a call is running now."""
        return self._lock.locked()

    def idle_s(self, now: float | None = None) -> float:
        """Seconds since the last call ended (0 while one is running)."""
        if self.busy:
            return 0.0
        return (time.monotonic() if now is None else now) - self.last_active

    def close(self, why: str = "closed by the client") -> bool:
        """Close after any running call; kills the sandbox. Idempotent.

        Returns:
            Whether this call closed it (False: it was already closed).
        """
        with self._lock:
            return self._shut(why)

    def expire(self, why: str) -> bool:
        """Close only if no call is running (idle expiry never kills a working step).

        Returns:
            Whether the session was closed by this call.
        """
        if not self._lock.acquire(blocking=False):
            return False
        try:
            return self._shut(why)
        finally:
            self._lock.release()

    def kill(self, why: str) -> None:
        """Close now, even mid-step: the sandbox's processes are killed (shutdown)."""
        if not self._lock.acquire(timeout=0.05):
            self._closed_why = self._closed_why or why
            env, self._env = self._env, None
            if env is not None:
                env.close()  # the workspace kills its process tree from any thread
            return
        try:
            self._shut(why)
        finally:
            self._lock.release()

    def _shut(self, why: str) -> bool:
        if self._closed_why:
            return False
        self._closed_why = why
        env, self._env = self._env, None
        if env is not None:
            env.close()
        return True

    @contextlib.contextmanager
    def _active(self) -> Iterator[None]:
        with self._lock:
            if self._closed_why:
                raise SessionClosed(f"session {self.id} is closed: {self._closed_why}")
            try:
                yield
            finally:
                self.last_active = time.monotonic()
