"""Ten thousand hostile turns through the real environment: nothing breaks, nothing escapes.

Issue 11: model text broke things downstream. A 5,000-digit integer in a checked file
made strength raise ``ValueError`` out of ``step()``; a file named
``$(printf 'x\\377.tsv')`` put lone surrogates into the observation, which broke the
tokenizer, the HTTP body and ``RecordEpisode``, and in ``vera-env eval`` the attempt
became an excluded ``error``: an opt-out from a wrong answer. Scenarios pin the cases we
know; this fuzzer looks for the ones we do not (``turn_fuzzer`` lists its invariants; it
found the 5,000-digit crash again on its first run).

Reproduce a failure: ``VERA_FUZZ_SEED=<seed> VERA_FUZZ_TURNS=<n> python3 -m pytest
tests/redteam/test_fuzz_turns.py``. A longer run: ``VERA_FUZZ_TURNS=100000`` here, or
``benchmarks/fuzz_turns.py`` for several seeds and a table.
"""

from __future__ import annotations

import os

import pytest
from hostile_turns import KINDS, SPAWNING, TurnGenerator, would_spawn
from turn_fuzzer import KILL_SLACK_S, LIMITS, fuzz, spawn_bound_s

from vera_env.sandbox import probe_bwrap
from vera_env.verification.rewards import RewardConfig, step_bound_s

pytestmark = pytest.mark.skipif(bool(probe_bwrap()), reason=f"bwrap unusable: {probe_bwrap()}")

SEED = int(os.environ.get("VERA_FUZZ_SEED", "20261201"))
TURNS = int(os.environ.get("VERA_FUZZ_TURNS", "10000"))


def test_fuzz_hostile_turns_break_nothing_and_escape_nothing(tmp_path):
    report = fuzz(SEED, TURNS, root=tmp_path)
    assert report.failures == [], "\n".join(report.failures[:20])
    # The run did what it claims: enough turns, of every kind, some running processes.
    assert report.turns >= TURNS and report.episodes >= TURNS // 40
    assert report.spawning >= TURNS // 50 and report.rejected >= TURNS // 2
    assert report.answers >= TURNS // 100 and report.judge_outages == report.unscorable


def test_turn_generator_is_reproducible_and_covers_every_kind():
    first = [TurnGenerator(7, max_action_chars=8000).next(spawn_ok=True) for _ in range(1)]
    a, b = TurnGenerator(7, max_action_chars=8000), TurnGenerator(7, max_action_chars=8000)
    drawn = [a.next(spawn_ok=True) for _ in range(3000)]
    assert drawn == [b.next(spawn_ok=True) for _ in range(3000)] and drawn[0] == first[0]
    assert {t.kind for t in drawn} == set(KINDS)


def test_turn_generator_spawns_nothing_when_told_not_to():
    gen = TurnGenerator(11, max_action_chars=8000)
    turns = [gen.next(spawn_ok=False) for _ in range(3000)]
    assert not any(t.kind in SPAWNING for t in turns)
    assert not any(would_spawn(t.text) for t in turns)


def test_spawn_bound_is_the_package_step_bound_plus_kill_slack():
    on, off = RewardConfig(), RewardConfig(strength=False)
    for config in (on, off):
        for n in (0, 2, 16, 100):
            assert spawn_bound_s(LIMITS, config, n) == step_bound_s(LIMITS, config, n) + KILL_SLACK_S
    assert spawn_bound_s(LIMITS, off, 0) < spawn_bound_s(LIMITS, off, 2) < spawn_bound_s(LIMITS, on, 2)
