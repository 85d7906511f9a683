"""A node's strength budget: its runs' own time, which a busy machine cannot eat.

Observed: the same turns on ``real.h5ad.detected_cells`` (4 nodes x 6 checks of
0.3-1 s) earned verification 0.250 and 0.500 on a quiet machine and 0.167 and 0.125
beside two busy loops: 4-21 of its 24 checks were cut by the node's strength deadline,
then wall-clock seconds, which another process's load spent. Concurrent training envs
are such load, so the gradient got noise biased against the checks that read the most.

The rule: **the same episode earns the same reward on a quiet or a busy machine.** So
a node's budget is charged what its work costs, not when it ends. Its size:
``BUDGET_FACTOR`` x the node's deadline (``StrengthSession.deadline_s``:
``StrengthConfig.deadline_*`` over its checks' and derivation's own time), at most twice
``deadline_max_s``. A check is run some 12-18 times (controls, mutants,
confirmations): at 2 x the deadline, the wall deadline's worth with two runs at once,
the reference's own checks of ``tab.sentinel_mean`` (each burning 0.25 s) used 89-105%
of it, so noise decided which were cut; at 4 x they use under half. It is charged:

* each strength sandbox run, its **own time** (``run_cost``): its wall time less the
  seconds in which its processes waited for a CPU another process held
  (``ExecResult.cpu_wait_s``, the kernel's PSI for its cgroup), and at least its CPU
  time (``cpu_s``; several processes can use more CPU than wall). A CPU-bound run
  costs its CPU time, a run that sleeps its sleep, whatever else runs beside it;
* the harness's own work for the node, in CPU time (``time.thread_time`` of each thread
  between two looks at the budget: finding inputs, building, classifying and writing
  variants, pumping runs).

A busy machine makes this work take longer, not cost more: a node gets the same work
done, later. Spent (``work``), what is undecided earns nothing (the check's cost, as
the wall deadline's was).

A **backstop** of ``STRENGTH_BACKSTOP_FACTOR`` x ``deadline_max_s`` in wall
time (480 s by default, the same for every node) bounds the step
(``rewards.step_bound_s``): at least twice the time the budget takes with one run at a
time. Waiting that long on a busy machine costs wall time; giving up sooner would throw
the episode away (measured: at load 14 on 2 CPUs a node of ``real.h5ad.detected_cells``
took 5x its quiet time, past a backstop of 4x its own deadline). It stops the node; if
the work charged by then (the runs it cut included) is under budget, the runs were
starved by other load, and the node is an infrastructure fault (``StrengthStarved``:
the episode is unscorable), never a silent 0. So is a run cut by its own wall timeout
while its own time was under half of that timeout (``run_starved``): a check slow on
a quiet machine used its time and earns nothing; one starved by load did not.

Why a model cannot reach either on purpose (an opt-out from a wrong answer): a run's
own time grows by a second each second unless some process of it waits for a CPU that
another holds; on a machine with no other load that other is this node's (charged)
work, so the budget is spent by half the backstop at the latest. A check that sleeps
is charged its sleep.

Degraded, and said so: where a run's CPU wait is not counted (no cgroup the harness may
write, a kernel without PSI, the ``local`` backend) it is charged its wall time, the old
deadline's dependence on load. And what happens outside the run's cgroup is charged as
wall time too: a fresh sandbox's start (bwrap before the harness places it) and the
harness's latency in reading the run. For checks of a few milliseconds that is most of
a run: beside two busy loops at load 15, ``real.csv.penguin_mass``'s nodes were charged
20-33 s where alone they were 5-7 s (of an 80 s budget), while ``detected_cells``'s
0.2 s checks stayed within 10-30% (12.6 and 12.6, 23.0 and 27.8, 25.2 and 23.8 s).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from vera_env.errors import StrengthStarved
from vera_env.verification.rewards import STRENGTH_BACKSTOP_FACTOR

if TYPE_CHECKING:
    from vera_env.sandbox import ExecResult

__all__ = ["BUDGET_FACTOR", "Budget", "Spent", "run_cost", "run_starved"]

BUDGET_FACTOR = 4.0
"""Seconds of own time a node's strength work may use per second of its deadline."""
_STARVED_SHARE = 0.5
Spent = Literal["work", "backstop", "starved"]


def run_cost(duration_s: float, cpu_s: float | None, cpu_wait_s: float | None) -> float:
    """What one run costs a budget: its own time (wall less CPU wait, at least its
    CPU), or its wall time where its CPU wait was not counted.

    Example:
        >>> run_cost(3.0, 1.0, 2.0), run_cost(3.0, 0.0, 0.0), run_cost(3.0, None, None)
        (1.0, 3.0, 3.0)
    """
    if cpu_wait_s is None:
        return duration_s
    return max(cpu_s or 0.0, duration_s - cpu_wait_s)


def _result_cost(result: ExecResult) -> float:
    return run_cost(result.duration_s, result.cpu_s, result.cpu_wait_s)


class Budget:
    """One node's strength budget (see the module docstring). Called, it is the
    ``time_left`` strength's scans, builds and replays take.

    Args:
        seconds: The budget, in seconds of own time.
        backstop_s: The wall-clock backstop, in seconds.
        monotonic: The wall clock (tests give a fake).
        thread_cpu: The calling thread's CPU clock (tests give a fake).

    Example:
        >>> b = Budget.for_deadline(20.0, max_deadline_s=120.0)
        >>> b.seconds, b.backstop_s, b.spent is None, b() > 479
        (80.0, 480.0, True, True)
    """

    def __init__(self, seconds: float, *, backstop_s: float,
                 monotonic: Callable[[], float] = time.monotonic,
                 thread_cpu: Callable[[], float] = time.thread_time) -> None:
        if not 0 < seconds <= backstop_s:
            raise ValueError(f"need 0 < seconds <= backstop_s, got {seconds!r} and "
                             f"{backstop_s!r}")
        self.seconds = seconds
        self.backstop_s = backstop_s
        self._monotonic, self._thread_cpu = monotonic, thread_cpu
        self._started = monotonic()
        self._lock = threading.Lock()
        self._work_s = 0.0
        self._seen: dict[int, float] = {}  # thread id -> its CPU time last charged
        self._why = ""
        self.spent: Spent | None = None

    @classmethod
    def for_deadline(cls, deadline_s: float, *, max_deadline_s: float,
                     monotonic: Callable[[], float] = time.monotonic,
                     thread_cpu: Callable[[], float] = time.thread_time) -> Budget:
        """The budget of a node whose deadline is ``deadline_s`` (at most
        ``max_deadline_s``): ``BUDGET_FACTOR`` x it of own time (at most twice
        ``max_deadline_s``, half the backstop), and a backstop of
        ``STRENGTH_BACKSTOP_FACTOR`` x ``max_deadline_s`` of wall time."""
        if not 0 < deadline_s <= max_deadline_s:
            raise ValueError(f"need 0 < deadline_s <= max_deadline_s, got {deadline_s!r} "
                             f"and {max_deadline_s!r}")
        return cls(min(BUDGET_FACTOR * deadline_s, 2 * max_deadline_s),
                   backstop_s=STRENGTH_BACKSTOP_FACTOR * max_deadline_s,
                   monotonic=monotonic, thread_cpu=thread_cpu)

    @property
    def work_s(self) -> float:
        """Seconds charged so far."""
        return self._work_s

    def charge(self, result: ExecResult) -> None:
        """Charge one sandbox run of this node (``run_cost``)."""
        with self._lock:
            self._work_s += _result_cost(result)

    def __call__(self) -> float:
        """``left()``."""
        return self.left()

    def left(self) -> float:
        """Wall seconds a run may still take: 0 once the budget is spent (``spent``
        says how), else what is left to the backstop. Charges the calling thread's CPU
        since its last look (the harness's own work)."""
        cpu, me = self._thread_cpu(), threading.get_ident()
        with self._lock:
            last = self._seen.get(me)
            self._seen[me] = cpu
            if last is not None:
                self._work_s += max(0.0, cpu - last)
            if self.spent is not None:
                return 0.0
            wall = self._monotonic() - self._started
            if self._work_s >= self.seconds:
                self.spent = "work"
            elif wall >= self.backstop_s:
                self.spent = "backstop"
            return 0.0 if self.spent is not None else self.backstop_s - wall

    def starve(self, why: str) -> None:
        """A run was starved (``run_starved``): end the node, as an infrastructure
        fault unless its work was already spent."""
        with self._lock:
            if self.spent != "work":
                self.spent, self._why = "starved", why

    @property
    def starved(self) -> bool:
        """Other load, not the checks, ended the node: a run was starved, or the
        backstop came with the work under budget (the runs it cut charged)."""
        return self.spent == "starved" or (self.spent == "backstop"
                                           and self._work_s < self.seconds)

    def raise_if_starved(self) -> None:
        """Call once every run of the node has returned (and been charged).

        Raises:
            StrengthStarved: ``starved``.
        """
        if not self.starved:
            return
        why = self._why or (f"{self._work_s:.1f} s of the node's {self.seconds:.0f} s of "
                            f"work were done when its {self.backstop_s:.0f} s backstop "
                            "passed")
        raise StrengthStarved(f"strength: other load starved the node's runs of CPU: {why}")

    def describe(self) -> str:
        """Why undecided checks earn nothing, for their ``detail`` (when the node is
        not ``starved``)."""
        return (f"the node's strength budget ({self.seconds:.0f} s of its runs' own time) "
                "was spent before its variants were run")


def run_starved(result: ExecResult, timeout_s: float) -> bool:
    """A run cut by its wall timeout while its own time (``run_cost``) was under half
    of it: starved by other load, not slow."""
    return result.timed_out and result.cpu_wait_s is not None and \
        _result_cost(result) < _STARVED_SHARE * timeout_s
