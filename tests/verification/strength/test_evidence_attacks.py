"""One fact earns once, however it is gated, split or re-worded (played through the env).

The attack this pins: one honest recount of the answer, copied six times per node
over four nodes, each copy answering False on a mismatch only when a chosen hex digit
of the mismatching value's hash is below 8, and otherwise exiting 3 (read as a verdict
of its own, ``?``) or saying True (a kill set shaped on purpose). Under the earlier
rule (distinct verdict strings per node) such gating filled whole nodes on 19 of 23
types; here the episode earns at most one check's worth (0.5 / 12).
"""

from __future__ import annotations

import pytest

from vera_env import VeraEnv
from vera_env.policy import ScriptedPolicy
from vera_env.rollout import run_episode
from vera_env.tasks.builtin import make_task
from vera_env.verification.rewards import RewardConfig

TASK = "tab.sentinel_mean.easy.s0"
MEAN = ("awk -F, 'NR > 1 && $2 == \"Adelie\" && $6 != -999 { s += $6; n++ } "
        "END { printf \"%.2f\", s / n }' penguins.csv")
ONE_CHECK = RewardConfig().verification_weight / (
    RewardConfig().checks_per_node * RewardConfig().max_rewarded_nodes)


def _gated_turns(answer: str, otherwise: str) -> tuple[str, ...]:
    turns = []
    for k, digest in enumerate(("md5sum", "sha1sum", "sha256sum", "sha512sum")):
        checks = [f'CHECK range "mean {k}.{i}" :: v=$({MEAN}); '
                  f'if [ "$v" = {answer} ]; then echo True; '
                  f'elif [ "$(printf %s "$v" | {digest} | cut -c{i})" \\< 8 ]; '
                  f'then echo False; else {otherwise}; fi' for i in range(1, 7)]
        turns.append(f'<command>ls</command>\nNODE kind=qc summary="the mean, way {k}" '
                     f'artifact=penguins.csv\n' + "\n".join(checks))
    return (*turns, f"FINAL ANSWER: {answer}")


@pytest.mark.parametrize("otherwise", ["exit 3", "echo True"])
def test_one_recount_gated_into_many_verdicts_earns_one_checks_worth_at_most(otherwise):
    task = make_task(TASK)
    env = VeraEnv([task], max_steps=8, reward=RewardConfig())
    try:
        attempt = run_episode(env, ScriptedPolicy({task.id: _gated_turns(task.answer,
                                                                         otherwise)}),
                              task_id=task.id, seed=0)
    finally:
        env.close()
    checks = [c for s in attempt.steps for c in s.checks]
    assert attempt.status == "ok" and sum(c.passed for c in checks) == 24
    # exit 3 is a rejection, so the copies are one fact: one check's worth at most. A
    # True gate leaves each copy a small chance of reading as a fact of its own (two
    # draws per kind): bounded here by one node, where the earlier rule paid four.
    bound = ONE_CHECK if otherwise == "exit 3" else 3 * ONE_CHECK
    assert attempt.verification_reward <= bound + 1e-9, [
        (c.evidence, c.detail) for c in checks]
