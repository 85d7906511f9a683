"""Real genome (FASTA): restriction sites in the 2.46 Mb chromosome of *C. diphtheriae*.

Why this trap. FASTA wraps a sequence at 80 bases a line, so a 6-base site can be cut
in two by a line break, and ``grep -c`` counts *lines* with a match, not matches: a
line holding two sites counts once. On this chromosome ``grep -c GAATTC`` says 659 for
EcoRI's 712 sites -- a believable count, 7% short. The sequence has to be joined first.

Only palindromic sites whose occurrences cannot overlap are asked about (``GCTAGC`` and
``GCATGC`` overlap themselves in this genome and are left out), so "count the site" has
one meaning, strand does not matter, and ``grep -o | wc -l`` and ``str.count`` agree
with the overlapping count the tests make.
"""

from __future__ import annotations

import gzip
import random
import re
from collections.abc import Mapping
from functools import partial

import numpy as np

from vera_env.tasks.builtin.instance import Instance, check, fill, final, node, turn, verdict
from vera_env.tasks.real.kinds import (
    Census,
    Probe,
    RealInstance,
    careless_trap,
    content_of,
    edit_line,
    python_check,
)
from vera_env.tasks.undetermined import with_clause
from vera_env.verification.strength.reference import Contents, Reference

__all__ = ["SITES", "count_sites", "site_count"]

SITES = {"EcoRI": "GAATTC", "BamHI": "GGATCC", "HindIII": "AAGCTT", "PstI": "CTGCAG",
         "SalI": "GTCGAC", "XhoI": "CTCGAG", "KpnI": "GGTACC", "SacI": "GAGCTC",
         "NcoI": "CCATGG", "EcoRV": "GATATC", "XbaI": "TCTAGA", "ClaI": "ATCGAT",
         "BglII": "AGATCT", "PvuII": "CAGCTG", "ScaI": "AGTACT"}
_FILE = "genome.fna.gz"


def _question(organism: str, enzyme: str) -> str:
    return with_clause(
        f"{_FILE} holds the complete chromosome of {organism} strain NCTC11397. How many "
        f"{enzyme} restriction sites ({SITES[enzyme]}, a palindrome, so one strand shows every "
        "site) does the chromosome have? Answer with one integer.")


_JOINED = ("python3 -c \"import gzip, re; s = ''.join(l.strip() for l in gzip.open('@F@', 'rt') "
           "if not l.startswith('>')); p = [m.start() for m in re.finditer('@S@', s)]; ")
"""The joined sequence ``s`` and the offsets ``p`` of the site in it, read by python:
the second route the checks compare the model's files with."""


def _solution(enzyme: str, length: int, gc: int, offsets: list[int]) -> tuple[str, ...]:
    """Join the sequence, find every site in it, count them.

    The checks recount from the FASTA what the count is built from: the bases and their
    composition, the sites' offsets (where they start and end, how they split between
    the chromosome's halves), and the count over the whole chromosome.
    """
    half = length // 2
    v = {"F": _FILE, "L": length, "GC": gc, "S": SITES[enzyme], "ANS": len(offsets),
         "LO": offsets[0], "HI": offsets[-1], "H": half,
         "H1": sum(o < half for o in offsets)}

    py = python_check(_JOINED, v)
    return (
        turn(fill("zcat @F@ | head -2\nzcat @F@ | grep -c '>'\nzcat @F@ | grep -v '>' | tr -d "
                  "'\\n' > seq.txt\nwc -c < seq.txt", **v),
             node("load", fill("one record of @L@ bases, joined into one line", **v), "seq.txt"), [
                 check("conservation", "every base kept, one record", verdict(fill(
                     "test \"$(wc -c < seq.txt)\" -eq @L@ && test \"$(zcat @F@ | grep -v '>' | "
                     "tr -d '\\n' | wc -c)\" -eq @L@ && test \"$(zcat @F@ | grep -c '>')\" -eq 1",
                     **v))),
                 check("type", fill("only A, C, G, T, @GC@ of them G or C", **v), verdict(fill(
                     "test \"$(tr -d 'ACGT' < seq.txt | wc -c)\" -eq 0 && test \"$(tr -cd 'GC' < "
                     "seq.txt | wc -c)\" -eq @GC@", **v)))]),
        turn(fill("grep -bo @S@ seq.txt | cut -d: -f1 > sites.txt\nwc -l < sites.txt\nsed -n "
                  "'1p;$p' sites.txt", **v),
             node("transform", fill("@ANS@ @S@ sites, at offsets @LO@ to @HI@ of the joined "
                                    "sequence, @H1@ in its first half", **v), "sites.txt", "n1"), [
                 check("conservation", fill("one offset per site: @ANS@", **v),
                       py("len(open('sites.txt').readlines()) == len(p) == @ANS@")),
                 check("range", fill("the sites run from offset @LO@ to @HI@", **v),
                       py("(lambda t: [t[0], t[-1]])([int(x) for x in open('sites.txt')]) == "
                          "[p[0], p[-1]] == [@LO@, @HI@] and len(p) == @ANS@")),
                 check("conservation", fill("@H1@ sites start in the first @H@ bases, the rest "
                                            "after", **v),
                       py("sum(int(x) < @H@ for x in open('sites.txt')) == sum(o < @H@ for o in p) "
                          "== @H1@ and len(p) == @ANS@"))]),
        turn("wc -l < sites.txt > n.txt\ncat n.txt",
             node("test", fill("@ANS@ @S@ sites in the joined sequence", **v), "n.txt", "n2"), [
                 check("invariance", "python counts the same in the joined sequence",
                       py("s.count('@S@') == int(open('n.txt').read()) == @ANS@")),
                 check("conservation", fill("counted over the whole chromosome: @L@ bases",
                                            **v),
                       py("len(s) == @L@ and int(open('n.txt').read()) == len(open('sites.txt')"
                          ".readlines())"))]),
        final(str(len(offsets))),
    )


def count_sites(content: bytes, site: str) -> int:
    """Occurrences of ``site`` in the sequences of a decoded FASTA, each record's lines
    joined first (a site cut by a line wrap counts; one across two records does not).

    Raises:
        ValueError: Not FASTA (no ``>`` line first, or not ASCII).
    """
    text = content.decode("ascii")
    if not text.startswith(">"):
        raise ValueError("not FASTA: the content does not start with a '>' line")
    total = 0
    for record in text[1:].split("\n>"):
        _, _, body = record.partition("\n")
        total += re.sub(r"\s+", "", body).count(site)
    return total


def _solve(contents: Contents, *, site: str) -> str:
    """The reference's solver (module level: `vera_env.tasks.programs` exports it)."""
    return str(count_sites(content_of(contents, _FILE), site))


def _reference(site: str) -> Reference:
    """One record: line wraps and the gzip settings do not matter (``rewrap``,
    ``recompress``); aimed mutants break one site inside a line or write a new one."""
    destroy = {"A": "C", "C": "G", "G": "T", "T": "A"}

    def is_sequence(line: bytes) -> bool:
        return not line.startswith(b">") and len(line.rstrip()) >= len(site)

    def broken(line: bytes) -> bytes | None:
        at = line.find(site.encode())
        if at < 0:
            return None
        return line[:at] + destroy[site[0]].encode() + line[at + 1:]

    def break_site(content: bytes, rng: random.Random) -> bytes | None:
        return edit_line(content, rng, lambda line: site.encode() in line, broken)

    def write_site(content: bytes, rng: random.Random) -> bytes | None:
        def put(line: bytes) -> bytes:
            at = rng.randrange(len(line.rstrip()) - len(site) + 1)
            return line[:at] + site.encode() + line[at + len(site):]

        return edit_line(content, rng, is_sequence, put)

    return Reference(
        solve=partial(_solve, site=site),
        preserving={_FILE: ("recompress", "rewrap")},
        mutators={_FILE: (break_site, write_site)})


def site_count(files: Mapping[str, bytes], rng: np.random.Generator) -> RealInstance:
    """Sites of one enzyme (trap: ``grep -c`` counts lines and misses wrapped sites)."""
    data = files["genome.fna.gz"]
    content = gzip.decompress(data)
    lines = content.decode().splitlines()
    header, seq = lines[0], "".join(lines[1:])
    organism = " ".join(header.split()[1:3])
    enzyme = sorted(SITES)[int(rng.integers(len(SITES)))]
    site = SITES[enzyme]
    answer = count_sites(content, site)
    wrong = sum(1 for line in lines[1:] if site in line)
    careless = f"zcat {_FILE} | grep -c {site}"
    trap = careless_trap("grep -c counts lines, missing sites cut by line wraps and repeats",
                         careless,
                         f"{wrong} {site} sites", "some sites",
                         f"test \"$({careless})\" -gt 0", wrong)
    instance = Instance(files={_FILE: data}, question=_question(organism, enzyme),
                        answer=str(answer), grader={"kind": "numeric", "abs_tol": 0},
                        solution=_solution(enzyme, len(seq), seq.count("G") + seq.count("C"),
                                           [m.start() for m in re.finditer(site, seq)]),
                        trap=trap, tags=("fasta", "line-wraps", "pyrodigal"),
                        reference=_reference(site))
    probe = Probe("Corynebacterium ulcerans", _question("Corynebacterium ulcerans", enzyme),
                  f"zcat {_FILE} | grep '>' | cut -d' ' -f2,3",
                  f"zcat {_FILE} | awk '/^>/ {{ r++; next }} {{ n += length($0) }} END {{ print "
                  "(r == 1) ? n : -1 }'", len(seq), "bases in one record")
    reads = Census(f"zcat {_FILE} | grep -v '>' | tr -d '\\n' | wc -c", len(seq),
                   "bases of the chromosome")
    return RealInstance(instance, _FILE, probe, reads=reads)
