#!/usr/bin/env python3
"""Writes the hand-written example suite: four task folders over CSV, FASTA, VCF and a
plain tab-separated table, each with its data, a ``reference`` program and a reference
``solution``.

Why a script. The data are drawn once from a fixed seed, and every number a task states
(its answer, the counts and sums its solution's CHECK lines pin) is computed here from
the same data, so the folders can be rebuilt byte for byte and a reader can see where
each pinned number comes from. Standard library only, as the reference programs are:

    python3 docs/examples/suite/make_suite.py   # rewrites the four task folders

``vera-env tasks validate docs/examples/suite`` replays each solution; ``vera-env tasks
audit docs/examples/suite`` plays it beside the no-analysis attacks (docs/evaluating.md).
"""

from __future__ import annotations

import json
import math
import random
import re
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 20261207


def _fill(template: str, **values: object) -> str:
    """``template`` with each ``@NAME@`` replaced: awk and python braces stay as written."""
    for name, value in values.items():
        template = template.replace(f"@{name}@", str(value))
    assert not re.search(r"@[A-Z0-9]+@", template), template
    return template


def _write_task(task_id: str, body: dict[str, object], files: dict[str, str],
                script: str | None = None) -> None:
    folder = HERE / task_id
    if folder.exists():
        shutil.rmtree(folder)
    (folder / "data").mkdir(parents=True)
    for name, text in files.items():
        (folder / "data" / name).write_text(text, encoding="utf-8")
    if script is not None:
        (folder / "reference.py").write_text(script, encoding="utf-8")
    task = {"id": task_id, **body}
    (folder / "task.json").write_text(json.dumps(task, indent=2) + "\n", encoding="utf-8")


# ----- CSV: a grouped mean over a column with a sentinel -----

_CSV_REFERENCE = '''#!/usr/bin/env python3
"""Mean ldl_mg_dl of the statin arm in trial.csv, the README's missing-value code left out."""
import csv
import math
import re

code = re.search(r"coded as (-?[0-9]+)", open("README.txt").read()).group(1)
with open("trial.csv", newline="") as handle:
    rows = list(csv.DictReader(handle))
values = [float(r["ldl_mg_dl"]) for r in rows
          if r["arm"] == "statin" and r["ldl_mg_dl"] not in ("", "NA", code)]
print(f"{math.fsum(values) / len(values):.2f}")
'''


def csv_task(rng: random.Random) -> None:
    arms = {"placebo": 135, "statin": 98, "ezetimibe": 112}
    sites = ("Leeds", "Lyon", "Porto", "Turku")
    lines = ["patient_id,arm,site,age,ldl_mg_dl"]
    statin, missing = [], 0
    for i in range(1, 151):
        arm = rng.choice(tuple(arms))
        ldl = max(45, round(rng.gauss(arms[arm], 24)))
        if rng.random() < 0.12:
            ldl = -1
        if arm == "statin":
            statin.append(ldl)
        lines.append(f"P{i:04d},{arm},{rng.choice(sites)},{rng.randint(41, 79)},{ldl}")
    measured = [v for v in statin if v != -1]
    missing = len(statin) - len(measured)
    mean = f"{math.fsum(measured) / len(measured):.2f}"
    readme = ("LDL cholesterol trial, 150 patients, one row per patient (trial.csv).\n"
              "ldl_mg_dl: fasting LDL cholesterol at week 12, in mg/dL. A sample that was\n"
              "not measured (haemolysed or lost) is coded as -1.\n")
    v = {"N": len(statin), "M": missing, "K": len(measured), "S": sum(measured), "MEAN": mean}
    solution = [
        _fill("<command>head -3 trial.csv\ncat README.txt\n"
              "head -1 trial.csv | tr ',' '\\n' | grep -nx ldl_mg_dl | cut -d: -f1 > col.txt\n"
              "cat col.txt\nawk -F, '$2 == \"statin\"' trial.csv | wc -l</command>\n"
              "NODE kind=load summary=\"ldl_mg_dl is column 5; the README codes an unmeasured sample"
              " as -1; @N@ statin patients\" artifact=col.txt\n"
              "CHECK type \"col.txt points at ldl_mg_dl\" :: test \"$(head -1 trial.csv | cut -d, "
              "-f\"$(cat col.txt)\")\" = ldl_mg_dl && echo True || echo False\n"
              "CHECK type \"the README codes an unmeasured sample as -1\" :: test \"$(grep -o 'coded "
              "as -*[0-9]*' README.txt | grep -o -- '-*[0-9]*$')\" = -1 && echo True || echo False\n"
              "CHECK range \"@K@ statin patients have a measured LDL\" :: test \"$(awk -F, '$2 == "
              "\"statin\" && $5 != -1' trial.csv | wc -l)\" -eq @K@ && echo True || echo False", **v),
        _fill("<command>awk -F, -v c=\"$(cat col.txt)\" 'NR > 1 && $2 == \"statin\" && $c != -1 "
              "{ print $c }' trial.csv > values.txt\nwc -l < values.txt\n"
              "awk '{ s += $1 } END { print s }' values.txt</command>\n"
              "NODE kind=qc summary=\"@K@ measured statin values kept, @M@ coded -1 dropped; they sum "
              "to @S@ mg/dL\" artifact=values.txt parents=n1\n"
              "CHECK conservation \"the measured statin values sum to @S@\" :: test \"$(awk -F, '$2 == "
              "\"statin\" && $5 != -1 { s += $5 } END { print s }' trial.csv)\" -eq @S@ && echo True "
              "|| echo False\n"
              "CHECK range \"no kept value is the missing code\" :: awk '$1 <= 0 { bad = 1 } END { print "
              "(NR == @K@ && !bad) ? \"True\" : \"False\" }' values.txt", **v),
        _fill("<command>awk '{ s += $1; n++ } END { printf \"%.2f\\n\", s / n }' values.txt > "
              "mean.txt\ncat mean.txt</command>\n"
              "NODE kind=test summary=\"mean LDL of the statin arm: @MEAN@ mg/dL (n=@K@)\" "
              "artifact=mean.txt parents=n2\n"
              "CHECK invariance \"a python recomputation from trial.csv agrees: @MEAN@\" :: python3 -c "
              "\"import csv; v = [int(r['ldl_mg_dl']) for r in csv.DictReader(open('trial.csv')) if "
              "r['arm'] == 'statin' and r['ldl_mg_dl'] != '-1']; print(f'{sum(v) / len(v):.2f}' == "
              "'@MEAN@' == open('mean.txt').read().strip())\"", **v),
        f"FINAL ANSWER: {mean}",
    ]
    wrong = f"{sum(statin) / len(statin):.2f}"
    careless = [f"<command>awk -F, '$2 == \"statin\" {{ s += $5; n++ }} END {{ printf \"%.2f\\n\", "
                f"s / n }}' trial.csv</command>\nNODE kind=test summary=\"mean LDL of the statin arm: "
                f"{wrong}\"\nCHECK range \"the mean is positive\" :: awk -F, '$2 == \"statin\" {{ s += $5;"
                f" n++ }} END {{ print (s / n > 0) ? \"True\" : \"False\" }}' trial.csv",
                f"FINAL ANSWER: {wrong}"]
    _write_task("csv.statin_ldl", {
        "question": "trial.csv holds one row per patient of a cholesterol trial; README.txt "
                    "describes its columns. What is the mean ldl_mg_dl of the patients in the "
                    "statin arm, over the patients whose LDL was measured? Give two decimals.",
        "answer": mean,
        "grader": {"kind": "numeric", "abs_tol": 0.006},
        "tags": ["csv", "missing-values", "sentinel", "hand-written"],
        "reference": {"script": "reference.py"},
        "solution": solution,
        "trap": {"description": "the -1 code for an unmeasured sample is averaged in as a value",
                 "careless_solution": careless, "wrong_answer": wrong},
    }, {"trial.csv": "\n".join(lines) + "\n", "README.txt": readme}, _CSV_REFERENCE)


# ----- FASTA: a motif on both strands -----

_FASTA_REFERENCE = '''#!/usr/bin/env python3
"""FokI sites (GGATG on either strand) in contigs.fa: records joined, overlaps counted."""
import re

records = open("contigs.fa").read().split(">")[1:]
seqs = ["".join(r.split("\\n")[1:]).upper() for r in records]
print(sum(len(re.findall("(?=GGATG)", s)) + len(re.findall("(?=CATCC)", s)) for s in seqs))
'''


def _contig(rng: random.Random, length: int) -> str:
    seq = "".join(rng.choice("ACGT") for _ in range(length))
    for _ in range(rng.randint(1, 3)):  # a few extra sites, so every record has some
        at = rng.randrange(0, length - 5)
        seq = seq[:at] + rng.choice(("GGATG", "CATCC")) + seq[at + 5:]
    return seq


def fasta_task(rng: random.Random) -> None:
    seqs = []
    while len(seqs) < 14:
        seq = _contig(rng, rng.randint(240, 420))
        if "GGATGGATG" not in seq and "CATCCATCC" not in seq:  # no overlapping sites
            seqs.append(seq)
    # Contigs without a site: records the question never reads, so strength's controls can
    # drop some (without them a pin on the record count or the headers' digits survived
    # every control and earned: content_pins in the first audit).
    while len(seqs) < 20:
        seq = "".join(rng.choice("ACGT") for _ in range(rng.randint(200, 320)))
        if "GGATG" not in seq and "CATCC" not in seq:
            seqs.insert(rng.randrange(len(seqs) + 1), seq)
    text = ""
    for i, seq in enumerate(seqs, 1):
        text += f">contig_{i:02d} len={len(seq)}\n"
        text += "".join(seq[j:j + 60] + "\n" for j in range(0, len(seq), 60))
    forward = sum(s.count("GGATG") for s in seqs)
    reverse = sum(s.count("CATCC") for s in seqs)
    on_lines = sum(line.count("GGATG") + line.count("CATCC") for line in text.splitlines()
                   if not line.startswith(">"))
    v = {"R": len(seqs), "K": sum(1 for s in seqs if "GGATG" in s or "CATCC" in s),
         "F": forward, "C": reverse,
         "T": forward + reverse, "W": forward + reverse - on_lines}
    join = "awk '/^>/ { if (s != \"\") print s; s = \"\"; next } { s = s $0 } END { print s }' contigs.fa"
    solution = [
        _fill("<command>head -2 contigs.fa\ngrep -c '^>' contigs.fa\n" + join + " > seqs.txt\n"
              "wc -l < seqs.txt\ngrep -c -e GGATG -e CATCC seqs.txt</command>\n"
              "NODE kind=load summary=\"@R@ records wrapped at 60, joined one record a line (a site cut "
              "by a line break is seen); @K@ of them hold a site\" artifact=seqs.txt\n"
              "CHECK conservation \"seqs.txt holds one line per record\" :: test \"$(wc -l < seqs.txt)\" "
              "-eq \"$(grep -c '^>' contigs.fa)\" && echo True || echo False\n"
              "CHECK range \"@K@ joined records hold a site on either strand\" :: test \"$(" + join +
              " | grep -c -e GGATG -e CATCC)\" -eq @K@ && echo True || echo False", **v),
        _fill("<command>grep -o GGATG seqs.txt | wc -l\ngrep -o CATCC seqs.txt | wc -l\n"
              "grep -v '^>' contigs.fa | grep -o -e GGATG -e CATCC | wc -l</command>\n"
              "NODE kind=transform summary=\"@F@ GGATG on the given strand, @C@ CATCC (GGATG on the other);"
              " @W@ of the @T@ sites span a line break\" artifact=seqs.txt parents=n1\n"
              "CHECK range \"GGATG occurs @F@ times in the joined records\" :: test \"$(" + join +
              " | grep -o GGATG | wc -l)\" -eq @F@ && echo True || echo False\n"
              "CHECK range \"CATCC occurs @C@ times in the joined records\" :: test \"$(" + join +
              " | grep -o CATCC | wc -l)\" -eq @C@ && echo True || echo False", **v),
        _fill("<command>echo $(( $(grep -o GGATG seqs.txt | wc -l) + $(grep -o CATCC seqs.txt | "
              "wc -l) )) > sites.txt\ncat sites.txt</command>\n"
              "NODE kind=test summary=\"@T@ FokI sites on both strands (@F@ + @C@)\" artifact=sites.txt "
              "parents=n2\n"
              "CHECK invariance \"a python recount, overlapping matches included, agrees: @T@\" :: "
              "python3 -c \"import re; s = [''.join(r.split()[2:]).upper() for r in "
              "open('contigs.fa').read().split('>')[1:]]; n = sum(len(re.findall('(?=GGATG)', x)) + "
              "len(re.findall('(?=CATCC)', x)) for x in s); print(n == int(open('sites.txt').read()) "
              "== @T@)\"", **v),
        f"FINAL ANSWER: {forward + reverse}",
    ]
    _write_task("fasta.foki_sites", {
        "question": "How many FokI recognition sites are in contigs.fa, over all records? FokI "
                    "binds GGATG on either strand, so count GGATG and its reverse complement "
                    "CATCC as read on the given strand. Answer with one integer.",
        "answer": str(forward + reverse),
        "grader": {"kind": "numeric", "abs_tol": 0},
        "tags": ["fasta", "motif", "both-strands", "line-wraps", "hand-written"],
        "reference": {"script": "reference.py"},
        "solution": solution,
        "trap": {"description": "grep on the wrapped lines loses the sites cut by a line break",
                 "careless_solution": [
                     "<command>grep -v '^>' contigs.fa | grep -o -e GGATG -e CATCC | wc -l</command>\n"
                     f"NODE kind=test summary=\"{on_lines} FokI sites\"\nCHECK range \"some sites\" :: "
                     "test \"$(grep -v '^>' contigs.fa | grep -c GGATG)\" -gt 0 && echo True || echo False",
                     f"FINAL ANSWER: {on_lines}"],
                 "wrong_answer": str(on_lines)},
    }, {"contigs.fa": text}, _FASTA_REFERENCE)


# ----- VCF: heterozygous calls of one sample, phased included -----

_VCF_REFERENCE = '''#!/usr/bin/env python3
"""Heterozygous calls of P02 in calls.vcf: two different called alleles, | or /."""
import re

col = None
n = 0
for line in open("calls.vcf"):
    if line.startswith("#CHROM"):
        col = line.rstrip("\\n").split("\\t").index("P02")
    elif not line.startswith("#") and line.strip():
        alleles = re.split("[|/]", line.rstrip("\\n").split("\\t")[col].split(":")[0])
        n += len(alleles) == 2 and "." not in alleles and alleles[0] != alleles[1]
print(n)
'''


def _genotype(rng: random.Random, n_alt: int) -> str:
    roll = rng.random()
    if roll < 0.05:
        return rng.choice(("./.", ".|."))
    alleles = [rng.choice((0, 0, 1)) for _ in range(2)]
    if n_alt > 1 and rng.random() < 0.4:
        alleles[rng.randrange(2)] = 2
    return f"{alleles[0]}{'|' if rng.random() < 0.6 else '/'}{alleles[1]}"


def vcf_task(rng: random.Random) -> None:
    samples = ("P01", "P02", "P03")
    lines = ["##fileformat=VCFv4.2", "##source=make_suite.py",
             "##contig=<ID=chr20,length=64444167>",
             '##INFO=<ID=DP,Number=1,Type=Integer,Description="Total depth">',
             '##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">',
             '##FORMAT=<ID=DP,Number=1,Type=Integer,Description="Read depth">',
             "#" + "\t".join(("CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO",
                              "FORMAT", *samples))]
    pos, gts = 61000, []
    for _ in range(160):
        pos += rng.randint(40, 900)
        ref = rng.choice("ACGT")
        alts = rng.sample([b for b in "ACGT" if b != ref], 2 if rng.random() < 0.15 else 1)
        calls = [_genotype(rng, len(alts)) for _ in samples]
        gts.append(calls[1])
        fields = ["chr20", str(pos), f"rs{rng.randint(10**6, 10**8)}", ref, ",".join(alts),
                  str(rng.randint(30, 99)), "PASS", f"DP={rng.randint(40, 120)}", "GT:DP"]
        lines.append("\t".join(fields + [f"{g}:{rng.randint(8, 45)}" for g in calls]))
    split = [re.split("[|/]", g) for g in gts]
    het = sum(1 for a, b in split if "." not in (a, b) and a != b)
    phased = sum(1 for g, (a, b) in zip(gts, split, strict=True) if "|" in g and "." not in (a, b) and a != b)
    v = {"H": het, "P": phased, "U": het - phased,
         "ALT2": sum(1 for a, b in split if "." not in (a, b) and a != b and "2" in (a, b)),
         "SITES": len(gts)}
    gt = "grep -v '^#' calls.vcf | cut -f11 | cut -d: -f1"
    solution = [
        _fill("<command>grep '^#CHROM' calls.vcf | tr '\\t' '\\n' | grep -nx P02 | cut -d: -f1 > "
              "col.txt\ncat col.txt\ngrep -vc '^#' calls.vcf</command>\n"
              "NODE kind=load summary=\"P02 is column 11; @SITES@ sites\" artifact=col.txt\n"
              "CHECK type \"the column holds P02\" :: test \"$(grep '^#CHROM' calls.vcf | cut "
              "-f\"$(cat col.txt)\")\" = P02 && echo True || echo False\n"
              "CHECK range \"P02 has @H@ calls of two different alleles, | or /\" :: test \"$(" + gt +
              " | awk -F'[|/]' '$1 != \".\" && $2 != \".\" && $1 != $2' | wc -l)\" -eq @H@ && echo True"
              " || echo False", **v),
        _fill("<command>grep -v '^#' calls.vcf | cut -f\"$(cat col.txt)\" | cut -d: -f1 > gt.txt\n"
              "sort gt.txt | uniq -c</command>\n"
              "NODE kind=transform summary=\"@SITES@ genotypes of P02: @P@ phased (|) and @U@ unphased (/)"
              " heterozygotes, @ALT2@ with the second ALT allele\" artifact=gt.txt parents=n1\n"
              "CHECK range \"@P@ phased heterozygotes\" :: test \"$(" + gt + " | awk -F'|' 'NF == 2 && "
              "$1 != \".\" && $2 != \".\" && $1 != $2' | wc -l)\" -eq @P@ && echo True || echo False\n"
              "CHECK range \"@ALT2@ heterozygotes carry the second ALT allele\" :: awk -F'[|/]' '$1 != "
              "\".\" && $2 != \".\" && $1 != $2 && ($1 == 2 || $2 == 2) { m++ } END { print (m + 0 == "
              "@ALT2@) ? \"True\" : \"False\" }' gt.txt", **v),
        _fill("<command>awk -F'[|/]' '$1 != \".\" && $2 != \".\" && $1 != $2 { n++ } END { print "
              "n + 0 }' gt.txt > n_het.txt\ncat n_het.txt</command>\n"
              "NODE kind=test summary=\"P02 is heterozygous at @H@ sites (@P@ phased + @U@ unphased)\" "
              "artifact=n_het.txt parents=n2\n"
              "CHECK invariance \"a python recount from calls.vcf agrees: @H@\" :: python3 -c \"import "
              "re; g = [re.split('[|/]', l.split('\\t')[10].split(':')[0]) for l in open('calls.vcf') "
              "if not l.startswith('#')]; n = sum(1 for a, b in g if '.' not in (a, b) and a != b); "
              "print(n == int(open('n_het.txt').read()) == @H@)\"", **v),
        f"FINAL ANSWER: {het}",
    ]
    _write_task("vcf.p02_hets", {
        "question": "At how many sites in calls.vcf is sample P02 heterozygous (two different "
                    "alleles, phased or unphased)? Sites where P02's genotype is missing do not "
                    "count. Answer with one integer.",
        "answer": str(het),
        "grader": {"kind": "numeric", "abs_tol": 0},
        "tags": ["vcf", "genotypes", "phasing", "hand-written"],
        "reference": {"script": "reference.py"},
        "solution": solution,
        "trap": {"description": "counting only unphased 0/1-style calls misses the phased "
                                "heterozygotes",
                 "careless_solution": [
                     "<command>" + gt + " | awk -F/ 'NF == 2 && $1 != \".\" && $1 != $2' | wc -l"
                     f"</command>\nNODE kind=test summary=\"P02 is heterozygous at {het - phased} sites\"\n"
                     "CHECK range \"some calls\" :: test \"$(grep -vc '^#' calls.vcf)\" -gt 0 && echo True "
                     "|| echo False", f"FINAL ANSWER: {het - phased}"],
                 "wrong_answer": str(het - phased)},
    }, {"calls.vcf": "\n".join(lines) + "\n"}, _VCF_REFERENCE)


# ----- a plain table: one gene's column sum -----
# Tab-separated, not space-aligned: strength's value-rewriting controls (transfer_values,
# permute_values) find a table's columns by a tab or a comma, and a space-aligned .txt is
# read as prose (a title line added, spaces re-spaced), so nothing would rewrite its values.

_TABLE_REFERENCE = "awk -F'\\t' '$2 == \"MYC\" { s += $4 } END { print s + 0 }' counts.tsv"


def table_task(rng: random.Random) -> None:
    """One amplicon library per gene, condition and replicate: groups of ten libraries that
    share a gene and a condition, which strength's value-rewriting controls need (a table
    whose every row is its own group got none, and a hash of its sorted rows earned in the
    first audit), and a ``library_id`` column they rename."""
    genes = ("ACTB", "BRCA1", "CDK4", "EGFR", "GAPDH", "KRAS", "MYC", "MYCL", "MYCN",
             "PTEN", "RB1", "SOX2", "TP53", "VEGFA")
    rows = [(gene, condition, rng.randint(20, 4000)) for gene in genes
            for condition in ("control", "treated") for _ in range(10)]
    rng.shuffle(rows)
    rows = [(f"LIB{i:04d}", *row) for i, row in enumerate(rows, 1)]
    text = "library_id\tgene\tcondition\treads\n"
    text += "".join(f"{lib}\t{g}\t{c}\t{r}\n" for lib, g, c, r in rows)
    myc = [r for r in rows if r[1] == "MYC"]
    v = {"N": len(myc), "S": sum(r[3] for r in myc),
         "CT": sum(r[3] for r in myc if r[2] == "control"),
         "TR": sum(r[3] for r in myc if r[2] == "treated"),
         "G": sum(1 for r in rows if "MYC" in r[1])}
    wrong = str(sum(r[3] for r in rows if "MYC" in r[1]))
    solution = [
        _fill("<command>head -3 counts.tsv\ncut -f2 counts.tsv | sort | uniq -c\n"
              "awk -F'\\t' '$2 == \"MYC\"' counts.tsv > myc.txt\nwc -l < myc.txt</command>\n"
              "NODE kind=load summary=\"@N@ libraries name MYC exactly (grep MYC would also take MYCN "
              "and MYCL: @G@ rows); reads is column 4\" artifact=myc.txt\n"
              "CHECK conservation \"@N@ MYC libraries, each id once\" :: test \"$(awk -F'\\t' '$2 == "
              "\"MYC\" { print $1 }' counts.tsv | sort -u | wc -l)\" -eq @N@ && test \"$(wc -l < "
              "myc.txt)\" -eq @N@ && echo True || echo False", **v),
        _fill("<command>awk -F'\\t' '{ s[$3] += $4; t += $4 } END { for (c in s) print c, s[c]; "
              "print \"total\", t }' myc.txt | sort > myc_sums.txt\ncat myc_sums.txt</command>\n"
              "NODE kind=test summary=\"MYC reads: @CT@ in control + @TR@ in treated = @S@\" "
              "artifact=myc_sums.txt parents=n1\n"
              "CHECK conservation \"the control MYC libraries sum to @CT@, the treated to @TR@\" :: test "
              "\"$(awk -F'\\t' '$2 == \"MYC\" && $3 == \"control\" { s += $4 } END { print s }' "
              "counts.tsv)\" -eq @CT@ && test \"$(awk -F'\\t' '$2 == \"MYC\" && $3 == \"treated\" { s += "
              "$4 } END { print s }' counts.tsv)\" -eq @TR@ && echo True || echo False\n"
              "CHECK invariance \"a python recount from counts.tsv agrees: @S@\" :: python3 -c \"r = "
              "[l.rstrip('\\n').split('\\t') for l in open('counts.tsv')]; print(sum(int(x[3]) for x "
              "in r if x[1] == 'MYC') == @S@ == int(dict(l.split() for l in "
              "open('myc_sums.txt'))['total']))\"", **v),
        f"FINAL ANSWER: {v['S']}",
    ]
    _write_task("table.myc_reads", {
        "question": "counts.tsv is a tab-separated table of read counts of an amplicon panel, one "
                    "row per sequencing library. What is the total of the reads column for the "
                    "gene MYC over all libraries? Answer with one integer.",
        "answer": str(v["S"]),
        "grader": {"kind": "numeric", "abs_tol": 0},
        "tags": ["table", "tsv", "gene-names", "hand-written"],
        "reference": {"command": _TABLE_REFERENCE},
        "solution": solution,
        "trap": {"description": "grep MYC also takes the MYCN and MYCL rows",
                 "careless_solution": [
                     "<command>grep MYC counts.tsv | awk '{ s += $4 } END { print s }'</command>\n"
                     f"NODE kind=test summary=\"MYC reads: {wrong}\"\nCHECK range \"some MYC rows\" :: "
                     "test \"$(grep -c MYC counts.tsv)\" -gt 0 && echo True || echo False",
                     f"FINAL ANSWER: {wrong}"],
                 "wrong_answer": wrong},
    }, {"counts.tsv": text})


def main() -> None:
    for offset, write in enumerate((csv_task, fasta_task, vcf_task, table_task)):
        write(random.Random(SEED + offset))  # one stream per task: editing one moves no other


if __name__ == "__main__":
    main()
