"""Vector environments: ``gymnasium.make_vec`` on one machine, and what it needs here.

Both of Gymnasium's vector envs work with the registered id::

    envs = gym.make_vec("vera_env/Vera-v0", num_envs=8, vectorization_mode="async",
                        wrappers=[EnvInfo], tasks="builtin", max_steps=30)
    obs, infos = envs.reset(seed=0)            # obs: a tuple of 8 str
    obs, rewards, terminated, truncated, infos = envs.step(actions)   # actions: 8 str

Each sub-env owns its sandbox and workspace; ``envs.close()`` closes every sub-env,
which kills its commands and removes its workspace. A sub-env whose worker process
dies without closing (SIGKILL, OOM, or ``close(terminate=True)``, which is SIGTERM)
leaves no process (bwrap dies with its parent) and its directory is removed by the
next environment made on that machine (``vera_env.sandbox.reaper``). After a worker
died in a step, ``AsyncVectorEnv.step_wait`` raises ``EOFError`` and so does every
later ``close()``, which then terminates nobody; ``close_vector_env`` closes it anyway
and removes what the dead workers left at once.

What to know about text envs in a vector env, found while building this:

* **Shared memory.** ``AsyncVectorEnv`` defaults to ``shared_memory=True``, which
  flattens every observation. ``FreeText`` flattens to code points and reads the
  buffer live (``vera_env.observation.spaces``); ``shared_memory=False`` pickles the strings
  through the pipe instead. Both give the same observations.
* **Autoreset.** The default ``NEXT_STEP`` mode resets a finished sub-env on the *next*
  ``step`` call and ignores the action given for it then (reward 0, not terminated, the
  observation is the new episode's first). A text policy must not count that turn: its
  reply was never played. ``SAME_STEP`` resets within the step that finished and puts
  the last observation and info under ``infos["final_obs"]``/``infos["final_info"]``;
  ``DISABLED`` needs ``reset(options={"reset_mask": mask})``. Reset options go to every
  sub-env alike, so a vector env picks tasks by seed, not by ``task_id``.
* **Info batching.** Gymnasium batches a dict-valued info key recursively and any
  other value into an array. ``info["node"]`` is always a dict (``{}`` when the turn
  recorded no node), so it batches like any dict: a sub-env that recorded no node just
  leaves the nested keys' masks False. (``None`` there would crash
  ``SyncVectorEnv.step``; nothing in the package patches Gymnasium.)
* **Info batching changes values.** An array is typed by the first sub-env's value,
  so ``correct=None`` (not graded, or unscorable) in one sub-env reads ``False`` when
  sub-env 0 had a bool — an unscorable episode would look like a wrong answer.
  ``EnvInfo`` adds each sub-env's info unchanged under ``infos["env_info"]``;
  ``env_info(infos, i)`` reads it back.

``play_vector`` drives a vector env with one policy over a list of seeds and returns
one ``Attempt`` per seed, equal to what ``run_episode`` records for the same seed
(timings aside).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal, SupportsFloat

import gymnasium as gym
import numpy as np

from vera_env.policy import Policy
from vera_env.rollout.attempt import Attempt
from vera_env.rollout.pool import EnvSource, env_factory
from vera_env.sandbox.reaper import reap_orphans

__all__ = ["ENV_INFO", "EnvInfo", "close_vector_env", "env_info", "make_vector_env",
           "play_vector"]

ENV_INFO = "env_info"
"""The info key under which ``EnvInfo`` keeps a sub-env's info, unbatched."""


def close_vector_env(envs: gym.vector.VectorEnv, *, timeout_s: float = 60.0) -> list[Path]:
    """Close ``envs`` even when a worker died, then remove what dead workers left.

    Live workers close their envs normally when they can; if any worker is dead or
    does not answer within ``timeout_s``, every worker still alive is terminated.

    Returns:
        The owned roots of dead processes that were removed (``reap_orphans``).
    """
    vector = envs.unwrapped
    if not isinstance(vector, gym.vector.AsyncVectorEnv):
        envs.close()
    elif not all(p.is_alive() for p in vector.processes):
        _terminate(vector, timeout_s)  # its close() would wait on the dead pipe, then raise
    else:
        try:
            envs.close(timeout=timeout_s)  # a timeout terminates every worker itself
        except (EOFError, OSError):
            _terminate(vector, timeout_s)
    return reap_orphans()


def _terminate(vector: gym.vector.AsyncVectorEnv, timeout_s: float) -> None:
    for process in vector.processes:
        if process.is_alive():
            process.terminate()
        process.join(timeout_s)
    for pipe in vector.parent_pipes:
        pipe.close()
    vector.closed = True  # its own close() would raise again from __del__


@dataclass(frozen=True, slots=True)
class _Boxed:
    """Not a dict, so vector info batching stores it as one object."""

    info: dict[str, Any]


class EnvInfo(gym.Wrapper):
    """Adds the step's whole info, unchanged, under ``info["env_info"]``.

    Example:
        >>> import gymnasium as gym, vera_env
        >>> from vera_env.rollout.vector import EnvInfo, env_info
        >>> envs = gym.make_vec("vera_env/Vera-v0", num_envs=2, wrappers=[EnvInfo])
        >>> obs, infos = envs.reset(seed=0)
        >>> env_info(infos, 1)["step"]
        0
        >>> envs.close()
    """

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return obs, {**info, ENV_INFO: _Boxed(dict(info))}

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {**info, ENV_INFO: _Boxed(dict(info))}


def env_info(infos: dict[str, Any], index: int) -> dict[str, Any]:
    """Sub-env ``index``'s info from a vector env's batched ``infos``.

    Raises:
        KeyError: The vector env was not made with ``wrappers=[EnvInfo]``, or sub-env
            ``index`` reported nothing in this call.
    """
    if ENV_INFO not in infos:
        raise KeyError(f"no {ENV_INFO!r} in infos: make the vector env with "
                       "wrappers=[vera_env.rollout.vector.EnvInfo]")
    if not infos[f"_{ENV_INFO}"][index]:
        raise KeyError(f"sub-env {index} reported no info in this call")
    boxed: _Boxed = infos[ENV_INFO][index]
    return boxed.info


def make_vector_env(source: EnvSource, num_envs: int, *,
                    mode: Literal["sync", "async"] = "sync",
                    autoreset_mode: gym.vector.AutoresetMode = gym.vector.AutoresetMode.NEXT_STEP,
                    shared_memory: bool = True) -> gym.vector.VectorEnv:
    """A vector env of ``num_envs`` environments built from ``source``, each with
    ``EnvInfo`` (what ``play_vector`` needs).

    Args:
        source: An ``EnvSpec`` or a factory (picklable for ``async``).
        num_envs: Sub-envs.
        mode: ``sync`` (one process) or ``async`` (one process per sub-env).
        autoreset_mode: Gymnasium's autoreset mode (``play_vector`` works with each).
        shared_memory: ``async`` only: observations through shared memory.

    Raises:
        ValueError: ``num_envs`` < 1 or an unknown ``mode``.
    """
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    fns = [partial(_with_env_info, env_factory(source))] * num_envs
    if mode == "sync":
        return gym.vector.SyncVectorEnv(fns, autoreset_mode=autoreset_mode)
    if mode == "async":
        return gym.vector.AsyncVectorEnv(fns, autoreset_mode=autoreset_mode,
                                         shared_memory=shared_memory)
    raise ValueError(f"mode must be 'sync' or 'async', got {mode!r}")


def _with_env_info(make: Callable[[], gym.Env]) -> gym.Env:
    return EnvInfo(make())


@dataclass(slots=True)
class _Slot:
    job: int
    attempt: Attempt


def play_vector(envs: gym.vector.VectorEnv, policy: Policy,
                seeds: Sequence[int | None]) -> list[Attempt]:
    """Play one episode per seed with ``policy``, ``envs.num_envs`` at a time.

    A sub-env that finishes is reset at once with the next seed (``reset_mask``), so
    this works in every autoreset mode and no action is ever dropped. The policy is
    called once per live sub-env per step, in order; a policy that keeps per-episode
    state must key it by ``info["task_id"]`` (scripted and model policies do).

    Faults are the attempt's, never the batch's: a policy that raises for one sub-env
    ends that attempt (``provider`` for a ``PolicyError``, else ``error``) and the
    sub-env starts the next seed. A vector env that raises (a sub-env's sandbox could
    not be staged, a worker died) cannot be stepped on: every unfinished attempt then
    records that fault, unscorable, and the call returns.

    Args:
        envs: Made with ``wrappers=[EnvInfo]`` (``make_vector_env`` does).
        policy: ``act(observation, info) -> str``; ``begin_episode(info)`` if present.
        seeds: One episode per seed; the task is drawn by the seed.

    Returns:
        The Attempts in the order of ``seeds`` (their ``wall_s`` is the episode's span
        inside the batch, so it includes waiting for slower sub-envs).
    """
    play = _VectorPlay(envs, policy, seeds)
    try:
        play.run()
    except Exception as exc:  # noqa: BLE001 - the vector env's fault, recorded per attempt
        play.abandon(exc)
    return [play.done[j] for j in range(len(seeds))]


class _VectorPlay:
    """The state of one ``play_vector`` call."""

    def __init__(self, envs: gym.vector.VectorEnv, policy: Policy,
                 seeds: Sequence[int | None]) -> None:
        self.envs, self.policy, self.n = envs, policy, envs.num_envs
        self.pending = list(enumerate(seeds))[::-1]
        self.done: dict[int, Attempt] = {}
        self.slots: list[_Slot | None] = [None] * self.n
        self.obs: Any = ()
        self.infos: dict[str, Any] = {}

    def run(self) -> None:
        # Sync/AsyncVectorEnv take one seed per sub-env (VectorEnv's stub says int only).
        self.obs, self.infos = self.envs.reset(
            seed=self._take(range(self.n)))  # type: ignore[arg-type]
        self._begin(self.infos, range(self.n))
        while any(self.slots):
            actions = self._act()
            obs, rewards, terminated, truncated, infos = self.envs.step(actions)
            finished = []
            for i, slot in enumerate(self.slots):
                if slot is None:
                    continue
                last_obs, info = _outcome(obs, infos, i, terminated[i] or truncated[i])
                if slot.attempt.add_step(actions[i], last_obs, rewards[i].item(),
                                         terminated[i], truncated[i], info):
                    self.done[slot.job] = slot.attempt.finish()
                    finished.append(i)
            self.obs, self.infos = obs, infos
            # Reset every ended sub-env: stepping one that ended would raise.
            self._restart(finished, np.logical_or(terminated, truncated))

    def _act(self) -> tuple[str, ...]:
        """One action per sub-env; a slot whose policy call raised is finished and its
        sub-env restarted with the next job, whose action is then asked for."""
        actions: list[str | None] = [None] * self.n
        while True:
            faulted = []
            for i, slot in enumerate(self.slots):
                if slot is None or actions[i] is not None:
                    continue
                try:
                    actions[i] = self.policy.act(self.obs[i], env_info(self.infos, i))
                    slot.attempt.count_usage(self.policy)
                except Exception as exc:  # noqa: BLE001 - this attempt's fault, as data
                    slot.attempt.fail(exc)
                    self.done[slot.job] = slot.attempt.finish()
                    faulted.append(i)
            if not faulted:
                return tuple(a or "" for a in actions)
            mask = np.zeros(self.n, dtype=np.bool_)
            mask[faulted] = True
            self._restart(faulted, mask)

    def _restart(self, which: list[int], mask: np.ndarray) -> None:
        if not mask.any():
            return
        seeds = self._take(which)
        self.obs, reset_infos = self.envs.reset(
            seed=seeds, options={"reset_mask": mask})  # type: ignore[arg-type]
        self._begin(reset_infos, [i for i in which if self.slots[i]])
        self.infos = _merge(self.infos, reset_infos, mask)

    def _take(self, free: Any) -> list[int | None]:
        """Give the next jobs to the ``free`` sub-envs; the seeds to reset all with."""
        seeds: list[int | None] = [None] * self.n
        for i in free:
            self.slots[i] = None
            if self.pending:
                job, seed = self.pending.pop()
                self.slots[i] = _Slot(job, Attempt.start(seed=seed))
                seeds[i] = seed
        return seeds

    def _begin(self, infos: dict[str, Any], which: Any) -> None:
        for i in which:
            slot = self.slots[i]
            if slot is not None:
                slot.attempt.begin(env_info(infos, i), self.policy)

    def abandon(self, exc: BaseException) -> None:
        """The vector env failed: every unfinished attempt records ``exc``."""
        for slot in self.slots:
            if slot is not None and slot.job not in self.done:
                slot.attempt.fail(exc)
                slot.attempt.unscorable = True
                self.done[slot.job] = slot.attempt.finish()
        for job, seed in self.pending:
            lost = Attempt.start(seed=seed)
            lost.fail(RuntimeError(f"not played: the vector env failed first "
                                   f"({type(exc).__name__}: {exc})"))
            lost.unscorable = True
            self.done[job] = lost.finish()
        self.pending.clear()


def _outcome(obs: Any, infos: dict[str, Any], i: int, ended: bool
             ) -> tuple[str, dict[str, Any]]:
    """What sub-env ``i``'s step returned (``SAME_STEP`` moved it under ``final_*``)."""
    if ended and "final_info" in infos and infos.get("_final_info", [False] * len(obs))[i]:
        return infos["final_obs"][i], env_info(infos["final_info"], i)
    return obs[i], env_info(infos, i)


def _merge(infos: dict[str, Any], reset_infos: dict[str, Any], mask: np.ndarray
           ) -> dict[str, Any]:
    """Step infos where a sub-env went on, reset infos where it started again."""
    boxes = np.array(infos.get(ENV_INFO, [None] * len(mask)), dtype=object)
    boxes[mask] = np.asarray(reset_infos[ENV_INFO], dtype=object)[mask]
    present = np.logical_or(infos.get(f"_{ENV_INFO}", np.zeros(len(mask), np.bool_)), mask)
    return {ENV_INFO: boxes, f"_{ENV_INFO}": present}
