"""Sequence family: the longest open reading frame, on both strands.

Why this trap. "Find the longest ORF" is a first-week exercise, and the first-week
answer scans the three forward frames of the sequence as written. Genes sit on both
strands, so half of all ORFs are on the reverse complement. The generator plants the
longest ORF on the reverse strand and a shorter decoy on the forward strand, so a
forward-only scan returns a long, ATG-to-stop, perfectly plausible ORF -- and the wrong
length.

Definitions (stated in the question): an ORF runs from an ATG to the first in-frame
stop codon (TAA, TAG, TGA) on the same strand; its length is counted in amino acids,
the stop excluded; an ORF without a stop before the end of its record does not count.

The ground truth is found by a numpy scan of codon codes in all six frames (stops and
ATGs located with ``searchsorted``); tests recount it by translating each frame and
matching ``M[^*]*\\*`` with a regex. Easy instances are plain FASTA, harder ones gzipped.

Each instance's `Reference` rescans the decoded FASTA (any width, any record order;
letters other than A, C, G, T read no codon). No record is declared irrelevant: the
question is a maximum over every record, so each is read (dropping records whose ORFs
are shorter would keep the answer, but it would also kill the reference solution's
record and base counts, which pin what was loaded). The aimed mutants turn the longest
ORF's stop into a sense codon, delete one whole codon inside it, delete one base inside
it (a frameshift) or put a stop codon inside it: a check of where it ends dies on the
first only, one of where it starts or of the runner-up frame on the last two, a count
of the bases loaded on the middle two. The family's control renames every record.
"""

from __future__ import annotations

import random
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
from vera_env.tasks.builtin.sequences import fasta_text, random_bases, renamed_fasta, revcomp
from vera_env.tasks.builtin.solvers import (
    aimed,
    content_of,
    fasta_layout,
    fasta_records,
    with_bases,
)
from vera_env.tasks.model import Trap
from vera_env.verification.strength.reference import Contents, Reference

__all__ = ["longest_orf", "longest_orf_per_strand", "orf_answer"]

_STOPS = ("TAA", "TAG", "TGA")
_SENSE = tuple(a + b + c for a in "ACGT" for b in "ACGT" for c in "ACGT"
               if a + b + c not in _STOPS)
_SIZES: dict[str, tuple[int, int, int]] = {  # records, min length, max length
    "warmup": (2, 240, 360), "easy": (3, 900, 1500), "medium": (8, 2000, 5000),
    "hard": (30, 8000, 20_000),
    "xl": (60, 40_000, 80_000)}
_CODE = np.zeros(256, dtype=np.int64)
_CODE[np.frombuffer(b"ACGT", dtype=np.uint8)] = [0, 1, 2, 3]


def _codon_code(codon: str) -> int:
    return int(16 * _CODE[ord(codon[0])] + 4 * _CODE[ord(codon[1])] + _CODE[ord(codon[2])])


_ATG, _STOP_CODES = _codon_code("ATG"), [_codon_code(s) for s in _STOPS]


def _longest_in_frames(seq: str) -> int:
    """Longest complete ORF (amino acids, stop excluded) in the three frames of ``seq``."""
    bases = _CODE[np.frombuffer(seq.encode(), dtype=np.uint8)]
    best = 0
    for frame in range(3):
        n = (len(bases) - frame) // 3
        triplets = bases[frame:frame + 3 * n].reshape(n, 3)
        codes = triplets[:, 0] * 16 + triplets[:, 1] * 4 + triplets[:, 2]
        stops = np.flatnonzero(np.isin(codes, _STOP_CODES))
        atgs = np.flatnonzero(codes == _ATG)
        if not len(stops) or not len(atgs):
            continue
        previous = np.concatenate(([-1], stops[:-1]))
        first = np.searchsorted(atgs, previous + 1)  # first ATG after the previous stop
        ok = first < len(atgs)
        starts = atgs[np.minimum(first, len(atgs) - 1)]
        lengths = np.where(ok & (starts < stops), stops - starts, 0)
        best = max(best, int(lengths.max()))
    return best


def longest_orf_per_strand(records: list[str]) -> tuple[int, int]:
    """(longest forward-strand ORF, longest reverse-strand ORF) over all records."""
    forward = max(_longest_in_frames(s) for s in records)
    reverse = max(_longest_in_frames(revcomp(s)) for s in records)
    return forward, reverse


def _orf(rng: np.random.Generator, n_aa: int) -> str:
    """A stop, then ATG + ``n_aa - 1`` sense codons + a stop (the leading stop pins the
    start: no in-frame ATG upstream can lengthen it)."""
    body = [_SENSE[int(i)] for i in rng.integers(len(_SENSE), size=n_aa - 1)]
    stop = [_STOPS[int(i)] for i in rng.integers(3, size=2)]
    return stop[0] + "ATG" + "".join(body) + stop[1]


def _draw(rng: np.random.Generator, difficulty: Difficulty) -> tuple[list[str], int, int]:
    n_records, lo, hi = _SIZES[difficulty]
    seqs = [random_bases(rng, int(rng.integers(lo, hi + 1)), gc=0.5)
            for _ in range(n_records)]
    host_rev, host_fwd = (int(i) for i in rng.choice(n_records, size=2, replace=n_records < 2))
    n_rev = int(len(seqs[host_rev]) * rng.uniform(0.3, 0.45)) // 3
    n_fwd = int(n_rev * rng.uniform(0.55, 0.85))
    if difficulty == "warmup":  # no trap: the longest ORF is on the forward strand
        n_fwd, n_rev = n_rev, n_fwd
    for host, planted in ((host_fwd, _orf(rng, n_fwd)), (host_rev, revcomp(_orf(rng, n_rev)))):
        at = int(rng.integers(0, len(seqs[host]) - len(planted)))
        seqs[host][at:at + len(planted)] = planted.encode()
    records = [s.decode() for s in seqs]
    forward, reverse = longest_orf_per_strand(records)
    return records, forward, reverse


_SCAN = r"""cat > orfs.py <<'EOF'
import sys

STOPS = {'TAA', 'TAG', 'TGA'}
comp = str.maketrans('ACGT', 'TGCA')
best = (0, '', '')
out = open('orfs.tsv', 'w')
for rec, line in enumerate(open('seqs.txt'), 1):
    fwd = line.strip().upper()
    for strand, s in (('+', fwd), ('-', fwd.translate(comp)[::-1])):
        for frame in range(3):
            top, start, top_seq = 0, None, ''
            for i in range(frame, len(s) - 2, 3):
                codon = s[i:i + 3]
                if start is None and codon == 'ATG':
                    start = i
                elif start is not None and codon in STOPS:
                    if (i - start) // 3 > top:
                        top, top_seq = (i - start) // 3, s[start:i + 3]
                    start = None
            out.write(f'{rec}\t{strand}\t{frame}\t{top}\n')
            if top > best[0]:
                best = (top, f'record {rec} strand {strand} frame {frame}', top_seq)
out.close()
open('longest_orf.txt', 'w').write(best[2] + '\n')
print(best[1])
print(best[0])
EOF
python3 orfs.py"""


def _solution(cat: str, n_records: int, n_bases: int, answer: int, forward: int,
              second: int, orf: str) -> tuple[str, ...]:
    """Two nodes over facts different mutants move: the longest ORF, the runner-up frame,
    the forward strand's best, the bases loaded; the ORF's opening and closing bases.
    The ORF is on the reverse strand, except at warmup (``answer == forward``)."""
    rev = answer != forward
    v = {"CAT": cat, "N": n_records, "ROWS": 6 * n_records, "ANS": answer, "NT": 3 * answer + 3,
         "B": n_bases, "FWD": forward, "SECOND": second, "HEAD": orf[:24], "TAIL": orf[-24:],
         "MET": _internal_met(orf), "GCN": orf.count("G") + orf.count("C"),
         "STRAND": "-" if rev else "+"}
    unwrap = fill("@CAT@ | awk '/^>/ { if (n) print s; s = \"\"; n++; next } { s = s $0 } "
                  "END { if (n) print s }' > seqs.txt\nwc -l < seqs.txt", **v)
    revcomp_data = fill("@CAT@ | awk '/^>/ { if (n) print s; s = \"\"; n++; next } "
                        "{ s = s $0 } END { if (n) print s }'" + (
                            " | rev | tr ACGTacgt TGCAtgca" if rev else ""), **v)
    strand = "reverse" if rev else "forward"
    return (
        turn(unwrap),
        turn(_SCAN, node("test", f"longest ORF: {answer} aa, on the reverse strand; the "
                                 f"forward strand's longest is {forward} aa" if rev else
                         f"longest ORF: {answer} aa, on the forward strand",
                         "longest_orf.txt"), [
            check("range", f"the longest of all six frames is on the {strand} strand", fill(
                "awk -F'\\t' '$4 > m { m = $4; s = $2 } END { print (NR == @ROWS@ && "
                "m == @ANS@ && s == \"@STRAND@\") ? \"True\" : \"False\" }' orfs.tsv", **v)),
            check("range", "the runner-up frame's longest ORF is shorter", verdict(fill(
                "test \"$(cut -f4 orfs.tsv | sort -rn | sed -n 2p)\" -eq @SECOND@ && "
                "test \"$(cut -f4 orfs.tsv | sort -rn | head -1)\" -eq @ANS@", **v))),
            check("conservation", fill("all @B@ bases were scanned", **v), verdict(fill(
                "test \"$(tr -d '\\n' < seqs.txt | wc -c)\" -eq @B@ && "
                "test \"$(@CAT@ | grep -v '^>' | tr -d '\\n' | wc -c)\" -eq @B@", **v)))]),
        turn("head -c 60 longest_orf.txt; echo; tail -c 31 longest_orf.txt",
             node("interpret", f"the ORF: ATG ... stop, {3 * answer + 3} nt on the "
                               + ("reverse complement" if rev else "forward strand"),
                  "longest_orf.txt", "n1"), [
            check("type", "the ORF is ATG ... stop with no stop in frame before the end", fill(
                "awk '{ ok = length($0) == @NT@ && substr($0, 1, 3) == \"ATG\" && "
                "substr($0, length($0) - 2) ~ /^(TAA|TAG|TGA)$/; for (i = 1; i < length($0) "
                "- 2; i += 3) if (substr($0, i, 3) ~ /^(TAA|TAG|TGA)$/) ok = 0; "
                "print ok ? \"True\" : \"False\" }' longest_orf.txt", **v)),
            check("invariance", "its opening bases read on the reverse complement of a record"
                  if rev else "its opening bases read in a record",
                  verdict(fill("test \"$(tr -d '\\n' < longest_orf.txt | wc -c)\" -eq @NT@ && "
                               "test \"$(head -c 24 longest_orf.txt)\" = @HEAD@ && "
                               f"test \"$({revcomp_data} | grep -c @HEAD@)\" -ge 1", **v))),
            check("invariance", "its closing bases and stop read there too", verdict(fill(
                "test \"$(tr -d '\\n' < longest_orf.txt | wc -c)\" -eq @NT@ && "
                "test \"$(tr -d '\\n' < longest_orf.txt | tail -c 24)\" = @TAIL@ && "
                f"test \"$({revcomp_data} | grep -c @TAIL@)\" -ge 1", **v)))]),
        turn(_TRANSLATE, node("interpret", f"the protein: {answer} aa from M, no stop inside",
                              "protein.txt", "n2"), [
            check("range", "the protein has the answer's length, starts with M, no stop", fill(
                "awk '{ print (length($0) == @ANS@ && substr($0, 1, 1) == \"M\" && "
                "index($0, \"*\") == 0) ? \"True\" : \"False\" }' protein.txt", **v)),
            check("range", fill("@MET@ methionines inside the ORF after its start", **v),
                  verdict(fill("test \"$(tr -d '\\n' < protein.txt | wc -c)\" -eq @ANS@ && "
                               "test \"$(tail -c +2 protein.txt | tr -cd M | wc -c)\" -eq @MET@",
                               **v))),
            check("range", fill("the ORF holds @GCN@ G/C bases", **v), verdict(fill(
                "test \"$(tr -cd GC < longest_orf.txt | wc -c)\" -eq @GCN@", **v)))]),
        final(str(answer)),
    )


_TRANSLATE = ("python3 -c \"import itertools, sys\n"
              "b = 'TCAG'\naa = 'FFLLSSSSYY**CC*WLLLLPPPPHHQQRRRRIIIMTTTTNNKKSSRRVVVVAAAADDEEGGGG'\n"
              "code = {''.join(c): a for c, a in zip(itertools.product(b, repeat=3), aa)}\n"
              "s = open('longest_orf.txt').read().strip()\n"
              "print(''.join(code[s[i:i + 3]] for i in range(0, len(s) - 3, 3)))\" "
              "> protein.txt\ncat protein.txt\nawk '{ print length($0) }' protein.txt")


def _internal_met(orf: str) -> int:
    """ATG codons after the start codon, stop excluded."""
    return sum(orf[i:i + 3] == "ATG" for i in range(3, len(orf) - 3, 3))


def _trap(cat: str, wrong: int) -> Trap:
    scan = fill(
        "@CAT@ | awk '/^>/ { if (n) print s; s = \"\"; n++; next } { s = s $0 } "
        "END { if (n) print s }' | python3 -c \"import re, sys\n"
        "best = 0\nfor s in sys.stdin:\n    s = s.strip().upper()\n"
        "    for f in range(3):\n"
        "        codons = [s[i:i + 3] for i in range(f, len(s) - 2, 3)]\n"
        "        prot = ''.join('*' if c in ('TAA', 'TAG', 'TGA') else "
        "('M' if c == 'ATG' else 'X') for c in codons)\n"
        "        best = max([best] + [len(m) - 1 for m in re.findall('M[^*]*[*]', prot)])\n"
        "print(best)\" > orf_len.txt\ncat orf_len.txt", CAT=cat)
    return Trap(
        description="scanning the three forward frames only: the longest ORF is on the "
                    "reverse strand",
        careless_solution=(
            turn(scan, node("test", f"longest ORF is {wrong} aa", "orf_len.txt"), [
                check("range", "an ORF was found", verdict("test \"$(cat orf_len.txt)\" -gt 0"))]),
            final(str(wrong))),
        wrong_answer=str(wrong))


# ----- the reference: a scan of the written file -----

_READ = np.full(256, 64, dtype=np.int64)  # 64: no codon holding this letter is ATG or a stop
_READ[np.frombuffer(b"ACGT", dtype=np.uint8)] = [0, 1, 2, 3]
_COMPLEMENT = bytes.maketrans(b"ACGT", b"TGCA")
_SENSE_FOR_STOP = b"TAC"  # a stop made Tyr: the ORF runs on to the next stop, or never ends


def _frames(seq: bytes) -> list[tuple[int, int, int]]:
    """Per frame 0, 1, 2: (amino acids, start, stop) of the longest complete ORF of an
    uppercase ``seq`` in that frame, (0, -1, -1) for none; positions are of the ATG's and
    the stop codon's first base."""
    bases = _READ[np.frombuffer(seq, dtype=np.uint8)]
    out = []
    for frame in range(3):
        n = (len(bases) - frame) // 3
        triplets = bases[frame:frame + 3 * n].reshape(n, 3)
        codes = triplets[:, 0] * 16 + triplets[:, 1] * 4 + triplets[:, 2]
        stops = np.flatnonzero(np.isin(codes, _STOP_CODES))
        atgs = np.flatnonzero(codes == _ATG)
        if not len(stops) or not len(atgs):
            out.append((0, -1, -1))
            continue
        first = np.searchsorted(atgs, np.concatenate(([-1], stops[:-1])) + 1)
        starts = atgs[np.minimum(first, len(atgs) - 1)]
        lengths = np.where((first < len(atgs)) & (starts < stops), stops - starts, 0)
        i = int(lengths.argmax())
        out.append((int(lengths[i]), frame + 3 * int(starts[i]), frame + 3 * int(stops[i]))
                   if int(lengths[i]) else (0, -1, -1))
    return out


def _best_in_strand(seq: bytes) -> tuple[int, int, int]:
    """(amino acids, start, stop) of the longest complete ORF in the three frames of an
    uppercase ``seq`` (the first frame's on a tie)."""
    best = (0, -1, -1)
    for top in _frames(seq):
        if top[0] > best[0]:
            best = top
    return best


def frame_tops(records: list[str]) -> list[int]:
    """Every record's six frame maxima (what the solution's ``orfs.tsv`` lists)."""
    out = []
    for seq in records:
        upper = seq.upper().encode()
        out += [t[0] for strand in (upper, upper.translate(_COMPLEMENT)[::-1])
                for t in _frames(strand)]
    return out


def _best_in_record(seq: bytes) -> tuple[int, int, int, int]:
    """(amino acids, strand 1 or -1, start, stop) of a record's longest ORF, positions on
    that strand (the reverse strand read 5' to 3')."""
    upper = seq.upper()
    fwd = _best_in_strand(upper)
    rev = _best_in_strand(upper.translate(_COMPLEMENT)[::-1])
    return (*fwd[:1], 1, *fwd[1:]) if fwd[0] >= rev[0] else (*rev[:1], -1, *rev[1:])


def orf_answer(content: bytes) -> str:
    """The longest complete ORF over six frames of every record of a decoded FASTA.

    Raises:
        ValueError: Not FASTA.
    """
    return str(max(_best_in_record(seq)[0] for _, seq in fasta_records(content)))


def _solve_orf(contents: Contents, *, name: str) -> str:
    return orf_answer(content_of(contents, name))


def _orf_mutant(content: bytes, rng: random.Random, *, kind: str) -> bytes | None:
    """The longest ORF cut by a stop inside it (``cut``), its stop made a sense codon
    (``open``), one base inside it deleted (``shift``: a frameshift, and one base fewer
    in the file) or one whole codon away from its ends deleted (``codon``: one amino acid
    fewer, same start and stop), on its own strand; the first such edit that changes
    the answer."""
    layout = fasta_layout(content)
    data = np.frombuffer(content, dtype=np.uint8)
    seqs = [data[offsets].tobytes() for offsets in layout]
    base = max(_best_in_record(seq)[0] for seq in seqs)
    for r in rng.sample(range(len(seqs)), len(seqs)):
        length, strand, start, stop = _best_in_record(seqs[r])
        if length < base:
            continue
        inside = list(range(start + 3, stop, 3))
        if kind == "codon":
            inside = inside[5:-5] or inside
        at = [stop] if kind == "open" else rng.sample(inside, min(5, len(inside)))
        codon = _SENSE_FOR_STOP if kind == "open" else _STOPS[rng.randrange(3)].encode()
        if strand < 0:  # the reverse strand's codon at p is at len - p - 3 on the forward
            at, codon = [len(seqs[r]) - p - 3 for p in at], codon.translate(_COMPLEMENT)[::-1]
        for pos in at:
            if kind in ("shift", "codon"):
                cuts = {int(x) for x in layout[r][pos:pos + (3 if kind == "codon" else 1)]}
                edited = _without(content, cuts)
            else:
                edited = with_bases(content, layout[r][pos:pos + 3], codon)
            if orf_answer(edited) != str(base):
                return edited
    return None


def _without(content: bytes, cuts: set[int]) -> bytes:
    """``content`` without the bytes at offsets ``cuts``."""
    out, last = [], 0
    for cut in sorted(cuts):
        out.append(content[last:cut])
        last = cut + 1
    return b"".join(out) + content[last:]


def _reference(name: str) -> Reference:
    return Reference(
        solve=partial(_solve_orf, name=name),
        preserving={name: ("recompress", "shuffle_records", "rewrap") if name.endswith(".gz")
                    else ("shuffle_records", "rewrap")},
        mutators={name: aimed(*(partial(_orf_mutant, kind=kind)
                                for kind in ("open", "codon", "shift", "cut")))},
        controls={name: aimed(renamed_fasta)})


def _runner_up_and_orf(records: list[str], answer: int) -> tuple[int, str]:
    """The second of the six-frame maxima (what ``sort -rn | sed -n 2p`` of ``orfs.tsv``
    prints) and the longest ORF's nucleotides, stop included, as ``orfs.py`` writes them
    (the first frame found on a tie, in its scan order)."""
    tops = sorted(frame_tops(records), reverse=True)
    for seq in records:
        upper = seq.upper().encode()
        for strand in (upper, upper.translate(_COMPLEMENT)[::-1]):
            for length, begin, stop in _frames(strand):
                if length == answer:
                    return tops[1], strand[begin:stop + 3].decode()
    raise RuntimeError("longest_orf: the answer's ORF is not found; generator bug")


def longest_orf(rng: np.random.Generator, difficulty: Difficulty) -> Instance:
    """Longest ORF over six frames (trap: scanning the forward strand only; at warmup the
    longest is on the forward strand, so the careless scan is right)."""
    for _ in range(20):  # the decoy or background could outgrow the planted ORF: redraw
        records, forward, reverse = _draw(rng, difficulty)
        if (reverse > forward) if difficulty != "warmup" else (forward > reverse):
            break
    else:
        raise RuntimeError("longest_orf: the trap is wrong; generator bug")
    answer = max(forward, reverse)
    plain = difficulty in ("warmup", "easy")
    name = "transcripts.fa" if plain else "transcripts.fa.gz"
    text = fasta_text([(f"tx{i + 1}", s) for i, s in enumerate(records)])
    data = text.encode() if plain else gz(text)
    cat = f"cat {name}" if plain else f"zcat {name}"
    question = (
        f"What is the length, in amino acids, of the longest open reading frame in {name}? "
        "An ORF runs from an ATG to the first in-frame stop codon (TAA, TAG or TGA) on the "
        "same strand; count the amino acids from the ATG's methionine up to, not including, "
        "the stop. Consider all six reading frames of every record; an ORF without a stop "
        "before the end of its record does not count. Answer with one integer.")
    return Instance(
        files={name: data}, question=question, answer=str(answer),
        grader={"kind": "numeric", "abs_tol": 0},
        solution=_solution(cat, len(records), sum(map(len, records)), answer, forward,
                           *_runner_up_and_orf(records, answer)),
        trap=_trap(cat, forward), tags=("fasta", "orf", "six-frames", "reverse-complement"),
        reference=_reference(name))
