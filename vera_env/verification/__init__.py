"""How the reward is measured: checks, their strength, the reward, and grading.

``checks`` runs a node's checks read-only; ``strength`` (with ``mutants`` and
``check_inputs``) decides whether a passing check depends on the task's data;
``rewards`` composes a step's reward from what was measured; ``grading`` grades the
final answer (exact, numeric, set, choice, regex, LLM rubric). The model's text is an
input to all of them and never decides their outcome.
"""
