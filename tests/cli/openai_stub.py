"""A real OpenAI-compatible HTTP server on 127.0.0.1 that plays the tasks' reference solutions.

It reads what a model would read — the observation in the user message — and answers
as the oracle would: the task is found by its question, the turn by the step count the
observation states ("Steps left: N." or, forced, "You have used N of M steps."). A
request that ends with an assistant prefill (``continue_final_message``) gets only the
continuation (the answer without its prefix), as vLLM does, so a client that forgets
to prepend the prefill produces an unusable answer.

Faults are injected by request number (1-based, counting only episode requests):
``"500"``, ``"429"`` (with ``Retry-After: 0``), ``"drop"`` (close the connection
without a response) and ``"malformed"`` (200 with a body that is not a completion).
Used by the eval tests and by ``benchmarks/eval_throughput.py``.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from vera_env.tasks import TaskSource

__all__ = ["OracleServer"]

_STEPS_LEFT = re.compile(r"Steps left: (\d+)\.")
_USED = re.compile(r"You have used (\d+) of (\d+) steps")
_ANSWER = re.compile(r"FINAL ANSWER:\s*(.*)\s*$", re.S)


class OracleServer:
    """Serve ``/v1/chat/completions`` with the reference solutions of ``tasks``.

    Args:
        tasks: The tasks the eval runs (looked up by question).
        max_steps: The eval's step budget (to turn "Steps left" into a step index).
        faults: Request number -> fault.
        delay_s: Sleep before each reply (to make concurrent requests overlap).
    """

    def __init__(self, tasks: TaskSource, *, max_steps: int,
                 faults: dict[int, str] | None = None, delay_s: float = 0.0) -> None:
        self.by_question = {t.question: t for t in tasks}
        self.max_steps = max_steps
        self.faults = dict(faults or {})
        self.delay_s = delay_s
        self.requests: list[dict[str, Any]] = []   # every episode request's JSON body
        self.served: list[str] = []                # what happened to each: "ok" or a fault
        self.in_flight = self.peak_in_flight = 0
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> OracleServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def reply_for(self, body: dict[str, Any]) -> str:
        """The text the oracle model says to this request."""
        messages = body["messages"]
        prefilled = bool(body.get("continue_final_message")) and messages[-1]["role"] == "assistant"
        user = next(m["content"] for m in reversed(messages) if m["role"] == "user")
        question = user.split("QUESTION: ", 1)[1].split("\n", 1)[0] if "QUESTION: " in user else ""
        task = self.by_question.get(question)
        if task is None:
            return "OK"
        final = task.solution[-1]
        if prefilled:
            return _ANSWER.search(final).group(1).strip()
        used = _USED.search(user)
        if used:
            return final
        left = _STEPS_LEFT.search(user)
        step = self.max_steps - int(left.group(1)) if left else 0
        return task.solution[min(step, len(task.solution) - 1)]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                text = server.reply_for(body)
                fault = ""
                if text != "OK":
                    with server._lock:
                        server.requests.append(body)
                        fault = server.faults.get(len(server.requests), "")
                        server.served.append(fault or "ok")
                        server.in_flight += 1
                        server.peak_in_flight = max(server.peak_in_flight, server.in_flight)
                try:
                    if server.delay_s and text != "OK":
                        time.sleep(server.delay_s)
                    self._answer(body, text, fault)
                finally:
                    if text != "OK":
                        with server._lock:
                            server.in_flight -= 1

            def _answer(self, body: dict[str, Any], text: str, fault: str) -> None:
                if fault == "drop":
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                if fault in ("500", "429"):
                    payload = json.dumps({"error": {"message": f"injected {fault}"}}).encode()
                    self.send_response(int(fault))
                    if fault == "429":
                        self.send_header("Retry-After", "0")
                elif fault == "malformed":
                    payload = b'{"choices": "this is not a list", "id": 7'
                    self.send_response(200)
                else:
                    prompt_chars = sum(len(m["content"]) for m in body["messages"])
                    payload = json.dumps({
                        "id": "cmpl-stub", "object": "chat.completion", "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": text}}],
                        "usage": {"prompt_tokens": prompt_chars // 4,
                                  "completion_tokens": max(1, len(text) // 4)},
                    }).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler
