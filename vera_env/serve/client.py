"""``VeraRemoteEnv``: a ``gymnasium.Env`` whose episodes run on a ``vera-env serve`` server.

Anything written against the local env — ``gym.make_vec``, ``run_episode``/``run_many``,
training's collection, Ray workers — runs unchanged against remote environments: the
observation is the same text, ``info`` has the same keys with the same values (every
flag travels as an observation field of the OpenEnv wire), and errors are raised as
the same types (``ResetNeeded``, ``UnknownTaskError``, ``ValueError``, ...).

The transport is OpenEnv's wire (one WebSocket per environment) spoken directly by
``vera_env.serve.openenv_socket``, not through ``openenv``'s client: that client's import
loads gradio, and building one env took 18.8 s on a loaded machine; this one
imports ``websockets`` only (the ``serve`` extra), so a trainer's fresh worker has its env
in well under a second. The server side, and the conformance tests that drive it with
OpenEnv's own client, still use the ``openenv`` package. (No httpx either: the
one-HTTP-client rule of ``vera_env.llm`` holds.)

Two things cannot look local, and are explicit instead:

* An unscorable step comes over the wire with reward ``null``. Gymnasium's reward is a
  float, so it is ``nan`` here — loud in any sum, never a silent 0 — and
  ``info["unscorable"]`` is True, as locally.
* A server that goes away (killed, restarted, network gone) raises
  ``RemoteEnvError``, a ``SandboxError``: the rollout lifecycle records that episode as
  ``sandbox`` (unscorable, excluded), never as the model's failure. The next ``reset``
  reconnects.
"""

from __future__ import annotations

import math
import os
from typing import Any

import gymnasium as gym
from websockets.exceptions import WebSocketException

from vera_env import info as keys
from vera_env.errors import (
    RemoteEnvError,
    ResetNeeded,
    SandboxError,
    TaskFileError,
    UnknownTaskError,
)
from vera_env.observation.spaces import FreeText
from vera_env.serve.openenv_socket import ErrorFrame, OpenEnvSocket

__all__ = ["TOKEN_ENV_VAR", "RemoteEnvError", "VeraRemoteEnv"]

TOKEN_ENV_VAR = "VERA_SERVE_TOKEN"
_TYPED_MESSAGE_SEP = ": "  # the server names the exception's type: "ResetNeeded: call reset"
_TYPES: dict[str, type[Exception]] = {
    "ResetNeeded": ResetNeeded, "UnknownTaskError": UnknownTaskError,
    "SandboxError": SandboxError, "ValueError": ValueError, "IndexError": IndexError,
    "TypeError": TypeError, "KeyError": KeyError,
}


class VeraRemoteEnv(gym.Env[str, str]):
    """The Vera environment served by ``vera-env serve --protocol openenv``.

    Args:
        base_url: The server, e.g. ``http://127.0.0.1:8000``.
        token: Bearer token (default: ``$VERA_SERVE_TOKEN``, if set).
        message_timeout_s: Longest wait for one reply. A step runs commands and checks
            (60 s + 30 s by default, plus strength tests), so keep it above the worst
            step (``EnvSpec().step_bound_s()``, 1023 s with the default limits).
        connect_timeout_s: Longest wait to open the WebSocket.
        max_observation_chars: Size of the observation space (as the local env's).
        max_action_chars: Size of the action space (as the local env's).
        render_mode: ``"ansi"`` (``render`` returns the observation) or None.

    Example (needs a running server, so not a doctest)::

        import gymnasium as gym
        from vera_env.serve import VeraRemoteEnv

        envs = gym.vector.AsyncVectorEnv(
            [lambda: VeraRemoteEnv("http://10.0.0.5:8000")] * 16)
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(self, base_url: str, *, token: str | None = None,
                 message_timeout_s: float = 1200.0, connect_timeout_s: float = 30.0,
                 max_observation_chars: int = 100_000, max_action_chars: int = 50_000,
                 render_mode: str | None = None) -> None:
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        token = token if token is not None else os.environ.get(TOKEN_ENV_VAR)
        self.base_url = base_url
        self.render_mode = render_mode
        self.observation_space = FreeText(max_observation_chars)
        self.action_space = FreeText(max_action_chars)
        headers = {"Authorization": f"Bearer {token}"} if token else None
        # Nothing is opened here: the socket (a server session) opens on the first reset.
        self._socket = OpenEnvSocket(base_url, headers=headers, connect_timeout_s=connect_timeout_s,
                                     message_timeout_s=message_timeout_s)
        self._last_obs = ""
        self._running = False

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode: ``options`` may name ``task_id``, or ``split`` and ``index``.

        Raises:
            ValueError: Unknown option keys.
            UnknownTaskError: The server has no such task.
            RemoteEnvError: The server is busy or unreachable.
        """
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = set(options) - {"task_id", "split", "index"}
        if unknown:
            raise ValueError(f"unknown reset options {sorted(unknown)}; expected 'task_id', "
                             "or 'split' and 'index'")
        sent = {k: v for k, v in options.items() if v is not None}
        if seed is not None:
            sent["seed"] = seed
        self._running = False
        fields = self._call({"type": "reset", "data": sent})["observation"]
        self._running = True
        return self._unpack(fields)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Send one raw turn; the reward is ``nan`` when the step is unscorable.

        Raises:
            TypeError: ``action`` is not a string.
            ResetNeeded: No episode is running on the server.
            RemoteEnvError: The server went away or expired the session.
        """
        if not isinstance(action, str):
            raise TypeError(f"action must be str (the model's turn), got {type(action).__name__}")
        try:
            result = self._call({"type": "step", "data": {"text": action}})
        except ResetNeeded as exc:
            if not self._running:
                raise
            # The socket reconnects after the server closed it, and a new socket is a
            # new session: the episode this env was playing is gone.
            self._running = False
            raise RemoteEnvError(f"the session at {self.base_url} was lost mid-episode: the "
                                 "server closed it (idle longer than its --idle-timeout-s, a "
                                 "restart, or a dropped connection); reset to start "
                                 "again") from exc
        fields = result["observation"]
        obs, info = self._unpack(fields)
        reward = math.nan if result.get("reward") is None else float(result["reward"])
        self._running = not result.get("done", False)
        return obs, reward, bool(fields["terminated"]), bool(fields["truncated"]), info

    def render(self) -> str | None:
        """``ansi``: the last observation."""
        return self._last_obs if self.render_mode == "ansi" else None

    def close(self) -> None:
        """Close the session (the server kills its sandbox). Idempotent."""
        try:
            self._socket.close()
        except Exception:  # noqa: BLE001 - a dead server has nothing left to close
            pass
        super().close()

    # ----- internals -----

    def _unpack(self, fields: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        missing = [k for k in (*keys.INFO_KEYS, "text") if k not in fields]
        if missing:
            raise RemoteEnvError(f"{self.base_url} is not a vera_env server: its observation "
                                 f"lacks {missing}", code="PROTOCOL")
        self._last_obs = fields["text"]
        return fields["text"], {k: fields[k] for k in keys.INFO_KEYS}

    def _call(self, message: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._socket.request(message)
        except ErrorFrame as exc:
            raise _translate(exc.message, exc.code) from exc
        except (ConnectionError, OSError, TimeoutError, WebSocketException) as exc:
            self._running = False
            raise RemoteEnvError(f"the environment server at {self.base_url} went away or "
                                 f"closed the session: {type(exc).__name__}: {exc}") from exc


def _translate(message: str, code: str) -> Exception:
    """The local exception for an error frame.

    The server prefixes the message with the exception's type (``"ResetNeeded: call
    reset"``, ``openenv_app._typed_errors``); a frame from OpenEnv itself ("Server at
    capacity: ...") names none, and so becomes a ``RemoteEnvError`` with its code.
    """
    kind, sep, rest = message.partition(_TYPED_MESSAGE_SEP)
    if sep and kind in _TYPES:
        return _TYPES[kind](rest)
    if sep and kind == "TaskFileError":
        return TaskFileError("<server>", "<task>", rest)
    return RemoteEnvError(message, code=code)
