"""The fast writers and samplers behind the large difficulties: same bytes, exact totals."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from vera_env.tasks.builtin.columns import int_lines
from vera_env.tasks.builtin.counts import concat, mtx_bytes, sample_counts

_ROWS = st.lists(st.tuples(st.integers(0, 10**12), st.integers(0, 99), st.integers(0, 9)),
                 max_size=50)


@given(rows=_ROWS, sep=st.sampled_from([" ", "\t", ","]))
def test_int_lines_writes_what_printf_would(rows: list[tuple[int, int, int]], sep: str) -> None:
    columns = [np.array([r[i] for r in rows], dtype=np.int64) for i in range(3)]
    expected = "".join(sep.join(map(str, r)) + "\n" for r in rows).encode()
    assert int_lines(columns, sep) == expected


@pytest.mark.parametrize(("columns", "sep", "message"), [
    ([np.array([1, -2])], " ", "non-negative"), ([np.array([1]), np.array([1, 2])], " ",
                                                 "equal length"),
    ([np.array([1])], "::", "one ASCII character"), ([], " ", "one or more columns")])
def test_int_lines_rejects_what_it_cannot_write(columns: list[np.ndarray], sep: str,
                                                message: str) -> None:
    with pytest.raises(ValueError, match=message):
        int_lines(columns, sep)


def test_sample_counts_draws_exactly_the_planned_reads_per_cell() -> None:
    totals = np.array([0, 5, 1000, 37])
    genes, cells, counts = sample_counts(np.random.default_rng(0), totals,
                                         np.array([0.0, 1.0, 3.0, 0.5]), first_cell=10)
    assert np.bincount(cells - 10, weights=counts, minlength=4).tolist() == totals.tolist()
    assert 0 not in genes.tolist() and (counts > 0).all()
    keys = cells * 4 + genes
    assert (np.diff(keys) > 0).all()  # sorted by cell, then gene, no repeats


def test_concat_sums_overlapping_entries_and_sorts() -> None:
    a = (np.array([2, 1]), np.array([0, 1]), np.array([5, 1]))
    b = (np.array([2, 0]), np.array([0, 0]), np.array([2, 7]))
    genes, cells, counts = concat([a, b])
    assert list(zip(cells.tolist(), genes.tolist(), counts.tolist(), strict=True)) == [
        (0, 0, 7), (0, 2, 7), (1, 1, 1)]


def test_mtx_bytes_is_one_based_with_a_size_line() -> None:
    text = mtx_bytes(3, 2, np.array([0, 2]), np.array([1, 0]), np.array([4, 9]), ("note",))
    assert text.decode().splitlines() == [
        "%%MatrixMarket matrix coordinate integer general", "%note", "3 2 2", "1 2 4", "3 1 9"]
