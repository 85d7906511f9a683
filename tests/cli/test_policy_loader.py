"""The CLI's one policy loader: policies by name, model options declared once."""

from __future__ import annotations

import argparse
import sys

import pytest

from vera_env.cli.policy_loader import POLICY_NAMES, add_model_arguments, make_policy
from vera_env.errors import PolicyError
from vera_env.policy import OraclePolicy
from vera_env.tasks import TaskSource


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_model_arguments(parser)
    return parser.parse_args(list(argv))


def test_oracle_needs_nothing_from_the_policies_package(alcohol_task, monkeypatch):
    monkeypatch.setitem(sys.modules, "vera_env.policies", None)  # its import fails
    source = TaskSource([alcohol_task], name="t")
    assert isinstance(make_policy("oracle", _args(), source), OraclePolicy)
    with pytest.raises(PolicyError, match="needs vera_env.policies"):
        make_policy("human", _args(), source)


def test_openai_policy_is_built_from_the_declared_options(alcohol_task):
    policy = make_policy("openai", _args("--base-url", "http://127.0.0.1:9/v1", "--model",
                                         "m", "--temperature", "0.5", "--no-prefill"),
                         TaskSource([alcohol_task], name="t"))
    assert type(policy).__name__ == "OpenAIChatPolicy"
    assert policy.client.temperature == 0.5 and policy.prefill is False


def test_model_options_include_device_and_dtype():
    args = _args("--device", "cuda:1", "--dtype", "bfloat16")
    assert (args.device, args.dtype) == ("cuda:1", "bfloat16")
    with pytest.raises(SystemExit):
        _args("--dtype", "float8")
    assert set(POLICY_NAMES) == {"openai", "oracle", "transformers", "human"}
