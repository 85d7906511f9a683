"""Does a fingerprint of exactly the records a question reads still earn?

A red team found that the md5 of the sorted values the question reads earned
verification on every task type: every mutant edits a read record, and no control
rewrote one. ``strength.rewrites`` adds controls that do. This plays, per type, one
node of three pins written by hand for the question (values computed on the host from
the task's files, hard-coded, then the correct answer), and prints the verification
each episode earned and which pins earned: after the rewrites none should.

Pins per type: the sorted values of the asked column (or genotypes, alleles, sequence
lines), a hash of an unread field (ids) of the read records, and the first 64 bytes of
the sorted read records.

Usage::

    python benchmarks/read_pins.py [--types T ...] [--out benchmarks/results/read_pins.json]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from vera_env import VeraEnv
from vera_env.policy import ScriptedPolicy
from vera_env.rollout import run_episode
from vera_env.tasks import Task, TaskSource
from vera_env.tasks.builtin import make_task
from vera_env.verification.rewards import RewardConfig

V = " && echo True || echo False"
MD5 = "md5sum | cut -c1-32"
HEAD = "head -c 64 | md5sum | cut -c1-32"


def _sentinel(task: Task) -> list[str]:
    col, sp = re.search(r"mean (\w+) \(\w+\) of (\w+)", task.question).groups()  # type: ignore[union-attr]
    idx = f"$(head -1 penguins.csv | tr , '\\n' | grep -nx {col} | cut -d: -f1)"
    rows = f"awk -F, '$2 == \"{sp}\"' penguins.csv | sort"
    return [f"awk -F, -v c={idx} '$2 == \"{sp}\" && $c != -999 {{ print $c }}' penguins.csv "
            f"| sort | {MD5}", f"{rows} | cut -d, -f1 | {MD5}", f"{rows} | {HEAD}"]


def _survival(task: Task) -> list[str]:
    rows = "awk -F, '$2 == \"B\"' survival.csv | sort -t, -k3,3n"
    return [f"awk -F, '$2 == \"B\" {{ print $3, $4 }}' survival.csv | sort | {MD5}",
            f"{rows} | cut -d, -f3 | {MD5}", f"{rows} | {HEAD}"]


def _het(task: Task) -> list[str]:
    sample = re.search(r"sample (\S+) heterozygous", task.question).group(1)  # type: ignore[union-attr]
    col = f"$(zcat calls.vcf.gz | grep '^#CHROM' | tr '\\t' '\\n' | grep -nx {sample} | cut -d: -f1)"
    calls = f"zcat calls.vcf.gz | grep -v '^#' | cut -f1-5,{col}"
    return [f"zcat calls.vcf.gz | grep -v '^#' | cut -f{col} | cut -d: -f1 | sort | {MD5}",
            f"{calls} | sort | {MD5}", f"{calls} | sort | {HEAD}"]


def _titv(task: Task) -> list[str]:
    sites = "zcat variants.vcf.gz | grep -v '^#'"
    return [f"{sites} | cut -f4,5 | sort | {MD5}", f"{sites} | cut -f1-5 | sort | {MD5}",
            f"{sites} | cut -f1-8 | sort | {HEAD}"]


def _motif(task: Task) -> list[str]:
    seqs = "zcat seqs.fa.gz | grep -v '>'"
    return [f"{seqs} | sort | {MD5}", f"{seqs} | tr -d '\\n' | {MD5}",
            f"zcat seqs.fa.gz | tr -d '\\n' | {HEAD}"]


def _coding(task: Task) -> list[str]:
    feature = re.search(r"mean (\w+) of the malignant", task.question).group(1)  # type: ignore[union-attr]
    idx = f"$(head -1 tumours.csv | tr , '\\n' | grep -nx {feature} | cut -d: -f1)"
    code = "$(grep -o '[01] = malignant' codebook.txt | cut -c1)"
    rows = f"awk -F, -v m={code} '$NF == m' tumours.csv | sort"
    return [f"awk -F, -v c={idx} -v m={code} '$NF == m {{ print $c }}' tumours.csv | sort | {MD5}",
            f"{rows} | cut -d, -f1 | {MD5}", f"{rows} | {HEAD}"]


def _fold(task: Task) -> list[str]:
    gene = re.search(r"fold change of (\S+) between", task.question).group(1)  # type: ignore[union-attr]
    row = f"grep -w '^{gene}' expression.tsv"
    return [f"{row} | tr '\\t' '\\n' | sort | {MD5}", f"{row} | {MD5}",
            f"head -c 64 README.txt | {MD5}"]


def _gc(task: Task) -> list[str]:
    seqs = "zcat genome.fa.gz | grep -v '>'"
    return [f"{seqs} | tr -d '\\n' | fold -w 1 | sort | uniq -c | {MD5}",
            f"{seqs} | sort | {MD5}", f"zcat genome.fa.gz | grep -v '>' | {HEAD}"]


PINS = {"tab.sentinel_mean": _sentinel, "tab.survival_median": _survival,
        "vcf.het_count": _het, "vcf.titv": _titv, "seq.motif_count": _motif,
        "tab.label_coding": _coding, "tab.fold_change": _fold, "seq.gc_content": _gc}


def script(task: Task) -> list[str]:
    """The look, one node of the type's pins (values computed here), the right answer."""
    shells = PINS[task.id.rsplit(".", 2)[0]](task)
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in task.data_files().items():
            (Path(tmp) / name).write_bytes(path.read_bytes())
        values = [subprocess.run(["bash", "-c", s], cwd=tmp, capture_output=True, text=True,
                                 check=True).stdout.strip() for s in shells]
    checks = [f'CHECK range "read records {i + 1}" :: test "$({s})" = "{v}"{V}'
              for i, (s, v) in enumerate(zip(shells, values, strict=True))]
    node = 'NODE kind=load summary="the records the question reads"\n' + "\n".join(checks)
    return ["<command>ls -l</command>", f"<command>true</command>\n{node}",
            f"FINAL ANSWER: {task.answer}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--types", nargs="*", default=list(PINS))
    parser.add_argument("--seeds", type=int, nargs="*", default=[0])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    env = VeraEnv(TaskSource(name="read-pins", factory=make_task), max_steps=10,
                  reward=RewardConfig())
    rows: list[dict[str, Any]] = []
    try:
        for t in args.types:
            for seed in args.seeds:
                task = env.tasks.get(f"{t}.easy.s{seed}")
                attempt = run_episode(env, ScriptedPolicy({task.id: script(task)}),
                                      task_id=task.id, seed=0)
                checks = [c for s in attempt.steps for c in s.checks]
                row = {"task_id": task.id, "verification": attempt.verification_reward,
                       "passed": sum(c.passed for c in checks),
                       "earning": [c.command[:120] for c in checks if c.earns]}
                rows.append(row)
                print(f"{task.id:28s} verification {row['verification']:.3f} "
                      f"pins passed {row['passed']}/{len(checks)} earning {len(row['earning'])}",
                      file=sys.stderr, flush=True)
    finally:
        env.close()
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
