"""Running episodes: the Attempt record, runners, env pools, vector envs and Ray.

``attempt`` is the one episode lifecycle; ``pool`` the one place environments are
built (from an ``EnvSpec`` or a factory), reused and closed; ``runner`` plays a policy
through episodes (one, many in threads, many on one event loop); ``vector`` adapts
Gymnasium's vector envs; ``distributed`` runs rollout workers as Ray actors. Every one
of them records an episode with the same lifecycle and catches a fault at the same
boundary, so a fault is an attempt's status, never the end of a batch.
"""

from __future__ import annotations

from vera_env.rollout.attempt import STATUSES, Attempt, Status
from vera_env.rollout.pool import EnvPool, EnvSource, env_factory, map_episodes
from vera_env.rollout.runner import Job, arun_episode, arun_many, play_job, run_episode, run_many

__all__ = ["STATUSES", "Attempt", "EnvPool", "EnvSource", "Job", "Status", "arun_episode",
           "arun_many", "env_factory", "map_episodes", "play_job", "run_episode",
           "run_many"]
