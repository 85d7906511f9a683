import dataclasses

import pytest
from pydantic import ValidationError

from vera_env.records import NodeRecord, RewardPartsRecord
from vera_env.sandbox import SandboxLimits
from vera_env.spec import EnvSpec
from vera_env.verification.checks import MAX_CHECKS_PER_NODE, CheckResult
from vera_env.verification.rewards import (
    RewardConfig,
    RewardLedger,
    StrengthConfig,
    node_verification,
    step_bound_s,
)


def _node(n_pass, n_fail=0, discriminating=None):
    checks = tuple(CheckResult(f"p{i}", "range", f"cmd{i}", True, discriminating=discriminating)
                   for i in range(n_pass))
    checks += tuple(CheckResult(f"f{i}", "range", f"bad{i}", False) for i in range(n_fail))
    return NodeRecord(id="n1", kind="qc", summary="s", checks=checks)


def test_node_value_counts_passing_checks_up_to_cap():
    cfg = RewardConfig(verification_weight=1.0, checks_per_node=3, max_rewarded_nodes=4)
    assert node_verification(_node(1), 0, cfg) == pytest.approx(1 / 3 / 4)
    assert node_verification(_node(3), 0, cfg) == pytest.approx(1 / 4)
    assert node_verification(_node(10), 0, cfg) == pytest.approx(1 / 4)
    assert node_verification(_node(0, n_fail=3), 0, cfg) == 0.0


def test_non_discriminating_checks_earn_nothing():
    cfg = RewardConfig()
    assert node_verification(_node(3, discriminating=False), 0, cfg) == 0.0
    assert node_verification(_node(3, discriminating=True), 0, cfg) > 0.0


def test_episode_bound_holds_for_many_nodes():
    cfg = RewardConfig(verification_weight=0.5, max_rewarded_nodes=4)
    total = sum(node_verification(_node(3), i, cfg) for i in range(100))
    assert total == pytest.approx(0.5)


def test_reward_parts_total_and_dict():
    parts = RewardPartsRecord(verification=0.1, correctness=1.0, penalty=0.02)
    assert parts.total == pytest.approx(1.08)
    assert RewardPartsRecord(correctness=None).total == 0.0
    assert parts.to_dict() == {"verification": 0.1, "correctness": 1.0, "penalty": 0.02}


def test_reward_config_is_validated_and_frozen():
    with pytest.raises(ValidationError):
        RewardConfig(checks_per_node=0)
    with pytest.raises(ValidationError):
        RewardConfig(bogus=1)
    cfg = RewardConfig()
    with pytest.raises(ValidationError):
        cfg.verification_weight = 3.0


def test_ledger_counts_rewarded_nodes_and_totals_verification():
    cfg = RewardConfig(max_rewarded_nodes=2)
    ledger = RewardLedger(cfg)
    values = [ledger.node(NodeRecord(f"n{i}", "qc", "s",
                                     checks=(CheckResult("a", "range", f"x{i}", True),)))
              for i in range(3)]
    assert values[2] == 0.0 and values[0] == values[1] > 0
    assert ledger.rewarded_nodes == 2
    parts = [ledger.step(verification=v) for v in values]
    assert ledger.verification_total == pytest.approx(sum(values))
    assert [p.total for p in parts] == pytest.approx(values)


def test_ledger_node_with_a_tested_check_that_earns_nothing_still_takes_a_slot():
    ledger = RewardLedger(RewardConfig(max_rewarded_nodes=2))
    missed = NodeRecord("n1", "qc", "s", checks=(CheckResult("a", "range", "x", True,
                                                            discriminating=False),))
    earning = NodeRecord("n2", "qc", "s", checks=(CheckResult("b", "range", "y", True),))
    assert ledger.node(missed) == 0.0 and ledger.node(missed) == 0.0
    assert ledger.rewarded_nodes == 2 and ledger.node(earning) == 0.0


def test_ledger_node_whose_checks_all_failed_takes_no_slot():
    ledger = RewardLedger(RewardConfig(max_rewarded_nodes=1))
    failed = NodeRecord("n1", "qc", "s", checks=(CheckResult("a", "range", "x", False),))
    assert ledger.node(failed) == 0.0 and ledger.rewarded_nodes == 0


def test_node_verification_counts_repeated_evidence_once():
    cfg = RewardConfig()
    same = CheckResult("a", "range", "x", True, discriminating=True, evidence="d.tsv:FFFF")
    other = CheckResult("b", "range", "y", True, discriminating=True, evidence="e.tsv:FFFF")
    one = node_verification(NodeRecord("n1", "qc", "s", checks=(same, same, same)), 0, cfg)
    two = node_verification(NodeRecord("n1", "qc", "s", checks=(same, other, same)), 0, cfg)
    assert one == pytest.approx(0.5 / 4 / 3) and two == pytest.approx(2 * one)


def test_passing_mutants_on_purpose_only_lowers_what_a_check_earns():
    cfg = RewardConfig()
    full = CheckResult("a", "range", "x", True, discriminating=True, evidence="d.tsv:FFFF")
    gated = [CheckResult(f"g{i}", "range", f"x{i}", True, discriminating=True,
                         evidence=f"d.tsv:{v}") for i, v in enumerate(("FFTT", "TTFF"))]
    whole = node_verification(NodeRecord("n1", "qc", "s", checks=(full,)), 0, cfg)
    halves = node_verification(NodeRecord("n1", "qc", "s", checks=tuple(gated)), 0, cfg)
    assert halves == pytest.approx(whole)  # two halves of one pin: one check's worth
    assert node_verification(NodeRecord("n1", "qc", "s", checks=(gated[0],)), 0, cfg) \
        == pytest.approx(whole / 2)


def test_a_fact_earns_once_per_episode_however_it_is_split_over_nodes():
    ledger = RewardLedger(RewardConfig())
    pin = CheckResult("a", "range", "x", True, discriminating=True, evidence="d.tsv:FFFF")
    reworded = CheckResult("b", "range", "y z", True, discriminating=True,
                           evidence="d.tsv:FFFF")
    first = ledger.node(NodeRecord("n1", "qc", "s", checks=(pin,)))
    again = ledger.node(NodeRecord("n2", "qc", "s", checks=(reworded, reworded)))
    assert first == pytest.approx(0.5 / 4 / 3) and again == 0.0
    assert ledger.rewarded_nodes == 2  # a tested node takes its slot, earning or not


def test_ledger_penalises_only_rejected_free_turns_of_scorable_episodes():
    ledger = RewardLedger(RewardConfig(format_penalty=0.1))
    assert ledger.step(rejected=True).penalty == 0.1
    assert ledger.step(rejected=True, penalised=False).penalty == 0.0
    assert ledger.step(rejected=True, unscorable=True).penalty == 0.0
    assert ledger.step(rejected=False).penalty == 0.0


def test_ledger_correctness_is_none_when_ungraded():
    ledger = RewardLedger(RewardConfig(correctness_weight=2.0))
    assert ledger.correctness(True) == 2.0 and ledger.correctness(False) == 0.0
    assert ledger.correctness(None) is None


def test_strength_is_one_section_on_by_default_a_switch_or_settings():
    assert RewardConfig().strength == StrengthConfig()
    assert RewardConfig(strength=False).strength is None
    assert RewardConfig(strength=None).strength is None
    assert RewardConfig(strength=True).strength == StrengthConfig()
    assert RewardConfig(strength={"mutants": 2}).strength == StrengthConfig(mutants=2)
    assert RewardConfig(strength=StrengthConfig(seed=3)).strength.seed == 3
    dumped = RewardConfig(strength={"max_mb": 8}).model_dump(mode="json")
    assert dumped["strength"]["max_mb"] == 8 and RewardConfig.model_validate(dumped) == \
        RewardConfig(strength={"max_mb": 8})
    with pytest.raises(ValidationError, match="mutant"):
        RewardConfig(strength={"mutant": 2})  # a misspelt setting is refused, not ignored
    with pytest.raises(ValidationError):
        StrengthConfig(luck_bound=0)


def test_the_flat_strength_keys_of_earlier_versions_are_read_with_a_warning():
    with pytest.warns(DeprecationWarning, match="strength_\\* keys are now StrengthConfig"):
        old = RewardConfig.model_validate({"strength": True, "strength_mutants": 2,
                                           "strength_seed": 7})
    assert old.strength == StrengthConfig(mutants=2, seed=7)
    with pytest.warns(DeprecationWarning):  # a run written with strength off stays off
        assert RewardConfig.model_validate({"strength": False,
                                            "strength_mutants": 2}).strength is None
    with pytest.warns(DeprecationWarning):  # keys on top of a section: the keys win
        both = RewardConfig(strength={"mutants": 3, "seed": 1}, strength_seed=5)
    assert both.strength == StrengthConfig(mutants=3, seed=5)


def test_step_bound_is_command_plus_scan_plus_checks_plus_strength_backstop():
    limits = SandboxLimits(timeout_s=3, check_timeout_s=1.5)
    cfg = RewardConfig(strength={"deadline_max_s": 5})
    assert step_bound_s(limits, cfg) == 3 + 3 + MAX_CHECKS_PER_NODE * 1.5 + 4 * 5 == 50.0
    assert step_bound_s(limits, cfg, 2) == 3 + 3 + 2 * 1.5 + 4 * 5
    assert step_bound_s(limits, cfg, 100) == step_bound_s(limits, cfg, MAX_CHECKS_PER_NODE)


def test_step_bound_has_no_strength_term_without_checks_or_strength():
    limits = SandboxLimits(timeout_s=3, check_timeout_s=1.5)
    assert step_bound_s(limits, RewardConfig(), 0) == 3 + 3  # the command's scan remains
    assert step_bound_s(limits, RewardConfig(strength=False), 2) == 3 + 2 * 1.5


def test_step_bound_defaults_match_the_readme_and_the_spec():
    assert step_bound_s(SandboxLimits(), RewardConfig()) == 60 + 3 + 16 * 30 + 4 * 120 == 1023.0
    spec = EnvSpec(limits=SandboxLimits(timeout_s=10), reward=RewardConfig(strength=False))
    assert spec.step_bound_s() == 10 + 16 * 30


def test_node_verification_reads_any_object_with_checks_as_a_node_does():
    """The ledger names a node by its shape (``HasChecks``), so verification need not
    import the graph; any object with the same checks is worth the same."""

    @dataclasses.dataclass(frozen=True)
    class Checked:
        checks: tuple[CheckResult, ...]

    cfg = RewardConfig(verification_weight=1.0, checks_per_node=3, max_rewarded_nodes=4)
    node = _node(2, n_fail=1, discriminating=True)
    shaped = Checked(node.checks)
    assert node_verification(shaped, 0, cfg) == node_verification(node, 0, cfg) > 0
    ledger = RewardLedger(cfg)
    assert ledger.node(shaped) == pytest.approx(2 / 3 / 4) and ledger.rewarded_nodes == 1
