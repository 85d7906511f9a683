"""How the command line gets a policy: by name, from one place, loaded on use.

The CLI imported the policies package in eight places, each with its own arguments and
its own idea of which policy needs what. The environment must not depend on
``vera_env.policies`` as a library (it is usable without the model clients), so the CLI
reaches it here only, lazily and by name: ``oracle`` needs nothing (the scripted policies
are ``vera_env.policy``), ``openai``, ``transformers`` and ``human`` import
``vera_env.policies`` when they are built. Their command-line options are declared here once too.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any, Literal, get_args

from vera_env.errors import PolicyError
from vera_env.policy import OraclePolicy, Policy
from vera_env.tasks import TaskSource

__all__ = ["DTYPES", "POLICY_NAMES", "PolicyName", "add_model_arguments", "make_policy"]

PolicyName = Literal["openai", "oracle", "transformers", "human"]
POLICY_NAMES: tuple[PolicyName, ...] = get_args(PolicyName)
DTYPES = ("auto", "float32", "bfloat16", "float16")

_CLASSES = {"openai": "OpenAIChatPolicy", "transformers": "TransformersPolicy",
            "human": "HumanPolicy"}


def _policy_class(name: str) -> Any:
    """The class of a model-backed policy, imported from ``vera_env.policies`` now."""
    try:
        module = importlib.import_module("vera_env.policies")
    except ImportError as exc:  # a vera_env installed without its policies package
        raise PolicyError(f"the {name!r} policy needs vera_env.policies, installed with "
                          f"vera-env ({exc})") from exc
    return getattr(module, _CLASSES[name])


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the model-backed policies (endpoint, sampling, local checkpoint)."""
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. "
                                            "http://127.0.0.1:8000/v1")
    parser.add_argument("--model", help="served model id (or a checkpoint folder with "
                                        "--policy transformers)")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY",
                        help="environment variable holding the API key (default %(default)s)")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--max-tokens", type=int, default=2048, help="completion cap per turn")
    parser.add_argument("--timeout-s", type=float, default=600.0, help="per request")
    parser.add_argument("--max-retries", type=int, default=4,
                        help="on 429, 5xx, dropped connections")
    parser.add_argument("--system-prompt", default="", help="optional system message")
    parser.add_argument("--no-prefill", dest="prefill", action="store_false",
                        help="for servers without continue_final_message (hosted APIs)")
    parser.add_argument("--device", default=None,
                        help="--policy transformers: cpu, cuda, cuda:1... (default: CUDA "
                             "when available)")
    parser.add_argument("--dtype", choices=DTYPES, default=None,
                        help="--policy transformers: weights' dtype (default float32; "
                             "auto: the checkpoint's)")


def make_policy(name: PolicyName, args: argparse.Namespace, source: TaskSource) -> Policy:
    """Build the named policy from the parsed options.

    Raises:
        PolicyError: The policy cannot be built (no checkpoint, no package).
        ValueError: Options the policy refuses.
    """
    if name == "oracle":
        return OraclePolicy(source)
    policy: Policy  # the classes are loaded by name, so the type is stated here
    if name == "human":
        policy = _policy_class("human")()
    elif name == "transformers":
        policy = _policy_class("transformers").from_pretrained(
            args.model, device=args.device, dtype=args.dtype,
            system_prompt=args.system_prompt, temperature=args.temperature,
            max_new_tokens=args.max_tokens)
    else:
        policy = _policy_class("openai")(
            args.base_url, args.model, system_prompt=args.system_prompt, prefill=args.prefill,
            api_key_env=args.api_key_env, temperature=args.temperature,
            max_tokens=args.max_tokens, timeout_s=args.timeout_s, max_retries=args.max_retries)
    return policy
