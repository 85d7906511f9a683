"""The ASGI app of ``vera-env serve``: a protocol's app plus what makes it a service.

``create_app`` returns a FastAPI app you can run with any ASGI server or mount in your
own; ``vera-env serve`` runs it with uvicorn. Around the protocol's own app it adds:

* at start, ``reap_orphans``: the workspaces a server killed with SIGKILL left behind
  are removed (its sandbox processes died with it: bwrap runs with
  ``--die-with-parent``), so a crash loop cannot fill the disk;
* an idle reaper that expires sessions untouched for ``idle_timeout_s``;
* at shutdown, every session is closed and every sandbox killed, mid-step or not;
* ``/metrics`` (Prometheus text) and the optional bearer token.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI

from vera_env.sandbox.reaper import reap_orphans
from vera_env.serve.config import ServeConfig
from vera_env.serve.context import ServeContext, build_context
from vera_env.serve.middleware import BearerAuth, IdleSockets, MetricsRoute
from vera_env.spec import EnvSpec
from vera_env.tasks import TaskSource

if TYPE_CHECKING:
    from vera_env.verification.grading import Judge

__all__ = ["create_app"]

log = logging.getLogger("vera_env.serve")
_REAP_EVERY_S = 30.0


def create_app(spec: EnvSpec | None = None, *, config: ServeConfig | None = None,
               splits: Mapping[str, str | Path | TaskSource] | None = None,
               judge: Judge | None = None) -> FastAPI:
    """An ASGI app serving ``spec`` over ``config.protocol``.

    Args:
        spec: The environment each session gets (default: ``EnvSpec()``, builtin tasks).
            ``spec.tasks`` is the ``train`` split.
        config: Service settings (default: ``ServeConfig()``, OpenEnv).
        splits: ``validation`` / ``test`` (or ``train``) task sources.
        judge: Grades ``llm`` tasks; without one their answers are unscorable.

    Returns:
        The app; ``app.state.vera`` is its ``ServeContext``.

    Raises:
        TaskFileError: A task source is broken.

    Example:
        >>> from vera_env.serve import ServeConfig, create_app
        >>> from vera_env.spec import EnvSpec
        >>> app = create_app(EnvSpec(max_steps=20), config=ServeConfig(protocol="ors"))
        >>> app.state.vera.splits.names()
        ['train']
    """
    config = config or ServeConfig()
    context = build_context(spec or EnvSpec(), config, splits, judge)
    if config.protocol == "openenv":
        from vera_env.serve.openenv_app import openenv_app  # noqa: PLC0415 - optional extra

        app = openenv_app(context)
        # Later than the registry's expiry, so the sandbox is closed (and counted as
        # idle) before the socket is.
        app.add_middleware(IdleSockets,
                           timeout_s=config.idle_timeout_s + _poll_s(config) + 1.0)
    else:
        from vera_env.serve.ors_app import ors_app  # noqa: PLC0415 - optional extra

        app = ors_app(context)
    app.add_middleware(MetricsRoute, metrics=context.metrics)
    if config.token is not None:
        app.add_middleware(BearerAuth, token=config.token.get_secret_value())
    _chain_lifespan(app, context)
    app.state.vera = context
    return app


def _chain_lifespan(app: FastAPI, context: ServeContext) -> None:
    """Run the service's start and stop around the protocol app's own lifespan."""
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(asgi_app: Any) -> AsyncIterator[Any]:
        removed = await asyncio.to_thread(reap_orphans)
        log.info("server starting", extra={
            "protocol": context.config.protocol, "version": context.splits.version,
            "splits": context.splits.names(), "max_sessions": context.config.max_sessions,
            "reaped": [str(p) for p in removed]})
        reaper = asyncio.create_task(_expire_idle(context))
        try:
            async with inner(asgi_app) as state:
                yield state
        finally:
            reaper.cancel()
            closed = await asyncio.to_thread(context.registry.kill_all)
            log.info("server stopped", extra={"sessions_closed": closed})

    app.router.lifespan_context = lifespan


def _poll_s(config: ServeConfig) -> float:
    return min(config.idle_timeout_s / 4, _REAP_EVERY_S)


async def _expire_idle(context: ServeContext) -> None:
    while True:
        await asyncio.sleep(_poll_s(context.config))
        try:
            expired = await asyncio.to_thread(context.registry.expire_idle)
        except Exception:
            log.exception("idle expiry failed; will retry")
            continue
        if expired:
            log.info("sessions expired", extra={"sessions": expired})
