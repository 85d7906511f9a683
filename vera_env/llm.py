"""The one OpenAI-compatible chat client: policies and the LLM-judge grader share it.

Why one client and not one per caller: every failure an endpoint can produce has to
end up on the same side of the line between "the model was wrong" and "the provider
was down". The reference harness learned this the hard way — its first client turned a
refused connection into an empty reply, and an empty reply into a wrong answer. Here a
transport failure that survives the retries, an HTTP error that is not worth retrying
and a body that is not a chat completion all raise ``PolicyError`` with the cause
chained, and the rollout records the episode as ``provider`` (an exclusion).

What is retried, with exponential backoff and full jitter, honouring ``Retry-After``:
HTTP 408, 409, 429 and every 5xx, and transport errors (refused or dropped connections,
timeouts). What is not: other 4xx (a wrong model name or URL will not fix itself) and
malformed bodies (a server that answers 200 with garbage is broken, not busy).

Prefill. Asked in plain words to reply with a single ``FINAL ANSWER:`` line, one model
in the reference run kept emitting ``I need to identify the bacterium ... <tool_call>``
and was recorded with no answer. Starting the assistant turn with the prefix removes the
need for compliance: the request ends with an assistant message holding the prefix, and
``continue_final_message=True`` / ``add_generation_prompt=False`` (vLLM's and SGLang's
chat extensions) make the server continue it. The server returns only the continuation,
so the prefix is prepended here and callers always see a complete turn.

Example:
    >>> from vera_env.llm import ChatClient
    >>> client = ChatClient("http://127.0.0.1:8000/v1", "Qwen/Qwen3-8B")
    >>> # reply = client.chat([{"role": "user", "content": "2+2?"}], prefill="FINAL ANSWER: ")
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import random
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vera_env.errors import PolicyError
from vera_env.wire.text import safe_text

__all__ = ["ChatClient", "ChatReply"]

_RETRIED_STATUS = frozenset({408, 409, 429})
_MAX_RETRY_AFTER_S = 120.0   # a server asking for an hour is down; fail instead of hanging
_MAX_BACKOFF_S = 60.0
_BODY_SNIPPET_CHARS = 300


@dataclass(frozen=True, slots=True)
class ChatReply:
    """One completed chat turn.

    Attributes:
        text: The assistant's text, with the prefill already prepended.
        prompt_tokens: Tokens in, as the server counted them (None if not reported).
        completion_tokens: Tokens out (None if not reported).
        finish_reason: ``stop``, ``length``, ... ("" if not reported).
        latency_s: Wall time of the call, retries and backoff included.
    """

    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str
    latency_s: float


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore")
    content: str | list[dict[str, Any]] | None = None


class _Choice(BaseModel):
    model_config = ConfigDict(extra="ignore")
    message: _Message
    finish_reason: str | None = None


class _Usage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class _Completion(BaseModel):
    """The part of an OpenAI chat completion this client reads (servers add fields)."""

    model_config = ConfigDict(extra="ignore")
    choices: list[_Choice] = Field(min_length=1)
    usage: _Usage | None = None


class _Retry(Exception):
    """Internal: this try failed in a way worth retrying."""

    def __init__(self, reason: str, cause: BaseException, retry_after_s: float | None = None
                 ) -> None:
        super().__init__(reason)
        self.reason, self.cause, self.retry_after_s = reason, cause, retry_after_s


class ChatClient:
    """An OpenAI-compatible ``/chat/completions`` client, sync and async.

    Thread-safe for ``chat``; ``achat`` uses one ``httpx.AsyncClient`` created on first
    use, so use it from one event loop.

    Args:
        base_url: Endpoint root including the version, e.g. ``http://host:8000/v1``.
        model: Served model id.
        api_key: The key; None reads ``api_key_env`` (no key: no Authorization header,
            which local vLLM, SGLang, llama.cpp and Ollama servers accept).
        api_key_env: Environment variable holding the key.
        temperature: Default sampling temperature.
        max_tokens: Default completion cap.
        timeout_s: Per-request timeout (connect, read, write, pool).
        max_retries: Retries after the first try (so ``max_retries + 1`` tries at most).
        backoff_s: First backoff; doubles each retry, full jitter, capped at 60 s.
        transport: httpx transport for the sync client (tests: ``httpx.MockTransport``).
        async_transport: httpx transport for the async client.

    Raises:
        ValueError: An empty base URL or model, or a negative number.
    """

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None,
                 api_key_env: str = "OPENAI_API_KEY", temperature: float = 0.0,
                 max_tokens: int = 2048, timeout_s: float = 600.0, max_retries: int = 4,
                 backoff_s: float = 1.0, transport: httpx.BaseTransport | None = None,
                 async_transport: httpx.AsyncBaseTransport | None = None) -> None:
        if not base_url or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL such as "
                             f"http://127.0.0.1:8000/v1, got {base_url!r}")
        if not model:
            raise ValueError("model must name the served model, got an empty string")
        for name, value in (("max_tokens", max_tokens), ("timeout_s", timeout_s),
                            ("max_retries", max_retries), ("backoff_s", backoff_s),
                            ("temperature", temperature)):
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.retries = 0                      # retries performed so far (diagnostics)
        key = api_key if api_key is not None else os.environ.get(api_key_env)
        self._headers = {"Content-Type": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._url = self.base_url + "/chat/completions"
        self._transport = transport
        self._async_transport = async_transport
        self._client: httpx.Client | None = None
        self._aclient: httpx.AsyncClient | None = None
        self._lock = threading.Lock()

    # -- public -------------------------------------------------------------------------

    def chat(self, messages: list[dict[str, str]], *, prefill: str = "",
             max_tokens: int | None = None, temperature: float | None = None) -> ChatReply:
        """Send ``messages`` and return the assistant's reply.

        Args:
            messages: OpenAI chat messages (``role``, ``content``).
            prefill: If not empty, the assistant turn starts with this text and the
                model continues it; the reply's ``text`` starts with it.
            max_tokens: Override the default completion cap.
            temperature: Override the default temperature.

        Raises:
            PolicyError: Transport failure after the retries, an HTTP error that is not
                retried, or a malformed body.
        """
        payload = self._payload(messages, prefill, max_tokens, temperature)
        started = time.perf_counter()
        client = self._sync_client()
        for attempt in range(self.max_retries + 1):
            try:
                try:
                    response = client.post(self._url, json=payload)
                except httpx.TransportError as exc:
                    raise _Retry(f"{type(exc).__name__}: {exc}", exc) from exc
                return self._reply(response, prefill, started)
            except _Retry as retry:
                self._give_up_if_last(attempt, retry)
                time.sleep(self._delay_s(attempt, retry))
        raise AssertionError("unreachable")  # pragma: no cover

    async def achat(self, messages: list[dict[str, str]], *, prefill: str = "",
                    max_tokens: int | None = None, temperature: float | None = None
                    ) -> ChatReply:
        """Async form of ``chat`` (same arguments, same errors)."""
        payload = self._payload(messages, prefill, max_tokens, temperature)
        started = time.perf_counter()
        client = self._async_client()
        for attempt in range(self.max_retries + 1):
            try:
                try:
                    response = await client.post(self._url, json=payload)
                except httpx.TransportError as exc:
                    raise _Retry(f"{type(exc).__name__}: {exc}", exc) from exc
                return self._reply(response, prefill, started)
            except _Retry as retry:
                self._give_up_if_last(attempt, retry)
                await asyncio.sleep(self._delay_s(attempt, retry))
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Close the sync connection pool (idempotent)."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    async def aclose(self) -> None:
        """Close both connection pools (idempotent)."""
        if self._aclient is not None:
            await self._aclient.aclose()
            self._aclient = None
        self.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"ChatClient({self.base_url!r}, {self.model!r})"

    # -- internals ----------------------------------------------------------------------

    def _sync_client(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(headers=self._headers, transport=self._transport,
                                            timeout=httpx.Timeout(self.timeout_s))
            return self._client

    def _async_client(self) -> httpx.AsyncClient:
        if self._aclient is None:
            self._aclient = httpx.AsyncClient(headers=self._headers,
                                              transport=self._async_transport,
                                              timeout=httpx.Timeout(self.timeout_s))
        return self._aclient

    def _payload(self, messages: list[dict[str, str]], prefill: str,
                 max_tokens: int | None, temperature: float | None) -> dict[str, Any]:
        if not messages:
            raise ValueError("messages must hold at least one message")
        payload: dict[str, Any] = {
            "model": self.model,
            # A lone surrogate would make the body unencodable (UnicodeEncodeError, not
            # a PolicyError): send it escaped, visibly.
            "messages": [{**m, "content": safe_text(m["content"])}
                         if isinstance(m.get("content"), str) else m for m in messages],
            "max_tokens": self.max_tokens if max_tokens is None else max_tokens,
            "temperature": self.temperature if temperature is None else temperature,
        }
        if prefill:
            payload["messages"].append({"role": "assistant", "content": prefill})
            payload["continue_final_message"] = True
            payload["add_generation_prompt"] = False
        return payload

    def _reply(self, response: httpx.Response, prefill: str, started: float) -> ChatReply:
        """Turn a response into a reply, ``_Retry`` or ``PolicyError``."""
        if response.status_code in _RETRIED_STATUS or response.status_code >= 500:
            cause = httpx.HTTPStatusError(f"HTTP {response.status_code}",
                                          request=response.request, response=response)
            raise _Retry(f"HTTP {response.status_code}: {_snippet(response)}", cause,
                         _retry_after_s(response))
        try:
            response.raise_for_status()
        except httpx.HTTPStatusError as exc:
            hint = " (does base_url end with /v1?)" if response.status_code == 404 else ""
            raise PolicyError(f"POST {self._url}: HTTP {response.status_code}{hint}: "
                              f"{_snippet(response)}", status=response.status_code,
                              endpoint=self._url) from exc
        try:
            body = _Completion.model_validate_json(response.content)
        except ValidationError as exc:
            raise PolicyError(f"POST {self._url}: malformed chat completion: "
                              f"{_snippet(response)}", status=response.status_code,
                              endpoint=self._url) from exc
        choice = body.choices[0]
        usage = body.usage or _Usage()
        content = _content_text(choice.message.content)
        # vLLM and SGLang return only the continuation; llama.cpp's llama-server returns
        # the whole assistant message, prefill included (measured: prefill "ZQX colour:"
        # came back as "ZQX colour: ZQ"). Prepend the prefill only when it is missing.
        text = content if prefill and content.startswith(prefill) else prefill + content
        return ChatReply(text=text,
                         prompt_tokens=usage.prompt_tokens,
                         completion_tokens=usage.completion_tokens,
                         finish_reason=choice.finish_reason or "",
                         latency_s=time.perf_counter() - started)

    def _give_up_if_last(self, attempt: int, retry: _Retry) -> None:
        if attempt >= self.max_retries:
            status = (retry.cause.response.status_code
                      if isinstance(retry.cause, httpx.HTTPStatusError) else None)
            raise PolicyError(f"POST {self._url}: {retry.reason} "
                              f"(gave up after {attempt + 1} tries)", status=status,
                              endpoint=self._url) from retry.cause
        with self._lock:
            self.retries += 1

    def _delay_s(self, attempt: int, retry: _Retry) -> float:
        if retry.retry_after_s is not None:
            return min(retry.retry_after_s, _MAX_RETRY_AFTER_S)
        ceiling = min(self.backoff_s * 2 ** attempt, _MAX_BACKOFF_S)
        return random.uniform(0.0, ceiling)   # full jitter: clients do not retry in step


def _content_text(content: str | list[dict[str, Any]] | None) -> str:
    """Message content as text (some servers send a list of typed parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(str(part.get("text", "")) for part in content
                   if part.get("type", "text") == "text")


def _retry_after_s(response: httpx.Response) -> float | None:
    """``Retry-After`` in seconds (delta-seconds or an HTTP date); None if absent/bad."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _snippet(response: httpx.Response) -> str:
    try:
        text = response.text
    except (UnicodeDecodeError, httpx.ResponseNotRead):
        return "<unreadable body>"
    text = " ".join(text.split())
    return text[:_BODY_SNIPPET_CHARS] + ("..." if len(text) > _BODY_SNIPPET_CHARS else "")
