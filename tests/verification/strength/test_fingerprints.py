"""What a check could be a coin over: fingerprints of a file, and the tosses a gate on
each would have won (``strength.fingerprints``, ``strength.luck.Tosses``)."""

from __future__ import annotations

import math

import pytest

from vera_env import VeraEnv
from vera_env.evaluation.attacks import gated_true
from vera_env.tasks.builtin import make_task
from vera_env.verification.strength import luck
from vera_env.verification.strength.fingerprints import (
    FACETS,
    Shown,
    facets,
    hypotheses,
    runs,
    separator,
)

TABLE = b"id,species,mass\n1,Adelie,3700\n2,Gentoo,5100\n3,Adelie,3550\n"


def test_facets_see_order_free_what_an_order_free_pin_sees():
    """A re-ordering keeps every catalogued fingerprint (each is order-free); a changed
    value moves the sorted records, the digits and its column, not the others'."""
    sep = separator(TABLE)
    own = facets(TABLE, sep)
    lines = TABLE.splitlines(keepends=True)
    reordered = facets(lines[0] + lines[3] + lines[1] + lines[2], sep)
    edited = facets(TABLE.replace(b"3550", b"3551"), sep)
    assert sep == b"," and len(own) == len(FACETS)
    assert reordered == own
    moved = {FACETS[i] for i in range(len(own)) if edited[i] != own[i]}
    assert moved == {"sorted records", "column 3"}
    assert facets(TABLE.replace(b"3550", b"35500"), sep)[FACETS.index("digits")] != own[
        FACETS.index("digits")]


def _shown(values: dict[str, tuple[str, str | None, bool]]) -> list[Shown]:
    """One-facet variants: label -> (value, kind or None for a control, passed)."""
    return [Shown((v,), kind, passed) for v, kind, passed in values.values()]


def test_a_gate_is_supposed_only_where_the_verdicts_fit_it_and_a_control_moved_it():
    own = ("o",)
    fits = _shown({"c0": ("c", None, True), "m0": ("x", "k1", False), "m1": ("y", "k1", False)})
    [gate] = hypotheses(own, fits, [(None, None)])
    assert (gate.forced, gate.groups) == (1, (2,))
    # it rejected a variant with the file's own value: not a function of this fingerprint
    rejects_own = _shown({"c0": ("c", None, True), "m0": ("o", "k1", False),
                          "m1": ("y", "k1", False)})
    assert hypotheses(own, rejects_own, [(None, None)]) == []
    # two variants with one value, two verdicts: not a function of it either
    split = _shown({"c0": ("c", None, True), "m0": ("x", "k1", False), "m1": ("x", "k2", True)})
    assert hypotheses(own, split, [(None, None)]) == []
    # no control moved it: on these variants it is the answer, not a coin
    unmoved = _shown({"c0": ("o", None, True), "m0": ("x", "k1", False)})
    assert hypotheses(own, unmoved, [(None, None)]) == []


def test_draws_sharing_a_value_are_one_toss_and_repeated_reserves_none():
    """Two draws of a kind with one value are one coin; a kind holding a control's value
    passed with it; a reserve whose value was seen (or a re-run: None) tosses nothing."""
    own = ("o",)
    shown = _shown({"c0": ("c", None, True), "c1": ("c", None, True),
                    "a0": ("x", "ka", False), "a1": ("x", "ka", False),
                    "b0": ("c", "kb", True), "b1": ("z", "kb", True),
                    "d0": ("u", "kd", False), "d1": ("v", "kd", False)})
    plan = [(("w",), ("c",)), (("x",), ("n",)), (None, None), (("w",), ("n2",))]
    [gate] = hypotheses(own, shown, plan)
    assert gate.forced == 2  # "c", and "z" of the kind that shares "c"
    assert sorted(gate.groups) == [1, 2]  # "x" once; "u" and "v"
    assert gate.confirms == ((True, False), (False, True), (False, False), (False, True))


def test_the_coin_per_run_is_the_bound_it_always_was():
    coin = runs(4, {"k1": 2, "k2": 2, "k3": 2, "k4": 2}, 8, True)
    for r in (1, 2, 3):
        assert math.isclose(luck.log_chance(coin, r),
                            math.log(luck.worst_case(4, r, (2, 2, 2, 2))), rel_tol=1e-9)
    for index in (1, 4, 12):
        assert luck.needed([coin], index, 0.05) == luck.confirmations(4, index, 0.05,
                                                                       (2, 2, 2, 2))


def test_free_confirmations_never_bound_a_gate():
    """A gate whose confirmations repeat values it has seen wins them all for free, so no
    number of them bounds it: such a check earns nothing (None)."""
    free = luck.Tosses(1, (2, 2), ((False, False),) * 32)
    assert luck.needed([free], 1, 0.05) is None
    tossing = luck.Tosses(1, (2, 2), ((True, True),) * 32)
    assert luck.needed([tossing], 1, 0.05) is not None


def _verification(task_id: str, turns: list[str]) -> float:
    task = make_task(task_id)
    env = VeraEnv([task], max_steps=30)
    try:
        env.reset(seed=0, options={"task_id": task_id})
        for turn in turns:
            *_, term, trunc, info = env.step(turn)
            if term or trunc:
                break
        return float(info["verification_total"])
    finally:
        env.close()


@pytest.mark.parametrize("seed", [2, 7])
def test_a_gated_digit_count_pin_earns_nothing_where_it_once_did(seed):
    """On these two seeds of ``tab.label_coding`` a pin of the records' digit count,
    gated on a hash of the count, earned 0.021: it passed the two controls that move the
    count by the gate, the aimed kinds that keep it for free, and its confirmations for
    free (its killed kind had no reserve, so the mutant re-ran; the reserve control kept
    the count). Held to a gate on that count, it earns nothing; the reference beside it
    still earns."""
    task_id = f"tab.label_coding.easy.s{seed}"
    task = make_task(task_id)
    assert _verification(task_id, gated_true(task)) == 0
    assert _verification(task_id, list(task.solution)) > 0.05
