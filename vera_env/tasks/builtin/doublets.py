"""Sparse count matrix family: T/B doublets in a matrix exported cells x genes.

Why this trap. Cell Ranger writes genes x cells; AnnData holds cells x genes, and a
matrix exported from it with ``scipy.io.mmwrite(adata.X)`` keeps that orientation. The
files look the same (``matrix.mtx.gz``, ``features.tsv.gz``, ``barcodes.tsv.gz``), so an
analysis written for 10x output reads a cell where it means a gene: it looks up
Cd3e's line number in features.tsv.gz, picks the matrix entries whose *first* index is
that number -- a cell -- and happily counts something. The result is a small integer,
as a doublet count is. The MatrixMarket size line (cells, genes, entries) and a comment
under the banner say which way round the matrix is, for whoever looks.

Doublets are planted as the sum of a T-cell and a B-cell read profile. The ground truth
is counted on the drawn entries (barcodes with at least 3 Cd3e and 3 Cd19 counts); tests
recount it by parsing the written matrix.

Each instance's `Reference` recounts from the decoded files, telling the orientation
from the size line against the barcode and feature counts (entries in any order,
comments allowed; the lists are read by line number, so they keep their lines). It
answers "cannot be determined" when a marker is not listed exactly once. The aimed
mutants change one entry -- a doublet's Cd19 count lowered under the threshold, or a T
cell given enough Cd19 to become one -- or move the Cd19 symbol to another line of
features.tsv.gz (a check that pins the marker's column dies on that one).
"""

from __future__ import annotations

import random
from functools import partial

import numpy as np

from vera_env.tasks.builtin.counts import (
    barcodes,
    concat,
    gene_table,
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
from vera_env.tasks.undetermined import CANNOT_DETERMINE
from vera_env.verification.strength.reference import Contents, Reference

__all__ = ["doublets"]

MIN_COUNTS = 3
_MARKERS = ("Cd3e", "Cd19")
_OTHER = ("Actb", "Gapdh", "Malat1", "B2m", "Ptprc", "Cd74", "Lyz2", "Cd3d", "Cd3g", "Cd4",
          "Cd8a", "Ms4a1", "Cd79a", "Cd79b", "Itgam", "Csf1r", "Nkg7", "Gzma", "Hba-a1")
_SIZES = {"warmup": (40, 40), "easy": (300, 200), "medium": (1500, 800), "hard": (5000, 2500),
          "xl": (30_000, 5000)}  # genes, cells
_EXPORT_NOTE = "exported from AnnData with scipy.io.mmwrite(adata.X): rows = cells, columns = genes"


def _draw(rng: np.random.Generator, n_genes: int, n_cells: int
          ) -> tuple[list[str], list[str], np.ndarray, tuple[np.ndarray, ...]]:
    """Symbols, ids, each cell's kind (0 T, 1 B, 2 myeloid, 3 doublet) and the entries."""
    ids, symbols = gene_table(rng, _MARKERS + _OTHER, n_genes)
    t_col, b_col = symbols.index("Cd3e"), symbols.index("Cd19")
    base = rng.gamma(0.3, 1.0, n_genes) + 1e-3
    base[[t_col, b_col]] = 0.0
    marker = 0.005 * base.sum()
    profiles = [base.copy(), base.copy(), base]
    profiles[0][t_col], profiles[1][b_col] = marker, marker
    kind = rng.choice(4, size=n_cells, p=[0.36, 0.3, 0.27, 0.07])
    kind[:2] = 3  # at least two doublets
    kind = kind[rng.permutation(n_cells)]
    totals = np.clip(rng.lognormal(np.log(1800), 0.4, n_cells), 500, 6000).astype(np.int64)
    halves = np.flatnonzero(kind == 3)
    plan = [(np.flatnonzero(kind == k), totals[kind == k], profiles[k]) for k in range(3)]
    plan += [(halves, totals[halves] // 2, profiles[k]) for k in (0, 1)]  # doublet = T + B
    parts = []
    for group, reads, profile in plan:
        g, c, v = sample_counts(rng, reads, profile)
        parts.append((g, group[c], v))
    return ids, symbols, kind, concat(parts)


def _solution(n_genes: int, n_cells: int, t_col: int, b_col: int, answer: int,
              t_high: int, b_high: int) -> tuple[str, ...]:
    """Two nodes whose checks track different facts: the markers' columns
    (features.tsv.gz) with the cells high in each marker (the matrix); the doublets, the
    T-high and the B-high cells that are not doublets. The orientation is looked at
    first, without a node: that the size line matches the lists holds on every mutant."""
    v = {"NC": n_cells, "NG": n_genes, "T": t_col + 1, "B": b_col + 1, "ANS": answer,
         "MIN": MIN_COUNTS, "TH": t_high, "BH": b_high, "TO": t_high - answer,
         "BO": b_high - answer}
    body = "/^%/ { next } !h { h = 1; next }"
    pick = ("-v t=\"$(awk -F'\\t' '$1 == \"Cd3e\" { print $2 }' markers.tsv)\" "
            "-v b=\"$(awk -F'\\t' '$1 == \"Cd19\" { print $2 }' markers.tsv)\"")
    high = ("zcat matrix.mtx.gz | awk -v c=\"$(awk -F'\\t' '$1 == \"@M@\" { print $2 }' "
            f"markers.tsv)\" '{body} $2 == c && $3 >= @MIN@' | wc -l")
    only = ("awk 'NR == FNR { d[$1] = 1; next } !($1 in d)' doublets.txt @F@.txt | wc -l")
    return (
        turn("zcat matrix.mtx.gz | head -3\nzcat matrix.mtx.gz | grep -v '^%' | head -1 "
             "> dims.txt\ncat dims.txt\nzcat barcodes.tsv.gz | wc -l\nzcat features.tsv.gz | wc -l"),
        turn("zcat features.tsv.gz | awk -F'\\t' '$2 == \"Cd3e\" || $2 == \"Cd19\" "
             "{ print $2 \"\\t\" NR }' > markers.tsv\ncat markers.tsv",
             node("transform", fill("the matrix is cells x genes; Cd3e is matrix column @T@ "
                                    "and Cd19 column @B@", **v), "markers.tsv"), [
                 check("type", "each marker's column is its features.tsv.gz line", fill(
                     "zcat features.tsv.gz | awk -F'\\t' 'NR == FNR { want[$2] = $1; n++; next } "
                     "(FNR in want) && want[FNR] == $2 { k++ } END { print (n == 2 && k == 2) ? "
                     "\"True\" : \"False\" }' markers.tsv -", **v)),
                 check("range", fill("@TH@ cells have >= @MIN@ Cd3e counts", **v), verdict(
                     fill(f'test "$({high})" -eq @TH@', M="Cd3e", **v))),
                 check("range", fill("@BH@ cells have >= @MIN@ Cd19 counts", **v), verdict(
                     fill(f'test "$({high})" -eq @BH@', M="Cd19", **v)))]),
        turn(fill(f"zcat matrix.mtx.gz | awk {pick} '{body} $2 == t && $3 >= @MIN@ "
                  "{ print $1 > \"t_high.txt\" } $2 == b && $3 >= @MIN@ { print $1 > "
                  "\"b_high.txt\" }'\nsort -n t_high.txt b_high.txt | uniq -d > doublets.txt\n"
                  "wc -l < doublets.txt", **v),
             node("test", fill("@ANS@ barcodes have >= @MIN@ Cd3e and >= @MIN@ Cd19 counts: "
                               "T/B doublets", **v), "doublets.txt", "n1"), [
                 check("range", "the doublets are distinct cell rows", fill(
                     "awk '$1 < 1 || $1 > @NC@ || $1 <= p { bad = 1 } { p = $1 } END { print "
                     "(NR == @ANS@ && !bad) ? \"True\" : \"False\" }' doublets.txt", **v)),
                 check("range", fill("@TO@ Cd3e-high cells are single T cells", **v), verdict(
                     fill(f'test "$({only})" -eq @TO@', F="t_high", **v))),
                 check("range", fill("@BO@ Cd19-high cells are single B cells", **v), verdict(
                     fill(f'test "$({only})" -eq @BO@', F="b_high", **v)))]),
        turn("cut -f2 markers.tsv | paste -sd' ' > marker_cols.txt\ncat marker_cols.txt\n"
             "wc -l < doublets.txt",
             node("test", fill("the count used features.tsv.gz lines @T@ and @B@, the matrix's "
                               "columns (it is cells x genes)", **v), "marker_cols.txt", "n2"), [
                 check("invariance", "features.tsv.gz read again gives the same lines", verdict(
                     "test \"$(zcat features.tsv.gz | awk -F'\\t' '$2 == \"Cd3e\" || "
                     "$2 == \"Cd19\" { print NR }' | paste -sd' ')\" = \"$(cat marker_cols.txt)\"")),
                 check("invariance", "sort | uniq -d over both marker columns gives the same "
                                     "cells", fill(
                     f"zcat matrix.mtx.gz | awk {pick} '{body} ($2 == t || $2 == b) && "
                     "$3 >= @MIN@ { print $1 }' | sort -n | uniq -d | cmp -s - "
                     "doublets.txt && echo True || echo False", **v))]),
        final(str(answer)),
    )


def _careless(wrong: int) -> Trap:
    cmd = fill(
        "t=$(zcat features.tsv.gz | awk -F'\\t' '$2 == \"Cd3e\" { print NR }')\n"
        "b=$(zcat features.tsv.gz | awk -F'\\t' '$2 == \"Cd19\" { print NR }')\n"
        "zcat matrix.mtx.gz | awk -v t=\"$t\" -v b=\"$b\" '/^%/ { next } !h { h = 1; next } "
        "$1 == t && $3 >= @MIN@ { x[$2] = 1 } $1 == b && $3 >= @MIN@ { y[$2] = 1 } "
        "END { for (c in x) if (c in y) n++; print n + 0 }' > n_doublets.txt\n"
        "cat n_doublets.txt", MIN=MIN_COUNTS)
    return Trap(
        description=("the matrix is cells x genes (exported from AnnData); reading it as 10x "
                     "genes x cells looks up cells where it means marker genes"),
        careless_solution=(
            turn(cmd, node("test", f"{wrong} T/B doublets", "n_doublets.txt"), [
                check("range", "the count is a non-negative integer", verdict(
                    "test \"$(cat n_doublets.txt)\" -ge 0"))]),
            final(str(wrong))),
        wrong_answer=str(wrong))


def _careless_count(rows: np.ndarray, cols: np.ndarray, values: np.ndarray, t_col: int,
                    b_col: int) -> int:
    """What the careless awk computes: genes with >= MIN counts in *cells* t and b."""
    high = values >= MIN_COUNTS
    in_t = set(cols[high & (rows == t_col)].tolist())  # rows hold cells in the file
    in_b = set(cols[high & (rows == b_col)].tolist())
    return len(in_t & in_b)


# ----- the reference -----

def _solve(contents: Contents) -> str:
    mtx = read_mtx(content_of(contents, "matrix.mtx.gz"))
    features = named_lines(content_of(contents, "features.tsv.gz"), "features.tsv.gz")
    n_cells = len(named_lines(content_of(contents, "barcodes.tsv.gz"), "barcodes.tsv.gz"))
    if mtx.shape == (n_cells, len(features)):
        cell, gene = 0, 1
    elif mtx.shape == (len(features), n_cells):
        cell, gene = 1, 0
    else:
        raise ValueError(f"matrix.mtx.gz is {mtx.shape[0]} x {mtx.shape[1]}, but there are "
                         f"{n_cells} barcodes and {len(features)} features")
    found = [[i + 1 for i, f in enumerate(features) if f[1:2] == [marker]] for marker in _MARKERS]
    if any(len(lines) != 1 for lines in found):
        return CANNOT_DETERMINE
    high = mtx.entries[mtx.entries[:, 2] >= MIN_COUNTS]
    t_cells, b_cells = (high[high[:, gene] == lines[0], cell] for lines in found)
    return str(len(np.intersect1d(t_cells, b_cells)))


def _doublet_mutant(content: bytes, rng: random.Random, *, kind: str, t_col: int, b_col: int
                    ) -> bytes | None:
    """A doublet's Cd19 count set under the threshold (``lower``), or a Cd3e-high cell
    without enough Cd19 given the threshold's worth (``raise``); columns are 1-based."""
    mtx = read_mtx(content)
    rows, cols, values = mtx.entries.T
    t_high = set(rows[(cols == t_col) & (values >= MIN_COUNTS)].tolist())
    b_at = {int(r): k for k, r in zip(np.flatnonzero(cols == b_col).tolist(),
                                       rows[cols == b_col].tolist(), strict=True)}
    if kind == "raise_t":  # the same, markers swapped: a B-high cell made a doublet
        return _doublet_mutant(content, rng, kind="raise", t_col=b_col, b_col=t_col)
    if kind == "lower":
        cells = sorted(c for c in t_high if c in b_at and values[b_at[c]] >= MIN_COUNTS)
    else:
        cells = sorted(c for c in t_high if c not in b_at or values[b_at[c]] < MIN_COUNTS)
    if not cells:
        return None
    c = rng.choice(cells)
    line = b"%d %d %d\n" % (c, b_col, MIN_COUNTS - 1 if kind == "lower" else MIN_COUNTS)
    return mtx.edited({b_at[c]: line}) if c in b_at else mtx.edited({}, (line,))


def _move_marker(content: bytes, rng: random.Random, *, b_line: int, lines: tuple[int, ...]
                 ) -> bytes | None:
    """Cd19's symbol swapped with that of another line of features.tsv.gz, one the
    generator found gives another count (``lines``, 1-based)."""
    rows = lines_of(content)
    if not lines or b_line > len(rows) or max(lines) > len(rows):
        return None
    other = rng.choice(lines)
    a, b = tsv_fields(rows[b_line - 1]), tsv_fields(rows[other - 1])
    a[1], b[1] = b[1], a[1]
    return edit_lines(content, {b_line - 1: rejoin(a, rows[b_line - 1]),
                                other - 1: rejoin(b, rows[other - 1])})


def _recounting(genes: np.ndarray, cells: np.ndarray, values: np.ndarray, t_col: int,
                b_col: int, answer: int) -> tuple[int, ...]:
    """Feature lines (1-based) that, named Cd19, would give another doublet count."""
    t_high = np.unique(cells[(genes == t_col) & (values >= MIN_COUNTS)])
    both = (values >= MIN_COUNTS) & np.isin(cells, t_high)
    counts = np.bincount(genes[both], minlength=int(genes.max()) + 1)
    return tuple(int(g) + 1 for g in np.flatnonzero(counts != answer) if g not in (t_col, b_col))


def _reference(t_col: int, b_col: int, swap: tuple[int, ...]) -> Reference:
    return Reference(
        solve=_solve,
        preserving={"matrix.mtx.gz": ("recompress", "shuffle_records", "add_comment"),
                    "features.tsv.gz": ("recompress",), "barcodes.tsv.gz": ("recompress",)},
        mutators={"matrix.mtx.gz": aimed(*(partial(_doublet_mutant, kind=kind, t_col=t_col + 1,
                                                   b_col=b_col + 1) for kind in ("lower", "raise", "raise_t"))),
                  "features.tsv.gz": aimed(partial(_move_marker, b_line=b_col + 1, lines=swap))},
        controls={"matrix.mtx.gz": aimed(partial(split_entry, axis=1,
                                                 avoid=(t_col + 1, b_col + 1))),
                  "features.tsv.gz": aimed(renamed_ids, partial(
                      renamed_symbols, keep=(t_col + 1, b_col + 1))),
                  "barcodes.tsv.gz": aimed(renamed_barcodes)})


def doublets(rng: np.random.Generator, difficulty: Difficulty) -> Instance:
    """Count T/B doublets in a cells x genes matrix (trap: reading it as genes x cells)."""
    n_genes, n_cells = _SIZES[difficulty]
    for _ in range(10):
        ids, symbols, kind, (genes, cells, values) = _draw(rng, n_genes, n_cells)
        t_col, b_col = symbols.index("Cd3e"), symbols.index("Cd19")
        per_cell = np.zeros((2, n_cells), dtype=np.int64)
        for i, col in enumerate((t_col, b_col)):
            mask = genes == col
            per_cell[i, cells[mask]] = values[mask]
        answer = int(np.count_nonzero((per_cell >= MIN_COUNTS).all(axis=0)))
        # In the file a row is a cell: the careless reads cells t_col + 1 and b_col + 1.
        wrong = _careless_count(cells, genes, values, t_col, b_col)
        if answer > 0 and wrong != answer:
            break
    else:
        raise RuntimeError("doublets: the trap does not bite; generator bug")
    files = {  # row-major, as scipy writes a CSR matrix: by cell, then gene
        "matrix.mtx.gz": gz(mtx_bytes(n_cells, n_genes, cells, genes, values, (_EXPORT_NOTE,))),
        "features.tsv.gz": gz("".join(f"{i}\t{g}\tGene Expression\n"
                                      for i, g in zip(ids, symbols, strict=True))),
        "barcodes.tsv.gz": gz("".join(b + "\n" for b in barcodes(rng, n_cells))),
    }
    question = (f"Mouse spleen cells: matrix.mtx.gz with barcodes.tsv.gz (cells) and "
                f"features.tsv.gz (genes). T cells express Cd3e and B cells express Cd19, never "
                f"both; a barcode with at least {MIN_COUNTS} counts of Cd3e and at least "
                f"{MIN_COUNTS} counts of Cd19 is a T/B doublet. How many doublets are there? "
                "Answer with one integer.")
    return Instance(files=files, question=question, answer=str(answer),
                    grader={"kind": "numeric", "abs_tol": 0},
                    solution=_solution(n_genes, n_cells, t_col, b_col, answer, *(
                        len(np.unique(cells[(genes == col) & (values >= MIN_COUNTS)]))
                        for col in (t_col, b_col))),
                    trap=_careless(wrong),
                    tags=("single-cell", "sparse-matrix", "doublets", "orientation"),
                    reference=_reference(t_col, b_col, _recounting(genes, cells, values, t_col,
                                                                    b_col, answer)))
