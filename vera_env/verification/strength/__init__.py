"""Strength: a passing check earns only when its verdict follows the task's answer.

The modules, in the order data flows through them:

* ``reference``: what a task tells strength about itself — how its answer follows from
  its files (a solver) and which transformations of them keep that answer; ``task``:
  that reference with the task's files and cache key, fixed once at reset.
* ``encoding`` / ``transforms`` / ``mutants``: decode a task file, build candidate
  variants of its content (answer-preserving transformations and mutations).
* ``variants``: classify every candidate by the task's own reference (a *control* keeps
  the answer, a *mutant* changes it), encode them, cache them per task, and write fresh
  files of them for one episode in a secret order.
* ``command_log`` / ``shadows`` / ``targets``: the episode's file-writing commands,
  logged, replayed in a shadow workspace per variant, and each task file's variants
  and shadows kept for the episode within a shared disk budget.
* ``check_inputs``: which workspace files a check reads.
* ``luck``: how many confirmations bound what a check driven by entropy earns.
* ``budget`` / ``run_pool`` / ``verdicts``: what a node's runs may cost (their own time,
  not the wall clock), the episode's threads that run them, and the verdicts of pure
  checks shared between episodes.
* ``outcome``: the typed result of testing one check.
* ``session``: ``StrengthSession``, one episode's strength testing.
"""

from vera_env.verification.strength.reference import CONTROL_TRANSFORMS, Contents, Reference
from vera_env.verification.strength.session import StrengthSession
from vera_env.verification.strength.task import StrengthTask

__all__ = ["CONTROL_TRANSFORMS", "Contents", "Reference", "StrengthSession", "StrengthTask"]
