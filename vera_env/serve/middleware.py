"""ASGI middleware shared by both protocols: the bearer token, ``/metrics``, idle sockets.

Written as plain ASGI (no ``BaseHTTPMiddleware``) so WebSocket connections pass through
the same checks as HTTP requests and nothing is buffered.

Idle WebSockets. OpenEnv's server exempts a session whose WebSocket is still attached
from its idle reaper, so a trainer that hangs with its connection open (or leaks the
client object, whose keepalive pings go on) would hold a slot forever. ``IdleSockets``
closes such a connection with code 4000 and a reason the client can show, once no
request has been pending for ``timeout_s``; the protocol then destroys the session
as on any disconnect.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vera_env.serve.metrics import CONTENT_TYPE, ServeMetrics

__all__ = ["IDLE_CLOSE_CODE", "BearerAuth", "IdleSockets", "MetricsRoute", "send_json"]

IDLE_CLOSE_CODE = 4000
_OPEN_PATHS = frozenset({"/health"})


class BearerAuth:
    """Require ``Authorization: Bearer <token>`` (or ``X-API-Key: <token>``, which ORS
    clients send) on every request but ``/health``.

    Args:
        app: The wrapped app.
        token: The secret; compared in constant time.
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ValueError("an empty bearer token would let anyone in; pass None instead")
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] in _OPEN_PATHS \
                or self._allowed(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008,
                        "reason": "missing or wrong bearer token"})
            return
        await send_json(send, 401, {"detail": "missing or wrong bearer token: send "
                                              "'Authorization: Bearer <token>'"},
                        [(b"www-authenticate", b"Bearer")])

    def _allowed(self, scope: Scope) -> bool:
        headers = dict(scope.get("headers", []))
        bearer = headers.get(b"authorization", b"")
        offered = bearer[7:].strip() if bearer[:7].lower() == b"bearer " else \
            headers.get(b"x-api-key", b"").strip()
        return bool(offered) and hmac.compare_digest(offered, self._token)


class MetricsRoute:
    """Answer ``GET /metrics`` with the Prometheus text of ``metrics``, before any
    protocol routing (ORS redirects unknown top-level paths to its default env)."""

    def __init__(self, app: ASGIApp, metrics: ServeMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/metrics":
            await self.app(scope, receive, send)
            return
        body = self.metrics.render()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", CONTENT_TYPE.encode()),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class IdleSockets:
    """Close WebSocket connections with no pending request for ``timeout_s``.

    Args:
        app: The wrapped app.
        timeout_s: Idle time before the close.
        clock: Monotonic time source.
    """

    def __init__(self, app: ASGIApp, timeout_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.app = app
        self.timeout_s = timeout_s
        self._clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        conn = _Connection(self._clock)
        watchdog = asyncio.create_task(self._watch(conn, send))
        try:
            await self.app(scope, conn.wrap_receive(receive), conn.wrap_send(send))
        finally:
            watchdog.cancel()

    async def _watch(self, conn: _Connection, send: Send) -> None:
        poll_s = min(self.timeout_s / 4, 5.0)
        while True:
            await asyncio.sleep(poll_s)
            if conn.accepted and not conn.pending and \
                    self._clock() - conn.last_active > self.timeout_s:
                conn.expire()
                await send({"type": "websocket.close", "code": IDLE_CLOSE_CODE,
                            "reason": f"session expired after {self.timeout_s:g} s idle"})
                return


class _Connection:
    """One WebSocket's activity: requests received and not yet answered."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.accepted = False
        self.pending = 0
        self.last_active = clock()
        self._expired = asyncio.Event()

    def expire(self) -> None:
        self._expired.set()

    def wrap_receive(self, receive: Receive) -> Receive:
        async def wrapped() -> Message:
            get = asyncio.ensure_future(receive())
            stop = asyncio.ensure_future(self._expired.wait())
            done, _ = await asyncio.wait({get, stop}, return_when=asyncio.FIRST_COMPLETED)
            if get not in done:
                get.cancel()
                return {"type": "websocket.disconnect", "code": IDLE_CLOSE_CODE}
            stop.cancel()
            message = get.result()
            if message["type"] == "websocket.receive":
                self.pending += 1
                self.last_active = self._clock()
            return message
        return wrapped

    def wrap_send(self, send: Send) -> Send:
        async def wrapped(message: Message) -> None:
            kind = message["type"]
            if kind == "websocket.accept":
                self.accepted = True
            elif kind == "websocket.send":
                self.pending = max(0, self.pending - 1)
                self.last_active = self._clock()
            if self._expired.is_set() and kind in ("websocket.send", "websocket.close"):
                return  # the watchdog already closed the connection
            await send(message)
        return wrapped


async def send_json(send: Send, status: int, body: dict[str, Any],
                    headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """Send a whole JSON response."""
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(data)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": data})
