"""Policies that drive a ``VeraEnv``: scripted, oracle, and model-backed ones."""

from __future__ import annotations

from policies.base import Policy
from policies.scripted import OraclePolicy, ScriptedPolicy, careless_policy

__all__ = ["OraclePolicy", "Policy", "ScriptedPolicy", "careless_policy"]
