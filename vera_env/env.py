"""VeraEnv: the Gymnasium environment. It coordinates; it parses, scores and spawns nothing.

One step takes the model's raw turn text. The turn's command runs in the sandbox, its
node's checks run read-only there, and the reward is what the harness measured — the
model can never set its own score. Parsing lives in ``protocol``/``answers``, scoring in
``checks``/``rewards``/``grading``, process spawning in ``sandbox``; this module only
decides the order of things and what the model is told.

Model misbehaviour is a value: a malformed turn costs a step, earns a small format
penalty, and comes back as ``info["error"]`` plus a nudge in the next observation —
``step()`` never raises because of model text. A broken setup raises; an infrastructure
fault mid-episode (the sandbox failed) ends the episode with ``info["unscorable"]`` set,
because a fake 0 would be read as the model's failure.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import gymnasium as gym

from vera_env import info as keys
from vera_env.wire.answers import (ANSWER_PREFIX, answer_is_usable, extract_answer, strip_markup,
                              strip_reasoning)
from vera_env.observation.budget import clip_middle
from vera_env.verification.checks import CheckResult, run_checks
from vera_env.episode import Episode, Turn
from vera_env.errors import GraderError, ResetNeeded, SandboxError
from vera_env.verification.grading import Judge, grade
from vera_env.observation.prompts import (OBSERVATION_VARIANTS, ObservationVariant,
                                          render_step_prompt)
from vera_env.wire.protocol import Emission, parse_emission
from vera_env.verification.rewards import RewardConfig, RewardParts, node_verification
from vera_env.sandbox import Sandbox, SandboxConfig, SandboxLimits, Workspace, make_sandbox
from vera_env.sandbox.reaper import RootLease
from vera_env.observation.spaces import FreeText
from vera_env.observation.state import AnalysisState, Node
from vera_env.tasks import Task, TaskSource, load_tasks

__all__ = ["AnswerGate", "VeraEnv"]

AnswerGate = Callable[[AnalysisState], str]
"""Called before an answer is released: "" releases it, any other text withholds it
and becomes the nudge. Registered by wrappers such as ``EmissionGate``."""

_UNUSABLE_ANSWER = ("your FINAL ANSWER was not usable ({why}); give the value, name or "
                    "label the question asks for, not a command or a placeholder")


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

    Example:
        >>> import gymnasium as gym, vera_env
        >>> env = gym.make("vera_env/Vera-v0", tasks="builtin", max_steps=20)
        >>> obs, info = env.reset(seed=0)
        >>> obs, reward, terminated, truncated, info = env.step("<command>ls</command>")
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 1}

    def __init__(self, tasks: str | Sequence[Task] | TaskSource = "builtin", *,
                 max_steps: int = 50, reward: RewardConfig | None = None,
                 sandbox: str | Sandbox = "auto", limits: SandboxLimits | None = None,
                 sandbox_config: SandboxConfig | None = None, state_budget: int = 4000,
                 max_observation_chars: int = 100_000, max_action_chars: int = 50_000,
                 render_mode: str | None = None, judge: Judge | None = None,
                 observation_variant: ObservationVariant = "full") -> None:
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
        self.limits = limits or SandboxLimits()
        self._lease = RootLease(sandbox_config) if isinstance(sandbox, str) else None
        self.sandbox = (make_sandbox(sandbox, self.limits, config=self._lease.config)
                        if self._lease else sandbox)
        self.state_budget = state_budget
        self.render_mode = render_mode
        self.judge = judge
        self.observation_space = FreeText(max_observation_chars)
        self.action_space = FreeText(max_action_chars)
        self._episode: Episode | None = None
        self._gates: list[AnswerGate] = []
        self._last_obs = ""

    # ----- public read-only views (wrappers use these, never private state) -----

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

    def add_answer_gate(self, gate: AnswerGate) -> None:
        """Consult ``gate`` before releasing an answer while budget remains."""
        self._gates.append(gate)

    def remove_answer_gate(self, gate: AnswerGate) -> None:
        """Stop consulting ``gate``."""
        if gate in self._gates:
            self._gates.remove(gate)

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
        workspace = self.sandbox.stage(task.data_files())
        self._episode = Episode(task=task, workspace=workspace)
        return self._observe(), self._info(RewardParts())

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Take one turn of raw model text.

        Raises:
            ResetNeeded: Called before ``reset`` or after the episode ended.
            TypeError: ``action`` is not a string.
        """
        ep = self._require()
        mode, ep.answer_only = ep.answer_only, ""
        if mode == "extra":
            ep.done = False  # the one extra ask re-opens the truncated episode
        ep = self._begin_step(action, count=mode != "extra")
        ep.nudge = ""
        turn = Turn(forced_extra=mode == "extra")
        try:
            if mode:
                self._play_answer_only(ep, action, turn)
            else:
                self._play(ep, action, turn)
        except SandboxError as exc:
            ep.unscorable, ep.done = True, True
            turn.error = f"sandbox fault (not the model's): {exc}"
        return self._finish_step(ep, turn, count_penalty=not mode)

    def require_answer_next(self, *, extra: bool = False) -> None:
        """Make the next ``step`` an answer-only turn: nothing runs, no node is recorded.

        Used when answering is forced (``ForcedAnswer``). Going through ``step`` keeps
        every wrapper in the chain informed. In an answer-only turn reasoning blocks are
        stripped before extraction; a reply that is a command, a stub or only the echoed
        prefix is refused with a nudge; answer gates are not consulted (a forced answer
        is released).

        Args:
            extra: The next turn is the one extra ask after the budget ended without an
                answer. Allowed once; it takes no step of the budget, and an answer
                obtained this way is marked ``answer_forced``.

        Raises:
            ResetNeeded: ``extra`` asked when the episode did not end by running out of
                budget without an answer, or asked twice.
        """
        ep = self._require()
        if extra and not ep.truncated_without_answer:
            raise ResetNeeded("an extra answer turn is allowed only once, after the budget "
                              "ended without an answer")
        if not extra and ep.done:
            raise ResetNeeded("the episode has ended; call reset()")
        if extra:
            ep.truncated_without_answer = False
        ep.answer_only = "extra" if extra else "forced"

    def render(self) -> str | None:
        """``ansi``: the last observation; ``human``: print it."""
        if self.render_mode == "human":
            print(self._last_obs)
            return None
        if self.render_mode == "ansi":
            return self._last_obs
        return None

    def close(self) -> None:
        """Kill anything running and remove the workspace."""
        self._close_episode()
        closer = getattr(self.sandbox, "close", None)
        if callable(closer):
            closer()
        if self._lease:
            self._lease.release()
        super().close()

    # ----- internals -----

    def _require(self) -> Episode:
        if self._episode is None:
            raise ResetNeeded("call reset() before using the environment")
        return self._episode

    def _begin_step(self, action: Any, *, count: bool = True) -> Episode:
        ep = self._require()
        if ep.done:
            raise ResetNeeded("the episode has ended; call reset()")
        if not isinstance(action, str):
            raise TypeError(f"action must be str (the model's turn), got {type(action).__name__}")
        ep.steps += int(count)
        return ep

    def _play_answer_only(self, ep: Episode, reply: str, turn: Turn) -> None:
        # Only text after the answer prefix counts: asked to commit, a model that keeps
        # acting ("I need to identify the bacterium ... <tool_call>") has not answered.
        candidate = strip_markup(extract_answer(strip_reasoning(reply)))
        if answer_is_usable(candidate):
            self._release(ep, candidate, turn)
            return
        why = (f"no '{ANSWER_PREFIX}' line found" if not candidate.strip()
               else f"got {candidate[:80]!r}")
        turn.error = _UNUSABLE_ANSWER.format(why=why)

    def _play(self, ep: Episode, action: str, turn: Turn) -> None:
        if len(action) > self.action_space.max_length:
            turn.error = (f"your turn was {len(action)} characters; the limit is "
                          f"{self.action_space.max_length}. Put long scripts in a file "
                          f"written by a short command")
            return
        emission = parse_emission(strip_reasoning(action))
        if emission.error:
            turn.error = emission.error
            return
        if emission.command:
            result = ep.workspace.run(emission.command)
            turn.output = result.as_tool_output()
            ep.recent.append((emission.command, turn.output))
        if emission.declares_node:
            self._declare(ep, emission, turn)
        if emission.answer:
            self._offer_answer(ep, emission.answer, turn)

    def _declare(self, ep: Episode, emission: Emission, turn: Turn) -> None:
        commands = tuple(spec.command for spec in emission.checks)
        duplicate = ep.state.duplicate_of(emission.summary, commands)
        if duplicate:
            turn.notes.append(f"node not recorded: it repeats {duplicate}. Build on it "
                              f"(parents={duplicate}) instead of re-declaring it")
            return
        results = run_checks(emission.checks, ep.workspace,
                             timeout_s=self.limits.check_timeout_s)
        results = self._assess_strength(ep, results, emission.artifact)
        turn.checks = results
        malformed = [r for r in results if r.malformed]
        key = " ".join(emission.summary.lower().split()) or emission.kind
        if malformed and key not in ep.rewrite_asked:
            ep.rewrite_asked.add(key)
            bad = malformed[0]
            turn.notes.append(f"node not recorded: check {bad.name!r} printed a measurement, "
                              f"not a verdict ({bad.detail}). Rewrite it as a comparison "
                              f"ending in True or False, then declare the node again")
            return
        node = Node(id=ep.state.next_id(), kind=emission.kind,
                    summary=emission.summary or "(no summary given)",
                    artifact=emission.artifact,
                    parents=tuple(p for p in emission.parents if p in ep.state),
                    command=emission.command, checks=results, step=ep.steps)
        ep.state.add(node)
        turn.node = node
        value = node_verification(node, ep.rewarded_nodes, self.reward_config)
        if value > 0:
            ep.rewarded_nodes += 1
        turn.verification = value
        if not emission.checks:
            turn.notes.append(f"{node.id} has no CHECK lines, so nothing verified it")

    def _assess_strength(self, ep: Episode, results: tuple[CheckResult, ...],
                         artifact: str = "") -> tuple[CheckResult, ...]:
        """Mutation testing of passing checks (``vera_env.verification.strength``): a check that
        passes on every mutant of its data earns nothing. Raises ``SandboxError`` on
        an infrastructure fault, which ``step`` records as unscorable."""
        if not self.reward_config.strength:
            return results
        from vera_env.verification import strength  # noqa: PLC0415 - optional stage, loaded on use
        return strength.assess(results, ep.workspace, self.reward_config, self.limits,
                               artifact=artifact)

    def _offer_answer(self, ep: Episode, raw: str, turn: Turn) -> None:
        answer = strip_markup(raw)
        if not answer_is_usable(answer):
            turn.error = _UNUSABLE_ANSWER.format(why=f"got {answer[:80]!r}")
            return
        if ep.steps < self.max_steps:
            for gate in self._gates:
                why = gate(ep.state)
                if why:
                    ep.gated += 1
                    turn.notes.append(f"your answer was withheld: {why}")
                    return
        self._release(ep, answer, turn)

    def _release(self, ep: Episode, answer: str, turn: Turn) -> None:
        ep.answer, ep.done = answer, True
        turn.answer_forced = turn.forced_extra
        try:
            verdict = grade(ep.task, answer, self.judge)
        except GraderError as exc:
            ep.unscorable, turn.grade_detail = True, f"grader fault: {exc}"
            return
        ep.correct = verdict.correct
        ep.unscorable = ep.unscorable or verdict.unscorable
        turn.grade_detail = verdict.detail
        if verdict.correct is not None and not verdict.unscorable:
            turn.correctness = self.reward_config.correctness_weight * float(verdict.correct)

    def _finish_step(self, ep: Episode, turn: Turn, *, count_penalty: bool = True
                     ) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if turn.error:
            ep.nudge = f"your last turn was rejected: {turn.error}"
        if turn.notes:
            ep.nudge = "; ".join(filter(None, [ep.nudge, *turn.notes]))
        penalty = self.reward_config.format_penalty if turn.error and count_penalty else 0.0
        parts = RewardParts(verification=turn.verification, correctness=turn.correctness,
                            penalty=penalty if not ep.unscorable else 0.0)
        ep.verification_total += turn.verification
        terminated = bool(ep.answer)
        out_of_budget = ep.steps >= self.max_steps and not terminated
        if out_of_budget and not ep.unscorable and not turn.forced_extra:
            ep.truncated_without_answer = True
        truncated = out_of_budget or (ep.unscorable and not terminated)
        ep.done = ep.done or terminated or truncated
        obs = self._observe()
        return obs, parts.total, terminated, truncated, self._info(parts, turn)

    def _observe(self) -> str:
        ep = self._require()
        obs = render_step_prompt(ep.task.question, ep.workspace.listing(), ep.state,
                                 ep.recent, state_budget=self.state_budget,
                                 nudge=ep.nudge, steps_left=self.steps_left,
                                 variant=self.observation_variant)
        self._last_obs = clip_middle(obs, self.observation_space.max_length)
        return self._last_obs

    def _info(self, parts: RewardParts, turn: "Turn | None" = None) -> dict[str, Any]:
        ep = self._require()
        turn = turn or Turn()
        return {
            keys.TASK_ID: ep.task.id, keys.QUESTION: ep.task.question,
            keys.STEP: ep.steps, keys.STEPS_LEFT: self.steps_left, keys.ERROR: turn.error,
            keys.NUDGE: ep.nudge, keys.COMMAND_OUTPUT: turn.output,
            keys.NODE: turn.node.to_dict() if turn.node else {},
            keys.CHECKS: [c.to_dict() for c in turn.checks], keys.ANSWER: ep.answer,
            keys.ANSWER_FORCED: turn.answer_forced, keys.CORRECT: ep.correct,
            keys.GRADE_DETAIL: turn.grade_detail, keys.REWARD_PARTS: parts.to_dict(),
            keys.VERIFICATION_TOTAL: ep.verification_total,
            keys.UNSCORABLE: ep.unscorable, keys.FORCING: False, keys.PREFILL: "",
            keys.GATED: ep.gated,
        }

    def _close_episode(self) -> None:
        if self._episode is not None:
            self._episode.workspace.close()
            self._episode = None
