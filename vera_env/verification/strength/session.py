"""Strength: a check earns only when its verdict follows the task's answer.

The rule (``docs/concepts/rewards.md``, "Strength"): a passing check earns when it holds
on every *control* of a task file (a variant whose answer its reference keeps) and says
a clean ``False`` on some *mutant* (a variant whose answer moves), again on
``luck.confirmations`` more runs, with one verdict per kind of mutation; what it
rejected is its evidence, one fact per episode however phrased. Only the task's files
are varied, never the model's, and a check earns under either counterfactual:

* **frozen**: a task file the check names is shown as each variant in the real
  workspace (a fresh file per run, bound read-only over the name);
* **replay**: for a check that reads the model's files, each variant gets a shadow
  workspace where the episode's file-writing commands (``command_log``) are replayed
  (``shadows``), so a pin on a derived file earns only if the derivation ties it to
  the data.

This module runs that for one episode (``StrengthSession``: the command log, the
variants and shadows of ``targets``, the threads of ``run_pool``, the shared
``verdicts``), within a node's budget of its runs' own time (``budget``: the same
episode earns the same reward on a quiet or a busy machine). The session is owned by
its episode (``Episode.strength``) and everything it made dies with ``close()``.
"""

from __future__ import annotations

import os
import random
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from vera_env.errors import SandboxError
from vera_env.verification.checks import CheckResult
from vera_env.verification.strength.budget import Budget, run_cost, run_starved
from vera_env.verification.strength.check_inputs import WorkspaceIndex, named_files
from vera_env.verification.strength.command_log import CommandLog
from vera_env.verification.strength.fingerprints import Shown, hypotheses, runs
from vera_env.verification.strength.luck import Tosses, needed
from vera_env.verification.strength.mutants import RESERVE, kind_of
from vera_env.verification.strength.outcome import Outcome, StrengthDeadline
from vera_env.verification.strength.run_pool import RunPool
from vera_env.verification.strength.shadows import Shadow, ShadowBudgetSpent, ShadowGroup
from vera_env.verification.strength.targets import Target, TargetBank
from vera_env.verification.strength.variants import (
    Blob,
    Classified,
    Variant,
    VariantSet,
    copy_variant,
    write_like,
)
from vera_env.verification.strength.verdicts import VerdictKey, VerdictStore, Views, shareable
from vera_env.wire.protocol import verdict_from_output

if TYPE_CHECKING:
    from vera_env.sandbox import ExecResult, Sandbox, SandboxLimits, Workspace
    from vera_env.verification.rewards import StrengthConfig
    from vera_env.verification.strength.task import StrengthTask

__all__ = ["StrengthSession"]

_MIN_RUN_TIMEOUT_S = 10.0
_MAX_NAMED = 64
Run = Callable[[str, float], "ExecResult"]
Verdict = bool | None | str
"""A run's verdict: True, False, None (no clean verdict), or ``_BROKEN``."""
_BROKEN = "broken"
"""A confirmation site that could not be run (its twin's replay broke): no verdict."""


@dataclass(frozen=True, slots=True)
class _Site:
    """Where a check runs against one variant: the real workspace with a fresh file of
    the variant bound over the task file (``frozen``), or that variant's shadow."""

    label: str
    run: Run
    ready: Callable[[], bool | None] = lambda: True  # a twin replays first; None: broken
    view: Callable[[], str | None] = lambda: None  # ``verdicts``: what the check can read
    ran: Callable[[], str] | None = None  # the variant that last ran here, if not ``label``

    def last(self) -> str:
        """The label of the variant the last run here read (a confirmation may fall
        back to a variant already shown)."""
        return self.ran() if self.ran is not None else self.label


@dataclass(frozen=True, slots=True)
class _Sites:
    """Where one check is tested through one task file, by counterfactual: its
    controls, its mutants, where a confirmation of a kill runs a reserve mutant (the
    killed mutant again for None) and a reserve control (the first control again for
    None), and the classified variants they come from (``StrengthSession._frozen_sites``,
    ``_replayed_sites``)."""

    name: str
    windowed: bool
    controls: list[_Site]
    mutants: list[_Site]
    confirm_on: Callable[[_Site, Blob | None, int], _Site]
    late_control: Callable[[Blob | None, int], _Site]
    source: Classified | None = None


class StrengthSession:
    """Strength testing for one episode: its command log, variants and shadows.

    Args:
        sandbox: The episode's sandbox; shadows are staged by it.
        task: The task's files (``Task.data_files()``, as staged for the episode), its
            reference, its grader's agreement and cache key.
        workspace: The episode's workspace (its scratch space holds the variant files).
        config: The strength settings (``RewardConfig.strength``).
        limits: The sandbox's limits (replays and check runs are cut by them).
        workers: Sandbox runs in flight at once (default: CPUs, 2 to 8). Verdicts do
            not depend on it.
        verdicts: Verdicts shared with other episodes (``verdicts``); None: every
            run is made.
    """

    def __init__(self, sandbox: Sandbox, task: StrengthTask, workspace: Workspace,
                 config: StrengthConfig, limits: SandboxLimits, *,
                 workers: int | None = None, verdicts: VerdictStore | None = None) -> None:
        self._sources = dict(task.sources)
        self._workspace, self._config, self._limits = workspace, config, limits
        self._runs = RunPool(workers or min(8, max(2, os.cpu_count() or 2)))
        self.log = CommandLog(workspace.path, list(self._sources),
                              scan_budget_s=config.scan_budget_s)
        staged = {name: _stat(workspace.path / name, path)
                  for name, path in self._sources.items()}
        self._staged_inode = {name: (st.st_dev, st.st_ino) for name, st in staged.items()}
        self._tested = 0
        self._count_lock = threading.Lock()
        self._verdicts, self._views, self._node = verdicts, Views(), 0
        self._setting = f"{getattr(sandbox, 'name', type(sandbox).__name__)}|{limits!r}"
        self.bank = TargetBank(sandbox, task,
                               lambda: workspace.scratch_dir("strength-"),
                               {n: (st.st_mtime_ns, st.st_mode & 0o777)
                                for n, st in staged.items()}, config)

    def record(self, command: str, result: ExecResult) -> None:
        """Note a command the model ran (replayed later if it changed the workspace)."""
        self.log.record(command, result)

    def deadline_s(self, results: Sequence[CheckResult]) -> float:
        """The node's strength deadline, over its checks' and derivation's own time
        (``budget.run_cost``); its budget and backstop follow (the module docstring)."""
        cfg = self._config
        base = sum(run_cost(r.duration_s, r.cpu_s, r.cpu_wait_s)
                   for r in results if r.passed) + self.log.derivation_work_s
        return min(cfg.deadline_max_s, max(cfg.deadline_floor_s, cfg.deadline_factor * base))

    def assess(self, results: Sequence[CheckResult], *,
               artifact: str = "") -> tuple[CheckResult, ...]:
        """Strength-test every passing check of one node.

        Args:
            results: The node's executed checks.
            artifact: The node's artifact (counts as a file the checks name).

        Returns:
            ``results`` with ``discriminating``, ``killed_by``, ``evidence`` and (when a
            check earns nothing) ``detail`` set on passing checks.

        Raises:
            SandboxError: The sandbox or the harness's scratch space failed (an
                infrastructure fault: the episode is unscorable, not the check failed).
        """
        passing = [i for i, r in enumerate(results) if r.passed]
        if not passing:
            return tuple(results)
        budget = Budget.for_deadline(self.deadline_s(results),
                                     max_deadline_s=self._config.deadline_max_s)
        index = WorkspaceIndex(self._workspace.listing())
        with self._count_lock:  # the i-th check tested this episode: its share of luck
            order = {i: self._tested + k + 1 for k, i in enumerate(passing)}
            self._tested += len(passing)
            self._node += 1  # the real workspace's tree is read again (``_frozen``)
        out = list(results)
        try:
            with self._runs.lease() as runs, \
                    ThreadPoolExecutor(len(passing), "strength-check") as checks:
                futures = {i: checks.submit(self._probe, results[i], order[i], index,
                                            artifact, runs, budget)
                           for i in passing}
                for i, future in futures.items():
                    out[i] = future.result()
            budget.raise_if_starved()  # every run has returned: the node is judged
        except OSError as exc:
            raise SandboxError(f"strength: cannot write a variant: {exc}") from exc
        except RuntimeError as exc:  # the run pool refused work: close() stopped it
            if not self._runs.closed:
                raise
            raise SandboxError("strength: the episode was closed while its checks were "
                               "tested") from exc
        finally:
            self.bank.trim()
        return tuple(out)

    def close(self) -> None:
        """Close every shadow and delete every variant file, then stop the run threads
        (after the shadows: their servers are closed, not killed by the threads' exit).
        Idempotent."""
        try:
            self.bank.close()
        finally:
            self._runs.close()

    # ----- one check -----

    def _probe(self, result: CheckResult, nth: int, index: WorkspaceIndex, artifact: str,
               runs: Executor, budget: Budget) -> CheckResult:
        try:
            return self._probe_files(result, nth, index, artifact, runs, budget)
        except ShadowBudgetSpent:
            return _weak(result, "the shadows' disk budget (strength.max_shadow_mb) was "
                                 "full before its variants were run")
        except StrengthDeadline:
            if budget() > 0:  # not spent: the backstop was too near for a start or replay
                budget.starve("the backstop came before a replay or a sandbox could start")
            return _weak(result, budget.describe())

    def _probe_files(self, result: CheckResult, nth: int, index: WorkspaceIndex,
                     artifact: str, runs: Executor, time_left: Budget) -> CheckResult:
        named = named_files(result.command, index, self._workspace.path, artifact=artifact,
                            limit=_MAX_NAMED, time_left=time_left)
        if not named:
            return _weak(result, "names no file of the workspace, so the harness cannot "
                                 "tell what data it checks")
        untouched = [n for n in named if self._untouched(n)]
        model = [n for n in named if n not in untouched]
        plan = [(name, False) for name in untouched[:self._config.max_files]]
        if model:  # its files came from the model: vary their sources, replay the episode
            plan += [(name, True) for name in self._targets(model, time_left)]
        if not plan:
            return _weak(result, f"what it reads ({', '.join(model[:3])}) was written by "
                                 "commands that name no task file, so it is not derived "
                                 "from the data")
        tried: dict[str, int] = {}
        skipped: list[str] = []
        replayed = False
        for name, replay in plan:
            outcome = self._probe_file(result, nth, name, replay, runs, time_left)
            if outcome.kind == "kill":
                return replace(result, discriminating=True, killed_by=outcome.kills,
                               evidence=f"{name}:{outcome.evidence}")
            if outcome.kind == "weak":
                return _weak(result, outcome.why)
            if outcome.kind == "survived":
                tried[name] = tried.get(name, 0) + outcome.tried
                replayed = replayed or replay
            if outcome.kind == "skipped":
                skipped.append(outcome.why)
        if not tried:
            why = next((o for o in skipped if "fingerprint" in o), "")
            return _weak(result, why or "no variant of the task's data could be built "
                                        "(empty files), so it checks no data")
        how = " (the episode replayed on each)" if replayed else ""
        return _weak(result, f"passed on all {sum(tried.values())} mutants of "
                             f"{', '.join(tried)}{how}: its verdict does not follow the "
                             "answer")

    def _untouched(self, name: str) -> bool:
        """``name`` is a task file still as staged (the model has not replaced it)."""
        try:
            st = os.lstat(self._workspace.path / name)
        except OSError:
            return False
        return self._staged_inode.get(name) == (st.st_dev, st.st_ino)

    def _targets(self, model_files: Sequence[str], time_left: Budget) -> list[str]:
        """Task files the model's files came from (``CommandLog.sources_behind``),
        nearest first: varying any other file cannot change what a replay writes."""
        behind = self.log.sources_behind(model_files, list(self._sources),
                                         time_left=time_left)
        return behind[:self._config.max_files]

    def _probe_file(self, result: CheckResult, nth: int, name: str, replay: bool,
                    runs: Executor, time_left: Budget) -> Outcome:
        target = self.bank.acquire(name, time_left)
        if isinstance(target, Outcome):
            return target
        try:
            source = target.variants.source
            if source is not None and source.classified and not source.content_varied:
                return Outcome("skipped", f"no control of {name} changes its content "
                                          "(only its encoding), so a check through it cannot "
                                          "be told from a fingerprint of it")
            sites = (self._replayed_sites(target, runs, time_left) if replay
                     else self._frozen_sites(target))
            if isinstance(sites, Outcome):
                return sites
            return self._phases(result, nth, sites, runs, time_left)
        finally:
            self.bank.release(target)

    def _frozen_sites(self, target: Target) -> _Sites:
        """The frozen counterfactual: each variant bound over the task file in the real
        workspace; a confirmation of a kill runs the reserve draw ``_plan`` gives it (the
        killed mutant again, on a fresh file, where none is left)."""
        variants, scratch = target.variants, self.bank.scratch()

        def confirm_on(site: _Site, blob: Blob | None, k: int) -> _Site:
            fresh = _reserve(variants, blob, scratch)
            return site if fresh is None else self._frozen(variants.name, fresh, scratch)
        controls = [self._frozen(variants.name, v, scratch) for v in variants.controls]

        def late_control(blob: Blob | None, k: int) -> _Site:
            fresh = _reserve(variants, blob, scratch)
            return controls[0] if fresh is None else self._frozen(variants.name, fresh, scratch)
        return _Sites(variants.name, variants.windowed, controls,
                      [self._frozen(variants.name, v, scratch) for v in variants.mutants],
                      confirm_on, late_control, variants.source)

    def _replayed_sites(self, target: Target, runs: Executor, time_left: Budget
                        ) -> _Sites | Outcome:
        """The replay counterfactual: each variant's shadow, the episode replayed in it;
        a confirmation runs on the mutant's twin (replayed afresh at the first).

        Raises:
            StrengthDeadline: A replay is unfinished.
        """
        variants, scratch = target.variants, self.bank.scratch()
        group = self.bank.shadow_group(target, time_left)
        group.extend(self.log, self._limits, runs, time_left, self.bank.over_budget,
                     charge=time_left.charge)
        state = group.state(len(self.log))
        if state:
            return Outcome("weak", f"the episode did not replay the same way: {state}")
        controls = [self._shadow_site(group.shadows[v.label]) for v in variants.controls]
        return _Sites(variants.name, variants.windowed, controls,
                      [self._shadow_site(group.shadows[v.label]) for v in variants.mutants
                       if not group.shadows[v.label].broken],
                      lambda site, blob, k: self._twin(group, site, time_left, k,
                                                       _reserve(variants, blob, scratch)),
                      lambda blob, k: self._late_twin(group, controls[0], time_left,
                                                      _reserve(variants, blob, scratch)),
                      variants.source)

    def _frozen(self, name: str, variant: Variant, scratch: Path) -> _Site:
        ws = self._workspace

        def run(cmd: str, timeout_s: float) -> ExecResult:
            fresh = copy_variant(variant, scratch)  # a new inode for every run
            try:
                return ws.run_check(cmd, timeout_s=timeout_s, overlay={name: fresh})
            finally:
                fresh.unlink(missing_ok=True)

        def view() -> str | None:
            tree = self._views.tree(ws.path, self._node)
            part = self._views.part(variant.path)
            return None if tree is None or part is None else tree.view({name: part})
        return _Site(variant.label, run, view=view)

    def _twin(self, group: ShadowGroup, site: _Site, time_left: Budget, k: int,
              fresh: Variant | None) -> _Site:
        """Where the ``k``-th confirmation of a kill at ``site`` runs: a shadow of the
        kind's reserve draw ``fresh``, the episode replayed in it; without one, or where
        the episode does not replay the same way on it (a command that ends otherwise
        on the further-mutated data), the killed mutant's twin (replayed at the first
        confirmation, re-run after)."""
        if fresh is None and not len(self.log):
            return site  # nothing to replay: the same shadow is an identical replay
        chosen: list[Shadow] = []

        def replay(twin: Shadow, first: bool) -> None:
            if first or twin.replayed < len(self.log):
                twin.extend(self.log, self._limits, time_left, self.bank.over_budget,
                            charge=time_left.charge)
                twin.settle(self.log.root)

        def ready() -> bool | None:
            twin = group.twin(fresh.label, fresh) if fresh is not None else None
            if twin is not None:
                replay(twin, True)
                if twin.broken and not twin.cut:
                    twin = None
            if twin is None:
                twin = group.twin(site.label)
                replay(twin, k == 0)
            chosen.append(twin)
            if twin.cut or twin.replayed < len(self.log):
                raise StrengthDeadline(site.label)
            return None if twin.broken else True

        def run(cmd: str, timeout_s: float) -> ExecResult:
            return chosen[-1].workspace.run_check(cmd, timeout_s=timeout_s)
        return _Site(site.label, run, ready,
                     ran=lambda: chosen[-1].variant.label if chosen else site.label)

    def _late_twin(self, group: ShadowGroup, first: _Site, time_left: Budget,
                   fresh: Variant | None) -> _Site:
        """Where a confirmation re-runs a control: a shadow of the reserve control
        ``fresh``, the episode replayed in it; the first control's shadow where there is
        none, or where the episode does not replay the same way on it."""
        if fresh is None:
            return first
        chosen: list[Shadow | None] = []

        def ready() -> bool | None:
            twin = group.twin(fresh.label, fresh)
            if twin.replayed < len(self.log):
                twin.extend(self.log, self._limits, time_left, self.bank.over_budget,
                            charge=time_left.charge)
                twin.settle(self.log.root)
            if twin.cut or (twin.replayed < len(self.log) and not twin.broken):
                raise StrengthDeadline(fresh.label)
            chosen.append(None if twin.broken else twin)
            return first.ready() if twin.broken else True

        def run(cmd: str, timeout_s: float) -> ExecResult:
            twin = chosen[-1]
            if twin is None:
                return first.run(cmd, timeout_s)
            return twin.workspace.run_check(cmd, timeout_s=timeout_s)
        return _Site(fresh.label, run, ready,
                     ran=lambda: fresh.label if chosen and chosen[-1] is not None
                     else first.label)

    def _shadow_site(self, shadow: Shadow) -> _Site:
        ws = shadow.workspace

        def view() -> str | None:
            tree = self._views.tree(ws.path, shadow.replayed)
            return None if tree is None or shadow.broken else tree.view()
        return _Site(shadow.variant.label, lambda cmd, t: ws.run_check(cmd, timeout_s=t),
                     view=view)

    def _phases(self, result: CheckResult, nth: int, sites: _Sites, runs: Executor,
                time_left: Budget) -> Outcome:
        controls, mutants, name, windowed = sites.controls, sites.mutants, sites.name, \
            sites.windowed
        if not mutants:
            return Outcome("skipped", "no mutant of it could be built or replayed")
        timeout = min(self._limits.check_timeout_s,
                      max(_MIN_RUN_TIMEOUT_S, 5 * result.duration_s + 5))
        store = self._verdicts if shareable(result.command) else None
        run = _PhaseRunner(result.command, runs, timeout, time_left,
                           random.Random(f"{self._config.seed}|{result.command}"),
                           store, self._setting)
        first = run({"m": mutants[0], **({"c": controls[0]} if controls else {})})
        if controls and first["c"] is not True:
            return Outcome("weak", _flaky(name, windowed))
        rest = run({site.label: site for site in (*controls[1:], *mutants[1:])})
        verdicts = {mutants[0].label: first["m"], **rest}
        if any(verdicts[site.label] is not True for site in controls[1:]):
            return Outcome("weak", _flaky(name, windowed))
        kills = [site for site in mutants if verdicts[site.label] is not True]
        if not kills:
            return Outcome("survived", tried=len(mutants))
        marks = _marks_by_kind(mutants, verdicts)
        split = next((kind for kind, mark in marks.items() if mark is None), None)
        if split is not None:
            return Outcome("weak", f"it held on one {split} mutant of {name} and rejected "
                                   "another of the same kind: a fact of the data changes on "
                                   "both or on neither, so its verdict follows something "
                                   "else (a gate on the value's hash, a threshold)")
        plan = _plan(sites.source, kills, bool(controls))
        done: list[tuple[str | None, str | None]] = []  # what each confirmation read
        k = 0
        while True:
            labels = done + [(m.label if m else None, c.label if c else None)
                             for m, c in plan[k:]]
            coins = self._hypotheses(sites, verdicts, labels)
            repeats = needed(coins, nth, self._config.luck_bound)
            if repeats is None:
                over = next((c.name for c in coins
                             if needed([c], nth, self._config.luck_bound) is None), "luck")
                return Outcome("weak", f"it could be {over} of {name}: too few of the "
                                       "file's variants move that to bound what luck earns "
                                       "this late in the episode")
            if k >= repeats:
                break
            blob, reserve = plan[k]
            late = sites.late_control(reserve, k) if controls else None
            confirm = sites.confirm_on(kills[0], blob, k)
            again = run({"confirm": confirm, **({"control": late} if late is not None else {})},
                        confirm=True)
            if again["confirm"] is True or again["confirm"] == _BROKEN:
                return Outcome("weak", f"flaky: {confirm.last()} did not fail it again "
                                       f"(confirmation {k + 1} of {repeats})")
            if late is not None and again["control"] is not True:
                return Outcome("weak", _late(name, late.label, k + 1, repeats))
            done.append((confirm.last(), late.last() if late is not None else None))
            k += 1
        evidence = "".join(str(marks[kind]) for kind in sorted(marks))
        return Outcome("kill", kills=tuple(site.label for site in kills), evidence=evidence)



    @staticmethod
    def _hypotheses(sites: _Sites, verdicts: Mapping[str, Verdict],
                    confirms: list[tuple[str | None, str | None]]) -> list[Tosses]:
        """What the check could be a coin over (``fingerprints``), each as the tosses it
        won: a coin per run always; a gate on each catalogued fingerprint of the file
        that its verdicts fit, where the variants' fingerprints are known."""
        draws = Counter(kind_of(site.label) for site in sites.mutants)
        out = [runs(len(sites.controls), draws, len(confirms), bool(sites.controls))]
        source = sites.source
        if source is None or not source.own_facets:
            return out
        shown = [(site.label, None, True) for site in sites.controls] + [
            (site.label, kind_of(site.label), verdicts[site.label] is True)
            for site in sites.mutants]
        known = [(source.facets_of(label), kind, passed) for label, kind, passed in shown]
        if any(f is None for f, _, _ in known):
            return out

        def of(label: str | None) -> tuple[str, ...] | None:
            return source.facets_of(label) if label is not None else None
        return out + hypotheses(source.own_facets,
                                [Shown(f, kind, passed) for f, kind, passed in known if f is not None],
                                [(of(m), of(c)) for m, c in confirms])


class _PhaseRunner:
    """Runs a check against several variants at once, in a shuffled order; with a
    ``store``, a verdict it already holds is served, except to a confirmation."""

    def __init__(self, command: str, runs: Executor, timeout_s: float, time_left: Budget,
                 rng: random.Random, store: VerdictStore | None = None,
                 setting: str = "") -> None:
        self._command, self._runs, self._timeout_s = command, runs, timeout_s
        self._time_left, self._rng = time_left, rng
        self._store, self._setting = store, setting

    def __call__(self, sites: dict[str, _Site], *, confirm: bool = False
                 ) -> dict[str, Verdict]:
        keys = list(sites)
        self._rng.shuffle(keys)  # which variant runs first says nothing
        futures = {k: self._runs.submit(self._verdict, sites[k], confirm) for k in keys}
        wait(futures.values())  # all charged to the budget before the node is judged
        return {k: f.result() for k, f in futures.items()}  # re-raises StrengthDeadline

    def _verdict(self, site: _Site, confirm: bool) -> Verdict:
        if site.ready() is None:
            return _BROKEN
        budget = self._time_left
        left = budget()
        if left <= 0.05:
            raise StrengthDeadline(site.label)
        timeout_s = min(self._timeout_s, left)
        view = site.view() if self._store is not None else None
        key = None if view is None else VerdictKey(self._command, view, self._setting)
        if key is not None and self._store is not None and not confirm:
            decided = self._store.claim(key, timeout_s)
            if decided is not None:  # charged as its run was: the budget decides alike
                budget.charge(decided.as_result())
                return decided.verdict
            try:
                return self._run(site, timeout_s, key, confirm)
            finally:
                self._store.release(key)
        return self._run(site, timeout_s, key, confirm)

    def _run(self, site: _Site, timeout_s: float, key: VerdictKey | None,
             confirm: bool) -> Verdict:
        budget = self._time_left
        left = budget()  # again: ``claim`` may have waited for a run in flight
        if left <= 0.05:
            raise StrengthDeadline(site.label)
        timeout_s = min(timeout_s, left)
        # A sandbox that does not start in time is a fault (SandboxStartTimeout), also
        # when the backstop cut its timeout: the budget was not spent, so it was starved.
        res = site.run(self._command, timeout_s)
        budget.charge(res)
        if res.timed_out and budget() <= 0.05:
            raise StrengthDeadline(site.label)
        if run_starved(res, timeout_s):  # the node's other runs stop too
            budget.starve(f"a run of {site.label} was cut at its {timeout_s:.0f} s "
                          f"timeout after {res.cpu_wait_s or 0:.1f} s of waiting for a CPU")
            raise StrengthDeadline(site.label)
        verdict = _clean_verdict(res)
        if key is not None and self._store is not None:
            self._store.observe(key, res, verdict, confirmation=confirm)
        return verdict


def _written(blob: Blob, like: Path, scratch: Path) -> Variant:
    """A reserve draw written as the variants it was kept apart from are."""
    return Variant(blob.label, blob.control, write_like(blob.data, like, scratch))


_MAX_CONFIRMS = 32


def _plan(source: Classified | None, kills: Sequence[_Site], late: bool
          ) -> list[tuple[Blob | None, Blob | None]]:
    """What each confirmation of a kill runs, in order: a reserve draw of a killed kind
    (each killed kind's first, then each one's second, ...; the first killed mutant
    again once none is left) and a reserve control (the first control again once none
    is left; None without controls). A fresh draw on each side is a toss for a gate on
    a hash of what the check reads, where a variant it was shown repeats its verdict:
    so the reserves of every killed kind come before any re-run (measured: a kill
    whose kind had no reserve re-ran its mutant, a free pass that earned in 2 of 9
    seeds of ``tab.label_coding``)."""
    kinds = list(dict.fromkeys(kind_of(site.label) for site in kills))
    mutants = [blob for j in range(RESERVE) for kind in kinds
               if source is not None and (blob := source.reserve_for(kind, j)) is not None]
    controls = [blob for j in range(2 * RESERVE)
                if late and source is not None and (blob := source.reserve_control(j))]
    return [(mutants[k] if k < len(mutants) else None,
             controls[k] if k < len(controls) else None) for k in range(_MAX_CONFIRMS)]


def _reserve(variants: VariantSet, blob: Blob | None, scratch: Path) -> Variant | None:
    """A reserve draw (mutant or control) written as the file's variants are."""
    shown = variants.mutants or variants.controls
    return None if blob is None or not shown else _written(blob, shown[0].path, scratch)


def _marks_by_kind(mutants: Sequence[_Site], verdicts: Mapping[str, Verdict]
                   ) -> dict[str, str | None]:
    """One mark per kind of mutation (``mutants.kind_of``): its draws' common mark, or
    None where they differ."""
    marks: dict[str, set[str]] = {}
    for site in mutants:
        marks.setdefault(kind_of(site.label), set()).add(_mark(verdicts[site.label]))
    return {kind: next(iter(m)) if len(m) == 1 else None for kind, m in marks.items()}


def _mark(verdict: Verdict) -> str:
    """``T`` where the check held on a mutant, ``F`` where it rejected it: said False,
    failed, timed out or printed no verdict. A run that errors on a mutant is a rejection
    as it is on the real workspace (a failed check): were ``?`` a verdict of its own, one
    check could exit non-zero on a chosen subset of the mutants and read as as many
    "distinct" pieces of evidence as it has subsets."""
    return "T" if verdict is True else "F"


def _flaky(name: str, windowed: bool) -> str:
    if windowed:
        return (f"its verdict depends on {name} past the first strength.max_mb "
                "(after decompression), the window strength varies")
    return (f"it failed on a control (a variant of {name} with the same answer: records "
            "re-ordered or re-encoded, irrelevant ones dropped), so it checks the bytes, "
            "the time or the file's metadata, not what the question is about")


def _late(name: str, control: str, k: int, repeats: int) -> str:
    return (f"{control} of {name}, a control run after the kill, failed it (confirmation "
            f"{k} of {repeats}): its verdict follows when it runs (the clock, a fresh "
            "file's change time) or which controls it was shown (a gate on a hash of "
            "what it reads), not the answer")


def _weak(result: CheckResult, why: str) -> CheckResult:
    return replace(result, discriminating=False, killed_by=(), evidence="",
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

