"""A scripted OpenAI-compatible judge on 127.0.0.1, for rubric-grading tests.

``JudgeServer(reply)`` answers ``POST /v1/chat/completions`` with ``reply(messages)``:
a string becomes the assistant's content; ``("status", 503)`` an HTTP error; ``"garbage"``
a 200 whose body is not a chat completion. Every request's messages are kept in
``requests`` so tests can see what the judge was shown.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["JudgeServer", "answer_block"]

Reply = Callable[[list[dict[str, str]]], Any]


def answer_block(messages: list[dict[str, str]]) -> str:
    """The text between the answer markers of the judge's user message."""
    user = messages[-1]["content"]
    start = user.index("<<<ANSWER ")
    body = user[user.index("\n", start) + 1:]
    return body[:body.index("<<<END ANSWER ")].strip()


class JudgeServer:
    """A judge endpoint in a daemon thread; use as a context manager."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.requests: list[list[dict[str, str]]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append(body["messages"])
                out = owner.reply(body["messages"])
                if isinstance(out, tuple):
                    self._send(out[1], b'{"error": "scripted"}')
                elif out == "garbage":
                    self._send(200, b'{"not": "a completion"}')
                else:
                    self._send(200, json.dumps({
                        "id": "x", "object": "chat.completion", "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": out}}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5}}).encode())

            def _send(self, status: int, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> JudgeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
