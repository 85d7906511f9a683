"""Running episodes: the Attempt record, runners, env pools, vector envs and Ray.

``attempt`` is the one episode lifecycle; ``runner`` plays a policy through episodes
(sync, threads, asyncio); ``pool`` owns the environments of a batch; ``vector`` adapts
Gymnasium's vector envs; ``distributed`` runs rollout workers as Ray actors.
"""

from __future__ import annotations

from vera_env.rollout.attempt import STATUSES, Attempt, Status
from vera_env.rollout.pool import map_episodes
from vera_env.rollout.runner import arun_episode, arun_many, run_episode, run_many

__all__ = ["STATUSES", "Attempt", "Status", "arun_episode", "arun_many", "map_episodes",
           "run_episode", "run_many"]
