"""A policy backed by any OpenAI-compatible chat endpoint (vLLM, SGLang, llama.cpp, Ollama...).

One message per turn: the environment's observation already carries the bounded state
of the analysis (the graph within a token budget, the last few commands and outputs),
so the policy sends the observation as the only user message and never replays the
transcript. The reference harness measured why: replaying the transcript cost 9,267
prompt tokens per step to deliver about 400 new ones.

When the environment forces an answer, ``info["prefill"]`` holds ``"FINAL ANSWER: "``
and the policy starts the assistant turn with it (``continue_final_message``), so a
model that keeps trying to act still produces an answer line. Servers that reject the
extension can be driven with ``prefill=False``; the forced prompt still asks for the
line in words.

Transport faults and malformed replies raise ``PolicyError`` (from ``vera_env.llm``);
the rollout records the episode as ``provider``, an exclusion, never a wrong answer.

Example:
    >>> from vera_env.policies import OpenAIChatPolicy
    >>> policy = OpenAIChatPolicy("http://127.0.0.1:8000/v1", "Qwen/Qwen3-8B")
"""

from __future__ import annotations

import contextvars
from typing import Any

from vera_env import info as keys
from vera_env.llm import ChatClient, ChatReply
from vera_env.policies.chat import chat_messages

__all__ = ["OpenAIChatPolicy"]


class OpenAIChatPolicy:
    """Send each observation to a chat endpoint; return the assistant's text.

    Thread-safe and task-safe: one instance serves many concurrent episodes, sync
    (``act``, from threads) or async (``aact``, from one event loop).

    Args:
        base_url: Endpoint root including the version (``http://host:8000/v1``); give
            this and ``model``, or ``client``.
        model: Served model id.
        client: A ready ``ChatClient`` (instead of ``base_url`` and ``model``).
        system_prompt: Optional system message sent before every observation.
        prefill: Start forced answers with ``info["prefill"]`` (needs a server that
            supports ``continue_final_message``, such as vLLM or SGLang).
        api_key_env: Environment variable holding the API key.
        temperature: Sampling temperature (use > 0 with several attempts per task).
        max_tokens: Completion cap per turn.
        timeout_s: Per-request timeout.
        max_retries: Retries on 429, 5xx and connection errors.

    Raises:
        ValueError: Neither ``client`` nor both ``base_url`` and ``model``, or both.
    """

    def __init__(self, base_url: str | None = None, model: str | None = None, *,
                 client: ChatClient | None = None, system_prompt: str = "",
                 prefill: bool = True, api_key_env: str = "OPENAI_API_KEY",
                 temperature: float = 0.0, max_tokens: int = 2048,
                 timeout_s: float = 600.0, max_retries: int = 4) -> None:
        if client is not None and (base_url or model):
            raise ValueError("give either client= or base_url and model, not both")
        if client is None:
            if not base_url or not model:
                raise ValueError("OpenAIChatPolicy needs base_url and model (or client=); "
                                 f"got base_url={base_url!r}, model={model!r}")
            client = ChatClient(base_url, model, api_key_env=api_key_env,
                                temperature=temperature, max_tokens=max_tokens,
                                timeout_s=timeout_s, max_retries=max_retries)
        self.client = client
        self.system_prompt = system_prompt
        self.prefill = prefill
        self._last: contextvars.ContextVar[ChatReply | None] = contextvars.ContextVar(
            f"last_reply_{id(self)}", default=None)

    def messages(self, observation: str) -> list[dict[str, str]]:
        """The chat messages sent for ``observation`` (``vera_env.policies.chat.chat_messages``)."""
        return chat_messages(observation, self.system_prompt)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """One turn.

        Raises:
            PolicyError: The endpoint failed (after retries) or replied with garbage.
        """
        reply = self.client.chat(self.messages(observation), prefill=self._prefill(info))
        self._last.set(reply)
        return reply.text

    async def aact(self, observation: str, info: dict[str, Any]) -> str:
        """Async form of ``act``."""
        reply = await self.client.achat(self.messages(observation),
                                        prefill=self._prefill(info))
        self._last.set(reply)
        return reply.text

    def last_usage(self) -> tuple[int | None, int | None]:
        """(prompt, completion) tokens of the last call made in this thread or task."""
        reply = self._last.get()
        return (reply.prompt_tokens, reply.completion_tokens) if reply else (None, None)

    def close(self) -> None:
        """Close the client's connections."""
        self.client.close()

    async def aclose(self) -> None:
        """Close the client's connections, async ones included."""
        await self.client.aclose()

    def _prefill(self, info: dict[str, Any]) -> str:
        return str(info.get(keys.PREFILL) or "") if self.prefill else ""

    def __repr__(self) -> str:
        return f"OpenAIChatPolicy({self.client.base_url!r}, {self.client.model!r})"
