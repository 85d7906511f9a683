"""Sparse count matrix family: cell QC on a 10x-style mouse matrix.

Why this trap. The mitochondrial fraction is the most common single-cell QC filter, and
nearly every tutorial is written for human data, where mitochondrial genes are ``MT-CO1``.
In mouse they are ``mt-Co1``. ``grep MT-`` on a mouse gene list finds nothing, every
cell's mitochondrial fraction becomes 0, and dying cells pass QC: the careless count is
too high, yet looks perfectly reasonable. Mouse ``Mt1``/``Mt2`` (metallothioneins) and
``Mtor`` are included too, so a case-insensitive ``grep -i mt`` is wrong as well.

Layout follows Cell Ranger's v2 output: ``matrix.mtx.gz`` (MatrixMarket coordinate,
genes x cells, 1-based), ``genes.tsv.gz`` (id, symbol), ``barcodes.tsv.gz``.

The ground truth is decided from the per-cell totals and mitochondrial counts the
generator *plans* before drawing the matrix (each cell's reads are drawn to exactly
those totals, `counts.sample_counts`); tests re-derive it by parsing the written matrix.

Each instance's `Reference` recounts from the decoded files: entries in any order and
comment lines are fine, but the size line states the entry count and the gene and
barcode lists are read by line number, so no record may be dropped and those lists keep
their order. The aimed mutants change one entry of one cell -- a mitochondrial count
that pushes a passing cell over the fraction, or a nuclear count that lifts an empty
cell over the total: a check of the totals dies on the second, one of the fractions on
the first -- or drop the ``mt-`` prefix of the fewest, most counted mitochondrial genes
in genes.tsv.gz that move the answer.
"""

from __future__ import annotations

import random
from functools import partial

import numpy as np

from vera_env.tasks.builtin.counts import (
    Counts,
    barcodes,
    concat,
    mtx_bytes,
    renamed_barcodes,
    renamed_ids,
    renamed_symbols,
    sample_counts,
    split_entry,
)
from vera_env.tasks.builtin.instance import (
    Difficulty,
    Instance,
    check,
    fill,
    final,
    gz,
    node,
    turn,
    verdict,
)
from vera_env.tasks.builtin.solvers import (
    Mtx,
    aimed,
    content_of,
    edit_lines,
    lines_of,
    named_lines,
    read_mtx,
    rejoin,
    tsv_fields,
)
from vera_env.tasks.model import Trap
from vera_env.verification.strength.reference import Contents, Reference

__all__ = ["METADATA", "MITO_GENES", "qc_cells", "read_10x"]

MITO_GENES = ("mt-Nd1", "mt-Nd2", "mt-Co1", "mt-Co2", "mt-Atp8", "mt-Atp6", "mt-Co3",
              "mt-Nd3", "mt-Nd4l", "mt-Nd4", "mt-Nd5", "mt-Nd6", "mt-Cytb")
"""The 13 protein-coding genes of the mouse mitochondrial genome."""

_NUCLEAR = ("Actb", "Gapdh", "Malat1", "Cd74", "Ptprc", "Lyz2", "Cst3", "B2m", "Tmsb4x",
            "Rps27", "Rpl13", "Eef1a1", "Fth1", "Ftl1", "Vim", "S100a6", "Apoe", "Sparc",
            "Col1a1", "Cd3e", "Cd19", "Ms4a1", "Nkg7", "Hba-a1", "Hbb-bs", "Mt1", "Mt2",
            "Mtor", "Mki67", "Top2a")
_SIZES = {"warmup": (50, 30), "easy": (300, 150), "medium": (1500, 600), "hard": (5000, 2000),
          "xl": (30_000, 8000)}  # genes, cells


def _genes(rng: np.random.Generator, n_genes: int) -> list[str]:
    symbols = list(_NUCLEAR) + [f"Gm{10000 + i}" for i in range(n_genes - len(_NUCLEAR)
                                                                 - len(MITO_GENES))]
    symbols = [symbols[i] for i in rng.permutation(len(symbols))]
    at = int(rng.integers(0, len(symbols)))  # the chrM block sits somewhere in the list
    return symbols[:at] + list(MITO_GENES) + symbols[at:]


def _plan_cells(rng: np.random.Generator, n_cells: int, min_counts: int, max_pct: int,
                dying: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Per-cell total counts and mitochondrial counts, kept clear of both thresholds;
    without ``dying`` (warmup) no cell fails on its mitochondrial fraction alone, so a
    filter that misses the mt- genes counts right."""
    kind = rng.choice(3, size=n_cells, p=[0.6, 0.15, 0.25] if dying else [0.75, 0.0, 0.25])
    if dying:
        kind[:3] = 1  # at least three dying cells, or the trap cannot bite
    totals = np.where(kind == 2, rng.integers(20, min_counts - 50, n_cells),
                      np.minimum(rng.lognormal(np.log(min_counts), 0.6, n_cells),
                                 10 * min_counts).astype(np.int64) + min_counts + 100)
    fractions = np.where(kind == 0, rng.uniform(0.005, max_pct / 100 - 0.04, n_cells),
                         np.where(kind == 1, rng.uniform(max_pct / 100 + 0.05, 0.8, n_cells),
                                  rng.uniform(0.0, 0.6, n_cells)))
    totals = totals.astype(np.int64)
    return totals, np.rint(fractions * totals).astype(np.int64)


METADATA = 'metadata_json: {"software_version": "vera_env-builtin", "format_version": 2}'
"""The comment line Cell Ranger writes under the MatrixMarket banner."""


def _matrix(rng: np.random.Generator, genes: list[str], totals: np.ndarray,
            mito: np.ndarray) -> Counts:
    """Genes x cells counts whose per-cell totals and mitochondrial counts are exactly
    the planned ones (reads are drawn from the mitochondrial and nuclear profiles apart)."""
    is_mito = np.array([g.startswith("mt-") for g in genes])
    weights = rng.gamma(0.3, 1.0, len(genes)) + 1e-3
    return concat([sample_counts(rng, mito, np.where(is_mito, weights, 0)),
                   sample_counts(rng, totals - mito, np.where(is_mito, 0, weights))])


_MITO_ROWS = "zcat genes.tsv.gz | awk -F'\\t' '$2 ~ /^mt-/ { print NR }' > mito_rows.txt"
_PER_CELL = ("zcat matrix.mtx.gz | awk 'NR == FNR { m[$1] = 1; next } /^%/ { next } "
             "!h { h = 1; next } { t[$2] += $3; if ($1 in m) mt[$2] += $3 } "
             "END { for (c in t) printf \"%d\\t%d\\t%d\\n\", c, t[c], mt[c] + 0 }' "
             "mito_rows.txt - | sort -n > cell_qc.tsv\nwc -l < cell_qc.tsv")
_MTX_SUM = ("zcat matrix.mtx.gz | awk '/^%/ { next } !h { h = 1; next } { s += $3 } "
            "END { printf \"%d\", s }'")


_BY_ROWS = ("zcat matrix.mtx.gz | awk 'NR == FNR { m[$1] = 1; next } /^%/ { next } "
            "!h { h = 1; next } ($1 in m) == @IN@ { s += $3 } END { printf \"%d\", s }' "
            "mito_rows.txt -")


def _solution(n_genes: int, n_cells: int, min_counts: int, max_pct: int, mito: np.ndarray,
              totals: np.ndarray, answer: int, n_dying: int) -> tuple[str, ...]:
    """Three nodes, each with checks of different facts (so different mutants kill them):
    the mt- gene list (genes.tsv.gz) with the mitochondrial and nuclear count sums it
    splits the matrix into; the per-cell table's total, its cells with enough counts and
    its dying cells; the answer, the low-count cells and the mt- list read again."""
    enough = n_dying + answer
    v = {"MIN": min_counts, "PCT": max_pct, "FRAC": max_pct / 100, "CELLS": n_cells,
         "ANS": answer, "DYING": n_dying, "MITO": int(mito.sum()), "ENOUGH": enough,
         "NUC": int(totals.sum() - mito.sum()), "LOW": n_cells - enough}
    return (
        turn("zcat genes.tsv.gz | head -3\n" + _MITO_ROWS + "\nwc -l < mito_rows.txt\n"
             "zcat genes.tsv.gz | awk -F'\\t' '$2 ~ /^mt-/ { printf \"%s \", $2 } "
             "END { print \"\" }'",
             node("load", f"13 mitochondrially encoded genes (mouse prefix mt-) among {n_genes}",
                  "mito_rows.txt"), [
                 check("conservation", "13 rows, each an mt- gene", verdict(
                     'test "$(wc -l < mito_rows.txt)" -eq 13 && test "$(zcat genes.tsv.gz | '
                     "awk -F'\\t' 'NR == FNR { m[$1] = 1; next } (FNR in m) && $2 ~ /^mt-/' "
                     'mito_rows.txt - | wc -l)" -eq 13')),
                 check("range", fill("the mt- rows hold @MITO@ counts of the matrix", **v),
                       verdict(fill(f'test "$({_BY_ROWS})" -eq @MITO@', IN=1, **v))),
                 check("range", fill("the other rows hold @NUC@ counts", **v),
                       verdict(fill(f'test "$({_BY_ROWS})" -eq @NUC@', IN=0, **v)))]),
        turn(_PER_CELL, node("qc", f"total and mitochondrial counts for {n_cells} cells",
                             "cell_qc.tsv", "n1"), [
            check("conservation", "every count is kept", verdict(
                "test \"$(awk '{ s += $2 } END { printf \"%d\", s }' cell_qc.tsv)\" -eq "
                f"\"$({_MTX_SUM})\"")),
            check("range", fill("@ENOUGH@ cells have at least @MIN@ counts", **v), verdict(fill(
                "test \"$(awk '$2 >= @MIN@' cell_qc.tsv | wc -l)\" -eq @ENOUGH@", **v))),
            check("range", fill("@DYING@ of them are over @PCT@% mitochondrial", **v),
                  verdict(fill("test \"$(awk '$2 >= @MIN@ && 100 * $3 >= @PCT@ * $2' "
                               "cell_qc.tsv | wc -l)\" -eq @DYING@", **v)))]),
        turn(fill("awk -v min=@MIN@ -v pct=@PCT@ '$2 >= min && 100 * $3 < pct * $2 { n++ } "
                  "END { print n + 0 }' cell_qc.tsv > n_pass.txt\ncat n_pass.txt", **v),
             node("test", f"{answer} of {n_cells} cells pass (>= {min_counts} counts, "
                          f"mitochondrial fraction < {max_pct}%)", "n_pass.txt", "n2"), [
                 check("invariance", "a fractional threshold gives the same count", verdict(fill(
                     "test \"$(awk '$2 >= @MIN@ && $3 / $2 < @FRAC@' cell_qc.tsv | wc -l)\" "
                     "-eq \"$(cat n_pass.txt)\" && test \"$(cat n_pass.txt)\" -eq @ANS@", **v))),
                 check("range", fill("@LOW@ cells fail on counts alone", **v), verdict(fill(
                     "test \"$(awk '$2 < @MIN@' cell_qc.tsv | wc -l)\" -eq @LOW@ && "
                     "test \"$(cat n_pass.txt)\" -le @ENOUGH@", **v))),
                 check("invariance", "genes.tsv.gz read again gives the same mt- rows",
                       verdict("test \"$(zcat genes.tsv.gz | awk -F'\\t' '$2 ~ /^mt-/ "
                               "{ print NR }' | paste -sd,)\" = \"$(paste -sd, mito_rows.txt)\" "
                               "&& test -s n_pass.txt"))]),
        final(str(answer)),
    )


# ----- the reference -----

def read_10x(contents: Contents, genes: str, cells: str) -> tuple[Mtx, list[list[str]], list[str]]:
    """The matrix, the gene table's fields and the barcodes of a genes x cells 10x layout.

    Raises:
        ValueError: A file missing or unreadable, a gene line without a symbol, or a matrix
            whose shape is not (genes, barcodes).
    """
    mtx = read_mtx(content_of(contents, "matrix.mtx.gz"))
    table = named_lines(content_of(contents, genes), genes)
    barcodes = [fields[0] for fields in named_lines(content_of(contents, cells), cells)]
    if any(len(fields) < 2 for fields in table):
        raise ValueError(f"a line of {genes} without a symbol column")
    if mtx.shape != (len(table), len(barcodes)):
        raise ValueError(f"matrix.mtx.gz is {mtx.shape[0]} x {mtx.shape[1]}, but {genes} "
                         f"names {len(table)} genes and {cells} {len(barcodes)} cells")
    return mtx, table, barcodes


def _per_cell(mtx: Mtx, mito_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Total and mitochondrial counts of every cell (index 0 is cell 1)."""
    rows, cols, values = mtx.entries.T
    n_cells = mtx.shape[1]
    totals = np.bincount(cols - 1, weights=values, minlength=n_cells)
    is_mito = np.isin(rows, mito_rows)
    mito = np.bincount(cols[is_mito] - 1, weights=values[is_mito], minlength=n_cells)
    return totals, mito


def _solve(contents: Contents, *, min_counts: int, max_pct: int) -> str:
    mtx, table, _ = read_10x(contents, "genes.tsv.gz", "barcodes.tsv.gz")
    mito_rows = np.array([i + 1 for i, fields in enumerate(table) if fields[1].startswith("mt-")])
    totals, mito = _per_cell(mtx, mito_rows)
    return str(int(np.count_nonzero((totals >= min_counts) & (100 * mito < max_pct * totals))))


def _qc_mutant(content: bytes, rng: random.Random, *, kind: str, mito_rows: tuple[int, ...],
               min_counts: int, max_pct: int) -> bytes | None:
    """One entry changed so that one cell changes side: a passing cell's mitochondrial
    count raised over the fraction (``mito``), or an empty cell's nuclear count raised to
    pass (``total``)."""
    mtx = read_mtx(content)
    totals, mito = _per_cell(mtx, np.array(mito_rows))
    passing = (totals >= min_counts) & (100 * mito < max_pct * totals)
    rows, cols, values = mtx.entries.T
    is_mito = np.isin(rows, mito_rows)
    if kind == "mito":
        cells = passing[cols - 1] & is_mito
    else:
        cells = (totals[cols - 1] < min_counts) & ~is_mito & (100 * mito[cols - 1] < max_pct * min_counts)
    candidates = np.flatnonzero(cells)
    if not len(candidates):
        return None
    k = int(candidates[rng.randrange(len(candidates))])
    cell, value = int(cols[k]) - 1, int(values[k])
    total, m = int(totals[cell]), int(mito[cell])
    if kind == "mito":  # 100 (m + x) >= pct (total + x): x extra mitochondrial reads
        extra = -(-(max_pct * total - 100 * m) // (100 - max_pct))
    else:  # total + x >= min_counts, and the fraction stays under max_pct
        extra = max(min_counts - total, 100 * m // max_pct + 1 - total)
    line = b"%d %d %d\n" % (rows[k], cols[k], value + max(1, extra))
    return mtx.edited({k: line})


def _unmito_lines(genes: list[str], counts: Counts, totals: np.ndarray, min_counts: int,
                  max_pct: int, answer: int) -> tuple[int, ...]:
    """Lines (1-based) of the fewest mt- genes, most counted first, without which another
    number of cells would pass (all thirteen at worst: then no cell is ever dying, the
    trap's own answer, which differs)."""
    rows, cols, values = counts
    is_mito = np.array([g.startswith("mt-") for g in genes])
    per_gene = np.bincount(rows, weights=values, minlength=len(genes))
    heaviest = [int(g) for g in np.argsort(-per_gene, kind="stable") if is_mito[g]]
    mito = np.bincount(cols[is_mito[rows]], weights=values[is_mito[rows]], minlength=len(totals))
    for k, row in enumerate(heaviest, 1):
        mito = mito - np.bincount(cols[rows == row], weights=values[rows == row],
                                  minlength=len(totals))
        if int(np.count_nonzero((totals >= min_counts) & (100 * mito < max_pct * totals))) \
                != answer:
            return tuple(g + 1 for g in heaviest[:k])
    return ()


def _unmito(content: bytes, rng: random.Random, *, lines: tuple[int, ...]) -> bytes | None:
    """The ``mt-`` prefix dropped from the genes on ``lines`` of genes.tsv.gz (the fewest
    that move the answer, found by the generator): which genes are mitochondrial is what
    the question reads there."""
    rows = lines_of(content)
    if not lines or max(lines) > len(rows):
        return None
    edits = {}
    for at in (line - 1 for line in lines):
        fields = tsv_fields(rows[at])
        if len(fields) < 2 or not fields[1].startswith(b"mt-"):
            return None
        fields[1] = fields[1][3:]
        edits[at] = rejoin(fields, rows[at])
    return edit_lines(content, edits)


def _reference(genes: list[str], min_counts: int, max_pct: int, unmito: tuple[int, ...]
               ) -> Reference:
    mito_rows = tuple(i + 1 for i, g in enumerate(genes) if g.startswith("mt-"))
    return Reference(
        solve=partial(_solve, min_counts=min_counts, max_pct=max_pct),
        preserving={"matrix.mtx.gz": ("recompress", "shuffle_records", "add_comment"),
                    "genes.tsv.gz": ("recompress",), "barcodes.tsv.gz": ("recompress",)},
        mutators={"matrix.mtx.gz": aimed(*(partial(
            _qc_mutant, kind=kind, mito_rows=mito_rows, min_counts=min_counts, max_pct=max_pct)
            for kind in ("mito", "total"))),
                  "genes.tsv.gz": aimed(partial(_unmito, lines=unmito))},
        controls={"matrix.mtx.gz": aimed(split_entry),
                  "genes.tsv.gz": aimed(renamed_ids, renamed_symbols),
                  "barcodes.tsv.gz": aimed(renamed_barcodes)})


def qc_cells(rng: np.random.Generator, difficulty: Difficulty) -> Instance:
    """Cells passing a count and mitochondrial-fraction filter (trap: ``grep MT-``; no
    dying cell at warmup)."""
    n_genes, n_cells = _SIZES[difficulty]
    min_counts = int(rng.choice([500, 1000]))
    max_pct = int(rng.choice([10, 15, 20]))
    genes = _genes(rng, n_genes)
    totals, mito = _plan_cells(rng, n_cells, min_counts, max_pct, difficulty != "warmup")
    enough = totals >= min_counts
    answer = int(np.count_nonzero(enough & (100 * mito < max_pct * totals)))
    careless = int(np.count_nonzero(enough))
    ids = [f"ENSMUSG{int(x):011d}" for x in np.cumsum(rng.integers(1, 3000, n_genes)) + 1000]
    counts = _matrix(rng, genes, totals, mito)
    files = {
        "matrix.mtx.gz": gz(mtx_bytes(n_genes, n_cells, *counts, (METADATA,))),
        "genes.tsv.gz": gz("".join(f"{i}\t{g}\n" for i, g in zip(ids, genes, strict=True))),
        "barcodes.tsv.gz": gz("".join(b + "\n" for b in barcodes(rng, n_cells))),
    }
    question = (f"This is a mouse single-cell dataset (10x layout: matrix.mtx.gz is genes x "
                f"cells, with genes.tsv.gz and barcodes.tsv.gz). A cell passes QC if its total "
                f"count is at least {min_counts} and less than {max_pct}% of its counts come "
                "from mitochondrially encoded genes. How many cells pass QC? Answer with one "
                "integer.")
    careless_cmd = fill(
        "zcat genes.tsv.gz | grep -n 'MT-' | cut -d: -f1 > mito_rows.txt\n"
        "wc -l < mito_rows.txt\n"
        "zcat matrix.mtx.gz | awk -v rows=\"$(tr '\\n' ' ' < mito_rows.txt)\" 'BEGIN { "
        "split(rows, r, \" \"); for (i in r) m[r[i]] = 1 } /^%/ { next } !h { h = 1; next } "
        "{ t[$2] += $3; if ($1 in m) mt[$2] += $3 } END { for (c in t) if (t[c] >= @MIN@ && "
        "100 * mt[c] < @PCT@ * t[c]) n++; print n + 0 }'", MIN=min_counts, PCT=max_pct)
    trap = Trap(
        description=("human mitochondrial prefix MT- matches no mouse gene (mt-), so every "
                     "cell's mitochondrial fraction is 0 and dying cells pass"),
        careless_solution=(
            turn(careless_cmd, node("qc", f"{careless} cells pass QC", "mito_rows.txt"), [
                check("range", "mito gene list was read", verdict(
                    'test "$(wc -l < mito_rows.txt)" -ge 0'))]),
            final(str(careless))),
        wrong_answer=str(careless))
    solution = _solution(n_genes, n_cells, min_counts, max_pct, mito, totals, answer,
                         careless - answer)
    return Instance(files=files, question=question, answer=str(answer),
                    grader={"kind": "numeric", "abs_tol": 0}, solution=solution, trap=trap,
                    tags=("single-cell", "sparse-matrix", "qc", "mitochondrial", "mouse"),
                    reference=_reference(genes, min_counts, max_pct, _unmito_lines(
                        genes, counts, totals, min_counts, max_pct, answer)))
