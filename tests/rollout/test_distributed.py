"""Ray rollout workers: same Attempts as local collection, dead workers replaced."""

from __future__ import annotations

import os
import sys
from functools import partial
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from vera_env.rollout import run_many  # noqa: E402 (after the importorskip above)
from vera_env.rollout.distributed import RolloutPool, RolloutWorker, collect  # noqa: E402
from vera_env.spec import EnvSpec  # noqa: E402

SPEC = EnvSpec(max_steps=4, wrappers=())

NODE = ("<command>wc -l alcohol.txt</command>\n"
        'NODE kind=load summary="5 lines" artifact=alcohol.txt\n'
        'CHECK conservation "5 lines" :: test $(wc -l < alcohol.txt) -eq 5 && echo True || echo False\n')
TURNS = (NODE, "<command>ls</command>", "FINAL ANSWER: 5.0")


class Scripted:
    """The same three turns for every episode (stateless, so one serves many)."""

    def act(self, observation: str, info: dict) -> str:
        step = info["step"]
        return TURNS[step] if step < len(TURNS) else ""


class Dying(Scripted):
    """Kills its own worker process at the second turn of the tasks in ``die_on``.

    The first time only (a marker file in ``marker_dir`` remembers it), or every time
    with ``always``.
    """

    def __init__(self, marker_dir: str, die_on: tuple[str, ...], always: bool = False):
        self.marker_dir, self.die_on, self.always = marker_dir, die_on, always

    def act(self, observation: str, info: dict) -> str:
        task = info["task_id"]
        if info["step"] == 1 and task in self.die_on:
            marker = Path(self.marker_dir) / f"died-{task}"
            if self.always or not marker.exists():
                marker.write_text(str(os.getpid()))
                os._exit(1)  # a hard crash: no finalizer, no close
        return super().act(observation, info)


def tasks_for(data_dir: Path, n: int) -> list:
    from vera_env.tasks import Task

    return [Task(id=f"t{i}", question="Mean drinks, ignoring -999? One decimal.",
                 answer="5.0", grader={"kind": "numeric", "abs_tol": 0.05}, data_dir=data_dir)
            for i in range(n)]


@pytest.fixture(scope="module")
def local_ray():
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(sys.path)}})
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture
def tasks(alcohol_task):
    return tasks_for(alcohol_task.data_dir, 4)


def comparable(attempt) -> dict:
    """The Attempt without its timings (wall_s, each check's duration_s)."""
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in ("wall_s", "duration_s")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value
    return strip(attempt.to_dict())


def built(tasks):
    """The spec's env on in-memory tasks (picklable: Ray sends it to each worker)."""
    return partial(SPEC.build, tasks=tasks)


def local_attempts(tasks, policy, jobs):
    return run_many(built(tasks), policy, jobs, concurrency=1)


def test_two_workers_collect_the_attempts_local_collection_records(local_ray, tasks, tmp_path):
    jobs = [(t.id, seed) for seed, t in enumerate(tasks)]
    policy = Scripted()
    result = collect(built(tasks), Scripted, jobs, num_workers=2, num_cpus_per_worker=0.5,
                     to_record=lambda a: {"task_id": a.task_id, "score": a.score})
    local = local_attempts(tasks, policy, jobs)
    assert [comparable(a) for a in result.attempts] == [comparable(a) for a in local]
    assert [a.status for a in result.attempts] == ["ok"] * 4
    assert result.records == [{"task_id": a.task_id, "score": a.score} for a in local]
    assert result.retried == () and result.workers_replaced == 0


def test_pool_keeps_its_workers_between_collections(local_ray, tasks):
    jobs = [(t.id, seed) for seed, t in enumerate(tasks)]
    with RolloutPool(built(tasks), Scripted, num_workers=1, envs_per_worker=2,
                     num_cpus_per_worker=0.5) as pool:
        first, second = pool.collect(jobs[:2]), pool.collect(jobs[2:])
        workers = list(pool._workers)
        assert ray.get([w.pid.remote() for w in workers]) == ray.get(
            [w.pid.remote() for w in pool._workers])
    assert [a.task_id for a in first.attempts + second.attempts] == ["t0", "t1", "t2", "t3"]
    assert first.workers_replaced == second.workers_replaced == 0


def test_killed_worker_is_replaced_and_its_episode_retried_once(local_ray, tasks, tmp_path):
    jobs = [(t.id, seed) for seed, t in enumerate(tasks)]
    result = collect(built(tasks), lambda: Dying(str(tmp_path), die_on=("t1",)), jobs,
                     num_workers=2, num_cpus_per_worker=0.5)
    local = local_attempts(tasks, Scripted(), jobs)
    assert (tmp_path / "died-t1").exists()  # the worker really died mid-episode
    assert 1 in result.retried and result.workers_replaced >= 1
    assert [comparable(a) for a in result.attempts] == [comparable(a) for a in local]


def test_episode_whose_retry_dies_too_is_an_error_attempt_not_dropped(local_ray, tasks,
                                                                       tmp_path):
    jobs = [(tasks[0].id, 0), (tasks[2].id, 2)]
    result = collect(built(tasks), lambda: Dying(str(tmp_path), die_on=("t2",), always=True),
                     jobs, num_workers=1, num_cpus_per_worker=0.5)
    ok, lost = result.attempts
    assert ok.status == "ok" and ok.correct is True
    assert (lost.task_id, lost.seed, lost.status, lost.unscorable, lost.score) == (
        "t2", 2, "error", True, None)
    assert "died twice" in lost.error
    assert result.retried == (1,) and result.workers_replaced == 2


def test_rollout_worker_runs_in_process_and_closes_its_envs(tasks, tmp_path):
    worker = RolloutWorker(built(tasks), Scripted)
    index, attempt, record = worker.play(7, "t3", 3)
    assert (index, attempt.task_id, attempt.status, record) == (7, "t3", "ok", None)
    worker.close()


def test_collect_rejects_zero_workers(tasks, tmp_path):
    with pytest.raises(ValueError, match="num_workers"):
        collect(built(tasks), Scripted, 1, num_workers=0)


def oracle_on_builtin():
    from vera_env.policy import OraclePolicy
    from vera_env.tasks import load_tasks

    return OraclePolicy(load_tasks("builtin"))


def test_workers_build_their_envs_from_a_spec_sent_as_data(local_ray):
    from vera_env.tasks import load_tasks

    task_id = load_tasks("builtin").ids()[0]
    spec = EnvSpec(tasks="builtin", max_steps=10, reward={"strength": False})
    result = collect(spec, oracle_on_builtin, [(task_id, 0)], num_workers=1,
                     num_cpus_per_worker=0.5)
    (attempt,) = result.attempts
    assert (attempt.task_id, attempt.status, attempt.correct) == (task_id, "ok", True)
