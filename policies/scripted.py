"""Scripted policies: fixed turns, replayed. The oracle replays a task's reference solution.

They make the environment testable without a model: golden scenarios, the demo, the
red-team suite and benchmarks all drive the real environment with scripted text. They
live in ``vera_env.policy`` (the package replays scripts itself: golden scenarios, task
validation, the demo) and are re-exported here beside the model policies.
"""

from __future__ import annotations

from vera_env.policy import OraclePolicy, ScriptedPolicy, careless_policy

__all__ = ["OraclePolicy", "ScriptedPolicy", "careless_policy"]
