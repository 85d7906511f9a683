"""VeraEnv: the Gymnasium environment. It coordinates; it parses, scores and spawns nothing.

One step takes the model's raw turn text. The turn's command runs in the sandbox, its
node's checks run read-only there, and the reward is what the harness measured — the
model can never set its own score. Parsing lives in ``protocol``/``answers``, scoring in
``checks``/``rewards``/``grading``, process spawning in ``sandbox``; this module only
decides the order of things and what the model is told.

What a turn may do depends on the episode's phase (``vera_env.phase``): a free turn,
an answer-only turn in the last ``forced_reserve`` steps, or the one extra ask after
the budget; how each is played is ``vera_env.turns``, and every reward number comes
from the episode's ``RewardLedger`` (``vera_env.verification.rewards``). The env moves
the phase itself at the end of each step: a wrapper that forced the next turn after
``step`` returned re-entered the env and had the step's observation rendered twice.

Model misbehaviour is a value: a malformed turn costs a step, earns a small format
penalty, and comes back as ``info["error"]`` plus a nudge in the next observation —
``step()`` never raises because of model text. A broken setup raises; an infrastructure
fault mid-episode (the sandbox failed) ends the episode with ``info["unscorable"]`` set,
because a fake 0 would be read as the model's failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import gymnasium as gym

from vera_env import info as keys
from vera_env.episode import Episode, Turn, open_strength
from vera_env.errors import ResetNeeded, SandboxError
from vera_env.observation.budget import clip_middle
from vera_env.observation.prompts import (
    OBSERVATION_VARIANTS,
    ObservationVariant,
    render_forced_prompt,
    render_step_prompt,
)
from vera_env.observation.spaces import FreeText
from vera_env.observation.state import AnalysisState
from vera_env.phase import Event, Phase, advance
from vera_env.records import RewardPartsRecord
from vera_env.sandbox import Backend, Sandbox, SandboxConfig, SandboxLimits, Workspace, make_sandbox
from vera_env.sandbox.reaper import RootLease
from vera_env.tasks import OutcomeListener, Task, TaskSource, load_tasks
from vera_env.tasks.unreferenced import announce_unreferenced
from vera_env.turns import GATE_NUDGE, TurnRules, play_turn
from vera_env.verification.grading import Judge
from vera_env.verification.rewards import RewardConfig, RewardLedger
from vera_env.wire.answers import ANSWER_PREFIX
from vera_env.wire.text import safe_json

__all__ = ["GATE_NUDGE", "PREFILL", "VeraEnv", "vera_base"]

PREFILL = ANSWER_PREFIX + " "
"""``info["prefill"]`` while the next turn is answer-only (why: ``ForcedAnswer``)."""


class VeraEnv(gym.Env[str, str]):
    """An analysis task as a text environment with harness-executed reward.

    Args:
        tasks: ``"builtin"``, a suite folder, a JSONL file, a BioMysteryBench folder, a
            list of ``Task``, or a ``TaskSource``.
        max_steps: Step budget; the episode truncates when it is spent.
        reward: Reward weights and bounds.
        sandbox: ``"auto"``, ``"bwrap"``, ``"local"`` or a ``Sandbox`` instance.
        limits: Sandbox limits (timeouts, memory, output caps).
        sandbox_config: Toolbox and identity of a sandbox built from a name. Workspaces
            go under a directory owned by this process (``sandbox.reaper``), so those
            of a process that died (a vector-env or Ray worker) are removed later.
        state_budget: Tokens allowed for the rendered analysis graph.
        max_observation_chars: Observations are middle-clipped to this length.
        max_action_chars: Longer turns are rejected with an error.
        render_mode: ``"ansi"`` (``render`` returns the observation) or ``"human"``.
        judge: Grades ``llm``-graded tasks (``grading.RubricJudge``); without one their
            answers are unscorable.
        observation_variant: How observations tell the rules: ``"full"`` (the default)
            or ``"compact"`` (short rules without placeholders, for small models; see
            ``observation.prompts``).
        forced_reserve: The last this-many steps of the budget are answer-only turns
            (phase ``forced``), and a budget spent without an answer gets one extra ask
            (phase ``extra``); 0, the default, forces nothing. ``ForcedAnswer`` sets it.

    Attributes:
        require_verified_leaf: The emission gate, off by default. While it is on and
            budget remains, an answer in a free turn is released only if some leaf of
            the graph (after the turn's own node is recorded) has a check that earns
            (``AnalysisState.leaf_verified``); otherwise it is withheld with
            ``GATE_NUDGE``, the turn's command and node still take effect, and
            ``info["gated"]`` counts it. The last step of the budget and answer-only
            turns are never gated, so the gate cannot cost the model its answer; nor is
            a task whose checks cannot earn (no reference: `vera_env.tasks.unreferenced`).
            It outlives ``reset`` (a setting, not episode state); ``EmissionGate`` sets it.
        forced_reserve: As the argument; a setting too, checked when set.

    Example:
        >>> import gymnasium as gym, vera_env
        >>> env = gym.make("vera_env/Vera-v0", tasks="builtin", max_steps=20)
        >>> obs, info = env.reset(seed=0)
        >>> obs, reward, terminated, truncated, info = env.step("<command>ls</command>")
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 1}
    observation_space: FreeText
    action_space: FreeText

    def __init__(self, tasks: str | Sequence[Task] | TaskSource = "builtin", *,
                 max_steps: int = 50, reward: RewardConfig | None = None,
                 sandbox: str | Sandbox = "auto", limits: SandboxLimits | None = None,
                 sandbox_config: SandboxConfig | None = None, state_budget: int = 4000,
                 max_observation_chars: int = 100_000, max_action_chars: int = 50_000,
                 render_mode: str | None = None, judge: Judge | None = None,
                 observation_variant: ObservationVariant = "full",
                 forced_reserve: int = 0) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, "
                             f"got {render_mode!r}")
        if observation_variant not in OBSERVATION_VARIANTS:
            raise ValueError(f"observation_variant must be one of {list(OBSERVATION_VARIANTS)}, "
                             f"got {observation_variant!r}")
        self.observation_variant = observation_variant
        self.tasks = tasks if isinstance(tasks, TaskSource) else load_tasks(tasks)
        self.max_steps = max_steps
        self.reward_config = reward or RewardConfig()
        if self.reward_config.strength:  # its checks would earn nothing: say so, once
            announce_unreferenced(self.tasks)
        self.limits = limits or SandboxLimits()
        self._lease: RootLease | None = None
        self.sandbox: Sandbox
        if isinstance(sandbox, str):  # make_sandbox refuses a name it does not know
            self._lease = RootLease(sandbox_config)
            self.sandbox = make_sandbox(cast(Backend, sandbox), self.limits,
                                        config=self._lease.config)
        else:
            self.sandbox = sandbox
        self.state_budget = state_budget
        self.render_mode = render_mode
        self.judge = judge
        self.observation_space = FreeText(max_observation_chars)
        self.action_space = FreeText(max_action_chars)
        self._episode: Episode | None = None
        self.require_verified_leaf = False
        self.forced_reserve = forced_reserve
        self._last_obs = ""

    # ----- the public seams (wrappers use these, never private state) -----

    @property
    def task(self) -> Task:
        """The current episode's task."""
        return self._require().task

    @property
    def state(self) -> AnalysisState:
        """The current episode's analysis graph."""
        return self._require().state

    @property
    def steps_taken(self) -> int:
        """Steps taken in this episode."""
        return self._require().steps

    @property
    def steps_left(self) -> int:
        """Steps left in the budget."""
        return max(0, self.max_steps - self._require().steps)

    @property
    def workspace(self) -> Workspace:
        """The current episode's workspace."""
        return self._require().workspace

    @property
    def forced_reserve(self) -> int:
        """Final steps of the budget that demand an answer (see the class docstring)."""
        return self._forced_reserve

    @forced_reserve.setter
    def forced_reserve(self, reserve: int) -> None:
        if not isinstance(reserve, int) or isinstance(reserve, bool) \
                or not 0 <= reserve <= self.max_steps:
            raise ValueError(f"forced_reserve must be an int from 0 to max_steps="
                             f"{self.max_steps}, got {reserve!r}")
        self._forced_reserve = reserve

    @property
    def phase(self) -> Phase:
        """The current episode's phase (``vera_env.phase``)."""
        return self._require().phase

    def force_answer(self) -> None:
        """Make the next ``step`` an answer-only turn (phase ``forced``; asked per turn).

        Nothing runs and no node is recorded in it; a reply that is a command, a stub or
        only the echoed prefix is refused with a nudge but no penalty; the emission gate
        (``require_verified_leaf``) does not apply. It takes a step of the budget.

        Raises:
            ResetNeeded: The episode has ended.
        """
        ep = self._require()
        ep.phase = advance(ep.phase, Event.FORCE)

    def grant_extra_ask(self) -> None:
        """Grant the one extra answer-only turn after the budget ended without an answer.

        It takes no step of the budget; an answer it brings is marked ``answer_forced``;
        the episode ends after it whatever it brings.

        Raises:
            ResetNeeded: The episode is not in phase ``spent`` (it was answered or
                faulted, budget is left, or the extra ask was used).
        """
        ep = self._require()
        ep.phase = advance(ep.phase, Event.GRANT_EXTRA)

    def observe(self) -> str:
        """The observation for the current phase; ``render`` shows it from then on.

        The env renders every observation here, so what ``reset``/``step`` return and
        what ``render`` shows cannot differ: a free turn (or an ended episode) gets the
        step prompt; an answer-only turn (phase ``forced`` or ``extra``) gets the forced
        prompt — the question, the bounded analysis and the demand for one answer line,
        without the workspace or the window, since nothing will run. A caller that
        changes the phase (``force_answer``, ``grant_extra_ask``) calls it for the
        observation of the phase it set, instead of rendering one of its own.

        Raises:
            ResetNeeded: Called before ``reset``.
        """
        ep = self._require()
        if ep.phase.answer_only:
            reason = ("Your step budget is exhausted." if ep.phase is Phase.EXTRA
                      else f"You have used {ep.steps} of {self.max_steps} steps.")
            obs = render_forced_prompt(ep.task.question, ep.state,
                                       state_budget=self.state_budget, reason=reason,
                                       nudge=ep.nudge, variant=self.observation_variant)
        else:
            obs = render_step_prompt(ep.task.question, ep.workspace.listing(), ep.state,
                                     ep.recent, state_budget=self.state_budget,
                                     nudge=ep.nudge, steps_left=self.steps_left,
                                     variant=self.observation_variant)
        self._last_obs = clip_middle(obs, self.observation_space.max_length)
        return self._last_obs

    # ----- gymnasium API -----

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode on ``options["task_id"]`` or a task drawn with ``seed``.

        Raises:
            ValueError: Unknown option keys.
            KeyError: Unknown task id.
            SandboxError: The workspace could not be staged.
        """
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = set(options) - {"task_id"}
        if unknown:
            raise ValueError(f"unknown reset options {sorted(unknown)}; expected 'task_id'")
        self._close_episode()
        task_id = options.get("task_id")
        task = self.tasks.get(task_id) if task_id else self.tasks.pick(self.np_random)
        files = task.data_files()
        workspace = self.sandbox.stage(files)
        self._episode = Episode(task=task, workspace=workspace,
                                ledger=RewardLedger(self.reward_config))
        if (strength := self.reward_config.strength) is not None:
            self._episode.strength = open_strength(task, files, workspace, self.sandbox,
                                                   strength, self.limits)
        self._steer(self._episode)
        return self.observe(), self._info(RewardPartsRecord())

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Take one turn of raw model text, played as the episode's phase allows.

        Raises:
            ResetNeeded: Called before ``reset`` or after the episode ended.
            TypeError: ``action`` is not a string.
        """
        ep = self._require()
        if ep.phase.ended:
            raise ResetNeeded("the episode has ended; call reset()")
        if not isinstance(action, str):
            raise TypeError(f"action must be str (the model's turn), got {type(action).__name__}")
        turn = Turn(phase=ep.phase)
        ep.steps += int(turn.phase.counts_step)
        ep.nudge = ""
        try:
            play_turn(ep, action, turn, TurnRules(
                max_action_chars=self.action_space.max_length,
                check_timeout_s=self.limits.check_timeout_s, max_steps=self.max_steps,
                gate=self.require_verified_leaf, strength=self.reward_config.strength is not None,
                judge=self.judge))
        except SandboxError as exc:
            ep.unscorable = True
            turn.error = f"sandbox fault (not the model's): {exc}"
        ep.phase = advance(ep.phase, self._outcome(ep))
        if ep.phase.ended and isinstance(self.tasks, OutcomeListener):  # e.g. a Curriculum
            self.tasks.update(ep.task.id, None if ep.unscorable
                              else ep.correct if ep.answer else False)
        self._steer(ep)
        return self._finish_step(ep, turn)

    def render(self) -> str | None:
        """``ansi``: the last observation the model was given; ``human``: print it.

        Every observation comes from ``observe``, so under ``ForcedAnswer`` this is the
        forced prompt the model answered, not a step prompt it never saw.
        """
        if self.render_mode == "human":
            print(self._last_obs)
        return self._last_obs if self.render_mode == "ansi" else None

    def close(self) -> None:
        """Kill anything running and remove the workspace."""
        self._close_episode()
        self.sandbox.close()
        if self._lease:
            self._lease.release()
        super().close()

    # ----- internals -----

    def _require(self) -> Episode:
        if self._episode is None:
            raise ResetNeeded("call reset() before using the environment")
        return self._episode

    def _outcome(self, ep: Episode) -> Event:
        """What the turn just played did to the episode's phase."""
        if ep.answer:
            return Event.ANSWERED
        if ep.unscorable:
            return Event.FAULT
        return Event.BUDGET_SPENT if ep.steps >= self.max_steps else Event.TURN_ENDED

    def _steer(self, ep: Episode) -> None:
        """Forcing (``forced_reserve``): the next turn is answer-only in the budget's
        last steps, and a spent budget gets its one extra ask (the phase is the
        episode's, so each episode gets its own)."""
        if not self.forced_reserve:
            return
        if ep.phase is Phase.SPENT:
            ep.phase = advance(ep.phase, Event.GRANT_EXTRA)
        elif ep.phase is Phase.OPEN and self.steps_left <= self.forced_reserve:
            ep.phase = advance(ep.phase, Event.FORCE)

    def _finish_step(self, ep: Episode, turn: Turn
                     ) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if turn.error:
            ep.nudge = f"your last turn was rejected: {turn.error}"
        if turn.notes:
            ep.nudge = "; ".join(filter(None, [ep.nudge, *turn.notes]))
        parts = ep.ledger.step(verification=turn.verification, correctness=turn.correctness,
                               rejected=bool(turn.error), penalised=turn.phase.penalised,
                               unscorable=ep.unscorable)
        terminated = bool(ep.answer)
        truncated = ep.phase.ended and not terminated
        return self.observe(), parts.total, terminated, truncated, self._info(parts, turn)

    def _info(self, parts: RewardPartsRecord, turn: Turn | None = None) -> dict[str, Any]:
        ep = self._require()
        turn = turn or Turn()
        info: dict[str, Any] = safe_json({  # valid UTF-8 whatever a file or output holds
            keys.TASK_ID: ep.task.id, keys.QUESTION: ep.task.question,
            keys.STEP: ep.steps, keys.STEPS_LEFT: self.steps_left, keys.ERROR: turn.error,
            keys.NUDGE: ep.nudge, keys.COMMAND_OUTPUT: turn.output,
            keys.NODE: turn.node.to_dict() if turn.node else {},
            keys.CHECKS: [c.to_dict() for c in turn.checks], keys.ANSWER: ep.answer,
            keys.ANSWER_FORCED: turn.answer_forced, keys.CORRECT: ep.correct,
            keys.GRADE_DETAIL: turn.grade_detail, keys.REWARD_PARTS: parts.to_dict(),
            keys.ANSWER_PHASE: "" if ep.answer_phase is None else ep.answer_phase.value,
            keys.VERIFICATION_TOTAL: ep.ledger.verification_total,
            keys.UNSCORABLE: ep.unscorable, keys.FORCING: ep.phase.answer_only,
            keys.PREFILL: PREFILL if ep.phase.answer_only else "",
            keys.GATED: ep.gated,
        })
        return info

    def _close_episode(self) -> None:
        if self._episode is not None:
            self._episode.close()
            self._episode = None


def vera_base(env: gym.Env[Any, Any]) -> VeraEnv:
    """The ``VeraEnv`` under ``env``'s wrappers (the wrappers steer its episode phases).

    Raises:
        TypeError: ``env`` does not wrap a ``VeraEnv``.
    """
    base = env.unwrapped
    if not isinstance(base, VeraEnv):
        raise TypeError(f"expected a VeraEnv, possibly wrapped; got {type(base).__name__}")
    return base
