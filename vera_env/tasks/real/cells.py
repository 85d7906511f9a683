"""Real single-cell data (h5ad): in how many cells of a type is a gene detected?

Why this trap. scanpy's ``pbmc68k_reduced.h5ad`` is an AnnData file whose main matrix
``X`` is *scaled*: each gene centred on its mean and divided by its spread, so an
undetected gene reads about -0.3 and a weakly detected one can be negative too. Whether
a gene was measured in a cell is in ``raw.X``, the log-normalised values (sparse, CSR),
where "detected" is "non-zero". Counting ``X > 0`` counts cells *above the average*:
LYZ looks present in 15 of 129 CD14+ monocytes, when it is detected in 126. The cell
types are an HDF5 categorical: integer codes in ``obs`` and names in
``uns/bulk_labels_categories``.

Format choice: the file is staged as the real ``.h5ad`` (HDF5). The sandbox's python3
reads it with Debian's ``python3-h5py`` (the install step adds it); nothing else of
anndata is needed. The answer is computed here with h5py from the CSR arrays row by
row; the tests recompute it by densifying the matrix with the sandbox's own python3.
"""

from __future__ import annotations

import io
import random
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

import numpy as np

from vera_env.tasks.builtin.instance import Instance, check, fill, final, node, turn, verdict
from vera_env.tasks.real.kinds import (
    Probe,
    RealInstance,
    careless_trap,
    content_of,
    recounted,
)
from vera_env.tasks.undetermined import with_clause
from vera_env.verification.strength.reference import Mutator, Reference

__all__ = ["detected_cells", "read_pbmc"]

_FILE = "pbmc68k_reduced.h5ad"
_MARKERS = ("LYZ", "HLA-DRA", "CST3", "FCER1G", "FCGR3A", "NKG7", "GNLY", "CD79A", "CD3E")


def _h5py() -> ModuleType:
    """h5py, imported only where this type is used."""
    try:
        import h5py  # noqa: PLC0415 - only this type needs it
    except ImportError as exc:
        raise ImportError("the h5ad real-data type needs h5py: pip install h5py "
                          "(or the 'real' extra of vera-env)") from exc
    return h5py  # type: ignore[no-any-return]  # h5py is untyped (see pyproject)


def read_pbmc(data: bytes) -> tuple[list[str], list[str], np.ndarray, np.ndarray]:
    """Cell-type labels, gene names, detection in ``raw.X`` and ``X > 0``, per cell x gene.

    Raises:
        ImportError: h5py is missing (the ``real`` extra; ``vera-env setup`` installs it).
        ValueError: Not this AnnData layout (not HDF5, a dataset missing or out of range).
    """
    h5py = _h5py()
    try:
        with h5py.File(io.BytesIO(data), "r") as f:
            cats = [c.decode() for c in f["uns/bulk_labels_categories"][:]]
            labels = [cats[c] for c in f["obs"]["bulk_labels"]]
            genes = [v.decode() for v in f["raw.var"]["index"]]
            raw = f["raw.X"]
            indptr, indices, values = raw["indptr"][:], raw["indices"][:], raw["data"][:]
            detected = np.zeros((len(labels), len(genes)), dtype=bool)
            for i in range(len(labels)):
                row = slice(indptr[i], indptr[i + 1])
                detected[i, indices[row][values[row] != 0]] = True
            above = f["X"][:] > 0
    except (OSError, KeyError, IndexError) as exc:  # h5py's errors for a file it cannot read
        raise ValueError(f"not the pbmc68k_reduced AnnData layout: {exc}") from exc
    return labels, genes, detected, above


def _count(labels: list[str], genes: list[str], detected: np.ndarray, gene: str,
           cell_type: str) -> int:
    if gene not in genes:
        raise ValueError(f"{_FILE}: no gene {gene!r} in raw.var")
    return int(detected[np.array(labels) == cell_type, genes.index(gene)].sum())


def _edit(data: bytes, change: Callable[[Any], bool]) -> bytes | None:
    """``data`` with ``change`` applied to the HDF5 file opened read-write in memory."""
    buffer = io.BytesIO(data)
    try:
        with _h5py().File(buffer, "r+") as f:
            if not change(f):
                return None
    except (OSError, KeyError, ValueError):  # not this layout: nothing to aim at
        return None
    return buffer.getvalue()


def _reference(gene: str, cell_type: str) -> Reference:
    """HDF5 is binary: no control transform applies (the file is not compressed, has no
    text records), so the type brings its own controls (`_controls`). The aimed mutants
    write into the HDF5 in memory with h5py: one cell of the type loses its non-zero
    value of the gene in ``raw.X`` (one fewer), or one cell of another type where the
    gene is detected is relabelled (one more)."""
    def undetect(data: bytes, rng: random.Random) -> bytes | None:
        def change(f: Any) -> bool:
            labels, genes, where = _where(f, gene)
            hits = [k for i, k in where if labels[i] == cell_type]
            if hits:
                f["raw.X/data"][hits[rng.randrange(len(hits))]] = 0
            return bool(hits)
        return _edit(data, change)

    def relabel(data: bytes, rng: random.Random) -> bytes | None:
        def change(f: Any) -> bool:
            labels, _, where = _where(f, gene)
            cats = [c.decode() for c in f["uns/bulk_labels_categories"][:]]
            others = [i for i, _ in where if labels[i] != cell_type]
            if not others or cell_type not in cats:
                return False
            i = others[rng.randrange(len(others))]
            row = f["obs"][i]
            row["bulk_labels"] = cats.index(cell_type)
            f["obs"][i] = row
            return True
        return _edit(data, change)

    return Reference(
        solve=lambda contents: str(_count(*read_pbmc(content_of(contents, _FILE))[:3], gene,
                                          cell_type)),
        preserving={_FILE: ()},
        mutators={_FILE: (undetect, relabel)},
        controls={_FILE: _controls(gene, cell_type)})


def _where(f: Any, gene: str) -> tuple[list[str], list[str], list[tuple[int, int]]]:
    """Labels, gene names, and (cell, index into raw.X/data) of the gene's non-zero values."""
    cats = [c.decode() for c in f["uns/bulk_labels_categories"][:]]
    labels = [cats[c] for c in f["obs"]["bulk_labels"]]
    genes = [v.decode() for v in f["raw.var"]["index"]]
    j = genes.index(gene)
    indptr, indices, values = (f["raw.X"][k][:] for k in ("indptr", "indices", "data"))
    hits = [(i, int(k)) for i in range(len(labels))
            for k in range(indptr[i], indptr[i + 1]) if indices[k] == j and values[k] != 0]
    return labels, genes, hits


def _controls(gene: str, cell_type: str) -> tuple[Mutator, ...]:
    """Edits of the HDF5 (h5py, in memory) that keep the answer but change the content, so
    a fingerprint of the file fails them: a cell of another type relabelled as a third
    type, one of the gene's non-zero raw.X values doubled (still detected), one non-zero
    raw.X value of another gene set to 0."""
    def relabel_other(data: bytes, rng: random.Random) -> bytes | None:
        def change(f: Any) -> bool:
            cats = [c.decode() for c in f["uns/bulk_labels_categories"][:]]
            codes = f["obs"]["bulk_labels"]
            others = [i for i, c in enumerate(codes) if cats[c] != cell_type]
            if not others or len(cats) < 3:
                return False
            i = others[rng.randrange(len(others))]
            row = f["obs"][i]
            row["bulk_labels"] = rng.choice([k for k, c in enumerate(cats)
                                             if c != cell_type and k != codes[i]])
            f["obs"][i] = row
            return True
        return _edit(data, change)

    def scale_detected(data: bytes, rng: random.Random) -> bytes | None:
        def change(f: Any) -> bool:
            _, _, hits = _where(f, gene)
            if hits:
                k = hits[rng.randrange(len(hits))][1]
                f["raw.X/data"][k] = 2 * f["raw.X/data"][k]
            return bool(hits)
        return _edit(data, change)

    def zero_other_gene(data: bytes, rng: random.Random) -> bytes | None:
        def change(f: Any) -> bool:
            j = [v.decode() for v in f["raw.var"]["index"]].index(gene)
            indices, values = f["raw.X/indices"][:], f["raw.X/data"][:]
            others = np.flatnonzero((indices != j) & (values != 0))
            if len(others):
                f["raw.X/data"][int(others[rng.randrange(len(others))])] = 0
            return bool(len(others))
        return _edit(data, change)

    return relabel_other, scale_detected, zero_other_gene


def _question(gene: str, cell_type: str) -> str:
    return with_clause(
        f"{_FILE} is an AnnData file (HDF5) of 700 blood cells from 10x Genomics PBMC data; "
        "the cell type of each cell is its bulk_labels annotation. In how many cells of type "
        f"'{cell_type}' is the gene {gene} detected, that is, measured with a non-zero "
        "expression? Answer with one integer.")


_OPEN = "import h5py; f = h5py.File('" + _FILE + "', 'r')"
_LOAD = (f"python3 -c \"{_OPEN}; print(list(f), f['X'].shape, dict(f['raw.X'].attrs)); c = "
         "[x.decode() for x in f['uns/bulk_labels_categories'][:]]; open('labels.txt', 'w')"
         ".write(''.join(c[i] + '\\n' for i in f['obs']['bulk_labels']))\"\nsort labels.txt | "
         "uniq -c\npython3 -c \"import numpy as np; " + _OPEN + "; g = f['raw.X']; p, ix, d = "
         "g['indptr'][:], g['indices'][:], g['data'][:]; j = [v.decode() for v in f['raw.var']"
         "['index']].index('@G@'); r = np.repeat(np.arange(len(p) - 1), np.diff(p)); v = np.zeros("
         "len(p) - 1); k = ix == j; v[r[k]] = d[k]; np.savetxt('gene.txt', v, fmt='%g'); x = "
         "f['X'][:]; print('X min', x.min(), 'raw.X min', d.min())\"\ngrep -cv '^0$' gene.txt")
_TABLE = ("paste labels.txt gene.txt | awk -F'\\t' '{ n[$1]++; if ($2 != 0) d[$1]++ } END { for "
          "(t in n) print t \"\\t\" n[t] \"\\t\" d[t] + 0 }' | sort > detected.tsv\ncat detected.tsv")
_H5 = ("python3 -c \"import numpy as np; " + _OPEN + "; c = [x.decode() for x in f['uns/"
       "bulk_labels_categories'][:]]; t = np.array([c[i] for i in f['obs']['bulk_labels']]) == "
       "'@T@'; g = f['raw.X']; p, ix, d = g['indptr'][:], g['indices'][:], g['data'][:]; j = "
       "[v.decode() for v in f['raw.var']['index']].index('@G@'); r = np.repeat(np.arange(len(p) "
       "- 1), np.diff(p)); k = (ix == j) & (d != 0); on = np.zeros(len(t), bool); on[r[k]] = "
       "True; ")
"""The cells of the type (``t``) and those where the gene is non-zero in raw.X (``on``),
read from the CSR arrays by python: the second route of the checks."""
# The last two checks print counts for a shell test: a file h5py cannot read then fails
# them with a clean False, not a traceback.
_DENSE = verdict("test \"$(python3 -c \"import numpy as np; " + _OPEN + "; g = f['raw.X']; p, ix, "
                 "d = g['indptr'][:], g['indices'][:], g['data'][:]; m = np.zeros((len(p) - 1, "
                 "len(f['raw.var']))); r = np.repeat(np.arange(len(p) - 1), np.diff(p)); m[r, ix] "
                 "= d; j = [v.decode() for v in f['raw.var']['index']].index('@G@'); c = [x.decode()"
                 " for x in f['uns/bulk_labels_categories'][:]]; t = np.array([c[i] for i in "
                 "f['obs']['bulk_labels']]) == '@T@'; print(int(t.sum()), int((m[t, j] != 0).sum()"
                 "))\")\" = '@N@ @ANS@' && test \"$(cat n.txt)\" -eq @ANS@")
_ABOVE = verdict("test \"$(python3 -c \"" + _OPEN + "; j = [v.decode() for v in f['var']['index']]."
                 "index('@G@'); x = f['X'][:, j]; lab = open('labels.txt').read().splitlines(); "
                 "print(sum(1 for i, t in enumerate(lab) if t == '@T@' and x[i] > 0))\")\" -eq @W@ "
                 "&& test \"$(cat n.txt)\" -gt @W@ && test \"$(cat n.txt)\" -le @N@")


def _solution(gene: str, cell_type: str, n: int, answer: int, above: int, anywhere: int
              ) -> tuple[str, ...]:
    """Read the labels and the gene's raw.X column, tabulate detection per type, read the
    type's row.

    The checks recount from the h5ad what the count is built from: the cells of the
    type, the cells where the gene is non-zero in raw.X (of the type, and of all), and
    what ``X > 0`` (the scaled matrix, the wrong route) would say instead.
    """
    v = {"G": gene, "T": cell_type, "N": n, "ANS": answer, "W": above, "K": anywhere}

    def py(test: str) -> str:
        return fill(_H5 + f"print(int({test}))\"", **v)

    def row(column: int) -> str:
        return fill(f"awk -F'\\t' '$1 == \"@T@\" {{ print ${column} }}' detected.tsv", **v)

    return (
        turn(fill(_LOAD, **v),
             node("load", fill("700 cells, @N@ of them @T@; @G@'s raw.X values (X is scaled: "
                               "negative values), non-zero in @K@ cells", **v),
                  "gene.txt"), [
                 check("conservation", fill("one label per cell, @N@ of type @T@", **v),
                       recounted(fill("grep -cxF '@T@' labels.txt", **v), py("t.sum()"), n,
                                 "test \"$(wc -l < labels.txt)\" -eq 700")),
                 check("conservation", fill("@G@ is non-zero in raw.X in @K@ of the 700 cells",
                                            **v),
                       recounted("grep -cv '^0$' gene.txt", py("on.sum()"), anywhere,
                                 "test \"$(wc -l < gene.txt)\" -eq 700"))]),
        turn(_TABLE, node("transform", fill("cells and @G@ detections per cell type: @T@ "
                                            "@N@ cells, @ANS@ detected", **v),
                          "detected.tsv", "n1"), [
            check("conservation", fill("the @T@ row counts its @N@ cells", **v),
                  recounted(row(2), py("t.sum()"), n)),
            check("conservation", fill("the @T@ row counts @ANS@ detections", **v),
                  recounted(row(3), py("(on & t).sum()"), answer)),
            check("conservation", fill("the rows add up to 700 cells and @K@ detections", **v),
                  recounted("awk -F'\\t' '{ d += $3 } END { print d }' detected.tsv",
                            py("on.sum()"), anywhere,
                            "test \"$(awk -F'\\t' '{ n += $2 } END { print n }' detected.tsv)\" "
                            "-eq 700"))]),
        turn(row(3) + " > n.txt\ncat n.txt",
             node("test", fill("@G@ detected (raw.X non-zero) in @ANS@ of @N@ @T@ cells", **v),
                  "n.txt", "n2"), [
                 check("invariance", fill("a dense rebuild of raw.X agrees: @ANS@ of @N@", **v),
                       fill(_DENSE, **v)),
                 check("range", fill("X > 0 says @W@, the wrong route (X is scaled): fewer than "
                                     "detected, at most all @N@", **v), fill(_ABOVE, **v))]),
        final(str(answer)),
    )


def detected_cells(files: Mapping[str, bytes], rng: np.random.Generator) -> RealInstance:
    """Cells of a type in which a gene is detected (trap: ``X > 0`` on the scaled matrix)."""
    data = files["pbmc68k_reduced.h5ad"]
    labels, genes, detected, above = read_pbmc(data)
    lab = np.array(labels)
    pairs = []
    for gene in _MARKERS:
        j = genes.index(gene)
        for cell_type in sorted(set(labels)):
            cells = lab == cell_type
            right, wrong = int(detected[cells, j].sum()), int(above[cells, j].sum())
            if right >= 10 and wrong <= 0.75 * right:
                pairs.append((gene, cell_type, int(cells.sum()), right, wrong))
    gene, cell_type, n, answer, wrong = pairs[int(rng.integers(len(pairs)))]
    careless = (f"python3 -c \"{_OPEN}; c = [x.decode() for x in f['uns/bulk_labels_categories']"
                f"[:]]; j = [v.decode() for v in f['var']['index']].index('{gene}'); x = f['X'][:];"
                f" print(sum(1 for i, k in enumerate(f['obs']['bulk_labels']) if c[k] == "
                f"'{cell_type}' and x[i, j] > 0))\"")
    trap = careless_trap("X is scaled: X > 0 means above average, not detected (raw.X)", careless,
                         f"{gene} in {wrong} cells", "at most every cell",
                         f"test \"$({careless})\" -le 700", wrong)
    instance = Instance(files={_FILE: data}, question=_question(gene, cell_type),
                        answer=str(answer), grader={"kind": "numeric", "abs_tol": 0},
                        solution=_solution(gene, cell_type, n, answer, wrong,
                                           int(detected[:, genes.index(gene)].sum())),
                        trap=trap, tags=("h5ad", "scaled-vs-raw", "categorical", "scanpy"),
                        reference=_reference(gene, cell_type))
    probe = Probe("Megakaryocyte", _question(gene, "Megakaryocyte"),
                  f"python3 -c \"{_OPEN}; print('\\n'.join(x.decode() for x in "
                  "f['uns/bulk_labels_categories'][:]))\"",
                  f"python3 -c \"{_OPEN}; print(f['obs'].shape[0])\"", len(labels))
    return RealInstance(instance, _FILE, probe)
