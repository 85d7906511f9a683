"""One OpenEnv session over a WebSocket, spoken directly with ``websockets``' sync client.

Why not OpenEnv's own client: importing ``openenv.core.generic_client`` imports
``openenv.core``, whose ``__init__`` loads the server package and with it gradio's web
interface — 4.5 s of imports on an idle core, 18.8 s measured on a loaded machine (issue
21), to open a socket. A trainer builds one ``VeraRemoteEnv`` per worker, often in fresh
processes. The wire is small and is copied from ``openenv`` 0.10's ``EnvClient`` (the
server side, ``HTTPEnvServer``'s ``/ws`` route, is still the package's own):

* ``GET <base>/ws`` upgraded to a WebSocket, one session per socket; headers (the
  bearer token) travel on the upgrade request;
* requests are JSON text frames ``{"type": "reset", "data": {...reset kwargs}}``,
  ``{"type": "step", "data": {...action fields}}``, ``{"type": "state"}``, and
  ``{"type": "close"}`` (no reply: the server ends the session);
* each request gets exactly one reply, ``{"type": "observation", "data":
  {"observation", "reward", "done"}}`` or ``{"type": "error", "data": {"message",
  "code"}}``; a refused session (``CAPACITY_REACHED``) sends its error frame and closes.

Kept from OpenEnv's client because each one answers a failure seen in its history:
keepalive pings (20 s), a reply that times out drops the socket (the server may still
write that reply, and reading it as the answer to the next request would shift every
reply by one), a socket the far end closed is replaced on the next request (a new
socket is a new session), and the error frame queued before a refusal's close is read
rather than lost to the failed send.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from websockets.exceptions import ConnectionClosed
from websockets.protocol import State
from websockets.sync.client import ClientConnection, connect

from vera_env.errors import ErrorFrame

__all__ = ["ErrorFrame", "OpenEnvSocket", "ws_url"]

_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
_MAX_MESSAGE_BYTES = 100 * 1024 * 1024  # OpenEnv's client default (observations can be large)
_PING_INTERVAL_S = 20.0
_PING_TIMEOUT_S = 20.0


def ws_url(base_url: str) -> str:
    """The session endpoint for a server's base URL (``http://h:p`` → ``ws://h:p/ws``).

    Raises:
        ValueError: The URL's scheme is not http, https, ws or wss.
    """
    url = base_url.rstrip("/")
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "http", url
    mapped = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(scheme.lower())
    if mapped is None:
        raise ValueError(f"base_url must be http(s):// or ws(s)://, got {base_url!r}")
    return f"{mapped}://{rest}/ws"


@dataclass(frozen=True, slots=True)
class _Options:
    url: str
    headers: dict[str, str] | None
    connect_timeout_s: float
    message_timeout_s: float


class OpenEnvSocket:
    """A lazily opened WebSocket session: ``request`` sends one frame and reads its reply.

    Not thread-safe (one request at a time), as a ``gymnasium.Env`` is used.

    Args:
        base_url: The server, e.g. ``http://127.0.0.1:8000``.
        headers: Sent on the upgrade request (``Authorization``).
        connect_timeout_s: Longest wait to open the socket.
        message_timeout_s: Longest wait for one reply.
    """

    def __init__(self, base_url: str, *, headers: dict[str, str] | None,
                 connect_timeout_s: float, message_timeout_s: float) -> None:
        self._opts = _Options(ws_url(base_url), headers, connect_timeout_s, message_timeout_s)
        self._ws: ClientConnection | None = None
        # websockets 17.1+ wants its connection used as a context manager; the socket
        # outlives any one call, so this stack holds it open until close or drop.
        self._stack = contextlib.ExitStack()

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send ``message``; return its reply's ``data``.

        Raises:
            ErrorFrame: The server replied with an error frame.
            websockets.exceptions.WebSocketException, OSError, TimeoutError: The socket
                could not be opened, or was lost or timed out before the reply.
        """
        ws = self._connected()
        try:
            ws.send(json.dumps(message))
        except ConnectionClosed:
            pass  # a refusal's error frame may be queued before the close: recv reads it
        try:
            raw = ws.recv(timeout=self._opts.message_timeout_s)
        except TimeoutError:
            self._drop()  # its late reply must never be read as the next request's
            raise
        reply: dict[str, Any] = json.loads(raw)
        data: dict[str, Any] = reply.get("data") or {}
        if reply.get("type") == "error":
            raise ErrorFrame(str(data.get("message", "Unknown error")), str(data.get("code", "UNKNOWN")))
        return data

    def close(self) -> None:
        """End the session (``{"type": "close"}``, then the close handshake). Idempotent."""
        ws, self._ws = self._ws, None
        if ws is None:
            return
        try:
            ws.send(json.dumps({"type": "close"}))
        except ConnectionClosed:
            pass  # the server already ended it
        self._stack.close()

    def _connected(self) -> ClientConnection:
        if self._ws is not None and self._ws.state in (State.CLOSING, State.CLOSED):
            self._drop()  # closed by the far end: the next request opens a new session
        if self._ws is None:
            host = urlsplit(self._opts.url).hostname or ""
            opened = connect(self._opts.url, open_timeout=self._opts.connect_timeout_s,
                             max_size=_MAX_MESSAGE_BYTES, ping_interval=_PING_INTERVAL_S,
                             ping_timeout=_PING_TIMEOUT_S, additional_headers=self._opts.headers,
                             proxy=None if host in _LOCAL_HOSTS else True)
            self._ws = self._stack.enter_context(opened)
        return self._ws

    def _drop(self) -> None:
        self._ws = None
        self._stack.close()
