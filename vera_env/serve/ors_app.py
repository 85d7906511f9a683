"""The environment over ORS, the Open Reward Standard: the ``ors-sdk`` server, Vera tools.

``ors.Server`` provides the wire (HTTP + server-sent events): splits, tasks by index,
sessions created from ``(split, index)`` or a task spec, tools called by name, a ping
keepalive and its own reaper for sessions whose client stopped pinging. One session is
one episode: ``/create`` stages the workspace and resets, ``prompt`` is the first
observation, and each tool call is one turn.

Tools: ``turn{text}`` takes the model's raw turn, exactly as the OpenEnv action does;
``shell{command}`` and ``final_answer{answer}`` write the same wire text for models
trained on function calling. ``reward`` is set only when the episode is ``finished``
and is the episode's return (the sum of its step rewards) — ``null`` with
``metadata.unscorable`` when an infrastructure fault made it unscorable, never 0.
Every flag of the step is in ``metadata``.

Task lookups answer with ``env_name`` beside the task(s), as the ``openreward`` client
requires (``ors-sdk`` 0.1's ``/task`` and ``/task_range`` leave it out, and TRL's ORS
integration, ``trl.experimental.openreward``, then failed with ``KeyError: 'env_name'``
on its first ``get_task``): ``_add_env_name_routes`` serves those two paths first.

Every start gets a fresh shutdown event for the SDK's server-sent events. sse-starlette
before 3 (``openreward``, TRL's ORS client, pins 2.3.6) keeps one process-wide
``asyncio.Event`` that binds to the first event loop waiting on it; a second server in the
same process (the tests, a notebook, an app mounted twice) then failed every stream's exit
watch with "bound to a different event loop", and the client's retry ran a tool call a
second time: a turn played twice. ``_fresh_sse_exit_event`` clears it at startup.

The cap. ORS accepts ``/create`` before the environment exists, so ``CreateGate``
reserves the session's place at ``/create`` and answers 503 "busy" when the server is
full; the environment claims the reservation by its session id, which reaches it
through a context variable (the SDK creates the environment in a task spawned by the
``/create`` handler, and tasks inherit the context).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

from fastapi import FastAPI, HTTPException
from ors import Environment, Server, Split, TextBlock, ToolOutput, tool
from ors.types import GetTask, GetTaskRange
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette.sse import AppStatus
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vera_env.serve.context import ENV_NAME, ServeContext
from vera_env.serve.middleware import send_json
from vera_env.serve.registry import ServerBusy, SessionRegistry
from vera_env.serve.session import Turn, VeraSession
from vera_env.wire.answers import ANSWER_PREFIX

__all__ = ["AnswerInput", "CreateGate", "ShellInput", "TurnInput", "VeraEnvironment",
           "ors_app", "ors_environment"]

_SESSION_KEY: contextvars.ContextVar[str] = contextvars.ContextVar("vera_ors_sid", default="")


class TurnInput(BaseModel):
    """The model's raw turn."""

    model_config = ConfigDict(extra="forbid")
    text: str = Field(description="A <command>...</command>, a NODE line with CHECK lines, "
                                  "and/or FINAL ANSWER: <answer>")


class ShellInput(BaseModel):
    """One shell command to run in the workspace."""

    model_config = ConfigDict(extra="forbid")
    command: str = Field(description="A shell command; runs in the task's workspace")


class AnswerInput(BaseModel):
    """The final answer."""

    model_config = ConfigDict(extra="forbid")
    answer: str = Field(description="The answer to the task's question; ends the episode")


class VeraEnvironment(Environment):
    """One episode of a Vera task; ``ors_environment`` binds it to an app's context."""

    context: ClassVar[ServeContext]

    def __init__(self, task_spec: Any = None, secrets: Any = None) -> None:
        super().__init__(task_spec or {}, secrets or {})
        self._key = _SESSION_KEY.get()
        self._session: VeraSession | None = None
        self._first: Turn | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vera-ors")

    async def setup(self) -> None:
        """Open the session (claiming its reservation) and reset on the task."""
        registry = self.context.registry
        try:
            task_id, seed = _task_of(self.task_spec, self.context)
            self._session = registry.open(self._key or None)
        except Exception:
            registry.unreserve(self._key)
            raise
        self._first = await self._run(self._session.reset, task_id=task_id, seed=seed)

    async def teardown(self) -> None:
        """Close the session: its sandbox is killed."""
        if self._session is not None:
            await asyncio.to_thread(self.context.registry.close, self._session, "client")
        self._thread.shutdown(wait=False)

    def get_prompt(self) -> list[TextBlock]:
        """The first observation."""
        if self._first is None:
            raise RuntimeError("the session's environment is not set up")
        return [TextBlock(text=self._first.text)]

    @classmethod
    def list_splits(cls) -> list[Split]:  # type: ignore[override]
        """The served splits."""
        return [Split(name=name, type=name) for name in cls.context.splits.names()]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict[str, Any]]:
        """Every task spec of ``split`` (never an answer)."""
        return cls.context.splits.task_specs(split)

    @classmethod
    async def num_tasks(cls, split: str) -> int:
        """Tasks in ``split``."""
        return cls.context.splits.num_tasks(split)

    @classmethod
    async def get_task(cls, split: str, index: int) -> dict[str, Any]:
        """One task spec (``IndexError`` out of range: the SDK answers 400)."""
        return cls.context.splits.task_spec(split, index)

    @tool
    async def turn(self, params: TurnInput) -> ToolOutput:
        """Take one turn: the raw text of your reply (a <command>, a NODE with CHECK
        lines, and/or FINAL ANSWER: ...)."""
        return await self._play(params.text)

    @tool
    async def shell(self, params: ShellInput) -> ToolOutput:
        """Run one shell command in the task's workspace and see its output."""
        return await self._play(f"<command>{params.command}</command>")

    @tool
    async def final_answer(self, params: AnswerInput) -> ToolOutput:
        """Give the final answer to the task's question."""
        return await self._play(f"{ANSWER_PREFIX} {params.answer}")

    async def _play(self, text: str) -> ToolOutput:
        if self._session is None:
            raise RuntimeError("the session's environment is not set up")
        return _tool_output(await self._run(self._session.step, text))

    async def _run(self, fn: Any, *args: Any, **kwargs: Any) -> Turn:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, functools.partial(fn, *args, **kwargs))


def ors_environment(context: ServeContext) -> type[VeraEnvironment]:
    """``VeraEnvironment`` bound to ``context``, named ``vera`` (ORS lists tasks through
    classmethods, so the binding is a subclass per app)."""
    return type(ENV_NAME, (VeraEnvironment,), {"context": context,
                                               "__module__": __name__})


def _task_of(spec: Any, context: ServeContext) -> tuple[str | None, int | None]:
    """``(task_id, seed)`` from a task spec: ``{"task_id"}`` or ``{"split", "index"}``."""
    if not isinstance(spec, dict):
        raise ValueError(f"a task spec is a JSON object, got {type(spec).__name__}")
    unknown = set(spec) - {"task_id", "split", "index", "seed"}
    if unknown:
        raise ValueError(f"unknown task spec keys {sorted(unknown)}; expected task_id or "
                         "split and index, and optionally seed")
    seed = spec.get("seed")
    if spec.get("split") is not None and spec.get("index") is not None:
        listed = context.splits.task_id(spec["split"], int(spec["index"]))
        if spec.get("task_id") not in (None, listed):
            raise ValueError(f"task_id {spec['task_id']!r} is not task {spec['index']} of "
                             f"split {spec['split']!r} ({listed!r})")
        return listed, seed
    return spec.get("task_id"), seed


def _tool_output(turn: Turn) -> ToolOutput:
    fields = turn.fields()
    text = fields.pop("text")
    metadata = {**fields, "step_reward": turn.reward, "episode_return": turn.episode_return}
    reward = turn.episode_return if turn.done else None
    return ToolOutput(blocks=[TextBlock(text=text)], metadata=metadata, reward=reward,
                      finished=turn.done)


class CreateGate:
    """Reserve a session's place at ``POST /create``; answer 503 "busy" when full."""

    def __init__(self, app: ASGIApp, registry: SessionRegistry) -> None:
        self.app = app
        self.registry = registry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/create" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        key = dict(scope.get("headers", [])).get(b"x-session-id", b"").decode().strip()
        if not key:  # let the SDK answer its own 400
            await self.app(scope, receive, send)
            return
        try:
            self.registry.reserve(key)
        except ServerBusy as exc:
            await send_json(send, 503, {"detail": str(exc)}, [(b"retry-after", b"5")])
            return
        status = 0

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                if status != 200:  # give the place back before the client hears the refusal
                    self.registry.unreserve(key)
            await send(message)

        token = _SESSION_KEY.set(key)
        try:
            await self.app(scope, receive, watched)
        finally:
            _SESSION_KEY.reset(token)
            if status != 200:
                self.registry.unreserve(key)


def ors_app(context: ServeContext) -> FastAPI:
    """A FastAPI app serving ``context`` over ORS (the SDK's app, with the cap added)."""
    env_cls = ors_environment(context)
    app = Server([env_cls], return_errors="exception").app
    _add_env_name_routes(app, context)
    _fresh_sse_exit_event(app)
    app.add_middleware(CreateGate, registry=context.registry)
    return app


def _fresh_sse_exit_event(app: FastAPI) -> None:
    """Clear sse-starlette's process-wide shutdown event when the app starts (see the
    module docstring); a version without one is left alone."""
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(asgi_app: Any) -> AsyncIterator[Any]:
        if getattr(AppStatus, "should_exit_event", None) is not None:
            AppStatus.should_exit_event = None  # made again, lazily, in this loop
        async with inner(asgi_app) as state:
            yield state

    app.router.lifespan_context = lifespan


def _add_env_name_routes(app: FastAPI, context: ServeContext) -> None:
    """``/{env}/task`` and ``/{env}/task_range`` with ``env_name`` in the answer, matched
    before the SDK's own routes for the same paths (same checks, same errors)."""
    splits = context.splits

    def known(env_name: str, split: str) -> None:
        if env_name.lower() != ENV_NAME:
            raise HTTPException(404, f"unknown environment {env_name!r}")
        if split not in splits.names():
            raise HTTPException(400, "Invalid split")

    async def get_task(env_name: str, body: GetTask) -> dict[str, Any]:
        known(env_name, body.split)
        try:
            task = splits.task_spec(body.split, body.index)
        except IndexError as exc:
            raise HTTPException(400, "Invalid index") from exc
        return {"task": task, "env_name": env_name}

    async def get_task_range(env_name: str, body: GetTaskRange) -> dict[str, Any]:
        known(env_name, body.split)
        specs = splits.task_specs(body.split)
        return {"tasks": specs[slice(body.start, body.stop)], "env_name": env_name}

    before = len(app.router.routes)
    app.add_api_route("/{env_name}/task", get_task, methods=["POST"])
    app.add_api_route("/{env_name}/task_range", get_task_range, methods=["POST"])
    added = app.router.routes[before:]
    del app.router.routes[before:]
    app.router.routes[:0] = added
