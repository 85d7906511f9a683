"""Play one vera episode through verifiers' real rollout API; print what it recorded.

Run inside a virtualenv that has ``verifiers`` (it cannot share the main test env: its
``mcp==2.0.0`` pin clashes with the serve extra's ``openenv``), with ``vera_env`` on
``PYTHONPATH``. The model is a fake OpenAI-compatible server on 127.0.0.1 that replies
with fixed turns, in order, and records every request's messages, so the caller can
check both the return and the layout the model was shown.

Usage (prints one JSON object on the last line of stdout)::

    python verifiers_episode.py episode REQUEST_JSON   # {"task_id", "turns", "spec"}
    python verifiers_episode.py recipe REQUEST_JSON    # {"turns", "code", "lang", "cwd"}:
                                                       # a docs block, VERA_MODEL_URL set
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Script:
    """The fixed replies, served in order; the requests seen, kept for the caller."""

    def __init__(self, turns: list[str]) -> None:
        self.turns = list(turns)
        self.requests: list[list[dict[str, Any]]] = []
        self.lock = threading.Lock()

    def next(self, messages: list[dict[str, Any]]) -> str:
        with self.lock:
            self.requests.append(messages)
            return self.turns.pop(0) if self.turns else ""


def _handler(script: _Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            text = script.next(body.get("messages", []))
            created, model = int(time.time()), body.get("model", "scripted")
            if body.get("stream"):
                self._stream(text, created, model)
                return
            payload = {"id": "chatcmpl-0", "object": "chat.completion", "created": created,
                       "model": model,
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": text}}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                 "total_tokens": 2}}
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, text: str, created: int, model: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            base = {"id": "chatcmpl-0", "object": "chat.completion.chunk",
                    "created": created, "model": model}
            chunks = [{"index": 0, "delta": {"role": "assistant", "content": text},
                       "finish_reason": None},
                      {"index": 0, "delta": {}, "finish_reason": "stop"}]
            for choice in chunks:
                self.wfile.write(f"data: {json.dumps(base | {'choices': [choice]})}\n\n".encode())
            usage = base | {"choices": [], "usage": {"prompt_tokens": 1,
                                                      "completion_tokens": 1,
                                                      "total_tokens": 2}}
            self.wfile.write(f"data: {json.dumps(usage)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler


@contextmanager
def scripted_endpoint(turns: list[str]) -> Iterator[tuple[str, _Script]]:
    """A fake OpenAI-compatible endpoint on 127.0.0.1 replying with ``turns``."""
    script = _Script(turns)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", script
    finally:
        server.shutdown()
        server.server_close()


async def play(request: dict[str, Any]) -> dict[str, Any]:
    import verifiers.v1 as vf

    from vera_env.integrations.verifiers import load_environment

    env = load_environment(task_ids=[request["task_id"]], **request.get("spec", {}))
    (task,) = list(env.taskset)
    with scripted_endpoint(request["turns"]) as (base_url, script):
        client = vf.EvalClientConfig(base_url=base_url, api_key_var="VERA_SCRIPTED_KEY")
        ctx = vf.ModelContext(model="scripted", client=client)
        async with env.serving():
            episode = await env.run_episode(task, ctx)
    return {
        "ok": episode.ok,
        "episode_errors": [e.message for e in episode.errors],
        "rewards": [t.rewards["vera_return"].value if t.rewards.get("vera_return") else None
                    for t in episode.traces],
        "step_rewards": [t.metrics.get("vera_step_reward") for t in episode.traces],
        "trace_ok": [t.ok for t in episode.traces],
        "trace_errors": [[e.type for e in t.errors] for t in episode.traces],
        "requests": script.requests,
    }


def recipe(request: dict[str, Any]) -> dict[str, Any]:
    """Run a docs block (``lang`` python or bash) as a reader would, in ``cwd``, its
    model the scripted endpoint (``$VERA_MODEL_URL``)."""
    code = request["code"]
    argv = ([sys.executable, "-c", code] if request.get("lang", "python") == "python"
            else ["bash", "-euo", "pipefail", "-c", code])
    with scripted_endpoint(request["turns"]) as (base_url, script):
        env = {**os.environ, "VERA_MODEL_URL": base_url}
        done = subprocess.run(argv, env=env, cwd=request.get("cwd"), capture_output=True,
                              text=True, timeout=240, check=False)
    return {"returncode": done.returncode, "stdout": done.stdout,
            "stderr": done.stderr[-4000:], "requests": script.requests}


def main() -> int:
    mode, path = sys.argv[1:3]
    with open(path, encoding="utf-8") as fh:
        request = json.load(fh)
    result = asyncio.run(play(request)) if mode == "episode" else recipe(request)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
