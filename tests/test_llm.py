"""ChatClient: retries, prefill, usage, and every failure as PolicyError with its cause."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from vera_env.errors import PolicyError
from vera_env.llm import ChatClient, ChatReply

USER = [{"role": "user", "content": "How many?"}]


def completion(content="36", *, usage=True, finish="stop"):
    body = {"choices": [{"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", "content": content}}]}
    if usage:
        body["usage"] = {"prompt_tokens": 11, "completion_tokens": 2}
    return httpx.Response(200, json=body)


def scripted(*responses):
    """A MockTransport answering with ``responses`` in order; records the requests."""
    seen = []
    queue = list(responses)

    def handle(request):
        seen.append(request)
        item = queue.pop(0)
        if isinstance(item, Exception):
            raise item
        return item
    return httpx.MockTransport(handle), seen


def client(transport, **kw):
    return ChatClient("http://llm.test/v1", "m", transport=transport, backoff_s=0.001, **kw)


def test_chat_returns_text_usage_and_finish_reason():
    transport, seen = scripted(completion("hello"))
    reply = client(transport).chat(USER)
    assert isinstance(reply, ChatReply) and reply.text == "hello"
    assert (reply.prompt_tokens, reply.completion_tokens, reply.finish_reason) == (11, 2, "stop")
    assert seen[0].url == "http://llm.test/v1/chat/completions"
    body = json.loads(seen[0].content)
    assert body["messages"] == USER and body["model"] == "m" and body["temperature"] == 0.0
    assert "continue_final_message" not in body


def test_prefill_sent_as_continued_assistant_turn_and_prepended():
    transport, seen = scripted(completion("36"))
    reply = client(transport).chat(USER, prefill="FINAL ANSWER: ")
    body = json.loads(seen[0].content)
    assert body["messages"][-1] == {"role": "assistant", "content": "FINAL ANSWER: "}
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    assert reply.text == "FINAL ANSWER: 36"


def test_prefill_echoed_by_the_server_is_not_doubled():
    # llama.cpp's llama-server returns the prefill inside the content (measured with
    # SmolLM2-135M: prefill "ZQX colour:" came back as "ZQX colour: ZQ").
    transport, _ = scripted(completion("FINAL ANSWER: 36"))
    assert client(transport).chat(USER, prefill="FINAL ANSWER: ").text == "FINAL ANSWER: 36"


def test_500_and_429_are_retried_then_succeed():
    transport, seen = scripted(httpx.Response(500, text="overloaded"),
                               httpx.Response(429, headers={"Retry-After": "0"}),
                               completion())
    c = client(transport)
    assert c.chat(USER).text == "36"
    assert len(seen) == 3 and c.retries == 2


def test_retry_after_is_honoured(monkeypatch):
    waits = []
    monkeypatch.setattr("vera_env.llm.time.sleep", waits.append)
    transport, _ = scripted(httpx.Response(429, headers={"Retry-After": "7"}), completion())
    client(transport).chat(USER)
    assert waits == [7.0]


def test_backoff_grows_exponentially_with_jitter(monkeypatch):
    waits = []
    monkeypatch.setattr("vera_env.llm.time.sleep", waits.append)
    transport, _ = scripted(*[httpx.Response(503)] * 4, completion())
    ChatClient("http://x/v1", "m", transport=transport, backoff_s=1.0, max_retries=4).chat(USER)
    assert len(waits) == 4
    assert all(0 <= w <= 2 ** i for i, w in enumerate(waits))


def test_retries_exhausted_raise_policy_error_with_cause():
    transport, seen = scripted(*[httpx.Response(502, text="bad gateway")] * 3)
    with pytest.raises(PolicyError, match=r"HTTP 502.*gave up after 3 tries") as info:
        client(transport, max_retries=2).chat(USER)
    assert isinstance(info.value.__cause__, httpx.HTTPStatusError) and len(seen) == 3
    assert info.value.status == 502
    assert info.value.endpoint == str(seen[0].url)


def test_connection_error_retried_then_raised():
    error = httpx.ConnectError("connection refused")
    transport, seen = scripted(error, error)
    with pytest.raises(PolicyError, match="ConnectError") as info:
        client(transport, max_retries=1).chat(USER)
    assert info.value.__cause__ is error and len(seen) == 2
    assert info.value.status is None  # no answer, so no status


@pytest.mark.parametrize("body", [b"<html>gateway</html>", b'{"choices": []}',
                                  b'{"choices": [{"text": "legacy"}]}'])
def test_malformed_body_is_policy_error_not_retried(body):
    transport, seen = scripted(httpx.Response(200, content=body))
    with pytest.raises(PolicyError, match="malformed chat completion") as info:
        client(transport).chat(USER)
    assert len(seen) == 1 and info.value.status == 200


def test_client_error_not_retried_and_404_hints_at_v1():
    transport, seen = scripted(httpx.Response(404, text="not found"))
    with pytest.raises(PolicyError, match=r"HTTP 404 \(does base_url end with /v1\?\)") as info:
        client(transport).chat(USER)
    assert len(seen) == 1 and info.value.status == 404
    assert info.value.endpoint == str(seen[0].url)


def test_null_content_and_missing_usage_are_tolerated():
    transport, _ = scripted(httpx.Response(200, json={"choices": [
        {"message": {"content": None}}]}))
    reply = client(transport).chat(USER)
    assert reply.text == "" and reply.prompt_tokens is None and reply.finish_reason == ""


def test_api_key_from_environment(monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-test")
    transport, seen = scripted(completion(), completion())
    client(transport, api_key_env="MY_KEY").chat(USER)
    assert seen[0].headers["authorization"] == "Bearer sk-test"
    monkeypatch.delenv("MY_KEY")
    client(transport, api_key_env="MY_KEY").chat(USER)
    assert "authorization" not in seen[1].headers


def test_overrides_per_call():
    transport, seen = scripted(completion())
    client(transport).chat(USER, max_tokens=5, temperature=0.7)
    body = json.loads(seen[0].content)
    assert body["max_tokens"] == 5 and body["temperature"] == 0.7


@pytest.mark.parametrize("kwargs, match", [
    ({"base_url": "localhost:8000"}, "http"), ({"model": ""}, "model"),
    ({"max_retries": -1}, "max_retries")])
def test_constructor_validates(kwargs, match):
    args = {"base_url": "http://x/v1", "model": "m", **kwargs}
    with pytest.raises(ValueError, match=match):
        ChatClient(args.pop("base_url"), args.pop("model"), **args)


def test_achat_retries_and_prefills():
    seen = []

    def handle(request):
        seen.append(request)
        return httpx.Response(503) if len(seen) == 1 else completion("x")

    async def go():
        async with ChatClient("http://x/v1", "m", backoff_s=0.001,
                              async_transport=httpx.MockTransport(handle)) as c:
            return await c.achat(USER, prefill="FINAL ANSWER: ")
    reply = asyncio.run(go())
    assert reply.text == "FINAL ANSWER: x" and len(seen) == 2


class _DropOnce(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    calls = 0

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).calls += 1
        if type(self).calls == 1:
            self.connection.shutdown(socket.SHUT_RDWR)  # drop mid-request, no response
            return
        payload = json.dumps({"choices": [{"message": {"content": "ok"}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def test_dropped_connection_on_a_real_server_is_retried():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _DropOnce)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        with ChatClient(url, "m", backoff_s=0.001) as c:
            assert c.chat(USER).text == "ok" and c.retries == 1
    finally:
        server.shutdown()
        server.server_close()


def test_lone_surrogate_in_a_message_is_sent_escaped_not_raised():
    """Issue 11: a lone surrogate in an observation made the HTTP body unencodable."""
    transport, seen = scripted(completion())
    reply = client(transport).chat([{"role": "user", "content": "files: x\udcff.tsv"}])
    assert reply.text == "36"
    assert json.loads(seen[0].content)["messages"][0]["content"] == "files: x\\xff.tsv"
