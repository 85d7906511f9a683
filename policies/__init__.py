"""Policies that drive a ``VeraEnv``: scripted, oracle, and model-backed ones.

``OpenAIChatPolicy`` talks to any OpenAI-compatible endpoint, ``TransformersPolicy``
runs a local checkpoint (optional dependency: torch and transformers, imported only when
a model is loaded), ``HumanPolicy`` reads turns from a terminal (``vera-env play``).
"""

from __future__ import annotations

from vera_env.policies.human import HumanPolicy
from vera_env.policies.openai import OpenAIChatPolicy
from vera_env.policies.scripted import OraclePolicy, ScriptedPolicy, careless_policy
from vera_env.policies.transformers_policy import TransformersPolicy
from vera_env.policy import Policy

__all__ = ["HumanPolicy", "OpenAIChatPolicy", "OraclePolicy", "Policy", "ScriptedPolicy",
           "TransformersPolicy", "careless_policy"]
