"""``vera-env serve``: the environment behind the field's wire protocols, and its client.

Trainers mostly run on other machines than environments, and the field has settled on
wire protocols for the gap: OpenEnv (WebSocket sessions; prime-rl/verifiers train on
any OpenEnv server whose action is one string, TRL wraps one in a small class) and ORS,
the Open Reward Standard (HTTP + server-sent events; TRL, SkyRL and ROLL consume it).
This package serves a ``vera_env.spec.EnvSpec`` over either, its servers built on the
protocols' own packages (``openenv``, ``ors-sdk``; the ``serve`` extra) rather than on a
copy of their wire formats; the client, ``VeraRemoteEnv``, speaks OpenEnv's WebSocket
messages itself (``openenv_socket``), because importing OpenEnv's client loads gradio
(about 4 s before the first reset); the conformance tests hold both to the package.
It adds what users of environment services report missing:
a session cap that answers "busy", idle expiry, a sandbox creation rate, shutdown that
kills every sandbox, reaping after ``kill -9``, ``/metrics``, a bearer token, and an
unscorable step reported as ``null``, never as 0.

    >>> from vera_env.serve import ServeConfig, create_app   # an ASGI app to mount
    >>> from vera_env.serve import VeraRemoteEnv             # a gymnasium.Env over it

Names are loaded on first use: the client does not import the server's stack, and
``import vera_env.serve`` works without the ``serve`` extra until a server is built.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["RemoteEnvError", "ServeConfig", "VeraRemoteEnv", "create_app", "serve"]

_LAZY = {
    "ServeConfig": "vera_env.serve.config",
    "create_app": "vera_env.serve.app",
    "serve": "vera_env.serve.server",
    "VeraRemoteEnv": "vera_env.serve.client",
    "RemoteEnvError": "vera_env.serve.client",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'vera_env.serve' has no attribute {name!r}")
    try:
        module = importlib.import_module(_LAZY[name])
    except ModuleNotFoundError as exc:  # a plain install said only "No module named 'websockets'"
        missing = (exc.name or "vera_env").split(".")[0]
        if missing == "vera_env":
            raise
        extra = "client" if _LAZY[name] == "vera_env.serve.client" else "serve"
        raise ModuleNotFoundError(
            f"vera_env.serve.{name} needs {missing!r}, which the {extra!r} extra installs "
            f"(pip install 'vera-env[{extra}]', or from a clone: make install EXTRAS={extra})",
            name=missing) from exc
    return getattr(module, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
