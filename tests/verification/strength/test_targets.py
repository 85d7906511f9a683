"""The episode's targets: built once, shared, dropped whole within the bounds."""

from __future__ import annotations

import pytest

from vera_env.sandbox import SandboxLimits
from vera_env.verification.rewards import StrengthConfig
from vera_env.verification.strength.outcome import Outcome, StrengthDeadline
from vera_env.verification.strength.targets import TargetBank
from vera_env.verification.strength.task import StrengthTask

LIMITS = SandboxLimits(timeout_s=20, check_timeout_s=20)


def _bank(sandbox, tmp_path, **config):
    tmp_path.chmod(0o755)
    sources = {}
    for name in ("a.tsv", "b.tsv", "empty.txt"):
        path = tmp_path / name
        path.write_text("" if name == "empty.txt" else "".join(f"{i}\n" for i in range(30)))
        path.chmod(0o444)
        sources[name] = path
    scratch = tmp_path / "scratch"

    def make_scratch():
        scratch.mkdir(mode=0o711)
        return scratch
    stat_of = {n: (p.stat().st_mtime_ns, 0o444) for n, p in sources.items()}
    return TargetBank(sandbox, StrengthTask(sources), make_scratch, stat_of,
                      StrengthConfig(**config))


def test_acquire_builds_once_and_shares(sandbox, tmp_path):
    bank = _bank(sandbox, tmp_path)
    first = bank.acquire("a.tsv", lambda: 60.0)
    second = bank.acquire("a.tsv", lambda: 60.0)
    assert first is second and first.in_use == 2 and len(first.variants.mutants) == 4
    bank.close()


def test_acquire_empty_file_says_why(sandbox, tmp_path):
    bank = _bank(sandbox, tmp_path)
    outcome = bank.acquire("empty.txt", lambda: 60.0)
    assert outcome.kind == "skipped" and "no mutant of empty.txt" in outcome.why
    bank.close()


def test_shadow_count_bound_drops_the_least_recently_used_idle_target(sandbox, tmp_path):
    bank = _bank(sandbox, tmp_path, max_shadows=8)
    a = bank.acquire("a.tsv", lambda: 60.0)
    bank.shadow_group(a, lambda: 60.0)
    bank.release(a)
    b = bank.acquire("b.tsv", lambda: 60.0)
    group = bank.shadow_group(b, lambda: 60.0)
    assert group is b.group and bank.shadows == 8
    assert not a.variants.controls[0].path.exists()  # a was dropped whole
    bank.close()


def test_shadow_group_waits_for_a_target_in_use_until_the_deadline(sandbox, tmp_path):
    bank = _bank(sandbox, tmp_path, max_shadows=8)
    a = bank.acquire("a.tsv", lambda: 60.0)
    bank.shadow_group(a, lambda: 60.0)  # held: a is in use
    b = bank.acquire("b.tsv", lambda: 60.0)
    with pytest.raises(StrengthDeadline):
        bank.shadow_group(b, lambda: 0.0)
    assert bank.shadows == 8
    bank.close()


def test_close_deletes_everything_and_refuses_new_targets(sandbox, tmp_path):
    bank = _bank(sandbox, tmp_path)
    a = bank.acquire("a.tsv", lambda: 60.0)
    group = bank.shadow_group(a, lambda: 60.0)
    paths = [s.workspace.path for s in group.shadows.values()]
    bank.close()
    assert not any(p.exists() for p in paths) and not list((tmp_path / "scratch").iterdir())
    assert bank.acquire("b.tsv", lambda: 60.0) == Outcome("skipped", "the episode is over")
