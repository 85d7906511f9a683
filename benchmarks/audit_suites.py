"""`vera-env tasks audit` on suites of different origins: do they give the same verdicts?

The audit is meant to gate any suite, so it must judge a task the same whether the task
comes from the package (``builtin``, ``real``), from an exported folder (the builtin
families with their exported ``reference.py``) or from a folder a person wrote
(docs/examples/suite). This script plays nothing: it reads the ``audit.json`` of audits
already run (each command is in ``benchmarks/results/audit_suites.json``) and keeps,
per task, the verdict, what the reference earned, and the best no-analysis policy with
what it earned, then pairs each exported task with the same task audited from its
source.

Usage::

    python benchmarks/audit_suites.py --commit SHA --out benchmarks/results/X.json \\
        hand=/tmp/audit_hand exported_builtin=/tmp/audit_exp_b \\
        exported_real=/tmp/audit_exp_r builtin=/tmp/audit_builtin real=/tmp/audit_real
"""

from __future__ import annotations

import argparse
import json
from datetime import date
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "results" / "audit_suites.json"
COMMANDS = {
    "hand": "vera-env tasks audit docs/examples/suite --jobs 2 --out /tmp/audit_hand",
    "exported_builtin": "vera-env tasks export builtin /tmp/exp/b --types tab.sentinel_mean,"
                        "vcf.het_count --difficulties easy; vera-env tasks audit /tmp/exp/b "
                        "--jobs 2 --out /tmp/audit_exp_b",
    "exported_real": "vera-env tasks export real /tmp/exp/r --types csv.lung_median,"
                     "vcf.het_sites; vera-env tasks audit /tmp/exp/r --jobs 2 --out "
                     "/tmp/audit_exp_r",
    "builtin": "vera-env tasks audit builtin --types tab.sentinel_mean,vcf.het_count "
               "--difficulties easy --jobs 2 --out /tmp/audit_builtin",
    "real": "vera-env tasks audit real --types csv.lung_median,vcf.het_sites --jobs 2 "
            "--out /tmp/audit_real",
}
"""The commands of the latest record; an earlier record keeps its own in its file."""


def task_rows(audit: dict[str, Any]) -> list[dict[str, Any]]:
    """Per task: the verdict and the numbers that decided it (rounded to 3 places)."""
    def r(x: float | None) -> float | None:
        return None if x is None else round(x, 3)
    return [{"task": t["task_id"], "verdict": t["verdict"], "by": t["by"] or None,
             "reference": r(t["reference"]), "best_policy": t["best_policy"] or None,
             "best": r(t["best"]), "ratio": r(t["ratio"]), "faults": t["faults"],
             "earning_policies": {k: r(v) for k, v in sorted(t["earned"].items()) if v}}
            for t in audit["tasks"]]


def pairs(suites: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each exported task beside the same task audited from builtin or real."""
    original = {row["task"]: row for name in ("builtin", "real") for row in suites.get(name, [])}
    return [{"task": row["task"], "exported": row["verdict"],
             "original": original[row["task"]]["verdict"],
             "same": row["verdict"] == original[row["task"]]["verdict"]}
            for name, rows in suites.items() if name.startswith("exported")
            for row in rows if row["task"] in original]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("audits", nargs="+", help="NAME=FOLDER holding audit.json")
    parser.add_argument("--commit", required=True, help="the commit the audits ran at")
    parser.add_argument("--note", default="", help="how and where they ran")
    parser.add_argument("--out", type=Path, default=OUT, help="the record to write")
    args = parser.parse_args()
    suites: dict[str, list[dict[str, Any]]] = {}
    settings: dict[str, Any] = {}
    for item in args.audits:
        name, _, folder = item.partition("=")
        audit = json.loads((Path(folder) / "audit.json").read_text(encoding="utf-8"))
        suites[name] = task_rows(audit)
        settings[name] = {"max_steps": audit["settings"]["max_steps"],
                          "jobs": audit["settings"]["jobs"], "policies": len(audit["policies"])}
    result = {"date": date.today().isoformat(), "commit": args.commit, "note": args.note,
              "settings": settings, "commands": {k: COMMANDS[k] for k in suites},
              "suites": suites, "pairs": pairs(suites)}
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
