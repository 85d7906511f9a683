"""A policy backed by a local ``transformers`` model: evaluate a checkpoint without a server.

After training, the quickest question is "did the checkpoint get better?". Serving it
with vLLM first is the right answer at scale; this policy answers it on the training
machine, from the folder the trainer saved, with the same prompt path as
``OpenAIChatPolicy`` and step-wise training (``vera_env.policies.chat``): the observation is
the one user message, rendered with the tokenizer's chat template (plain text when it
has none), and a forced answer's ``info["prefill"]`` is appended after the generation
prompt, so the model continues it exactly as vLLM's ``continue_final_message`` would.
The returned text starts with the prefill.

torch and transformers are an optional dependency (the ``training`` extra); importing
this module does not import them — constructing from a path does.

Example (needs a checkpoint and the training extra, so not a doctest)::

    from vera_env.policies import TransformersPolicy

    policy = TransformersPolicy.from_pretrained("runs/grpo/checkpoint-200")
"""

from __future__ import annotations

import contextvars
import threading
from typing import Any

from vera_env import info as keys
from vera_env.errors import PolicyError
from vera_env.policies.chat import prompt_ids, prompt_text

__all__ = ["TransformersPolicy"]


class TransformersPolicy:
    """Generate each turn with a local causal LM.

    Generation is serialised by a lock (one model, one device); run evaluations with it
    at ``concurrency=1`` or expect episodes to queue.

    Args:
        model: A ``transformers`` causal LM (``PreTrainedModel``), already on its device.
        tokenizer: Its tokenizer.
        system_prompt: Optional system message before every observation.
        max_new_tokens: Completion cap per turn.
        temperature: 0 decodes greedily; > 0 samples.
        max_prompt_tokens: Prompts longer than this have their observation clipped in
            the middle until they fit (``vera_env.policies.chat.prompt_ids``: the question, the
            chat template and the prefill stay); None: no cap.

    Raises:
        ValueError: A negative temperature or a non-positive token cap.
    """

    def __init__(self, model: Any, tokenizer: Any, *, system_prompt: str = "",
                 max_new_tokens: int = 1024, temperature: float = 0.0,
                 max_prompt_tokens: int | None = None) -> None:
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        self.model, self.tokenizer = model, tokenizer
        self.system_prompt = system_prompt
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.max_prompt_tokens = max_prompt_tokens
        self._lock = threading.Lock()
        self._last: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar(
            f"last_usage_{id(self)}", default=None)

    @classmethod
    def from_pretrained(cls, path: str, *, device: str | None = None,
                        dtype: str | None = None, **options: Any) -> TransformersPolicy:
        """Load a model and tokenizer saved with ``save_pretrained`` (no hub access).

        Args:
            path: The folder (or a model id already in the local cache).
            device: ``cpu``, ``cuda``, ``cuda:1``...; None picks CUDA when available.
            dtype: ``float32``, ``bfloat16``, ``float16`` or ``auto`` (the checkpoint's);
                None loads transformers' default (float32).
            **options: Forwarded to the constructor (``system_prompt``, ``temperature``...).

        Raises:
            PolicyError: transformers is not installed, the dtype is unknown, or the
                folder cannot be loaded.
        """
        try:
            import torch  # noqa: PLC0415 - optional dependency
            from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415
        except ImportError as exc:
            raise PolicyError("TransformersPolicy needs torch and transformers: "
                              "the training extra (make install EXTRAS=training from a clone)") from exc
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if dtype not in (None, "auto", "float32", "bfloat16", "float16"):
            raise PolicyError(f"dtype must be float32, bfloat16, float16 or auto, got {dtype!r}")
        loading = {} if dtype is None else {"dtype": dtype if dtype == "auto"
                                            else getattr(torch, dtype)}
        try:
            tokenizer = AutoTokenizer.from_pretrained(path)
            model = AutoModelForCausalLM.from_pretrained(path, **loading).to(device)
        except (OSError, ValueError) as exc:
            raise PolicyError(f"cannot load a causal LM from {path!r}: {exc}") from exc
        model.eval()
        return cls(model, tokenizer, **options)

    def prompt(self, observation: str, prefill: str = "") -> str:
        """The exact text the model is conditioned on (template, then the prefill)."""
        return prompt_text(self.tokenizer, observation, prefill=prefill,
                           system_prompt=self.system_prompt)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """Generate one turn (the prefill, when forcing, starts it).

        Raises:
            PolicyError: Generation failed (out of memory, a broken model).
        """
        import torch  # noqa: PLC0415 - only reached with a model, so torch is there

        prefill = str(info.get(keys.PREFILL) or "")
        ids = torch.tensor([prompt_ids(self.tokenizer, observation, prefill=prefill,
                                       system_prompt=self.system_prompt,
                                       max_tokens=self.max_prompt_tokens)], dtype=torch.long)
        sampling = ({"do_sample": True, "temperature": self.temperature}
                    if self.temperature > 0 else {"do_sample": False})
        pad_id = self.tokenizer.pad_token_id
        if pad_id is None:
            pad_id = self.tokenizer.eos_token_id
        try:
            with self._lock, torch.no_grad():
                ids = ids.to(self.model.device)
                out = self.model.generate(
                    ids, attention_mask=torch.ones_like(ids),
                    max_new_tokens=self.max_new_tokens, pad_token_id=pad_id, **sampling)
        except (RuntimeError, ValueError) as exc:
            raise PolicyError(f"generation failed: {exc}") from exc
        new = out[0, ids.shape[1]:]
        self._last.set((int(ids.shape[1]), int(new.shape[0])))
        text: str = self.tokenizer.decode(new, skip_special_tokens=True)
        return prefill + text

    def last_usage(self) -> tuple[int | None, int | None]:
        """(prompt, completion) tokens of the last turn generated in this thread."""
        return self._last.get() or (None, None)
