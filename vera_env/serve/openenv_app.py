"""The environment over OpenEnv: ``openenv``'s own server, a Vera environment behind it.

OpenEnv's ``HTTPEnvServer`` provides the wire: ``/ws`` (one session per WebSocket:
reset / step / state / close), ``/health``, ``/schema``, ``/metadata`` and the task
API, with its own session cap ("Server at capacity", code ``CAPACITY_REACHED``) and a
worker thread per session, so a step never blocks the event loop. It runs in
production mode: the stateless ``/reset`` and ``/step`` HTTP routes build a throwaway
environment per request, which for a sandboxed env is a workspace staged and
destroyed to answer one call.

Action ``{"text": <raw turn>}``. Reset takes ``task_id``, or ``split`` + ``index``,
and ``seed``. Every flag is an observation field (``VeraObservation``): OpenEnv has no
``truncated`` and several clients drop ``metadata``. The step reward is ``null`` when
the step is unscorable — never 0. ``/metadata``'s ``version`` is the splits' hash.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI
from openenv.core.env_server import Action, Environment, HTTPEnvServer, Observation, State
from openenv.core.env_server.types import EnvironmentMetadata, ServerMode
from pydantic import Field

from vera_env.errors import ResetNeeded
from vera_env.serve.context import DESCRIPTION, ENV_NAME, ServeContext
from vera_env.serve.session import Turn, VeraSession

__all__ = ["VeraAction", "VeraObservation", "VeraOpenEnv", "VeraState", "openenv_app"]

_RESET_KEYS = frozenset({"seed", "episode_id", "task_id", "split", "index"})


class VeraAction(Action):
    """One raw model turn."""

    text: str = Field(description="The model's raw turn: a <command>, a NODE with CHECK "
                                  "lines, and/or FINAL ANSWER: ...")


class VeraObservation(Observation):
    """The rendered observation and every flag of the step (the local env's ``info``)."""

    text: str = Field("", description="The observation shown to the model")
    task_id: str = ""
    question: str = ""
    step: int = 0
    steps_left: int = 0
    error: str = Field("", description="Why the turn was rejected; '' if it was not")
    nudge: str = ""
    command_output: str = ""
    node: dict[str, Any] = Field(default_factory=dict)
    checks: list[dict[str, Any]] = Field(default_factory=list)
    answer: str = ""
    answer_forced: bool = False
    answer_phase: str = Field("", description="The phase whose turn released the answer")
    correct: bool | None = None
    grade_detail: str = ""
    reward_parts: dict[str, float | None] = Field(default_factory=dict)
    verification_total: float = 0.0
    unscorable: bool = Field(False, description="An infrastructure fault; reward is null")
    forcing: bool = False
    prefill: str = Field("", description="How the next assistant turn should start")
    gated: int = 0
    terminated: bool = False
    truncated: bool = False


class VeraState(State):
    """The session's episode, as ``state`` reports it."""

    session_id: str = ""
    task_id: str = ""
    done: bool = False


class VeraOpenEnv(Environment[VeraAction, VeraObservation, VeraState]):
    """One OpenEnv session: a ``VeraSession`` opened on the first reset.

    Constructing it is cheap (``/metadata`` and the task API build one per request).
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, context: ServeContext) -> None:
        super().__init__()
        self._ctx = context
        self._session: VeraSession | None = None
        self._episode_id: str | None = None

    def reset(self, seed: int | None = None, episode_id: str | None = None,
              **options: Any) -> VeraObservation:
        """Start an episode: ``task_id``, or ``split`` and ``index``, or a draw with ``seed``.

        Raises:
            ValueError: Unknown options, or ``split`` without ``index``.
            UnknownTaskError, IndexError, SandboxError: As the local env would.
        """
        with _typed_errors():
            task_id = self._task_id(options)
            if self._session is None:
                self._session = self._ctx.registry.open()
            self._episode_id = episode_id
            return _observation(self._session.reset(task_id=task_id, seed=seed))

    def step(self, action: VeraAction, timeout_s: float | None = None,
             **kwargs: Any) -> VeraObservation:
        """Play one raw turn (``timeout_s`` is ignored: the sandbox's limits apply).

        Raises:
            ResetNeeded: No episode is running.
            SessionClosed: The session expired or the server is shutting down.
        """
        with _typed_errors():
            if self._session is None:
                raise ResetNeeded("call reset before step")
            return _observation(self._session.step(action.text))

    def _task_id(self, options: dict[str, Any]) -> str | None:
        unknown = set(options) - _RESET_KEYS
        if unknown:
            raise ValueError(f"unknown reset options {sorted(unknown)}; expected task_id, "
                             "split and index, seed, episode_id")
        task_id = options.get("task_id")
        split, index = options.get("split"), options.get("index")
        if split is None and index is None:
            return task_id
        if task_id or split is None or index is None:
            raise ValueError("reset takes task_id, or split and index together")
        return self._ctx.splits.task_id(split, int(index))

    @property
    def state(self) -> VeraState:
        """The current episode (read on the event loop: no environment call)."""
        session = self._session
        if session is None:
            return VeraState(episode_id=self._episode_id)
        return VeraState(episode_id=self._episode_id, step_count=session.steps,
                         session_id=session.id, task_id=session.task_id, done=session.done)

    def get_metadata(self) -> EnvironmentMetadata:
        """Name, description and the splits' version hash."""
        return EnvironmentMetadata(name=ENV_NAME, description=DESCRIPTION,
                                   version=self._ctx.splits.version, author="vera_env")

    # ----- OpenEnv's task API -----

    def list_splits(self) -> list[str]:
        """The served splits."""
        return self._ctx.splits.names()

    def num_tasks(self, split: str) -> int:
        """Tasks in ``split``."""
        return self._ctx.splits.num_tasks(split)

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        """``{"task_id", "split", "index"}`` of one task (never its answer)."""
        return self._ctx.splits.task_spec(split, index)

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        """Every task spec of ``split``."""
        return self._ctx.splits.task_specs(split)

    def get_task_range(self, split: str, start: int | None = None,
                       stop: int | None = None) -> list[dict[str, Any]]:
        """Task specs in ``range(start, stop)``."""
        return self._ctx.splits.task_specs(split, start, stop)

    def close(self) -> None:
        """Close the session's environment and sandbox (OpenEnv calls this on disconnect)."""
        if self._session is not None:
            self._ctx.registry.close(self._session, "client")


@contextlib.contextmanager
def _typed_errors() -> Iterator[None]:
    """Name the exception's type in its message: OpenEnv sends only ``str(exc)``, and the
    client (``VeraRemoteEnv``) raises the same type the local env would."""
    try:
        yield
    except Exception as exc:
        raise RuntimeError(f"{type(exc).__name__}: {exc}") from exc


def _observation(turn: Turn) -> VeraObservation:
    return VeraObservation(**turn.fields(), done=turn.done, reward=turn.reward)


def openenv_app(context: ServeContext) -> FastAPI:
    """A FastAPI app serving ``context`` over OpenEnv (no lifespan or middleware yet)."""
    app = FastAPI(title="vera_env (OpenEnv)", version=context.splits.version)
    server = HTTPEnvServer(env=functools.partial(VeraOpenEnv, context), action_cls=VeraAction,
                           observation_cls=VeraObservation, state_cls=VeraState,
                           max_concurrent_envs=context.config.max_sessions, env_name=ENV_NAME)
    server.register_routes(app, mode=ServerMode.PRODUCTION)
    return app
