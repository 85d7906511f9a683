"""Running the app: uvicorn on a bound socket, JSON log lines, graceful shutdown.

The socket is bound before uvicorn starts so that ``--port 0`` works and the first log
line says the real address (a supervisor or a test reads it). SIGTERM and SIGINT stop
accepting, give in-flight steps ``shutdown_grace_s``, then the app's lifespan kills
every sandbox. Log lines are JSON objects on stderr — one event each, with the
session id where there is one — so they can be shipped and queried as they are.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import uvicorn

from vera_env.serve.app import create_app
from vera_env.serve.config import ServeConfig
from vera_env.spec import EnvSpec
from vera_env.tasks import TaskSource

__all__ = ["JsonFormatter", "serve"]

_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "color_message", "websocket"}  # uvicorn's console-only extras


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message and any ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record``."""
        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(), "logger": record.name,
            "message": record.getMessage()}
        line.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def _configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    for name in ("vera_env", "uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level.upper())
        logger.propagate = False


def serve(spec: EnvSpec | None = None, config: ServeConfig | None = None, *,
          splits: Mapping[str, str | Path | TaskSource] | None = None) -> None:
    """Serve ``spec`` until SIGTERM or SIGINT (blocking).

    Args:
        spec: The environment of every session (default: builtin tasks).
        config: Service settings.
        splits: Extra task splits (``validation``, ``test``).

    Raises:
        TaskFileError: A task source is broken.
        OSError: The address cannot be bound.
    """
    config = config or ServeConfig()
    _configure_logging(config.log_level)
    # ors-sdk logs every request at info through structlog; read before it is imported.
    os.environ.setdefault("ORS_USE_STRUCTURED_LOGS", "1")
    os.environ.setdefault("ORS_LOG_LEVEL", "debug" if config.log_level == "debug" else "warning")
    app = create_app(spec, config=config, splits=splits)
    sock = socket.socket(socket.AF_INET6 if ":" in config.host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((config.host, config.port))
    host, port = sock.getsockname()[:2]
    context = app.state.vera
    logging.getLogger("vera_env.serve").info("listening", extra={
        "url": f"http://{host}:{port}", "protocol": config.protocol,
        "version": context.splits.version, "auth": config.token is not None})
    server = uvicorn.Server(uvicorn.Config(
        app, log_config=None, access_log=False, ws="websockets-sansio",
        timeout_graceful_shutdown=math.ceil(config.shutdown_grace_s), timeout_keep_alive=60,
        ws_ping_interval=20.0, ws_ping_timeout=60.0))
    server.run(sockets=[sock])
