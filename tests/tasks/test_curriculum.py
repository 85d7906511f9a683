"""The curriculum source: climbs on mastered rungs, falls on collapsed ones, draws where
pass rates are informative, ignores unscorable outcomes, and resumes from JSON exactly."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from vera_env.env import vera_base
from vera_env.spec import EnvSpec
from vera_env.tasks import TaskSource, load_tasks
from vera_env.tasks.curriculum import Curriculum, builtin_band, curriculum_source
from vera_env.tasks.named import named_source, source_table
from vera_env.tasks.source import OutcomeListener

TYPES = ["seq.gc_content", "tab.sentinel_mean"]


def _cur(**kwargs: object) -> Curriculum:
    return curriculum_source(seeds=range(20), types=TYPES,
                             difficulties=("easy", "medium"), **kwargs)  # type: ignore[arg-type]


def _feed(cur: Curriculum, task_type: str, difficulty: str, outcomes: list[bool | None]) -> None:
    for seed, correct in enumerate(outcomes):
        cur.update(f"{task_type}.{difficulty}.s{seed}", correct)


def test_curriculum_new_starts_every_type_on_warmup_and_draws_only_warmup() -> None:
    cur = _cur()
    assert cur.ladder == ("warmup", "easy", "medium")
    assert {cur.level(t) for t in TYPES} == {"warmup"}
    assert {builtin_band(i)[1] for i in cur.sample(50)} == {"warmup"}


def test_curriculum_high_pass_rate_moves_type_up_one_rung_at_a_time() -> None:
    cur = _cur()
    _feed(cur, "seq.gc_content", "warmup", [True] * 8)
    assert cur.level("seq.gc_content") == "easy"
    assert cur.level("tab.sentinel_mean") == "warmup"
    _feed(cur, "seq.gc_content", "easy", [True] * 7 + [False])
    assert cur.level("seq.gc_content") == "easy", "7/8 is below the 0.9 mastery bar"
    _feed(cur, "seq.gc_content", "easy", [True] * 32)
    assert cur.level("seq.gc_content") == "medium"


def test_curriculum_too_few_episodes_never_moves() -> None:
    cur = _cur()
    _feed(cur, "seq.gc_content", "warmup", [True] * 7)
    assert cur.level("seq.gc_content") == "warmup"


def test_curriculum_all_wrong_moves_down_and_must_re_earn_the_climb() -> None:
    cur = _cur()
    _feed(cur, "seq.gc_content", "warmup", [True] * 8)
    _feed(cur, "seq.gc_content", "easy", [False] * 8)
    assert cur.level("seq.gc_content") == "warmup"
    assert cur.pass_rate(("seq.gc_content", "easy")) is None, "the collapsed rung forgets"
    assert cur.pass_rate(("seq.gc_content", "warmup")) is None, "mastery must be re-earned"
    _feed(cur, "seq.gc_content", "warmup", [True] * 7)
    assert cur.level("seq.gc_content") == "warmup"
    cur.update("seq.gc_content.warmup.s9", True)
    assert cur.level("seq.gc_content") == "easy"


def test_curriculum_all_wrong_on_the_first_rung_stays_but_keeps_a_floor_weight() -> None:
    cur = _cur()
    _feed(cur, "seq.gc_content", "warmup", [False] * 8)
    weights = cur.weights()
    assert cur.level("seq.gc_content") == "warmup"
    assert weights[("seq.gc_content", "warmup")] == pytest.approx(0.1)
    assert weights[("tab.sentinel_mean", "warmup")] == 1.0


def test_curriculum_draws_informative_bands_not_mastered_ones() -> None:
    cur = _cur()
    for task_type in TYPES:
        _feed(cur, task_type, "warmup", [True] * 8)
    _feed(cur, "seq.gc_content", "easy", [True, False] * 8)  # 50%: informative
    _feed(cur, "tab.sentinel_mean", "easy", [True] * 4 + [False] * 4)
    weights = cur.weights()
    assert weights[("seq.gc_content", "warmup")] == 0.0, "mastered rungs below are not drawn"
    assert ("seq.gc_content", "medium") not in weights, "rungs above are not drawn"
    drawn = Counter(builtin_band(i) for i in cur.sample(200))
    assert set(drawn) == {("seq.gc_content", "easy"), ("tab.sentinel_mean", "easy")}


def test_curriculum_unscorable_and_foreign_outcomes_are_ignored() -> None:
    cur = _cur()
    before = cur.state_dict()
    assert cur.update("seq.gc_content.warmup.s0", None) is False
    assert cur.update("seq.gc_content.hard.s0", True) is False, "hard is off this ladder"
    assert cur.update("alcohol-mean", False) is False, "not a builtin id"
    _feed(cur, "seq.gc_content", "warmup", [None] * 20)
    assert cur.state_dict() == before
    assert cur.update("seq.gc_content.warmup.s0", True) is True


def test_curriculum_state_round_trips_through_json_and_draws_the_same_next_ids() -> None:
    cur = _cur(seed=7)
    _feed(cur, "seq.gc_content", "warmup", [True] * 8)
    _feed(cur, "seq.gc_content", "easy", [True, False, False])
    cur.sample(5)
    saved = json.loads(json.dumps(cur.state_dict()))
    resumed = _cur(seed=123)
    resumed.load_state_dict(saved)
    assert resumed.state_dict() == cur.state_dict()
    assert resumed.sample(40) == cur.sample(40)
    rng_a, rng_b = np.random.default_rng(3), np.random.default_rng(3)
    assert [cur.pick(rng_a).id for _ in range(5)] == [resumed.pick(rng_b).id for _ in range(5)]


def test_curriculum_same_seed_same_samples_other_seed_other_samples() -> None:
    assert _cur(seed=1).sample(30) == _cur(seed=1).sample(30)
    assert _cur(seed=1).sample(30) != _cur(seed=2).sample(30)


def test_curriculum_load_state_from_another_ladder_or_level_refused() -> None:
    state = curriculum_source(seeds=range(3), types=TYPES).state_dict()
    with pytest.raises(ValueError, match="another curriculum"):
        _cur().load_state_dict(state)
    bad = _cur().state_dict()
    bad["levels"]["seq.gc_content"] = 3
    with pytest.raises(ValueError, match="another curriculum"):
        _cur().load_state_dict(bad)


def test_curriculum_wraps_any_source_with_a_band_function(alcohol_task) -> None:
    source = TaskSource([alcohol_task.model_copy(update={"id": f"alc-{d}-{i}"})
                         for d in ("a", "b") for i in range(3)], name="alc")
    cur = Curriculum(source, ladder=("a", "b"), min_episodes=2,
                     band_of=lambda tid: ("alc", tid.split("-")[1]))
    assert {i.split("-")[1] for i in cur.sample(20)} == {"a"}
    cur.update("alc-a-0", True)
    cur.update("alc-a-1", True)
    assert cur.level("alc") == "b"


def test_curriculum_warm_start_draws_only_its_rung_until_a_fall_reopens_the_one_below() -> None:
    cur = _cur(start="medium")
    assert {cur.level(t) for t in TYPES} == {"medium"}
    assert {builtin_band(i)[1] for i in cur.sample(60)} == {"medium"}, "skipped rungs unmeasured"
    _feed(cur, "seq.gc_content", "medium", [False] * 8)
    assert cur.level("seq.gc_content") == "easy"
    drawn = Counter(builtin_band(i) for i in cur.sample(200))
    assert drawn[("seq.gc_content", "easy")] > 0 and drawn[("seq.gc_content", "warmup")] == 0
    _feed(cur, "seq.gc_content", "easy", [True] * 8)
    assert cur.level("seq.gc_content") == "medium", "the fallen rung is climbed again"
    again = Counter(builtin_band(i) for i in cur.sample(200))
    assert again[("seq.gc_content", "easy")] == 0, "a mastered record below is not drawn"
    restored = _cur()
    restored.load_state_dict(json.loads(json.dumps(cur.state_dict())))
    assert restored.level("seq.gc_content") == "medium"
    assert restored.level("tab.sentinel_mean") == "medium"


def test_curriculum_warm_start_type_without_the_rung_takes_its_highest_below() -> None:
    from vera_env.tasks.builtin import builtin_source

    source = builtin_source(("warmup", "easy"), range(2), ["seq.gc_content"])
    cur = Curriculum(source, ladder=("warmup", "easy", "medium"), start="medium")
    assert cur.level("seq.gc_content") == "easy"


def test_curriculum_start_elsewhere_is_refused_with_reason() -> None:
    with pytest.raises(ValueError, match="not on the ladder"):
        _cur(start="hard")
    with pytest.raises(ValueError, match="only the curriculum"):
        named_source("builtin", start="easy")


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"low": 0.9, "high": 0.1}, "low < high"), ({"min_episodes": 0}, "min_episodes"),
    ({"ladder": ()}, "distinct"), ({"ladder": ("xl",)}, "no id"),
])
def test_curriculum_bad_settings_raise_with_reason(kwargs: dict[str, object], match: str) -> None:
    source = load_tasks("builtin")
    with pytest.raises(ValueError, match=match):
        Curriculum(source, **kwargs)  # type: ignore[arg-type]


def test_curriculum_is_a_named_source_and_listed() -> None:
    cur = load_tasks("curriculum")
    assert isinstance(cur, Curriculum) and isinstance(cur, OutcomeListener)
    assert cur.ladder == ("warmup", "easy") and len(cur.ids()) == 13 * 2 * 1000
    assert EnvSpec(tasks="curriculum").tasks == "curriculum"
    header, rows = source_table("curriculum")
    assert header[0] == "rung" and rows[0][0] == "warmup"


def test_env_episode_end_reports_outcome_to_the_curriculum() -> None:
    cur = curriculum_source(seeds=range(3), types=["tab.sentinel_mean"])
    env = EnvSpec(max_steps=2, wrappers=()).build(tasks=cur)
    try:
        assert vera_base(env).tasks is cur
        for seed in range(8):
            task_id = f"tab.sentinel_mean.warmup.s{seed % 3}"
            _, info = env.reset(options={"task_id": task_id})
            answer = cur.get(task_id).answer
            _, _, terminated, _, info = env.step(f"FINAL ANSWER: {answer}")
            assert terminated and info["correct"] is True
        assert cur.pass_rate(("tab.sentinel_mean", "warmup")) == 1.0
        assert cur.level("tab.sentinel_mean") == "easy"
        env.reset(options={"task_id": "tab.sentinel_mean.easy.s0"})
        env.step("<command>true</command>")
        _, _, terminated, truncated, _ = env.step("<command>true</command>")
        assert truncated and not terminated
        assert cur.pass_rate(("tab.sentinel_mean", "easy")) == 0.0, "no answer counts wrong"
    finally:
        env.close()
