"""Sparse count matrix family: which gene was knocked out in the treated cells?

Why this trap. MatrixMarket indices are 1-based: entry ``17 4 3`` is gene 17, the
seventeenth line of ``genes.tsv.gz``. Python lists are 0-based, so the natural
``genes[row]`` names the gene on the *next* line. The analysis is otherwise right --
the knocked-out gene is found, its row is right -- and the answer is a real gene symbol
from the list, one line off. Nothing about it looks wrong unless the row is looked up
again in the file.

Layout: Cell Ranger v2 (``matrix.mtx.gz`` genes x cells, ``genes.tsv.gz``,
``barcodes.tsv.gz``) plus ``cells.tsv`` (barcode, group), with control and treated
barcodes interleaved so that column numbers cannot be guessed from the order.

The ground truth is the gene the generator zeroes in the treated cells' expression
profile; generation verifies on the drawn counts that it is the only gene detected in
at least half of the control cells with no count in any treated cell (and redraws if
chance made a second one). Tests re-derive it by parsing the written files.

Each instance's `Reference` re-derives the gene from the decoded files (entries and
cells.tsv rows in any order, comments in the matrix); it answers "cannot be determined"
when no gene, or more than one, fits. The gene and barcode lists are read by line
number, so they keep their lines and order. The aimed mutants are of three kinds: one
count of the gene in a treated cell (the matrix), one control cell where the gene is
detected relabelled treated (cells.tsv), and the gene's symbol swapped with the next
line's (genes.tsv.gz: the off-by-one answer becomes the right one).
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
from vera_env.tasks.builtin.matrices import METADATA, read_10x
from vera_env.tasks.builtin.solvers import (
    aimed,
    edit_lines,
    lines_of,
    read_mtx,
    read_table,
    rejoin,
    text_of,
    tsv_fields,
)
from vera_env.tasks.model import Trap
from vera_env.tasks.undetermined import CANNOT_DETERMINE
from vera_env.verification.strength.reference import Contents, Reference

__all__ = ["KNOCKOUT_TARGETS", "knockout_gene"]

KNOCKOUT_TARGETS = ("Stat1", "Irf8", "Batf3", "Tbx21", "Gata3", "Rorc", "Ikzf1", "Pax5",
                    "Ebf1", "Spi1", "Cebpa", "Myc", "Trp53", "Pten", "Nfkb1", "Jak1")
_HOUSEKEEPING = ("Actb", "Gapdh", "Malat1", "B2m", "Tmsb4x", "Rps27", "Rpl13", "Eef1a1",
                 "Fth1", "Ftl1", "Vim", "Ptprc", "Cd74", "Lyz2")
_SIZES = {"warmup": (40, 30), "easy": (300, 160), "medium": (1500, 600), "hard": (5000, 2000),
          "xl": (30_000, 5000)}  # genes, cells


class _Draw:
    """One draw of the screen: symbols, groups, counts and the per-gene summaries."""

    def __init__(self, rng: np.random.Generator, n_genes: int, n_cells: int) -> None:
        self.ids, self.symbols = gene_table(rng, _HOUSEKEEPING + KNOCKOUT_TARGETS, n_genes)
        targets = [self.symbols.index(t) for t in KNOCKOUT_TARGETS]
        self.ko = targets[int(rng.integers(len(targets)))]
        if self.ko == n_genes - 1:  # keep a next line: the careless genes[row] must exist
            self.symbols.insert(0, self.symbols.pop())
            self.ko = 0
        # The next line holds another plausible target, so the off-by-one answer is too.
        decoy = self.symbols.index(KNOCKOUT_TARGETS[(KNOCKOUT_TARGETS.index(
            self.symbols[self.ko]) + 1 + int(rng.integers(len(KNOCKOUT_TARGETS) - 1)))
            % len(KNOCKOUT_TARGETS)])
        nxt = self.ko + 1
        self.symbols[nxt], self.symbols[decoy] = self.symbols[decoy], self.symbols[nxt]
        self.treated = rng.random(n_cells) < rng.uniform(0.4, 0.6)
        totals = np.clip(rng.lognormal(np.log(2000), 0.4, n_cells), 600, 8000).astype(np.int64)
        weights = rng.gamma(0.3, 1.0, n_genes) + 1e-3
        weights[self.ko] = 0.004 * (weights.sum() - weights[self.ko]) / 0.996
        knocked = weights.copy()
        knocked[self.ko] = 0.0
        parts = []
        for cells, profile in ((np.flatnonzero(~self.treated), weights),
                               (np.flatnonzero(self.treated), knocked)):
            g, c, v = sample_counts(rng, totals[cells], profile)
            parts.append((g, cells[c], v))
        self.rows, self.cols, self.values = concat(parts)
        in_ctrl = ~self.treated[self.cols]
        self.detected = np.bincount(self.rows[in_ctrl], minlength=n_genes)
        self.in_treated = np.bincount(self.rows[~in_ctrl], weights=self.values[~in_ctrl],
                                      minlength=n_genes)
        n_ctrl = int((~self.treated).sum())
        self.candidates = np.flatnonzero((2 * self.detected >= n_ctrl) & (self.in_treated == 0))


_BODY = "/^%/ { next } !h { h = 1; next }"
_PER_GENE = fill(
    "zcat matrix.mtx.gz | awk 'NR == FNR { grp[$1] = $3; next } @BODY@ { seen[$1] = 1; "
    "if (grp[$2] == \"control\") { nz[$1]++; c[$1] += $3 } else t[$1] += $3 } "
    "END { for (r in seen) printf \"%d\\t%d\\t%d\\t%d\\n\", r, nz[r] + 0, c[r] + 0, t[r] + 0 }' "
    "columns.tsv - | sort -n > gene_stats.tsv\nwc -l < gene_stats.tsv", BODY=_BODY)


def _solution(d: _Draw, n_genes: int) -> tuple[str, ...]:
    """Three nodes whose checks track different facts: the groups (cells.tsv) and the
    counts the matrix holds in each; the gene table's totals, the knockout's treated
    count and its control detection apart; the gene's symbol (genes.tsv.gz) and its
    detecting cells' groups (cells.tsv)."""
    n_cells, n_treated = len(d.treated), int(d.treated.sum())
    in_treated = d.treated[d.cols]
    v = {"N": n_cells, "C": n_cells - n_treated, "T": n_treated, "G": n_genes,
         "NG": int(np.count_nonzero(np.bincount(d.rows, minlength=n_genes))),
         "R": d.ko + 1, "SYM": d.symbols[d.ko], "K": int(d.detected[d.ko]),
         "CS": int(d.values[~in_treated].sum()), "TS": int(d.values[in_treated].sum())}
    total = f"zcat matrix.mtx.gz | awk '{_BODY} {{ s += $3 }} END {{ printf \"%d\", s }}'"
    by_group = ("zcat matrix.mtx.gz | awk 'NR == FNR { grp[$1] = $3; next } @BODY@ "
                "grp[$2] == \"@GRP@\" { s += $3 } END { printf \"%d\", s }' columns.tsv -")
    return (
        turn("head -3 cells.tsv\nzcat barcodes.tsv.gz | awk 'NR == FNR { g[$1] = $2; next } "
             "{ print FNR \"\\t\" $1 \"\\t\" g[$1] }' cells.tsv - > columns.tsv\n"
             "cut -f3 columns.tsv | sort | uniq -c",
             node("load", fill("matrix column j is line j of barcodes.tsv.gz: @C@ control and "
                               "@T@ treated cells", **v), "columns.tsv"), [
                 check("conservation", fill("one row per barcode, @C@ control, @T@ treated",
                                            **v), verdict(fill(
                     "test \"$(wc -l < columns.tsv)\" -eq @N@ && "
                     "test \"$(awk '$3 == \"control\"' columns.tsv | wc -l)\" -eq @C@ && "
                     "test \"$(awk '$3 == \"treated\"' columns.tsv | wc -l)\" -eq @T@", **v))),
                 check("range", fill("the control columns hold @CS@ counts", **v), verdict(
                     fill(f"test \"$({by_group})\" -eq @CS@", GRP="control", BODY=_BODY, **v))),
                 check("range", fill("the treated columns hold @TS@ counts", **v), verdict(
                     fill(f"test \"$({by_group})\" -eq @TS@", GRP="treated", BODY=_BODY, **v)))]),
        turn(_PER_GENE, node("transform", fill("control detection and treated counts for the "
                                              "@NG@ genes with any count", **v),
                            "gene_stats.tsv", "n1"), [
            check("conservation", "control plus treated counts are every count", verdict(
                "test \"$(awk '{ s += $3 + $4 } END { printf \"%d\", s }' gene_stats.tsv)\" "
                f"-eq \"$({total})\"")),
            check("range", fill("row @R@ has no treated count", **v), fill(
                "awk '$1 < 1 || $1 > @G@ { bad = 1 } $1 == @R@ { t = $4; n++ } END { print (!bad "
                "&& n == 1 && t == 0) ? \"True\" : \"False\" }' gene_stats.tsv", **v)),
            check("range", fill("row @R@ is detected in @K@ control cells", **v), verdict(fill(
                "test \"$(awk '$1 == @R@ { print $2 }' gene_stats.tsv)\" -eq @K@", **v)))]),
        turn(fill("awk '2 * $2 >= @C@ && $4 == 0 { print $1 }' gene_stats.tsv > ko_rows.txt\n"
                  "zcat genes.tsv.gz | awk -F'\\t' 'NR == FNR { want[$1] = 1; next } "
                  "FNR in want { print FNR \"\\t\" $2 }' ko_rows.txt - > ko_gene.tsv\n"
                  "zcat matrix.mtx.gz | awk -v r=\"$(cat ko_rows.txt)\" 'NR == FNR { b[FNR] = $1; "
                  "next } @BODY@ $1 == r && $3 > 0 { print b[$2] }' <(zcat barcodes.tsv.gz) - "
                  "| sort -u > ko_cells.txt\ncat ko_gene.tsv\nwc -l < ko_cells.txt\n"
                  "cut -f2 ko_gene.tsv", BODY=_BODY, **v),
             node("test", fill("@SYM@ (row @R@, 1-based) is detected in @K@ of @C@ control "
                               "cells and has no count in any treated cell", **v),
                  "ko_gene.tsv", "n2"), [
                 check("range", "exactly one gene is lost in the treated cells", verdict(fill(
                     "test \"$(wc -l < ko_rows.txt)\" -eq 1 && "
                     "test \"$(cut -f1 ko_gene.tsv)\" -eq @R@", **v))),
                 check("invariance", "the row names the same gene when read with sed", verdict(
                     "test \"$(zcat genes.tsv.gz | sed -n \"$(cat ko_rows.txt)p\" | cut -f2)\" "
                     "= \"$(cut -f2 ko_gene.tsv)\"")),
                 check("invariance", fill("cells.tsv calls all @K@ cells detecting it control",
                                          **v), verdict(fill(
                     "test \"$(awk -F'\\t' 'NR == FNR { w[$1] = 1; next } ($1 in w) && "
                     "$2 == \"control\"' ko_cells.txt cells.tsv | wc -l)\" -eq @K@", **v)))]),
        final(d.symbols[d.ko]),
    )


_CARELESS = r"""cat > ko.py <<'EOF'
import gzip

genes = [line.split('\t')[1].strip() for line in gzip.open('genes.tsv.gz', 'rt')]
group = dict(line.split() for line in open('cells.tsv') if not line.startswith('barcode'))
cols = {i: group[b.strip()] for i, b in enumerate(gzip.open('barcodes.tsv.gz', 'rt'), 1)}
ctrl, treated = {}, {}
body = (line for line in gzip.open('matrix.mtx.gz', 'rt') if not line.startswith('%'))
next(body)
for line in body:
    r, c, v = map(int, line.split())
    if cols[c] == 'control':
        ctrl[r] = ctrl.get(r, 0) + 1
    else:
        treated[r] = treated.get(r, 0) + v
n_ctrl = sum(1 for g in cols.values() if g == 'control')
hits = [r for r in ctrl if 2 * ctrl[r] >= n_ctrl and treated.get(r, 0) == 0]
print(genes[hits[0]])
EOF
python3 ko.py > ko_gene.txt
cat ko_gene.txt"""


# ----- the reference -----

def _treated(contents: Contents, barcodes: list[str]) -> np.ndarray:
    """Per matrix column, whether cells.tsv calls its barcode treated.

    Raises:
        ValueError: cells.tsv without its header, a barcode it does not list, or a group
            other than control and treated.
    """
    header, rows = read_table(text_of(contents, "cells.tsv"), "\t", ("barcode", "group"))
    b, g = header.index("barcode"), header.index("group")
    group = {row[b]: row[g] for row in rows}
    unknown = {group.get(code) for code in barcodes} - {"control", "treated"}
    if unknown:
        raise ValueError(f"cells.tsv gives a barcode no group or an unknown one: {unknown}")
    return np.array([group[code] == "treated" for code in barcodes])


def _solve(contents: Contents) -> str:
    mtx, table, barcodes = read_10x(contents, "genes.tsv.gz", "barcodes.tsv.gz")
    treated = _treated(contents, barcodes)
    rows, cols, values = mtx.entries[mtx.entries[:, 2] > 0].T
    in_treated = treated[cols - 1]
    pairs = np.sort(rows[~in_treated] * (len(barcodes) + 1) + cols[~in_treated])
    pairs = pairs[np.concatenate(([True], pairs[1:] != pairs[:-1]))]  # a cell counts once
    detected = np.bincount(pairs // (len(barcodes) + 1) - 1, minlength=len(table))
    lost = np.bincount(rows[in_treated] - 1, minlength=len(table)) > 0
    hits = np.flatnonzero((2 * detected >= np.count_nonzero(~treated)) & ~lost)
    return table[int(hits[0])][1] if len(hits) == 1 else CANNOT_DETERMINE


def _leak(content: bytes, rng: random.Random, *, row: int, treated: tuple[int, ...]) -> bytes:
    """One count of the knocked-out gene (matrix ``row``) in a treated column."""
    return read_mtx(content).edited({}, (b"%d %d 1\n" % (row, rng.choice(treated)),))


def _undetect(content: bytes, rng: random.Random, *, row: int, control: tuple[int, ...]
              ) -> bytes | None:
    """The gene's entries removed from enough control cells that it is detected in fewer
    than half of them (the size line follows): its control detection, not its treated
    count, moves the answer."""
    mtx = read_mtx(content)
    rows, cols = mtx.entries[:, 0], mtx.entries[:, 1]
    hits = np.flatnonzero((rows == row) & np.isin(cols, control) & (mtx.entries[:, 2] > 0))
    n_ctrl = len(control)
    drop = len(hits) - (n_ctrl - 1) // 2
    if drop <= 0:
        return None
    gone = rng.sample(hits.tolist(), drop)
    out = mtx.edited({int(k): b"" for k in gone})
    n_rows, n_cols = mtx.shape
    size = b"%d %d %d\n" % (n_rows, n_cols, len(mtx.entries) - drop)
    return mtx.head + size + out[len(mtx.head) + len(mtx.size):]


def _relabel(content: bytes, rng: random.Random, *, expressing: frozenset[str]) -> bytes | None:
    """One control cell that detects the gene relabelled treated (cells.tsv)."""
    lines = lines_of(content)
    hits = [i for i, line in enumerate(lines) if tsv_fields(line)[0].decode() in expressing]
    if not hits:
        return None
    i = rng.choice(hits)
    return edit_lines(content, {i: lines[i].replace(b"\tcontrol", b"\ttreated")})


def _swap_symbol(content: bytes, rng: random.Random, *, row: int) -> bytes | None:
    """The gene's symbol swapped with the next line's (genes.tsv.gz, ``row`` 1-based)."""
    lines = lines_of(content)
    if row >= len(lines):
        return None
    first, second = tsv_fields(lines[row - 1]), tsv_fields(lines[row])
    first[1], second[1] = second[1], first[1]
    return edit_lines(content, {row - 1: rejoin(first, lines[row - 1]),
                                row: rejoin(second, lines[row])})


def _swap_barcodes(content: bytes, rng: random.Random, *, treated: frozenset[str]
                   ) -> bytes | None:
    """Two barcodes of the same group trade lines (a control): every matrix column keeps
    its group, so the knockout is the same gene, but the list is another one."""
    lines = lines_of(content)
    group = [line.strip().decode() in treated for line in lines]
    i = rng.randrange(len(lines))
    same = [j for j in range(len(lines)) if group[j] == group[i] and j != i]
    if not same:
        return None
    j = rng.choice(same)
    return edit_lines(content, {i: lines[j].rstrip(b"\r\n") + lines[i][len(lines[i].rstrip(b"\r\n")):],
                                j: lines[i].rstrip(b"\r\n") + lines[j][len(lines[j].rstrip(b"\r\n")):]})


def _extra_cells(content: bytes, rng: random.Random) -> bytes | None:
    """Rows for barcodes the matrix does not hold, appended to cells.tsv (a control): the
    table is read by barcode, so cells outside barcodes.tsv.gz are never looked up."""
    lines = lines_of(content)
    if not lines:
        return None
    end = b"" if lines[-1].endswith(b"\n") else b"\n"
    extra = [bytes(rng.choice(b"ACGT") for _ in range(16)) + b"-2\t"
             + rng.choice((b"control", b"treated")) + b"\n" for _ in range(rng.randint(1, 3))]
    return content + end + b"".join(extra)


def _reference(draw: _Draw, cells: list[str]) -> Reference:
    row = draw.ko + 1
    treated = tuple(int(c) + 1 for c in np.flatnonzero(draw.treated))
    control = draw.cols[(draw.rows == draw.ko) & ~draw.treated[draw.cols]]
    return Reference(
        solve=_solve,
        preserving={"matrix.mtx.gz": ("recompress", "shuffle_records", "add_comment"),
                    "genes.tsv.gz": ("recompress",), "barcodes.tsv.gz": ("recompress",),
                    "cells.tsv": ("shuffle_records",)},
        mutators={"matrix.mtx.gz": aimed(partial(_leak, row=row, treated=treated),
                                         partial(_undetect, row=row, control=tuple(
                                             int(c) + 1 for c in np.flatnonzero(~draw.treated)))),
                  "cells.tsv": aimed(partial(_relabel, expressing=frozenset(
                      cells[int(c)] for c in control))),
                  "genes.tsv.gz": aimed(partial(_swap_symbol, row=row))},
        controls={"matrix.mtx.gz": aimed(partial(split_entry, axis=1, only=treated)),
                  "genes.tsv.gz": aimed(renamed_ids, partial(renamed_symbols,
                                                             keep=(row - 1, row, row + 1))),
                  "barcodes.tsv.gz": aimed(partial(_swap_barcodes, treated=frozenset(
                      cells[int(c)] for c in np.flatnonzero(draw.treated)))),
                  "cells.tsv": aimed(_extra_cells)})


def knockout_gene(rng: np.random.Generator, difficulty: Difficulty) -> Instance:
    """The gene absent from treated cells (trap: ``genes[row]`` with a 1-based row)."""
    n_genes, n_cells = _SIZES[difficulty]
    for _ in range(10):
        draw = _Draw(rng, n_genes, n_cells)
        if draw.candidates.tolist() == [draw.ko]:
            break
    else:
        raise RuntimeError("knockout_gene: the knockout is not unique; generator bug")
    answer, wrong = draw.symbols[draw.ko], draw.symbols[draw.ko + 1]
    cells = barcodes(rng, n_cells)
    files = {
        "matrix.mtx.gz": gz(mtx_bytes(n_genes, n_cells, draw.rows, draw.cols, draw.values,
                                      (METADATA,))),
        "genes.tsv.gz": gz("".join(f"{i}\t{g}\n" for i, g in zip(draw.ids, draw.symbols,
                                                                  strict=True))),
        "barcodes.tsv.gz": gz("".join(b + "\n" for b in cells)),
        "cells.tsv": ("barcode\tgroup\n" + "".join(
            f"{b}\t{'treated' if t else 'control'}\n"
            for b, t in zip(cells, draw.treated.tolist(), strict=True))).encode(),
    }
    question = ("A CRISPR knockout experiment in mouse cells (10x layout: matrix.mtx.gz is "
                "genes x cells, with genes.tsv.gz and barcodes.tsv.gz; cells.tsv says whether "
                "each barcode is a control or a treated cell). One gene was knocked out in the "
                "treated cells: it is detected (count > 0) in at least half of the control "
                "cells and has no count in any treated cell. Which gene is it? Answer with its "
                "symbol as written in genes.tsv.gz.")
    trap = Trap(
        description=("MatrixMarket rows are 1-based; genes[row] on a 0-based list names the "
                     "gene on the next line"),
        careless_solution=(
            turn(_CARELESS, node("test", f"the knocked-out gene is {wrong}", "ko_gene.txt"), [
                check("type", "a gene symbol was found", verdict(
                    "test \"$(wc -l < ko_gene.txt)\" -ge 0"))]),
            final(wrong)),
        wrong_answer=wrong)
    return Instance(files=files, question=question, answer=answer,
                    grader={"kind": "exact"}, solution=_solution(draw, n_genes), trap=trap,
                    tags=("single-cell", "sparse-matrix", "crispr", "one-based-index"),
                    reference=_reference(draw, cells))
