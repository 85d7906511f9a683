"""Sequence family: FASTA questions whose obvious one-liner is wrong.

Why these two tasks. Both are questions a bioinformatician answers daily and both have a
one-liner that looks right and is not:

* ``seq.motif_count`` -- ``grep -o MOTIF | wc -l`` counts one strand, skips overlapping
  matches (``ACACAC`` holds ``ACAC`` twice) and misses matches broken across the FASTA
  line wrap. The generator plants all three (tandem repeats, reverse-complement copies,
  matches straddling a line end), so the careless count is always too low.
* ``seq.gc_content`` -- the genome is soft-masked (repeats in lowercase, as in UCSC and
  Ensembl FASTA) and has runs of ``N`` (assembly gaps). ``tr -cd GC`` counts only
  uppercase G/C, and dividing by every character counts the gaps as bases, so the
  careless GC content is many points too low.

The ground truth is counted on the generated sequences with a regex lookahead (motif) or
``str.count`` on the case-folded sequence (GC, with N excluded from the denominator);
tests recount from the written files with numpy. The careless answer is computed the
way the careless one-liner computes it.

Each instance's `Reference` recounts from the decoded FASTA (any line width, records in
any order). Both answers are sums over records, so record order and line width never
matter; a record with no occurrence on either strand is never read by the motif
question. The aimed mutants break one occurrence on one strand (a one-strand count
misses half of them) or delete one base of one, or turn one record's soft-masked G/C
into A/T, or fill one gap with G (an uppercase-only count misses the first, a count of
every letter the second).
"""

from __future__ import annotations

import random
import re
from functools import partial

import numpy as np

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
    fasta_layout,
    fasta_records,
    fasta_sequence,
    moved,
    with_bases,
)
from vera_env.tasks.model import Trap
from vera_env.tasks.undetermined import CANNOT_DETERMINE
from vera_env.verification.strength.reference import Contents, Reference

__all__ = ["WRAP", "fasta_text", "gc_content", "motif_count", "random_bases", "revcomp"]

WRAP = 60
"""FASTA line width, as most tools write it."""

_ALPHABET = np.frombuffer(b"ACGT", dtype=np.uint8)
_COMPLEMENT = str.maketrans("ACGTacgt", "TGCAtgca")
# (motif, period): the motif overlaps itself when shifted by `period`. None is its own
# reverse complement, so "both strands" never counts one site twice.
_MOTIFS = (("ACAC", 2), ("AGAG", 2), ("GAGA", 2), ("TGTG", 2), ("CACAC", 2), ("AAGAAG", 3))
_SIZES: dict[str, tuple[int, int, int]] = {  # records, min length, max length
    "warmup": (2, 120, 240), "easy": (3, 300, 700), "medium": (8, 2000, 5000), "hard": (30, 10_000, 30_000),
    "xl": (100, 40_000, 80_000)}


def revcomp(seq: str) -> str:
    """Reverse complement of a DNA string (case preserved)."""
    return seq.translate(_COMPLEMENT)[::-1]


def random_bases(rng: np.random.Generator, length: int, gc: float) -> bytearray:
    weights = [(1 - gc) / 2, gc / 2, gc / 2, (1 - gc) / 2]
    return bytearray(_ALPHABET[rng.choice(4, size=length, p=weights)].tobytes())


def fasta_text(records: list[tuple[str, str]]) -> str:
    lines: list[str] = []
    for name, seq in records:
        lines.append(f">{name}")
        lines += [seq[i:i + WRAP] for i in range(0, len(seq), WRAP)]
    return "\n".join(lines) + "\n"


def _plant_motifs(rng: np.random.Generator, seq: bytearray, motif: str, period: int) -> None:
    """Overwrite ``seq`` with the three things a careless count misses."""
    k, n_lines = len(motif), len(seq) // WRAP
    tandem = (motif + motif[-period:]).encode()
    for _ in range(2):
        at = int(rng.integers(0, len(seq) - len(tandem)))
        seq[at:at + len(tandem)] = tandem
    for _ in range(2):  # straddling the end of a FASTA line
        at = WRAP * int(rng.integers(1, n_lines)) - int(rng.integers(1, k))
        seq[at:at + k] = motif.encode()
    for _ in range(3):  # last, so at least one reverse-strand site survives intact
        at = int(rng.integers(0, len(seq) - k))
        seq[at:at + k] = revcomp(motif).encode()


def renamed_fasta(content: bytes, rng: random.Random) -> bytes | None:
    """Every record's title replaced by another name with another count of digits: a
    control for questions that never read titles. A pin of the file's digits, of its
    sorted lines or of a copy of it dies here, while a count over the sequences holds."""
    if not content.startswith(b">"):
        return None
    prefix = rng.choice((b"contig", b"scaffold_", b"seq_", b"ctg"))
    out, index = [], 0
    for line in content.split(b"\n"):
        if line.startswith(b">"):
            index += 1
            digits = str(rng.randrange(10 ** rng.randint(1, 5))).encode()
            line = b">" + prefix + digits + b"_" + str(index).encode() * 2
        out.append(line)
    renamed = b"\n".join(out)
    if _digit_count(renamed) == _digit_count(content):  # a pin of the digits must die
        renamed = renamed.replace(b"_", b"_0_", 1)
    return renamed


def _digit_count(content: bytes) -> int:
    return sum(content.count(bytes([d])) for d in b"0123456789")


def _count_overlapping(seq: str, word: str) -> int:
    return sum(1 for _ in re.finditer(f"(?={word})", seq))


_UNWRAP = ("zcat seqs.fa.gz | awk '/^>/ { if (n) print s; s = \"\"; n++; next } "
           "{ s = s $0 } END { if (n) print s }' > seqs.txt\nwc -l < seqs.txt")
_COUNT_SCRIPT = (
    "cat > count_motif.py <<'EOF'\nimport sys\n\n"
    "motif = sys.argv[2]\nrc = motif.translate(str.maketrans('ACGT', 'TGCA'))[::-1]\n"
    "fwd = rev = 0\nfor line in open(sys.argv[1]):\n    s = line.strip().upper()\n"
    "    for i in range(len(s) - len(motif) + 1):\n"
    "        fwd += s[i:i + len(motif)] == motif\n"
    "        rev += s[i:i + len(motif)] == rc\nprint(fwd, rev, fwd + rev)\nEOF\n"
    "python3 count_motif.py seqs.txt @MOTIF@ > motif_counts.txt\ncat motif_counts.txt\n"
    "cut -d' ' -f3 motif_counts.txt")


def _awk_scan(word: str) -> str:
    """An overlapping scan for ``word`` over the records unwrapped from seqs.fa.gz itself:
    a second route to the count, from the data (a check that only compares two of the
    model's own files would pass on any data, and earns nothing under strength)."""
    return fill("zcat seqs.fa.gz | awk '/^>/ { if (n) print s; s = \"\"; n++; next } "
                "{ s = s $0 } END { if (n) print s }' | awk -v m=@W@ '{ for (i = 1; "
                "i + length(m) - 1 <= length($0); i++) if (substr($0, i, length(m)) == m) c++ } "
                "END { print c + 0 }'", W=word)


def _scan_both(motif: str, source: str) -> str:
    """Overlapping matches of ``motif`` and its reverse complement in each line of
    ``source`` (a file of unwrapped records), by awk."""
    return fill("awk -v m=@M@ -v r=@R@ '{ for (i = 1; i + length(m) - 1 <= length($0); i++) "
                "{ w = substr($0, i, length(m)); c += (w == m) + (w == r) } } "
                "END { print c + 0 }' @S@", M=motif, R=revcomp(motif), S=source)


def _motif_solution(motif: str, n_records: int, n_bases: int, fwd: int, rev: int,
                    careless: int) -> tuple[str, ...]:
    """Three nodes over facts different mutants move: records, bases, the count on each
    strand, the total and the one-strand per-line count the trap gives."""
    rc, total = revcomp(motif), fwd + rev
    v = {"N": n_records, "TOTAL": total, "B": n_bases, "CARE": careless, "M": motif}
    return (
        turn(_UNWRAP, node("load", f"{n_records} records, {n_bases} bases, one line per record",
                           "seqs.txt"), [
            check("conservation", fill("one line per FASTA record, @N@ records", **v),
                  verdict(fill("test \"$(wc -l < seqs.txt)\" -eq @N@ && "
                               "test \"$(zcat seqs.fa.gz | grep -c '^>')\" -eq @N@", **v))),
            check("conservation", fill("no bases lost when unwrapping, @B@ in all", **v),
                  verdict(fill("test \"$(tr -d '\\n' < seqs.txt | wc -c)\" -eq @B@ && "
                               "test \"$(zcat seqs.fa.gz | grep -v '^>' | tr -d '\\n' | wc -c)\" "
                               "-eq @B@", **v))),
            check("invariance", "an awk scan of the unwrapped records finds the total",
                  verdict(fill(f"test \"$({_scan_both(motif, 'seqs.txt')})\" -eq @TOTAL@",
                               **v)))]),
        turn(fill(_COUNT_SCRIPT, MOTIF=motif),
             node("test", f"{motif}: {fwd} forward + {rev} reverse-strand = {total} "
                          "overlapping matches", "motif_counts.txt", "n1"), [
                 check("invariance", "forward matches agree with an awk scan", verdict(
                     f"test \"$({_awk_scan(motif)})\" -eq \"$(cut -d' ' -f1 motif_counts.txt)\"")),
                 check("invariance", f"reverse-strand matches agree with an awk scan for {rc}",
                       verdict(f"test \"$({_awk_scan(rc)})\" -eq "
                               "\"$(cut -d' ' -f2 motif_counts.txt)\"")),
                 check("range", "total is forward plus reverse", fill(
                     "awk '{ print ($3 == $1 + $2 && $3 == @TOTAL@) ? \"True\" : \"False\" }' "
                     "motif_counts.txt", **v))]),
        turn(fill("grep -o @M@ seqs.txt | wc -l > one_strand.txt\ncat one_strand.txt\n"
                  "cut -d' ' -f3 motif_counts.txt", **v),
             node("interpret", f"{total} matches, not the {careless} that grep -o sees on "
                               "one strand without overlaps" if careless < total else
                               f"{total} matches, all on one strand without overlaps",
                  "one_strand.txt", "n2"), [
                 check("range", "grep -o misses matches: one strand, no overlaps"
                       if careless < total else "grep -o sees every match here",
                       verdict(fill("test \"$(cat one_strand.txt)\" -eq @CARE@ && "
                                    "test \"$(cut -d' ' -f3 motif_counts.txt)\" -eq @TOTAL@ && "
                                    "test @CARE@ @OP@ \"$(cut -d' ' -f3 motif_counts.txt)\"",
                                    OP="-lt" if careless < total else "-eq", **v))),
                 check("range", "the reverse strand adds its own matches", verdict(fill(
                     "test $(( $(cut -d' ' -f3 motif_counts.txt) - $(cut -d' ' -f1 "
                     "motif_counts.txt) )) -eq $(cut -d' ' -f2 motif_counts.txt) && "
                     "test \"$(cut -d' ' -f2 motif_counts.txt)\" -eq @REV@", REV=rev, **v))),
                 check("range", "the answer is the total of both strands", verdict(fill(
                     "test \"$(cut -d' ' -f3 motif_counts.txt)\" -eq @TOTAL@ && "
                     "test \"$(cut -d' ' -f1 motif_counts.txt)\" -eq @FWD@", FWD=fwd, **v)))]),
        final(str(total)),
    )


def _motif_trap(motif: str, careless: int) -> Trap:
    grep = f"zcat seqs.fa.gz | grep -v '^>' | grep -o {motif} | wc -l"
    return Trap(
        description=("grep -o counts one strand, no overlapping matches, and no match "
                     "broken by the FASTA line wrap"),
        careless_solution=(
            turn(grep, node("test", f"{motif} occurs {careless} times"), [
                check("range", "motif found", verdict(f"test \"$({grep})\" -gt 0"))]),
            final(str(careless))),
        wrong_answer=str(careless))


# ----- motif_count: the reference -----

def _occurrences(seq: bytes, word: bytes) -> int:
    return len(re.findall(b"(?=" + re.escape(word) + b")", seq))


def _count_motif(contents: Contents, *, name: str, motif: str) -> str:
    """Overlapping occurrences on both strands, within each record, case-insensitive."""
    words = (motif.encode(), revcomp(motif).encode())
    records = fasta_records(content_of(contents, name))
    return str(sum(_occurrences(seq.upper(), word) for _, seq in records for word in words))


def _motif_free(record: bytes, *, motif: str) -> bool:
    """No occurrence on either strand: the count never reads this record."""
    seq = fasta_sequence(record).upper()
    return motif.encode() not in seq and revcomp(motif).encode() not in seq


def _break_occurrence(content: bytes, rng: random.Random, *, motif: str, strand: int,
                      delete: bool = False) -> bytes | None:
    """One occurrence on ``strand`` (0 forward, 1 reverse) broken by one base changed,
    the other strand's count kept (a check of one strand's count dies on one of the two
    mutants), or by one base deleted (``delete``: one base fewer in the file, too; the
    other strand's count kept as well, so every draw of this edit moves the same counts)."""
    words = (motif.encode(), revcomp(motif).encode())
    layout = fasta_layout(content)
    data = np.frombuffer(content, dtype=np.uint8)
    sites = [(r, m.start()) for r, offsets in enumerate(layout) for m in re.finditer(
        b"(?=" + words[strand] + b")", data[offsets].tobytes().upper())]
    rng.shuffle(sites)
    for r, at in sites[:20]:
        seq = bytearray(data[layout[r]].tobytes().upper())
        before = [_occurrences(bytes(seq), w) for w in words]
        if delete:
            i = at + rng.randrange(len(motif))
            after = [_occurrences(bytes(seq[:i] + seq[i + 1:]), w) for w in words]
            if after[strand] < before[strand] and after[1 - strand] == before[1 - strand]:
                cut = int(layout[r][i])
                return content[:cut] + content[cut + 1:]
            continue
        for i in rng.sample(range(len(motif)), len(motif)):
            for base in b"ACGT":
                trial = seq.copy()
                trial[at + i] = base
                after = [_occurrences(bytes(trial), w) for w in words]
                if after[strand] < before[strand] and after[1 - strand] == before[1 - strand]:
                    return with_bases(content, layout[r][at + i:at + i + 1], bytes([base]))
    return None


def _repeat_record(content: bytes, rng: random.Random, *, motif: str) -> bytes | None:
    """One record holding a match, appended again under a new title: one record more,
    its bases and matches on both strands added (a count of records alone moves here)."""
    chunks = (b"\n" + content).split(b"\n>")[1:]
    held = [c for c in chunks if not _motif_free(c, motif=motif)]
    if not held:
        return None
    title, _, body = rng.choice(held).partition(b"\n")
    tail = b"" if content.endswith(b"\n") else b"\n"
    return content + tail + b">" + title + b" copy\n" + body.rstrip(b"\n") + b"\n"


def _motif_reference(name: str, motif: str) -> Reference:
    return Reference(
        solve=partial(_count_motif, name=name, motif=motif),
        preserving={name: ("recompress", "shuffle_records", "rewrap", "drop_irrelevant")},
        irrelevant={name: partial(_motif_free, motif=motif)},
        mutators={name: aimed(partial(_break_occurrence, motif=motif, strand=0),
                              partial(_break_occurrence, motif=motif, strand=1),
                              partial(_break_occurrence, motif=motif, strand=0, delete=True),
                              partial(_repeat_record, motif=motif))},
        controls={name: aimed(renamed_fasta)})


def _plant_plain(rng: np.random.Generator, seq: bytearray, motif: str) -> None:
    """Warmup: two forward copies inside one FASTA line each (what ``grep -o`` sees)."""
    for _ in range(2):
        line = int(rng.integers(0, len(seq) // WRAP))
        at = WRAP * line + int(rng.integers(0, WRAP - len(motif)))
        seq[at:at + len(motif)] = motif.encode()


def _motif_draw(rng: np.random.Generator, difficulty: Difficulty, motif: str, period: int
                ) -> tuple[list[tuple[str, str]], int, int, int]:
    """(records, forward, reverse, careless count); a warmup draw has no reverse-strand,
    overlapping or wrapped match, so the careless count is the answer."""
    n_records, lo, hi = _SIZES[difficulty]
    records = []
    for i in range(n_records):
        seq = random_bases(rng, int(rng.integers(lo, hi + 1)), gc=0.5)
        (_plant_plain(rng, seq, motif) if difficulty == "warmup"
         else _plant_motifs(rng, seq, motif, period))
        records.append((f"seq{i + 1} len={len(seq)}", seq.decode()))
    fwd = sum(_count_overlapping(s, motif) for _, s in records)
    rev = sum(_count_overlapping(s, revcomp(motif)) for _, s in records)
    careless = sum(line.count(motif) for line in fasta_text(records).splitlines()
                   if not line.startswith(">"))
    return records, fwd, rev, careless


def motif_count(rng: np.random.Generator, difficulty: Difficulty) -> Instance:
    """Count a motif on both strands, overlaps included (trap: ``grep -o``; none at
    warmup)."""
    motif, period = _MOTIFS[int(rng.integers(len(_MOTIFS)))]
    rc = revcomp(motif)
    for _ in range(200):  # warmup: redraw until no match is one grep -o misses
        records, fwd, rev, careless = _motif_draw(rng, difficulty, motif, period)
        if (careless == fwd + rev) == (difficulty == "warmup"):
            break
    else:
        raise RuntimeError(f"motif_count: the trap is wrong at {difficulty}; generator bug")
    n_records, text = len(records), fasta_text(records)
    one_strand = sum(s.count(motif) for _, s in records)
    question = (
        f"How many times does the motif {motif} occur in the sequences of seqs.fa.gz? "
        f"Count both strands (a reverse-strand occurrence reads {rc} on the given strand), "
        "count overlapping occurrences, and count within each record (no match spans two "
        "records). Answer with one integer.")
    n_bases = sum(len(s) for _, s in records)
    return Instance(files={"seqs.fa.gz": gz(text)}, question=question, answer=str(fwd + rev),
                    grader={"kind": "numeric", "abs_tol": 0},
                    solution=_motif_solution(motif, n_records, n_bases, fwd, rev, one_strand),
                    trap=_motif_trap(motif, careless),
                    tags=("fasta", "motif", "reverse-complement", "overlapping-matches"),
                    reference=_motif_reference("seqs.fa.gz", motif))


def _soft_mask(rng: np.random.Generator, seq: bytearray) -> None:
    """Lowercase repeat-like stretches covering roughly a third to a half of ``seq``."""
    target, masked, n = int(len(seq) * rng.uniform(0.35, 0.5)), 0, len(seq)
    while masked < target:
        span = int(rng.integers(20, max(21, n // 6)))
        at = int(rng.integers(0, n - span))
        masked += span
        seq[at:at + span] = seq[at:at + span].lower()


def _add_gaps(rng: np.random.Generator, seq: bytearray) -> None:
    """Overwrite one to three stretches with N, as assembly gaps look in a FASTA file."""
    for _ in range(int(rng.integers(1, 4))):
        span = int(rng.integers(len(seq) // 40, len(seq) // 12))
        at = int(rng.integers(0, len(seq) - span))
        seq[at:at + span] = b"N" * span


_SEQ_ONLY = "zcat genome.fa.gz | grep -v '^>'"
_CLASSES = ("zcat genome.fa.gz | awk '!/^>/ { s = $0; ug += gsub(/[GC]/, \"\", s); "
            "lg += gsub(/[gc]/, \"\", s); ua += gsub(/[AT]/, \"\", s); "
            "la += gsub(/[at]/, \"\", s); n += gsub(/[Nn]/, \"\", s) } "
            "END { printf \"%d %d %d %d %d\\n\", ug, lg, ua, la, n }' > base_classes.txt\n"
            "cat base_classes.txt")
_GC_COUNT = ("awk '{ print $1 + $2, $1 + $2 + $3 + $4, $3 + $4 }' base_classes.txt "
             "> gc_counts.txt\ncat gc_counts.txt")


def _gc_values(joined: str, answer: str) -> dict[str, object]:
    """The base classes the solution's checks pin, counted by the generator."""
    ug, lg = joined.count("G") + joined.count("C"), joined.count("g") + joined.count("c")
    ua, la = joined.count("A") + joined.count("T"), joined.count("a") + joined.count("t")
    return {"SEQ": _SEQ_ONLY, "UG": ug, "LG": lg, "UA": ua, "LA": la, "GC": ug + lg,
            "AT": ua + la, "C": ug + lg + ua + la, "NN": joined.count("N"), "ANS": answer}


def _gc_solution(v: dict[str, object]) -> tuple[str, ...]:
    """Three nodes, each pinning three base classes that different edits move (masked
    g/c, uppercase G/C, called A/T turned N, a gap filled): distinct evidence."""
    def col(path: str, k: int, name: str) -> str:
        return f"test \"$(cut -d' ' -f{k} {path})\" -eq {v[name]}"
    classes = [col("base_classes.txt", k, n) for k, n in ((1, "UG"), (2, "LG"), (3, "UA"))]
    counts = [col("gc_counts.txt", k, n) for k, n in ((1, "GC"), (2, "C"), (3, "AT"))]
    return (
        turn(f"zcat genome.fa.gz | head -3\n{_SEQ_ONLY} | fold -w1 | sort | uniq -c"),
        turn(_CLASSES, node("transform", f"{v['UG']} G/C and {v['UA']} A/T uppercase, "
                                         f"{v['LG']} g/c and {v['LA']} a/t soft-masked, "
                                         f"{v['NN']} N", "base_classes.txt"), [
            check("invariance", "uppercase G/C agree with a tr count", verdict(
                classes[0] + fill(" && test \"$(@SEQ@ | tr -cd 'GC' | wc -c)\" -eq @UG@", **v))),
            check("invariance", "soft-masked g/c agree with a tr count", verdict(
                classes[1] + fill(" && test \"$(@SEQ@ | tr -cd 'gc' | wc -c)\" -eq @LG@", **v))),
            check("invariance", "uppercase A/T agree with a tr count", verdict(
                classes[2] + fill(" && test \"$(@SEQ@ | tr -cd 'AT' | wc -c)\" -eq @UA@", **v)))]),
        turn(_GC_COUNT, node("transform", f"{v['GC']} G/C among {v['C']} called bases "
                                          f"({v['NN']} N excluded), soft-masked lowercase "
                                          "bases included", "gc_counts.txt", "n1"), [
            check("conservation", "G/C in any case agree with a case-insensitive tr count",
                  verdict(counts[0] + fill(" && test \"$(@SEQ@ | tr -cd 'GCgc' | wc -c)\" "
                                           "-eq @GC@", **v))),
            check("range", "called bases are exactly A, C, G, T in any case", verdict(
                counts[1] + fill(" && test \"$(@SEQ@ | tr -cd 'ACGTacgt' | wc -c)\" -eq @C@",
                                 **v))),
            check("conservation", "A/T are the called bases that are not G/C", verdict(
                counts[2] + " && awk '{ exit !($3 == $2 - $1) }' gc_counts.txt"))]),
        turn("awk '{ printf \"%.2f\\n\", 100 * $1 / $2 }' gc_counts.txt > gc_percent.txt\n"
             "cat gc_percent.txt",
             node("interpret", f"GC content {v['ANS']}%", "gc_percent.txt", "n2"), [
                 check("range", "percentage recomputes from the counts", fill(
                     "awk 'NR == FNR { p = $1; next } { d = 100 * $1 / $2 - p; print "
                     "(d < 0.005 && d > -0.005 && p == @ANS@) ? \"True\" : \"False\" }' "
                     "gc_percent.txt gc_counts.txt", **v)),
                 check("range", "N is left out of the denominator", verdict(fill(
                     "test \"$(@SEQ@ | tr -cd 'Nn' | wc -c)\" -eq @NN@ && test \"$(cut -d' ' "
                     "-f5 base_classes.txt)\" -eq @NN@", **v))),
                 check("range", "soft-masked g/c are counted in the numerator", verdict(fill(
                     "test $(( $(cut -d' ' -f1 gc_counts.txt) - $(@SEQ@ | tr -cd 'GC' | "
                     "wc -c) )) -eq @LG@", **v)))]),
        final(str(v["ANS"])),
    )


def _gc_trap(wrong: str) -> Trap:
    careless = (f"{_SEQ_ONLY} | tr -d '\\n' > bases.txt\n"
                "gc=$(tr -cd 'GC' < bases.txt | wc -c); n=$(wc -c < bases.txt)\n"
                "awk -v g=\"$gc\" -v n=\"$n\" 'BEGIN { printf \"%.2f\\n\", 100 * g / n }' "
                "> gc.txt\ncat gc.txt")
    return Trap(
        description=("tr -cd GC counts only uppercase bases, so soft-masked (lowercase) G/C "
                     "are lost, and N gaps are counted as bases"),
        careless_solution=(
            turn(careless, node("test", f"GC content {wrong}%", "gc.txt"), [
                check("range", "GC content is plausible",
                      "awk '{ print ($1 > 20 && $1 < 80) ? \"True\" : \"False\" }' gc.txt")]),
            final(wrong)),
        wrong_answer=wrong)


# ----- gc_content: the reference -----

_LETTERS = bytes(range(ord("A"), ord("Z") + 1)) + b"-*."
_GC_TOL = 0.01


def _gc_counts(seq: bytes) -> tuple[int, int]:
    """(G or C, called bases: A, C, G or T) of one sequence, case-insensitive.

    Raises:
        ValueError: A character that is no sequence letter.
    """
    upper = seq.upper()
    if upper.translate(None, _LETTERS):
        raise ValueError("a FASTA sequence line holds a character that is no base letter")
    gc = upper.count(b"G") + upper.count(b"C")
    return gc, gc + upper.count(b"A") + upper.count(b"T")


def _percent(gc: int, called: int) -> str:
    return f"{100 * gc / called:.2f}" if called else CANNOT_DETERMINE


def _solve_gc(contents: Contents, *, name: str) -> str:
    counts = [_gc_counts(seq) for _, seq in fasta_records(content_of(contents, name))]
    return _percent(sum(c[0] for c in counts), sum(c[1] for c in counts))


_SWAPS = {"masked": (b"gc", b"at"), "upper": (b"GC", b"AT"), "called": (b"AT", b"NN")}


def _gc_edit(seq: np.ndarray, rng: random.Random, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(positions, new letters) in one record: its soft-masked g/c made a/t (``masked``),
    its uppercase G/C made A/T (``upper``), its uppercase A/T made N (``called``: fewer
    called bases, the same G/C), or one N gap filled with G (``gap``). Each moves a
    different base class, so checks of different classes fail on different mutants."""
    if kind in _SWAPS:
        old, new = (np.frombuffer(x, dtype=np.uint8) for x in _SWAPS[kind])
        at = np.flatnonzero(np.isin(seq, old))
        return at, np.where(seq[at] == old[0], new[0], new[1]).astype(np.uint8)
    gap = np.concatenate(([False], (seq == ord("N")) | (seq == ord("n")), [False]))
    edges = np.flatnonzero(np.diff(gap.astype(np.int8)))
    if not len(edges):
        return edges, edges.astype(np.uint8)
    run = rng.randrange(len(edges) // 2)
    at = np.arange(edges[2 * run], edges[2 * run + 1])
    return at, np.full(len(at), ord("G"), dtype=np.uint8)


def _gc_mutant(content: bytes, rng: random.Random, *, kind: str) -> bytes | None:
    """One record edited (see `_gc_edit`): the fewest of its edited bases (doubling)
    that move the percentage beyond the grader's tolerance, so that a loose range on
    the answer (a plausibility test) does not tell the mutant apart; a gap is filled
    whole."""
    layout = fasta_layout(content)
    data = np.frombuffer(content, dtype=np.uint8)
    counts = [_gc_counts(data[offsets].tobytes()) for offsets in layout]
    gc, called = sum(c[0] for c in counts), sum(c[1] for c in counts)
    base = _percent(gc, called)
    for r in rng.sample(range(len(layout)), len(layout)):
        at, letters = _gc_edit(data[layout[r]], rng, kind)
        order = np.array(rng.sample(range(len(at)), len(at)), dtype=np.int64)
        n = len(at) if kind == "gap" else 1
        while 0 < n <= len(at):
            pick = order[:n] if kind != "gap" else order
            edited = data[layout[r]].copy()
            edited[at[pick]] = letters[pick]
            g, c = _gc_counts(edited.tobytes())
            if moved(base, _percent(gc - counts[r][0] + g, called - counts[r][1] + c), _GC_TOL):
                return with_bases(content, layout[r][at[pick]], letters[pick].tobytes())
            n = len(at) + 1 if n == len(at) else min(2 * n, len(at))
    return None


def _gc_reference(name: str) -> Reference:
    return Reference(
        solve=partial(_solve_gc, name=name),
        preserving={name: ("recompress", "shuffle_records", "rewrap")},
        mutators={name: aimed(*(partial(_gc_mutant, kind=k)
                                for k in ("masked", "gap", "upper", "called")))},
        controls={name: aimed(renamed_fasta)},
        rewriting={name: ("revcomp_records",)})  # a GC share has no strand


def gc_content(rng: np.random.Generator, difficulty: Difficulty) -> Instance:
    """GC percentage of a soft-masked genome (trap: counting only uppercase G/C; at
    warmup the genome is all uppercase without gaps, so ``tr -cd GC`` is right)."""
    n_records, lo, hi = _SIZES[difficulty]
    records = []
    for i in range(n_records):
        seq = random_bases(rng, int(rng.integers(lo, hi + 1)), gc=float(rng.uniform(0.35, 0.6)))
        if difficulty != "warmup":
            _soft_mask(rng, seq)
            _add_gaps(rng, seq)
        records.append((f"chr{i + 1}", seq.decode()))
    joined = "".join(s for _, s in records)
    n_bases = len(joined)
    n_called = n_bases - joined.count("N")
    n_gc = joined.upper().count("G") + joined.upper().count("C")
    n_upper_gc = joined.count("G") + joined.count("C")
    answer, wrong = f"{100 * n_gc / n_called:.2f}", f"{100 * n_upper_gc / n_bases:.2f}"
    question = ("What is the GC content of genome.fa.gz: the percentage of called bases "
                "(A, C, G or T, in upper or lower case; N marks an unknown base and does not "
                "count), over all records, that are G or C? Give two decimals.")
    return Instance(files={"genome.fa.gz": gz(fasta_text(records))}, question=question,
                    answer=answer, grader={"kind": "numeric", "abs_tol": _GC_TOL},
                    solution=_gc_solution(_gc_values(joined, answer)), trap=_gc_trap(wrong),
                    tags=("fasta", "gc-content", "soft-masking", "gaps"),
                    reference=_gc_reference("genome.fa.gz"))
