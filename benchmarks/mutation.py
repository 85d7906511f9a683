"""How strong is the test suite where it guards the reward? A mutation score with mutmut.

mutmut 3 rewrites every function of the mutated modules into a trampoline that calls the
original or one of its mutants, chosen by the ``MUTANT_UNDER_TEST`` variable. A stats pass
runs the selected tests once with the trampolines recording which functions each test
reached; then each mutant is tested by only the tests that reached its function
(fastest first, stopping at the first failure), in a process forked per mutant.

Why this script and not a bare ``mutmut run``: mutmut copies the package to ``mutants/``
and puts that folder first on ``sys.path``, so the tests must import the copy. A first
run recorded no test covering any mutant, because the copied tree was not the one
imported (the editable install's finder maps ``vera_env`` and ``policies`` to
``/work/main``, and a ``PYTHONPATH`` pointing at a checkout shadows the copy as well):
the trampolines never ran, so no test was associated with any mutant. Here the tree to
measure is copied into a scratch folder with everything the selected tests import
(``vera_env``, ``policies``, ``tests``, ``README.md``), ``PYTHONPATH`` is cleared, and a
small pytest plugin stops the run if ``vera_env`` or ``policies`` is imported from
anywhere but ``mutants/``. The same plugin turns off Hypothesis' deadline: on a shared
machine a slow example would otherwise fail a test and count as a kill it is not.

The tree can be any checkout (``--tree``), so the score before and after a change is
measured by one script with one configuration, whatever the tree's own ``pyproject``
says.

Usage::

    nice -n 15 python benchmarks/mutation.py [--tree PATH] [--work DIR] [--max-children 2]
    python benchmarks/mutation.py --resume --work DIR        # continue a stopped run
    python benchmarks/mutation.py --report-only --work DIR   # tables from a finished run
    python benchmarks/mutation.py --retest --work COPY       # its survivors vs today's tests
    python benchmarks/mutation.py --tree OLD --only 'vera_env/x/*.py' --tests tests/x  # a part

``--tests PATH...`` replaces the test selection (``TESTS``, or ``OWN_TESTS`` with
``--own-tests``) by the paths given, relative to the tree: for modules ``OWN_TESTS`` does
not list, or for two trees whose tests live at different paths (each run then names its
own tree's paths for the same tests; the results JSON records the selection).

Prints a markdown table (mutants, killed, survived, timeouts, kill rate per module),
writes the counts to ``benchmarks/results/mutation.json`` and every surviving mutant's
diff to ``benchmarks/results/mutation_survivors.md``. Expect two hours on two shared
cores. The kill rate counts a timeout as a kill (a mutant that loops forever is caught).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "mutation.json"

# What is mutated: the modules that turn a model's text into a reward.
MODULES = [
    "vera_env/env.py",
    "vera_env/wrappers/*.py",
    "vera_env/verification/rewards.py",
    "vera_env/wire/protocol.py",
    "vera_env/wire/answers.py",
    "vera_env/verification/grading/*.py",
    "vera_env/phase.py",
    "vera_env/verification/checks.py",
    "vera_env/records.py",
    "vera_env/rollout/attempt.py",
    "vera_env/evaluation/summary.py",
]

# Which tests may kill them: the tests of those modules and the scenario suites that
# drive the env end to end; not the training, Ray, CLI or sandbox suites (slow, and they
# reach these modules only through the tests above).
TESTS = [
    "tests/test_env.py",
    "tests/wrappers",
    "tests/verification/test_rewards.py",
    "tests/verification/test_grading.py",
    "tests/wire",
    "tests/evaluation/test_golden.py",
    "tests/redteam/test_redteam_scenarios.py",
    "tests/tasks/test_task_model.py",
    "tests/rollout/test_rollout.py",
    "tests/test_phase.py",
    "tests/verification/test_checks.py",
    "tests/test_records.py",
    "tests/evaluation/test_metrics.py",
    "tests/rollout/test_attempt_endings.py",
]

# The tests of each mutated module's own behaviour: ``--retest`` runs a finished run's
# survivors against only these (the full selection per survivor would take hours).
OWN_TESTS = {
    "vera_env/env.py": ["tests/test_env.py"],
    "vera_env/wrappers/": ["tests/wrappers"],
    "vera_env/verification/grading/": ["tests/verification/test_grading.py"],
    "vera_env/verification/checks.py": ["tests/verification/test_checks.py"],
    "vera_env/verification/rewards.py": ["tests/verification/test_rewards.py"],
    "vera_env/wire/": ["tests/wire"],
    "vera_env/phase.py": ["tests/test_phase.py"],
    "vera_env/records.py": ["tests/test_records.py"],
    "vera_env/rollout/attempt.py": ["tests/rollout/test_rollout.py", "tests/test_records.py",
                                    "tests/rollout/test_attempt_endings.py"],
    "vera_env/evaluation/summary.py": ["tests/evaluation/test_metrics.py", "tests/test_records.py"],
}
# Copied next to the package: what the selected tests import or read (benchmarks: the
# strength rewrite tests import benchmarks/read_pins.py).
ALSO_COPY = ["policies", "training", "tests", "README.md", "docs", "benchmarks"]

PLUGIN = "mutation_guard"
PLUGIN_SOURCE = '''"""pytest plugin for benchmarks/mutation.py (generated; see its docstring)."""

from pathlib import Path

from hypothesis import settings

settings.register_profile("mutation", deadline=None)
settings.load_profile("mutation")


def pytest_sessionstart(session):
    import vera_env
    import vera_env.policies as policies

    here = Path.cwd().resolve()
    for module in (vera_env, policies):
        where = Path(module.__file__).resolve()
        if here not in where.parents:
            raise SystemExit(f"{module.__name__} imported from {where}, not from {here}: "
                             "the tests would never reach a mutant")
'''


def own_tests(modules: list[str]) -> list[str]:
    """The ``OWN_TESTS`` of ``modules`` (globs as in ``MODULES``), in order, once each."""
    found: list[str] = []
    for module in modules:
        prefix = module.split("*")[0]
        for owner, tests in OWN_TESTS.items():
            if prefix.startswith(owner) or owner.startswith(prefix):
                found += [t for t in tests if t not in found]
    return found


def mutmut_config(modules: list[str], tests: list[str] | None = None) -> str:
    """The ``[tool.mutmut]`` table this benchmark runs under, as TOML (``tests``: the
    test selection, ``TESTS`` when None)."""

    def toml_list(items: list[str]) -> str:
        return "[" + ", ".join(json.dumps(item) for item in items) + "]"

    return "\n".join([
        "[tool.mutmut]",
        'source_paths = ["vera_env"]',
        f"only_mutate = {toml_list(modules)}",
        f"also_copy = {toml_list(ALSO_COPY + [PLUGIN + '.py'])}",
        f"pytest_add_cli_args = {toml_list(['-p', PLUGIN, '-p', 'no:cacheprovider'])}",
        f"pytest_add_cli_args_test_selection = {toml_list(tests or TESTS)}",
        # A mutant times out at this multiple of its tests' clean run time (+1 s). mutmut's
        # default, 15, gave spurious timeouts on the shared two-core machine at load 20.
        "timeout_multiplier = 30.0",
        "",
    ])


def prepare(tree: Path, work: Path, *, fresh: bool, modules: list[str],
            tests: list[str] | None = None) -> None:
    """Copies what the run needs from ``tree`` into ``work`` (emptied first when ``fresh``).

    The configuration is written every time, so a resumed run uses the current one.
    """
    if fresh:
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        ignore = shutil.ignore_patterns("__pycache__", ".hypothesis", ".pytest_cache", "*.egg-info")
        for name in ["vera_env"] + ALSO_COPY:
            source = tree / name
            if source.is_dir():
                shutil.copytree(source, work / name, ignore=ignore)
            else:
                shutil.copy2(source, work / name)
    pyproject = (tree / "pyproject.toml").read_text()
    pyproject = re.sub(r"(?ms)^\[tool\.mutmut\].*?(?=^\[|\Z)", "", pyproject)
    (work / "pyproject.toml").write_text(pyproject.rstrip() + "\n\n" + mutmut_config(modules, tests))
    (work / f"{PLUGIN}.py").write_text(PLUGIN_SOURCE)


def run_mutmut(work: Path, max_children: int) -> float:
    """Runs ``mutmut run`` in ``work``; returns its wall time in seconds."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "CI"}}
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(max_children)],
                   cwd=work, env=env, check=True)
    return time.monotonic() - started


def module_of(meta: Path, work: Path) -> str:
    """``mutants/vera_env/wire/protocol.py.meta`` -> ``vera_env/wire/protocol.py``."""
    return str(meta.relative_to(work / "mutants")).removesuffix(".meta")


def collect(work: Path) -> dict[str, Counter[str]]:
    """Counts mutant outcomes per module from mutmut's ``.meta`` files."""
    from mutmut.stats import status_by_exit_code

    counts: dict[str, Counter[str]] = {}
    for meta in sorted((work / "mutants" / "vera_env").rglob("*.py.meta")):
        exit_codes = json.loads(meta.read_text())["exit_code_by_key"]
        counts[module_of(meta, work)] = Counter(status_by_exit_code[code] for code in exit_codes.values())
    return counts


def survivors(work: Path) -> list[str]:
    """Names of the mutants no selected test killed (survived or not covered)."""
    from mutmut.stats import status_by_exit_code

    names = []
    for meta in sorted((work / "mutants" / "vera_env").rglob("*.py.meta")):
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            if status_by_exit_code[code] in {"survived", "no tests"}:
                names.append(name)
    return names


def write_survivors(work: Path, names: list[str], out: Path) -> Path:
    """Writes each survivor's diff (``mutmut show``) to ``out``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with out.open("w") as f:
        for name in names:
            shown = subprocess.run([sys.executable, "-m", "mutmut", "show", name], cwd=work, env=env,
                                   capture_output=True, text=True)
            f.write(f"```diff\n{shown.stdout.strip()}\n```\n\n")
    return out


def retest(work: Path, tree: Path, max_children: int) -> dict[str, int]:
    """Runs a finished run's survivors (and uncovered mutants) against ``tree``'s current tests (``OWN_TESTS`` of
    each survivor's module, first failure stops), writing each kill into the run's
    ``.meta`` files so ``collect`` counts it. Returns the new exit code per survivor.

    Tests written after a run, for what its survivors showed untested, are scored this
    way without repeating the hours of the full run; a survivor that no retest kills
    keeps its exit code.
    """
    from concurrent.futures import ThreadPoolExecutor

    shutil.rmtree(work / "mutants" / "tests")
    shutil.copytree(tree / "tests", work / "mutants" / "tests",
                    ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "CI"}}
    metas = {module_of(meta, work): meta for meta in (work / "mutants" / "vera_env").rglob("*.py.meta")}

    def tests_for(module: str) -> list[str]:
        return next(tests for prefix, tests in OWN_TESTS.items() if module.startswith(prefix))

    def run(name: str, module: str) -> int:
        try:
            done = subprocess.run(
                [sys.executable, "-m", "pytest", "-x", "-q", "-p", PLUGIN, "-p", "no:cacheprovider",
                 "--rootdir=.", *tests_for(module)],
                cwd=work / "mutants", env={**env, "MUTANT_UNDER_TEST": name},
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=900)
        except subprocess.TimeoutExpired:
            return -1  # not counted as a kill here
        return done.returncode

    for prefix, tests in OWN_TESTS.items():  # a kill must be the mutant's doing
        if (code := run("", prefix)) != 0:
            raise SystemExit(f"{' '.join(tests)} fail (exit {code}) with no mutant active")
    jobs = [(name, module) for module, meta in metas.items() for name, code in
            json.loads(meta.read_text())["exit_code_by_key"].items()
            if code in (0, 33)]  # survived, or no selected test reached it
    with ThreadPoolExecutor(max_children) as pool:
        codes = dict(zip((n for n, _ in jobs), pool.map(lambda job: run(*job), jobs), strict=True))
    for meta in metas.values():
        data = json.loads(meta.read_text())
        for name in data["exit_code_by_key"]:
            if codes.get(name, 0) == 1:  # 1: a test failed; anything else leaves it as it was
                data["exit_code_by_key"][name] = 1
        meta.write_text(json.dumps(data))
    return codes


def table(counts: dict[str, Counter[str]]) -> str:
    """The markdown table: one row per module and a total."""
    rows = ["| module | mutants | killed | survived | no tests | timeout | other | kill rate |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    total: Counter[str] = Counter()
    for module, c in [*counts.items(), ("**total**", None)]:
        if c is None:
            c = total
        else:
            total.update(c)
        n = sum(c.values())
        killed = c["killed"]
        timeout = c["timeout"]
        other = n - killed - c["survived"] - c["no tests"] - timeout
        rate = f"{100 * (killed + timeout) / n:.1f}%" if n else "-"
        rows.append(f"| `{module}` | {n} | {killed} | {c['survived']} | {c['no tests']} | {timeout} "
                    f"| {other} | {rate} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout to measure")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "vera-mutation",
                        help="scratch folder (emptied first unless --report-only)")
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--resume", action="store_true",
                        help="keep --work and mutmut's results in it; test only what has no result")
    parser.add_argument("--report-only", action="store_true", help="tabulate a finished run")
    parser.add_argument("--retest", action="store_true",
                        help="rerun a finished run's survivors against --tree's current tests "
                             "(OWN_TESTS of their module) and tabulate; use a copy of --work")
    parser.add_argument("--only", nargs="+", default=MODULES, metavar="GLOB",
                        help="mutate only these modules (globs as in MODULES), e.g. to rerun a "
                             "part of the slow full run; default: all of MODULES")
    parser.add_argument("--own-tests", action="store_true",
                        help="select only the OWN_TESTS of the mutated modules: a mutant of a module "
                             "every suite imports (records) is then tested in seconds, not minutes, "
                             "and only its own tests may kill it (stricter than TESTS)")
    parser.add_argument("--tests", nargs="+", metavar="PATH",
                        help="select only these tests (paths relative to --tree); overrides TESTS "
                             "and --own-tests")
    parser.add_argument("--results", type=Path, default=RESULTS,
                        help="JSON of counts (survivor diffs go next to it, *_survivors.md)")
    args = parser.parse_args()
    work = args.work.resolve()
    tests = args.tests or (own_tests(args.only) if args.own_tests else TESTS)
    if missing := [t for t in args.tests or [] if not (args.tree / t).exists()]:
        raise SystemExit(f"not in {args.tree}: {' '.join(missing)}")

    wall_s = None
    if args.retest:
        started = time.monotonic()
        codes = retest(work, args.tree.resolve(), args.max_children)
        wall_s = time.monotonic() - started
        print(f"retested {len(codes)} survivors against {OWN_TESTS}: "
              f"{sum(c == 1 for c in codes.values())} now killed")
    elif not args.report_only:
        prepare(args.tree.resolve(), work, fresh=not (args.resume and work.exists()), modules=args.only,
                tests=tests)
        wall_s = run_mutmut(work, args.max_children)
    counts = collect(work)
    names = survivors(work)
    survivors_path = args.results.with_name(args.results.stem + "_survivors.md")
    print(table(counts))
    if wall_s is not None:
        print(f"\nwall time {wall_s / 60:.1f} min, --max-children {args.max_children}, "
              f"load average at the end {os.getloadavg()[0]:.1f}")
    print(f"{len(names)} survivors, diffs in {write_survivors(work, names, survivors_path)}")
    if wall_s is None:
        return  # a report of an earlier run: its counts are in mutation.json already
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=args.tree, capture_output=True,
                            text=True).stdout.strip()
    args.results.parent.mkdir(exist_ok=True)
    args.results.write_text(json.dumps({
        "when": datetime.now().isoformat(timespec="minutes"), "tree": str(args.tree), "commit": commit,
        "machine": f"{os.cpu_count()} cpus, {platform.platform()}, Python {platform.python_version()}",
        "wall_s": wall_s, "max_children": args.max_children,
        "tests": OWN_TESTS if args.retest else tests, "retest_of_survivors": args.retest,
        "modules": {module: dict(c) for module, c in counts.items()}, "survivors": names,
    }, indent=2) + "\n")


if __name__ == "__main__":
    main()
