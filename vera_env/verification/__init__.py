"""How the reward is measured: checks, their strength, the reward, and grading.

``checks`` runs a node's checks read-only; ``strength`` decides whether a passing
check depends on the task's data (``encoding``/``mutants``/``variants`` build the
variants of a task file, ``command_log`` logs the episode's derivation, ``shadows`` and
``targets`` replay it on each variant, ``check_inputs`` finds what a check reads);
``rewards`` composes a step's reward from what was measured; ``grading`` grades the
final answer (exact, numeric, set, choice, regex, LLM rubric). The model's text is an
input to all of them and never decides their outcome.
"""
