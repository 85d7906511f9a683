"""The ends of a file (``ends``) and ``drop_irrelevant`` dropping their unread holders."""

from __future__ import annotations

import random

from vera_env.verification.strength.ends import end_groups
from vera_env.verification.strength.transforms import apply_control

HEADER = b"id\tgene\treads\n"
ROWS = [f"L{i:02d}\t{'MYC' if i % 3 == 0 else 'KRAS'}\t{100 + (i * 37) % 800}\n".encode()
        for i in range(10, 50)]
ROWS[7] = b"L17\tKRAS\t1005\n"  # reads: the least in byte order, the greatest as a number
ROWS[13] = b"L23\tKRAS\t9\n"  # the greatest in byte order, the least as a number
LEAST = b"L17\tKRAS\t1005\n"


def test_ends_are_the_holders_of_each_columns_least_and_greatest_values():
    groups = set(end_groups(ROWS))
    assert (0,) in groups and (len(ROWS) - 1,) in groups  # the records' own ends
    assert (7,) in groups and (13,) in groups  # reads, in byte order and as numbers
    # gene: MYC and KRAS are each held by more than four rows, so not an end to drop
    assert not any(len(g) > 4 for g in groups)
    assert end_groups(ROWS) is end_groups(ROWS)  # remembered for the same list


def test_a_small_file_or_an_end_held_by_many_records_has_none():
    assert end_groups(ROWS[:31]) == ()  # a codebook's lines are all ends
    rows = [b"a\t1\n"] * 36 + [b"b\t2\n"]
    assert not any(set(g) & set(range(36)) for g in end_groups(rows))


def test_drop_irrelevant_with_ends_drops_the_unread_holders_on_some_draws_only():
    content = HEADER + b"".join(ROWS)
    unread = lambda record: b"KRAS" in record  # noqa: E731
    moved = []
    for draw in range(24):
        out = apply_control("drop_irrelevant", "t.tsv", content, random.Random(draw),
                            unread, ends=True)
        assert out is not None and all(r in out for r in ROWS if b"MYC" in r)
        moved.append(LEAST not in out)
    assert 0 < sum(moved) < 24  # moved on some draws, kept on others
    plain = [apply_control("drop_irrelevant", "t.tsv", content, random.Random(d), unread)
             for d in range(24)]
    assert sum(LEAST not in out for out in plain) < sum(moved)
