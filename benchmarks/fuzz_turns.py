"""The hostile-turn fuzzer at length: many seeds, 100,000+ turns, one table.

CI plays 10,000 turns of one fixed seed (``tests/redteam/test_fuzz_turns.py``); this
plays more turns over fresh seeds, to find what one seed does not. Each run is the same
``turn_fuzzer.fuzz`` (real bwrap sandbox, strength on, forced-answer and gate wrappers,
a judge that drops verdicts or is down), so a failure found here replays in the test
with ``VERA_FUZZ_SEED=<seed> VERA_FUZZ_TURNS=<n>``.

Usage::

    python benchmarks/fuzz_turns.py [--turns 100000] [--seeds 1 2 3 4 5]

Prints a markdown table (turns, episodes, processes run, rejected turns, answers graded,
unscorable/outages, slowest parse-level and spawning step, turns per second, failures)
and every failure; exits 1 if any.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "redteam"))

from turn_fuzzer import fuzz


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100_000, help="turns over all seeds")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    args = parser.parse_args()
    per_seed = -(-args.turns // len(args.seeds))
    print("| seed | turns | episodes | spawned | rejected | answers | unscorable (outages) "
          "| slowest parse-level s | slowest spawning s | turns/s | failures |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    failures: list[str] = []
    totals = [0, 0.0]
    for seed in args.seeds:
        r = fuzz(seed, per_seed)
        totals[0] += r.turns
        totals[1] += r.wall_s
        failures += r.failures
        print(f"| {seed} | {r.turns} | {r.episodes} | {r.spawning} | {r.rejected} | {r.answers} "
              f"| {r.unscorable} ({r.judge_outages}) | {r.slowest_parse_s:.3f} "
              f"| {r.slowest_spawn_s:.2f} | {r.turns / r.wall_s:.0f} | {len(r.failures)} |",
              flush=True)
    print(f"\n{totals[0]} turns in {totals[1]:.0f} s; {len(failures)} failure(s)")
    for failure in failures:
        print(f"- {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
