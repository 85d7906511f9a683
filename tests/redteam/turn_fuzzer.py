"""The hostile-turn fuzzer: generated turns through the real environment, every invariant checked.

``fuzz(seed, turns)`` plays episodes of `hostile_turns.TurnGenerator` turns through
``RecordEpisode(ForcedAnswer(EmissionGate(VeraEnv)))`` and a bare ``VeraEnv`` in turn
(bubblewrap sandbox, strength on, an ``llm`` task judged by a judge that sometimes
replies without a verdict and sometimes cannot be reached), with the same ``Attempt``
lifecycle ``vera-env eval`` uses, and checks after every step:

* ``step()`` returned (an exception is a failure, whatever its type);
* the observation is valid UTF-8 and inside ``observation_space``; the ``info`` has
  every key, encodes as strict JSON (no NaN) in UTF-8; the reward is finite;
* the step took no longer than its bound: ``PARSE_BOUND_S`` for a turn that ran
  nothing; for one that ran a command or checks, the package's worst-case step time
  (``vera_env.verification.rewards.step_bound_s``: ``timeout_s + n_checks x
  check_timeout_s + strength.deadline_max_s``, the formula the README states) plus
  ``KILL_SLACK_S`` for the sandbox's kill latency;
* a turn with an invisible character was rejected, and ran nothing;
* ``unscorable`` only after a fault the model cannot cause (the judge was unreachable);
* a released answer holds no invisible character;

after every episode: the attempt is not ``error`` and its JSON line round-trips, the
task's data is byte-identical, no process the turns started in the background survives;
and after ``close()``: every workspace is gone, no file was written outside one.
Failures are collected, not raised, each naming the seed and the turn index.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hostile_turns import BG_MARK, HOST_MARK, HostileTurn, TurnGenerator

from vera_env import info as keys
from vera_env.env import VeraEnv
from vera_env.errors import PolicyError
from vera_env.rollout import Attempt
from vera_env.sandbox import SandboxLimits
from vera_env.tasks import Task
from vera_env.verification.grading import RubricJudge
from vera_env.verification.rewards import RewardConfig, step_bound_s
from vera_env.wire.text import invisible_problem
from vera_env.wrappers import RecordEpisode, apply_wrappers

__all__ = ["KILL_SLACK_S", "LIMITS", "PARSE_BOUND_S", "FuzzReport", "fuzz", "spawn_bound_s"]

LIMITS = SandboxLimits(timeout_s=3, check_timeout_s=2, memory_mb=512, max_processes=64,
                       max_workspace_mb=64, max_output_bytes=2 * 2**20)
PARSE_BOUND_S = 2.0       # a turn that runs nothing is pure Python on <= 50k characters
KILL_SLACK_S = 5.0        # the sandbox's kill latency for the runs cut at a bound
_MAX_STEPS = 24


def spawn_bound_s(limits: SandboxLimits, config: RewardConfig, n_checks: int) -> float:
    """The bound asserted for a step that ran a command or checks: the package's
    worst-case step time for ``n_checks`` checks, plus ``KILL_SLACK_S``."""
    return step_bound_s(limits, config, n_checks) + KILL_SLACK_S


@dataclass
class FuzzReport:
    """What one fuzz run did and what it found."""

    seed: int
    turns: int = 0
    episodes: int = 0
    spawning: int = 0
    rejected: int = 0
    answers: int = 0
    unscorable: int = 0
    judge_outages: int = 0
    slowest_parse_s: float = 0.0
    slowest_spawn_s: float = 0.0
    wall_s: float = 0.0
    failures: list[str] = field(default_factory=list)


class _ChaosJudge:
    """A judge model that gives a verdict, or none, or is unreachable (an outage)."""

    def __init__(self, seed: int) -> None:
        import random

        self.rng = random.Random(seed)
        self.outages = 0

    def chat(self, messages: list[dict[str, str]]) -> Any:
        draw = self.rng.random()
        if draw < 0.15:
            self.outages += 1
            raise PolicyError("judge endpoint down (injected)")
        text = ("I list both: SCORE: 1\nSCORE: 0" if draw < 0.55
                else f"Reasoning.\nSCORE: {self.rng.randint(0, 1)}")
        return type("Reply", (), {"text": text})()


def _tasks(root: Path) -> list[Task]:
    data = root / "data"
    data.mkdir(parents=True)
    (data / "data.tsv").write_text("id\tvalue\n1\t3\n2\t5\n3\t4\n")
    (data / "counts.txt").write_text("".join(f"gene{i}\t{i * 7 % 13}\n" for i in range(40)))
    return [
        Task(id="fuzz-numeric", question="Mean of value?", answer="4",
             grader={"kind": "numeric", "abs_tol": 0.01}, data_dir=data),
        Task(id="fuzz-set", question="Which genes?", answer="TP53, BRCA1",
             grader={"kind": "set"}, data_dir=data),
        Task(id="fuzz-llm", question="Which organism?", answer="E. coli",
             grader={"kind": "llm", "rubric": "Score 1.0 if the answer names E. coli."},
             data_dir=data),
    ]


def _hashes(root: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.iterdir())}


def _processes_with(marker: bytes) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as handle:
                    if marker in handle.read():
                        found.append(int(name))
            except OSError:
                continue
    return found


class _Run:
    """One fuzz run's state: the generator, the environments, the report."""

    def __init__(self, seed: int, turns: int, spawn_budget: int, root: Path) -> None:
        self.report = FuzzReport(seed=seed)
        self.target, self.spawn_budget = turns, spawn_budget
        self.gen = TurnGenerator(seed, max_action_chars=8_000)
        self.judge_model = _ChaosJudge(seed)
        self.data = root / "tasks" / "data"
        tasks = _tasks(root / "tasks")
        self.config = RewardConfig()
        self.envs = []
        for i, names in enumerate((["gate", "forced"], [])):
            base = VeraEnv(tasks, max_steps=_MAX_STEPS, limits=LIMITS,
                           judge=RubricJudge(self.judge_model), max_action_chars=8_000,
                           max_observation_chars=30_000)
            self.envs.append(RecordEpisode(apply_wrappers(base, names), root / f"rec{i}"))
        self.workspaces: list[Path] = []
        self.before = _hashes(self.data)

    def fail(self, where: str, message: str, turn: HostileTurn | None = None) -> None:
        shown = f" turn={turn.kind}:{turn.text[:160]!r}" if turn else ""
        self.report.failures.append(f"seed={self.report.seed} {where}: {message}{shown}")

    def play(self) -> FuzzReport:
        started = time.perf_counter()
        try:
            while self.report.turns < self.target:
                self.episode(self.envs[self.report.episodes % len(self.envs)])
        finally:
            for env in self.envs:
                env.close()
        self.after_close()
        self.report.wall_s = time.perf_counter() - started
        return self.report

    def episode(self, env: Any) -> None:
        report = self.report
        attempt = Attempt.start(seed=report.episodes)
        outages_before = self.judge_model.outages
        with attempt.capturing():
            obs, info = env.reset(seed=report.episodes)
            attempt.begin(info)
            self.workspaces.append(env.unwrapped.workspace.path)
            ended = False
            while not ended:
                at = f"turn {report.turns}"
                allowed = report.spawning < self.spawn_budget * (report.turns + 1) / self.target
                turn = self.gen.next(spawn_ok=allowed)
                clock = time.perf_counter()
                step = env.step(turn.text)
                self.check_step(at, turn, step, time.perf_counter() - clock,
                                self.judge_model.outages > outages_before)
                report.turns += 1
                ended = attempt.add_step(turn.text, *step)
        attempt.finish()
        report.episodes += 1
        self.check_episode(attempt, env)

    def check_step(self, at: str, turn: HostileTurn, step: tuple, elapsed_s: float,
                   outage: bool) -> None:
        obs, reward, _, _, info = step
        report = self.report
        spawned = bool(info[keys.COMMAND_OUTPUT] or info[keys.CHECKS])
        report.spawning += spawned
        report.rejected += bool(info[keys.ERROR])
        try:
            obs.encode("utf-8")
            json.dumps(info, allow_nan=False, ensure_ascii=False).encode("utf-8")
        except (UnicodeEncodeError, ValueError, TypeError) as exc:
            self.fail(at, f"observation/info not UTF-8 JSON: {exc}", turn)
        if not self.envs[0].observation_space.contains(obs):
            self.fail(at, f"observation of {len(obs)} chars outside the space", turn)
        if set(keys.INFO_KEYS) - set(info) or not math.isfinite(reward):
            self.fail(at, f"info keys {sorted(set(keys.INFO_KEYS) - set(info))}, "
                          f"reward {reward}", turn)
        bound = (spawn_bound_s(LIMITS, self.config, len(info[keys.CHECKS])) if spawned
                 else PARSE_BOUND_S)
        if elapsed_s > bound:
            self.fail(at, f"step took {elapsed_s:.2f}s, over its bound {bound:.1f}s", turn)
        if spawned:
            report.slowest_spawn_s = max(report.slowest_spawn_s, elapsed_s)
        else:
            report.slowest_parse_s = max(report.slowest_parse_s, elapsed_s)
        if turn.kind == "invisible" and (spawned or "invisible or control character"
                                         not in info[keys.ERROR]):
            self.fail(at, f"invisible character not rejected: {info[keys.ERROR][:120]!r}", turn)
        if info[keys.UNSCORABLE] and not outage:
            self.fail(at, "unscorable without an infrastructure fault: "
                          f"{(info[keys.ERROR] or info[keys.GRADE_DETAIL])[:200]!r}", turn)
        report.answers += bool(info[keys.ANSWER]) and bool(info[keys.GRADE_DETAIL])
        report.unscorable += bool(info[keys.UNSCORABLE])
        report.judge_outages += outage and bool(info[keys.UNSCORABLE])
        if info[keys.ANSWER] and invisible_problem(info[keys.ANSWER]):
            self.fail(at, f"released answer holds an invisible character: "
                          f"{info[keys.ANSWER][:80]!r}", turn)

    def check_episode(self, attempt: Attempt, env: Any) -> None:
        where = f"episode {self.report.episodes - 1}"
        if attempt.status == "error":
            self.fail(where, f"attempt ended 'error': {attempt.error[:300]}")
        try:
            if Attempt.from_json(attempt.to_json().encode("utf-8").decode()) != attempt:
                self.fail(where, "attempt JSON does not round-trip")
        except (UnicodeError, ValueError) as exc:
            self.fail(where, f"attempt JSON unusable: {exc}")
        transcript = env.episode_dir / "transcript.jsonl"
        try:
            for line in transcript.read_text(encoding="utf-8").splitlines():
                json.loads(line)
        except (OSError, UnicodeError, ValueError) as exc:
            self.fail(where, f"recorded transcript unreadable: {exc}")
        if _hashes(self.data) != self.before:
            self.fail(where, "the task's source data changed")
        leaked = _processes_with(BG_MARK.encode())
        if leaked:
            self.fail(where, f"background processes survived their command: {leaked}")
            for pid in leaked:
                os.kill(pid, 9)

    def after_close(self) -> None:
        left = [str(p) for p in self.workspaces if p.exists()]
        if left:
            self.fail("close", f"{len(left)} workspace(s) left behind, e.g. {left[0]}")
        places = {Path(tempfile.gettempdir()), Path.home(), Path.cwd(),
                  *(p.parent for p in self.workspaces), *(p.parent.parent for p in self.workspaces)}
        written = [str(p / HOST_MARK) for p in places if (p / HOST_MARK).exists()]
        if written:
            self.fail("close", f"a turn wrote outside its workspace: {written}")


def fuzz(seed: int, turns: int, *, spawn_budget: int | None = None,
         root: Path | None = None) -> FuzzReport:
    """Play at least ``turns`` hostile turns; return the report with every failure.

    Args:
        seed: Seeds the turns, the judge and the episodes: the same seed replays.
        turns: Turns to play (the last episode is finished, so a few more).
        spawn_budget: Turns that may run processes; default 4% of ``turns``, at most 400.
        root: Where tasks and recordings go; a temporary directory by default.
    """
    budget = spawn_budget if spawn_budget is not None else min(400, turns // 25)
    if root is not None:
        return _Run(seed, turns, budget, root).play()
    with tempfile.TemporaryDirectory(prefix="vera-fuzz-") as tmp:
        return _Run(seed, turns, budget, Path(tmp)).play()
