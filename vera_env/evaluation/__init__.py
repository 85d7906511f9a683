"""Evaluating a fixed policy on a task suite: metrics, the run folder, reports, re-scoring;
and evaluating the tasks themselves: golden scenarios and task validation.

``vera-env eval`` writes a run folder (settings, one ``Attempt`` per line, transcripts,
a summary); the modules here read and write it so that ``report`` and ``rescore`` work
from the folder alone, without rerunning an episode. ``golden`` replays recorded
incidents and ``validation`` replays each task's reference and careless solutions,
both through the same runner as every episode.
"""

from __future__ import annotations

from vera_env.evaluation.metrics import EXCLUDED_STATUSES, pass_at_k, summarise

__all__ = ["EXCLUDED_STATUSES", "pass_at_k", "summarise"]
