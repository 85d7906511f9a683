"""Evaluating a fixed policy on a task suite: metrics, the run folder, reports, re-scoring.

``vera-env eval`` writes a run folder (settings, one ``Attempt`` per line, transcripts,
a summary); the modules here read and write it so that ``report`` and ``rescore`` work
from the folder alone, without rerunning an episode.
"""

from __future__ import annotations

from vera_env.evaluation.metrics import EXCLUDED_STATUSES, pass_at_k, summarise

__all__ = ["EXCLUDED_STATUSES", "pass_at_k", "summarise"]
