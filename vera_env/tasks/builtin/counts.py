"""Drawing single-cell count matrices and writing them as 10x / MatrixMarket files.

Why reads are sampled, not genes x cells drawn. A per-cell multinomial over every gene
costs O(genes) per cell, which is fine for a 300-gene toy and minutes for a 30,000 x
10,000 matrix. Sampling each cell's reads as gene indices from the cell's expression
profile (``searchsorted`` on its cumulative distribution) and counting them costs
O(reads), draws exactly the planned total per cell (so QC thresholds the generator
plans are met exactly), and gives the matrix sorted by cell, then gene -- the order
Cell Ranger writes.
"""

from __future__ import annotations

import random

import numpy as np

from vera_env.tasks.builtin.columns import int_lines
from vera_env.tasks.builtin.solvers import edit_lines, lines_of, read_mtx, rejoin, tsv_fields

__all__ = ["Counts", "barcodes", "concat", "gene_table", "mtx_bytes", "renamed_barcodes",
           "renamed_ids", "renamed_symbols", "sample_counts", "split_entry"]

Counts = tuple[np.ndarray, np.ndarray, np.ndarray]
"""(gene index, cell index, count), 0-based, sorted by cell then gene."""


def sample_counts(rng: np.random.Generator, totals: np.ndarray, profile: np.ndarray,
                  first_cell: int = 0) -> Counts:
    """Draw ``totals[i]`` reads for cell ``first_cell + i`` from ``profile``.

    Args:
        rng: The generator.
        totals: Reads per cell (non-negative integers).
        profile: Expression weights per gene (non-negative, not all zero); normalised here.
        first_cell: Index of the first cell, so groups drawn apart can be concatenated.

    Returns:
        Non-zero entries as `Counts`.
    """
    totals = np.asarray(totals, dtype=np.int64)
    cdf = np.cumsum(profile, dtype=np.float64)
    cdf /= cdf[-1]
    genes = np.minimum(np.searchsorted(cdf, rng.random(int(totals.sum())), side="right"),
                       len(cdf) - 1)
    cells = np.repeat(np.arange(len(totals), dtype=np.int64), totals)
    keys, counts = np.unique(cells * len(cdf) + genes, return_counts=True)
    return keys % len(cdf), keys // len(cdf) + first_cell, counts.astype(np.int64)


def concat(parts: list[Counts]) -> Counts:
    """Entries of several draws as one, re-sorted by cell then gene (summing overlaps)."""
    genes = np.concatenate([p[0] for p in parts])
    cells = np.concatenate([p[1] for p in parts])
    values = np.concatenate([p[2] for p in parts])
    n_genes = int(genes.max()) + 1 if len(genes) else 1
    keys = cells * n_genes + genes
    order = np.argsort(keys, kind="stable")
    keys, values = keys[order], values[order]
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    summed = np.add.reduceat(values, starts) if len(keys) else values
    keys = keys[starts] if len(keys) else keys
    return keys % n_genes, keys // n_genes, summed.astype(np.int64)


def mtx_bytes(n_rows: int, n_cols: int, rows: np.ndarray, cols: np.ndarray,
              values: np.ndarray, comments: tuple[str, ...] = ()) -> bytes:
    """A MatrixMarket coordinate file; ``rows``/``cols`` are 0-based here, 1-based in it."""
    header = ["%%MatrixMarket matrix coordinate integer general", *(f"%{c}" for c in comments),
              f"{n_rows} {n_cols} {len(values)}"]
    return ("\n".join(header) + "\n").encode() + int_lines([rows + 1, cols + 1, values])


def barcodes(rng: np.random.Generator, n_cells: int) -> list[str]:
    """``n_cells`` distinct 16-base barcodes with the ``-1`` GEM-well suffix."""
    letters = np.frombuffer(b"ACGT", dtype=np.uint8)
    seen: dict[str, None] = {}
    while len(seen) < n_cells:
        seen[letters[rng.integers(0, 4, 16)].tobytes().decode() + "-1"] = None
    return list(seen)


def gene_table(rng: np.random.Generator, named: tuple[str, ...], n_genes: int
               ) -> tuple[list[str], list[str]]:
    """Mouse-style gene ids and symbols: ``named`` plus ``Gm`` filler, shuffled.

    Returns:
        (Ensembl-like ids, symbols), ``n_genes`` of each, ids increasing.
    """
    filler = [f"Gm{10000 + i}" for i in range(n_genes - len(named))]
    symbols = list(named) + filler
    symbols = [symbols[i] for i in rng.permutation(len(symbols))]
    ids = [f"ENSMUSG{int(x):011d}" for x in np.cumsum(rng.integers(1, 3000, n_genes)) + 1000]
    return ids, symbols


# ----- the families' own controls: answer-preserving edits of the 10x files -----
# Shuffling entries and adding comments keep a matrix's sorted lines, entry count and
# digits, and recompression keeps a gene or barcode list's content: a pin of any of
# those passed every generic control. These edits change exactly those facts and keep
# what a question reads (each family picks the ones its answer ignores; `solve`
# classifies every one anyway).

def split_entry(content: bytes, rng: random.Random, *, axis: int = 0,
                only: tuple[int, ...] | None = None, avoid: tuple[int, ...] = ()) -> bytes | None:
    """Entries ``r c v`` (v >= 2) each written as two, ``r c a`` and ``r c v-a`` (the
    size line's count updated): a reader that sums entries sees the same matrix. One
    entry, then 0 to 31 more (a draw): each draw moves the entry count, the records'
    digits and bytes by its own amount, so a pin gated on one of those counts meets a
    new value on each (with one entry split, five draws of ``mtx.knockout_gene`` gave
    two digit counts: such a pin passed them as a gate passes one value, and an honest
    sum could not be told from it). ``only`` / ``avoid`` restrict the entries by their
    index on ``axis`` (0 rows, 1 columns, 1-based) -- e.g. a marker gene's column,
    read entry by entry against a threshold."""
    mtx = read_mtx(content)
    entries = mtx.entries
    ok = (entries[:, 2] >= 2) & ~np.isin(entries[:, axis], avoid)
    if only is not None:
        ok &= np.isin(entries[:, axis], only)
    candidates = np.flatnonzero(ok)
    if not len(candidates):
        return None
    replace: dict[int, bytes] = {}
    added: list[bytes] = []
    for i in range(1 + rng.randrange(32)):
        k = int(candidates[rng.randrange(len(candidates))])
        if i and k in replace:
            continue
        r, c, v = (int(x) for x in entries[k])
        a = rng.randint(1, v - 1)
        replace[k] = b"%d %d %d\n" % (r, c, a)
        added.append(b"%d %d %d\n" % (r, c, v - a))
    return mtx.edited(replace, tuple(added))


def renamed_ids(content: bytes, rng: random.Random) -> bytes | None:
    """Every gene id given an Ensembl version suffix (``ENSMUSG...`` -> ``ENSMUSG....3``),
    drawn per line (1 to 19): the first column, which no question here reads, changes
    on every line, and each draw moves the file's byte count by its own amount (one
    version for the whole file moved it by one of two amounts, so a pin gated on the
    count passed every further draw for free: ``strength.fingerprints``)."""
    lines = lines_of(content)
    edits = {}
    for i, line in enumerate(lines):
        fields = tsv_fields(line)
        fields[0] += b".%d" % rng.randint(1, 19)
        edits[i] = rejoin(fields, line)
    return edit_lines(content, edits) if edits else None


def renamed_symbols(content: bytes, rng: random.Random, *, keep: tuple[int, ...] = ()
                    ) -> bytes | None:
    """About a quarter of the ``Gm`` filler symbols renumbered (never the 1-based lines in
    ``keep``, the genes a question names or reads next to): still filler, other text."""
    lines = lines_of(content)
    edits = {}
    for i, line in enumerate(lines):
        fields = tsv_fields(line)
        if (i + 1) in keep or len(fields) < 2 or not fields[1].startswith(b"Gm") \
                or rng.random() > 0.25:
            continue
        fields[1] = b"Gm%d" % rng.randint(50_000, 99_999)
        edits[i] = rejoin(fields, line)
    return edit_lines(content, edits) if edits else None


def renamed_barcodes(content: bytes, rng: random.Random) -> bytes | None:
    """Every barcode replaced by another (distinct) one of the same shape: where only the
    number of barcodes matters, their letters are free."""
    lines = lines_of(content)
    seen: set[bytes] = set()
    edits = {}
    for i, line in enumerate(lines):
        code = b""
        while not code or code in seen:
            code = bytes(rng.choice(b"ACGT") for _ in range(16)) + b"-1"
        seen.add(code)
        edits[i] = code + line[len(line.rstrip(b"\r\n")):]
    return edit_lines(content, edits) if edits else None
