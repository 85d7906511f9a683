"""Perturbed variants of any task: the data made messy the way real data is.

Why. A policy trained only on clean files learns that files are clean. Real exports
carry a UTF-8 byte-order mark that breaks the first column's name, Windows line endings
on some lines that leave a ``\\r`` on the last field, a header repeated where two
exports were concatenated, a download cut short, an old version of the file lying next
to the new one, and a README full of text that has nothing to do with the question.
Each kind below applies one of those to a task's primary file (the file its question
is about) and says what becomes of the ground truth:

* ``bom``, ``crlf``, ``dup_header``: the data are the same once cleaned, so the answer
  is unchanged; the reference solution gains a first turn that notices and cleans the
  file in place (a ``qc`` node whose check recounts the records the question reads, the
  base's `base_census`), then replays the original analysis.
* ``truncated``: the primary file (gzip, BGZF or HDF5) is cut at 60% of its bytes. What
  the missing part held cannot be known, so the answer becomes "cannot be determined"
  (`vera_env.tasks.undetermined`); the reference solution notes the cut (``gzip -t``,
  HDF5's open) and pins what is readable before it (`_truncation_solution`).
* ``decoy``: an older version of the primary file (a tenth of its records dropped) sits
  in ``old/``; the answer is unchanged and a careful analysis reads the file named.
* ``bloat``: the question is preceded by three paragraphs of irrelevant study
  background and the workspace gains a 40 KB README of the same; the answer is unchanged.

The reference (`vera_env.tasks.perturbed_reference`, what strength classifies the
variants by) is the base task's, reading through the mess: its solver cleans the primary
file (BOM, CRLF and repeated headers removed wherever they are) and ignores ``old/`` and
the README, whose every record is irrelevant; a ``truncated`` variant has none, its
answer being "cannot be determined" whatever the bytes.

The careless solution is the base task's: its answer is the trap's wrong answer, which
is still wrong (the truth is unchanged or undetermined). Ids are ``<base id>+<kind>``
(``real.csv.penguin_mass.s0+bom``, ``tab.sentinel_mean.easy.s0+crlf``).
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vera_env.tasks.builtin.instance import check, final, gz, node, turn, verdict
from vera_env.tasks.cache import cache_dir, materialise
from vera_env.tasks.model import Task, Trap
from vera_env.tasks.perturbed_reference import perturbed_reference
from vera_env.tasks.source import TaskSource, UnknownTaskError
from vera_env.tasks.undetermined import CANNOT_DETERMINE, UNDETERMINED_GRADER, with_clause
from vera_env.verification.strength.transforms import file_format

if TYPE_CHECKING:
    from vera_env.tasks.real.kinds import Census

__all__ = ["KINDS", "base_census", "base_task", "kinds_for", "make_perturbed_task", "perturb",
           "perturbed_id", "perturbed_ids", "perturbed_reference", "perturbed_source",
           "split_variant_id"]

KINDS: dict[str, str] = {
    "bom": "a UTF-8 byte-order mark before the first line",
    "crlf": "Windows line endings on about half of the lines",
    "dup_header": "the header line repeated inside the table",
    "truncated": "the file cut at 60% of its bytes: the answer cannot be determined",
    "decoy": "an older version of the file in old/, a tenth of its records missing",
    "bloat": "three paragraphs of irrelevant background and a 40 KB README",
}
_TEXT = (".csv", ".tsv", ".txt", ".vcf", ".gtf", ".gff", ".gff3", ".fa", ".fna", ".fasta",
         ".fq", ".fastq", ".mtx", ".bed", ".sam")
_TABLES = (".csv", ".tsv")
_CUT = (".gz", ".bam", ".h5ad")


def _stem(name: str) -> str:
    return name.removesuffix(".gz")


def kinds_for(primary: str) -> tuple[str, ...]:
    """The perturbation kinds that apply to a primary file, by its name."""
    stem = _stem(primary)
    text = stem.endswith(_TEXT)
    kinds = [k for k, ok in (("bom", text), ("crlf", text),
                             ("dup_header", stem.endswith(_TABLES)),
                             ("truncated", primary.endswith(_CUT)), ("decoy", text),
                             ("bloat", True)) if ok]
    return tuple(kinds)


def split_variant_id(tid: str) -> tuple[str, str]:
    """``"<base>+<kind>"`` -> (base, kind).

    Raises:
        UnknownTaskError: No ``+`` suffix.
    """
    base, sep, kind = tid.rpartition("+")
    if not sep or not base or not kind:
        raise UnknownTaskError(f"{tid!r} is not a variant id: expected <base task id>+<kind>, "
                               "e.g. real.csv.penguin_mass.s0+bom.")
    return base, kind


def perturbed_id(base_id: str, kind: str) -> str:
    """Compose a perturbed id, e.g. ``perturbed_id("real.bam.duplicates.s0", "truncated")``."""
    return f"{base_id}+{kind}"


def base_task(base_id: str) -> tuple[Task, str]:
    """The base task of a variant and its primary file.

    Real tasks name their primary file; for a builtin task it is the largest data file
    (the matrix, the VCF, the table).

    Raises:
        UnknownTaskError: The base id is neither a real nor a builtin id.
    """
    if base_id.startswith("real."):
        from vera_env.tasks.real import make_real_task, real_instance  # noqa: PLC0415

        return make_real_task(base_id), real_instance(base_id).primary
    from vera_env.tasks.builtin import make_task  # noqa: PLC0415

    task = make_task(base_id)
    files = task.data_files()
    return task, max(files, key=lambda name: (files[name].stat().st_size, name))


def base_census(base_id: str) -> Census | None:
    """What the base task's question reads in its primary file, counted (real tasks
    name it; builtin families do not yet): what a cleaning turn's check recounts."""
    if not base_id.startswith("real."):
        return None
    from vera_env.tasks.real import real_instance  # noqa: PLC0415

    return real_instance(base_id).reads


def _decode(name: str, data: bytes) -> str:
    return (gzip.decompress(data) if name.endswith(".gz") else data).decode("utf-8")


def _encode(name: str, text: str) -> bytes:
    return gz(text) if name.endswith(".gz") else text.encode("utf-8")


def _reader(name: str) -> str:
    return f"zcat {name}" if name.endswith(".gz") else f"cat {name}"


def _rewrite(name: str, filter_cmd: str) -> str:
    """Shell that replaces ``name`` by ``filter_cmd`` applied to its text, same encoding."""
    if name.endswith(".gz"):
        return f"zcat {name} | {filter_cmd} | gzip -n > {name}.clean && mv {name}.clean {name}"
    return f"{filter_cmd} < {name} > {name}.clean && mv {name}.clean {name}"


def _cleaning_turn(kind: str, name: str, clean_text: str, census: Census | None) -> str:
    """The reference turn that notices a perturbation of ``name`` and undoes it in place.

    Its check says the mess is gone and recounts, in the cleaned file, the records the
    question reads (the base's `Census`). A count of every line would fail strength's
    controls -- records the question never reads dropped or re-ordered -- and earn
    nothing; the records the answer is built from hold on them and move with it. A base
    that names no census (a builtin family) gets the node without a check.
    """
    n = clean_text.count("\n")
    read = _reader(name)
    if kind == "bom":
        command = _rewrite(name, "sed '1s/^\\xEF\\xBB\\xBF//'")
        extra = f"test \"$({read} | head -c3 | od -An -tx1 | tr -d ' ')\" != efbbbf"
        summary, gone = f"{name} began with a byte-order mark; stripped, {n} lines kept", "no BOM"
    elif kind == "crlf":
        command = _rewrite(name, "tr -d '\\r'")
        extra = f"test \"$({read} | tr -cd '\\r' | wc -c)\" -eq 0"
        summary, gone = f"{name} mixed CRLF and LF line endings; now LF only, {n} lines", "no CR"
    else:
        command = _rewrite(name, "awk 'NR == 1 { h = $0 } NR == 1 || $0 != h'")
        extra = f"test \"$({read} | grep -cxF \"$({read} | head -1)\")\" -eq 1"
        summary = f"{name} repeated its header inside the table; dropped, {n} lines left"
        gone = "one header"
    look = f"{read} | head -c 300 | od -c | head -5\n{read} | wc -l\n"
    checks = [] if census is None else [check(
        "conservation", f"cleaned ({gone}); the {census.value} {census.what} all kept",
        verdict(f"{extra} && test \"$({census.command})\" -eq {census.value}"))]
    return turn(look + command, node("qc", summary, name), checks)


def _shift_parents(text: str) -> str:
    """Renumber ``parents=nK`` to ``n(K+1)``: a cleaning node now comes first."""
    def shift(match: re.Match[str]) -> str:
        return "parents=" + ",".join(f"n{int(p[1:]) + 1}" for p in match[1].split(","))

    return re.sub(r"parents=(n\d+(?:,n\d+)*)", shift, text)


def _corrupt_text(kind: str, text: str, rng: np.random.Generator) -> str:
    lines = text.splitlines(keepends=True)
    if kind == "bom":
        return "\ufeff" + text
    if kind == "crlf":
        flip = rng.random(len(lines)) < 0.5
        return "".join(line[:-1] + "\r\n" if f and line.endswith("\n") else line
                       for line, f in zip(lines, flip, strict=True))
    at = int(rng.integers(2, max(3, len(lines))))
    return "".join(lines[:at] + lines[:1] + lines[at:])


def _bloat(rng: np.random.Generator, paragraphs: int) -> str:
    words = ("the", "cohort", "protocol", "site", "visit", "freezer", "batch", "consent",
             "committee", "amendment", "courier", "ethics", "shipment", "calibration",
             "reagent", "lot", "weekly", "meeting", "minutes", "budget", "renewal", "audit")
    out = []
    for _ in range(paragraphs):
        sentences = [" ".join(words[i] for i in rng.integers(len(words), size=14)).capitalize()
                     + "." for _ in range(int(rng.integers(6, 10)))]
        out.append(" ".join(sentences))
    return "\n\n".join(out)


def _variant(task: Task, kind: str, primary: str, rng: np.random.Generator,
             files: dict[str, bytes], census: Census | None
             ) -> tuple[dict[str, bytes], str, str, dict[str, Any], tuple[str, ...]]:
    """(files, question, answer, grader, solution) of one perturbed variant."""
    question, answer = with_clause(task.question), task.answer
    grader = task.grader.model_dump(exclude_none=True)
    solution = task.solution
    if kind in ("bom", "crlf", "dup_header"):
        clean = _decode(primary, files[primary])
        files[primary] = _encode(primary, _corrupt_text(kind, clean, rng))
        solution = (_cleaning_turn(kind, primary, clean, census),
                    *(_shift_parents(t) for t in task.solution))
    elif kind == "truncated":
        size = len(files[primary])
        files[primary] = files[primary][:int(size * 0.6)]
        answer, grader = CANNOT_DETERMINE, dict(UNDETERMINED_GRADER)
        solution = _truncation_solution(primary, files[primary])
    elif kind == "decoy":
        lines = _decode(primary, files[primary]).splitlines(keepends=True)
        kept = [line for i, line in enumerate(lines) if i == 0 or i % 10]
        files[f"old/{primary.rsplit('/', 1)[-1]}"] = _encode(primary, "".join(kept))
    else:
        files["README.md"] = ("# Study notes\n\n" + _bloat(rng, 60) + "\n").encode()
        question = _bloat(rng, 3) + "\n\n" + question
    return files, question, answer, grader, solution


def _readable(data: bytes) -> bytes:
    """What zlib decodes of a cut gzip (or BGZF) file: its whole members, then what the cut
    one holds up to the cut -- what strength testing decodes its variants from."""
    out = []
    while data:
        decoder = zlib.decompressobj(wbits=31)
        out.append(decoder.decompress(data))
        if not decoder.eof:
            break
        data = decoder.unused_data
    return b"".join(out)


# The same decoding in the sandbox's python3 (a check is one line: a recursive lambda).
_READ = ("python3 -c \"import zlib; r = lambda b: (lambda d: d.decompress(b) + (r(d.unused_data) "
         "if d.eof else b''))(zlib.decompressobj(31)); x = r(open('{name}', 'rb').read()); "
         "print({what})\"")


_COMMENTS = {"vcf": "#", "gff": "#", "sam": "@", "mtx": "%"}
"""Formats whose header and comment lines start with a mark: not records."""


def _truncation_solution(primary: str, data: bytes) -> tuple[str, ...]:
    """Notice the cut, and pin what is readable before it.

    Strength varies a cut file as what it decodes to (complete lines for text), so a
    check of the cut itself (``gzip -t`` fails) fails on its controls too; the readable
    part (its complete lines, or its bytes for binary content) is a value of the data.
    Where the format has comment lines (VCF, GTF/GFF, SAM, MatrixMarket) only records
    are counted: strength adds a comment line as a control, and a comment is no record.
    HDF5 is varied as it is: there the byte count and the failed open are the check.
    """
    size = len(data)
    if primary.endswith(".h5ad"):
        probe = f"python3 -c \"import h5py; h5py.File('{primary}', 'r')\""
        return (turn(f"ls -l {primary}\n{probe}; echo \"exit $?\"",
                     node("qc", f"{primary} is truncated ({size} bytes): HDF5 cannot open it",
                          primary), [
                         check("type", f"{size} bytes and incomplete", verdict(
                             f"test \"$(wc -c < {primary})\" -eq {size} && ! {probe} >/dev/null "
                             "2>&1"))]),
                final(CANNOT_DETERMINE))
    readable = _readable(data)
    comment = _COMMENTS.get(file_format(primary))
    if b"\0" in readable[:8192]:
        what, n, unit = "len(x)", len(readable), "bytes"
    elif comment:  # a comment line is no record: strength adds one as a control
        lines = readable.split(b"\n")[:-1]
        what = f"sum(1 for l in x.split(b'\\n')[:-1] if not l.startswith(b'{comment}'))"
        n, unit = sum(1 for x in lines if not x.startswith(comment.encode())), "complete records"
    else:
        what, n, unit = "x.count(b'\\n')", readable.count(b"\n"), "complete lines"
    read = _READ.format(name=primary, what=what)
    return (turn(f"ls -l {primary}\ngzip -t {primary}; echo \"exit $?\"\n{read}",
                 node("qc", f"{primary} is truncated ({size} bytes): gzip -t reports an "
                      f"unexpected end of file; {n} {unit} decode before the cut", primary), [
                     check("conservation", f"{n} {unit} readable before the cut", verdict(
                         f"test \"$({read})\" -eq {n}"))]),
            final(CANNOT_DETERMINE))


def perturb(task: Task, kind: str, primary: str, *, seed: int = 0,
            census: Census | None = None) -> Task:
    """A perturbed variant of ``task`` (its data written to the cache, read-only).

    Args:
        task: The base task (with files).
        kind: One of `KINDS` that `kinds_for` allows for ``primary``.
        primary: The data file the question is about.
        seed: Seeds where the perturbation lands (which lines, which words).
        census: The records of ``primary`` the question reads (`base_census`): the
            cleaning turn's check recounts them; None leaves that turn without a check.

    Raises:
        UnknownTaskError: ``kind`` is unknown or does not apply to ``primary``.
    """
    if kind not in kinds_for(primary):
        raise UnknownTaskError(f"perturbation {kind!r} does not apply to {primary!r} of "
                               f"{task.id}; it allows {list(kinds_for(primary))}")
    rng = np.random.default_rng([seed, zlib.crc32(f"{task.id}+{kind}".encode())])
    base = {name: path.read_bytes() for name, path in task.data_files().items()}
    files, question, answer, grader, solution = _variant(task, kind, primary, rng, dict(base),
                                                          census)
    tid = perturbed_id(task.id, kind)
    trap = task.trap and Trap(
        description=f"{task.trap.description}; and {KINDS[kind]}",
        careless_solution=task.trap.careless_solution, wrong_answer=task.trap.wrong_answer)
    header = _decode(primary, base[primary]).split("\n", 1)[0] if kind == "dup_header" else ""
    reference = perturbed_reference(task.reference, kind, primary, frozenset(base),
                                    tuple(sorted(set(files) - set(base))), header.encode())
    return Task(id=tid, question=question, answer=answer, grader=grader,
                human_solvable=task.human_solvable, tags=(*task.tags, "perturbed", kind),
                solution=solution, trap=trap,
                data_dir=materialise(tid, files, root=cache_dir() / "perturbed"),
                ).with_reference(reference)


def make_perturbed_task(tid: str) -> Task:
    """The perturbed task named by ``<base id>+<kind>``.

    Raises:
        UnknownTaskError: A malformed id, unknown base, or a kind that does not apply.
    """
    base_id, kind = split_variant_id(tid)
    if kind not in KINDS:
        raise UnknownTaskError(f"{tid!r}: unknown perturbation {kind!r}; kinds are {list(KINDS)}")
    task, primary = base_task(base_id)
    return perturb(task, kind, primary, census=base_census(base_id))


def perturbed_ids(base_ids: Sequence[str], kinds: Sequence[str] | None = None,
                  primary_of: Callable[[str], str] | None = None) -> tuple[str, ...]:
    """Every applicable (base, kind) id; ``primary_of`` maps a base id to its primary file."""
    chosen = list(KINDS) if kinds is None else list(kinds)
    unknown = [k for k in chosen if k not in KINDS]
    if unknown:
        raise UnknownTaskError(f"unknown perturbation kinds {unknown}; kinds are {list(KINDS)}")
    find = primary_of or (lambda b: base_task(b)[1])
    return tuple(perturbed_id(b, k) for b in base_ids for k in chosen if k in kinds_for(find(b)))


def perturbed_source(base: str = "real", *, seeds: Sequence[int] = (0,),
                     types: Sequence[str] | None = None, kinds: Sequence[str] | None = None,
                     difficulties: Sequence[str] = ("easy",)) -> TaskSource:
    """The source behind ``load_tasks("perturbed")``: every applicable kind of every base task.

    Args:
        base: ``"real"`` or ``"builtin"``: which tasks are perturbed.
        seeds: Seeds of the base tasks.
        types: Base types (default all).
        kinds: Perturbation kinds (default all that apply).
        difficulties: Builtin difficulties (ignored for real tasks).
    """
    if base == "real":
        from vera_env.tasks.real import real_ids, real_instance  # noqa: PLC0415

        ids = perturbed_ids(real_ids(seeds, types), kinds, lambda b: real_instance(b).primary)
    elif base == "builtin":
        from vera_env.tasks.builtin import builtin_ids  # noqa: PLC0415

        base_ids = builtin_ids(difficulties, seeds, types)  # type: ignore[arg-type]
        ids = perturbed_ids(base_ids, kinds)
    else:
        raise ValueError(f"base must be 'real' or 'builtin', got {base!r}")
    return TaskSource(name="perturbed", ids=ids, factory=make_perturbed_task)

