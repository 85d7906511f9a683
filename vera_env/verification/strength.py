"""Strength: a check earns only when its verdict is a function of the task's data.

The harness runs the model's checks, so the model cannot *print* its score — but it
can write checks that cannot fail (``echo True``, ``test -f qc.mtx``) or checks on
values it typed itself. Issue 11 showed the last one farming the whole verification
bound in four turns: ``echo 42 > a.txt`` and a check ``test "$(cat a.txt)" = 42``
"discriminated", because the old design mutated whatever file a check named —
including the model's own. So strength now asks a counterfactual question: *had the
task's data been different, would this check have said False?*

* Only the task's source files (``Task.data_files()``) are varied, never the model's.
  Each is built into controls (content unchanged) and mutants (``mutants``) by one
  builder in one pass (``variants``): same codec and settings, same mode and mtime,
  written in a shuffled order — only content tells them apart.
* Two counterfactuals, and a check earns under either:

  - **the data varied under the model's files** (*frozen*): a task file the check
    names, still as staged, is shown as each variant in the real workspace (a
    read-only bind, nothing copied). A check that ties the model's result to the data
    — ``cmp gt.txt <(zcat calls.vcf.gz | cut -f11)``, a recount that must match — or
    pins a raw fact of the data (``wc -l data.tsv``) fails there.
  - **the data varied through the model's derivation** (*replay*): for a check that
    reads the model's files, each variant gets a shadow workspace where the episode's
    file-writing commands (``replay``) are replayed in order under the constant
    entropy the real commands ran with (``shadows``). ``awk ... calls.vcf.gz >
    het.txt`` replays to another count, so a pin on ``het.txt`` earns; ``echo 42 >
    a.txt`` replays to the same file and earns nothing. Only the task files the
    model's files came from are varied (``CommandLog.sources_behind``: the files the
    commands that wrote them name, glob or run scripts naming); a file written by
    commands that name no task file is not derived from the data, and no replay is
    needed to say so.
* **Discriminating** = passed on the real workspace, passes on every control, and
  says a clean ``False`` (exit 0) on some mutant — and again on a second run (for a
  replay, an independent second replay of that mutant, the *twin*). The controls make
  a check that detects the variant (re-encoding, inodes, ctime, the mount table)
  flaky; the controls and the repeat bound what a clock-driven check earns by luck.

Order and cost. A check that names no workspace file (``check_inputs``) is not tested:
the harness does not pay for what it cannot see. Task files are tried nearest first,
at most ``strength_max_files`` per counterfactual. Per file the first mutant runs
beside the first control; most real checks die there, and the other controls and the
repeat follow. A check that survives the first mutant meets the others at once. The
checks of a node are tested concurrently, ``workers`` sandbox runs at a time. Variants
and shadows persist across nodes (``bank``), so each command is replayed once per
variant per episode.

Every node has a **deadline**: ``strength_deadline_factor`` x (the node's passing
checks' runtime + the derivation's runtime), at least ``strength_deadline_floor_s``,
at most ``strength_deadline_max_s``. Issue 11 measured a 5 s check making one step
take 66 s; now every run is cut at the deadline, and a check undecided by then earns
nothing, with a ``detail`` that says so.

The session is per episode and owned by it (``Episode.strength``): the command log,
the variants and the shadows die with ``close()`` — nothing of one episode leaks into
the next, and no temp dir or process outlives it.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from vera_env.errors import SandboxError
from vera_env.verification.bank import TargetBank
from vera_env.verification.check_inputs import WorkspaceIndex, named_files
from vera_env.verification.checks import CheckResult
from vera_env.verification.replay import CommandLog
from vera_env.verification.shadows import DEADLINE, Shadow, ShadowGroup
from vera_env.wire.protocol import verdict_from_output

if TYPE_CHECKING:
    from vera_env.sandbox import ExecResult, Sandbox, SandboxLimits, Workspace
    from vera_env.verification.rewards import RewardConfig

__all__ = ["StrengthSession"]

_MIN_RUN_TIMEOUT_S = 10.0
_MAX_NAMED = 64
_UNFINISHED = "unfinished"
TimeLeft = Callable[[], float]
Verdict = bool | None | str


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What testing a check against one task file's variants found."""

    kills: tuple[str, ...] = ()
    weak: str = ""        # decided: the check does not discriminate, and why
    tried: int = 0        # mutants it passed
    unfinished: bool = False
    skipped: str = ""     # this file could not be varied (an empty file)


@dataclass(frozen=True, slots=True)
class _Site:
    """Where a check runs against one variant: the real workspace with the task file
    shown in place (``frozen``), or that variant's shadow (``replay``)."""

    label: str
    run: Callable[[str, float], ExecResult]
    ready: Callable[[], Verdict] = lambda: True  # a twin replays first


class StrengthSession:
    """Strength testing for one episode: its command log, variants and shadows.

    Args:
        sandbox: The episode's sandbox; shadows are staged by it.
        sources: The task's files (``Task.data_files()``), as staged for the episode.
        workspace: The episode's workspace (walked after every command; its scratch
            space holds the variant files).
        config: ``strength_*`` settings of ``RewardConfig``.
        limits: The sandbox's limits (replays and check runs are cut by them).
        workers: Sandbox runs in flight at once (default: CPUs, 2 to 8). Verdicts do
            not depend on it.
    """

    def __init__(self, sandbox: Sandbox, sources: Mapping[str, Path], workspace: Workspace,
                 config: RewardConfig, limits: SandboxLimits, *,
                 workers: int | None = None) -> None:
        self._sources = dict(sources)
        self._workspace, self._config, self._limits = workspace, config, limits
        self._workers = workers or min(8, max(2, os.cpu_count() or 2))
        self.log = CommandLog(workspace.path, list(self._sources))
        staged = {name: _stat(workspace.path / name, path) for name, path in sources.items()}
        self._staged_inode = {name: (st.st_dev, st.st_ino) for name, st in staged.items()}
        self.bank = TargetBank(sandbox, self._sources,
                               lambda: workspace.scratch_dir("strength-"),
                               {n: (st.st_mtime_ns, st.st_mode & 0o777)
                                for n, st in staged.items()}, config)

    def record(self, command: str, result: ExecResult) -> None:
        """Note a command the model ran (replayed later if it changed the workspace)."""
        self.log.record(command, result)

    def deadline_s(self, results: Sequence[CheckResult]) -> float:
        """The node's strength deadline (see the module docstring)."""
        cfg = self._config
        base = sum(r.duration_s for r in results if r.passed) + self.log.derivation_s
        return min(cfg.strength_deadline_max_s,
                   max(cfg.strength_deadline_floor_s, cfg.strength_deadline_factor * base))

    def assess(self, results: Sequence[CheckResult], *,
               artifact: str = "") -> tuple[CheckResult, ...]:
        """Strength-test every passing check of one node.

        Args:
            results: The node's executed checks.
            artifact: The node's artifact (counts as a file the checks name).

        Returns:
            ``results`` with ``discriminating``, ``killed_by`` and (when a check earns
            nothing) ``detail`` set on passing checks.

        Raises:
            SandboxError: The sandbox or the harness's scratch space failed (an
                infrastructure fault: the episode is unscorable, not the check failed).
        """
        passing = [i for i, r in enumerate(results) if r.passed]
        if not passing:
            return tuple(results)
        budget_s = self.deadline_s(results)
        ends = time.monotonic() + budget_s

        def time_left() -> float:
            return ends - time.monotonic()

        index = WorkspaceIndex(self._workspace.listing())
        out = list(results)
        try:
            with ThreadPoolExecutor(self._workers, "strength-run") as runs, \
                    ThreadPoolExecutor(len(passing), "strength-check") as checks:
                futures = {i: checks.submit(self._probe, results[i], index, artifact, runs,
                                            time_left, budget_s) for i in passing}
                for i, future in futures.items():
                    out[i] = future.result()
        except OSError as exc:
            raise SandboxError(f"strength: cannot write a variant: {exc}") from exc
        finally:
            self.bank.trim()
        return tuple(out)

    def close(self) -> None:
        """Close every shadow and delete every variant file. Idempotent."""
        self.bank.close()

    # ----- one check -----

    def _probe(self, result: CheckResult, index: WorkspaceIndex, artifact: str,
               runs: Executor, time_left: TimeLeft, budget_s: float) -> CheckResult:
        named = named_files(result.command, index, self._workspace.path, artifact=artifact,
                            limit=_MAX_NAMED)
        if not named:
            return _weak(result, "names no file of the workspace, so the harness cannot "
                                 "tell what data it checks")
        untouched = [n for n in named if self._untouched(n)]
        model = [n for n in named if n not in untouched]
        plan = [(name, False) for name in untouched[:self._config.strength_max_files]]
        if model:  # its files came from the model: vary their sources, replay the episode
            plan += [(name, True) for name in self._targets(model)]
        if not plan:
            return _weak(result, f"what it reads ({', '.join(model[:3])}) was written by "
                                 "commands that name no task file, so it is not derived "
                                 "from the data")
        tried: dict[str, int] = {}
        replayed = False
        for name, replay in plan:
            outcome = self._probe_file(result, name, replay, runs, time_left)
            if outcome.kills:
                return replace(result, discriminating=True, killed_by=outcome.kills)
            if outcome.weak:
                return _weak(result, outcome.weak)
            if outcome.unfinished:
                return _weak(result, f"the strength deadline ({budget_s:.0f} s for this "
                                     f"node) passed before its variants of {name} were run")
            if not outcome.skipped:
                tried[name] = tried.get(name, 0) + outcome.tried
                replayed = replayed or replay
        if not tried:
            return _weak(result, "no variant of the task's data could be built (empty "
                                 "files), so it checks no data")
        how = " (the episode replayed on each)" if replayed else ""
        return _weak(result, f"passed on all {sum(tried.values())} mutants of "
                             f"{', '.join(tried)}{how}: it does not depend on that data")

    def _untouched(self, name: str) -> bool:
        """``name`` is a task file still as staged (the model has not replaced it)."""
        try:
            st = os.lstat(self._workspace.path / name)
        except OSError:
            return False
        return self._staged_inode.get(name) == (st.st_dev, st.st_ino)

    def _targets(self, model_files: Sequence[str]) -> list[str]:
        """Task files the model's files came from (``CommandLog.sources_behind``),
        nearest first: varying any other file cannot change what a replay writes."""
        behind = self.log.sources_behind(model_files, list(self._sources))
        return behind[:self._config.strength_max_files]

    def _probe_file(self, result: CheckResult, name: str, replay: bool, runs: Executor,
                    time_left: TimeLeft) -> _Outcome:
        target = self.bank.acquire(name, time_left)
        if isinstance(target, str):
            return _Outcome(skipped=target)
        try:
            variants = target.variants
            if not replay:
                controls = [self._frozen(name, v.label, v.path) for v in variants.controls]
                mutants = [self._frozen(name, v.label, v.path) for v in variants.mutants]
                return self._phases(result, controls, mutants, lambda site: site, runs,
                                    time_left, variants.windowed, name)
            group = self.bank.shadow_group(target, time_left)
            if group == DEADLINE:
                return _Outcome(unfinished=True)
            assert isinstance(group, ShadowGroup)
            group.extend(self.log, self._limits, runs, time_left, self.bank.over_budget)
            state = group.state(len(self.log))
            if state:
                return (_Outcome(unfinished=True) if state == DEADLINE else
                        _Outcome(weak=f"the episode did not replay the same way: {state}"))
            controls = [_shadow_site(group.shadows[v.label]) for v in variants.controls]
            mutants = [_shadow_site(group.shadows[v.label]) for v in variants.mutants
                       if not group.shadows[v.label].broken]
            return self._phases(result, controls, mutants,
                                lambda site: self._twin(group, site, time_left), runs,
                                time_left, variants.windowed, name)
        finally:
            self.bank.release(target)

    def _frozen(self, name: str, label: str, path: Path) -> _Site:
        ws = self._workspace
        return _Site(label, lambda cmd, t: ws.run_check(cmd, timeout_s=t, overlay={name: path}))

    def _twin(self, group: ShadowGroup, site: _Site, time_left: TimeLeft) -> _Site:
        if not len(self.log):
            return site  # nothing to replay: the same shadow is an identical replay
        twin = group.twin(site.label)

        def ready() -> Verdict:
            twin.extend(self.log, self._limits, time_left, self.bank.over_budget)
            twin.settle(self.log.root)
            if twin.broken == DEADLINE or twin.replayed < len(self.log):
                return _UNFINISHED
            return None if twin.broken else True
        return _Site(site.label, _shadow_site(twin).run, ready)

    def _phases(self, result: CheckResult, controls: list[_Site], mutants: list[_Site],
                twin_of: Callable[[_Site], _Site], runs: Executor, time_left: TimeLeft,
                windowed: bool, name: str) -> _Outcome:
        if not mutants:
            return _Outcome(skipped="every mutant's replay failed")
        timeout = min(self._limits.check_timeout_s,
                      max(_MIN_RUN_TIMEOUT_S, 5 * result.duration_s + 5))
        run = _PhaseRunner(result.command, runs, timeout, time_left,
                           random.Random(f"{self._config.strength_seed}|{result.command}"))
        first = run({"m": mutants[0], "c": controls[0]})
        if _UNFINISHED in first.values():
            return _Outcome(unfinished=True)
        if first["c"] is not True:
            return _Outcome(weak=_flaky(name, windowed))
        kills = [mutants[0]] if first["m"] is False else []
        if not kills:
            rest = run({site.label: site for site in mutants[1:]})
            if _UNFINISHED in rest.values():
                return _Outcome(unfinished=True)
            kills = [site for site in mutants[1:] if rest[site.label] is False]
            if not kills:
                return _Outcome(tried=len(mutants))
        last = run({**{site.label: site for site in controls[1:]}, "twin": twin_of(kills[0])})
        if _UNFINISHED in last.values():
            return _Outcome(unfinished=True)
        if any(last[site.label] is not True for site in controls[1:]):
            return _Outcome(weak=_flaky(name, windowed))
        if last["twin"] is not False:
            return _Outcome(weak=f"flaky: {kills[0].label} did not fail it again (the "
                                 "kill did not repeat)")
        return _Outcome(kills=tuple(site.label for site in kills))


class _PhaseRunner:
    """Runs a check against several variants at once, in a shuffled order."""

    def __init__(self, command: str, runs: Executor, timeout_s: float, time_left: TimeLeft,
                 rng: random.Random) -> None:
        self._command, self._runs, self._timeout_s = command, runs, timeout_s
        self._time_left, self._rng = time_left, rng

    def __call__(self, sites: dict[str, _Site]) -> dict[str, Verdict]:
        keys = list(sites)
        self._rng.shuffle(keys)  # which variant runs first says nothing
        futures = {k: self._runs.submit(self._verdict, sites[k]) for k in keys}
        return {k: f.result() for k, f in futures.items()}

    def _verdict(self, site: _Site) -> Verdict:
        ready = site.ready()
        if ready is not True:
            return ready
        left = self._time_left()
        if left <= 0.05:
            return _UNFINISHED
        res = site.run(self._command, min(self._timeout_s, left))
        if res.timed_out and self._time_left() <= 0.05:
            return _UNFINISHED
        return _clean_verdict(res)


def _shadow_site(shadow: Shadow) -> _Site:
    ws = shadow.workspace
    return _Site(shadow.variant.label, lambda cmd, t: ws.run_check(cmd, timeout_s=t))


def _flaky(name: str, windowed: bool) -> str:
    if windowed:
        return (f"its verdict depends on {name} past the first strength_max_mb "
                "(after decompression), the window strength varies")
    return (f"flaky: it failed on a control ({name} unchanged in content), so it depends "
            "on something besides the data: time, randomness, file metadata or encoding")


def _weak(result: CheckResult, why: str) -> CheckResult:
    return replace(result, discriminating=False, killed_by=(),
                   detail=f"not discriminating: {why}"[:200])


def _clean_verdict(res: ExecResult) -> bool | None:
    if res.status != "ok" or res.exit_code != 0 or res.timed_out:
        return None
    return verdict_from_output(res.stdout)


def _stat(staged: Path, source: Path) -> os.stat_result:
    """The staged task file's stat (its source's if the name is already gone)."""
    try:
        return os.lstat(staged)
    except OSError:
        return os.stat(source)
