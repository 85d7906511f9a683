"""The phases of an episode, and the one function that moves between them.

The turns an episode can take are named here, each with what it allows, and every
change of phase goes through ``advance``; a change the table does not list raises, so a
wrapper that asks for an impossible turn fails loudly instead of bending the episode.
Steered by flags instead (a string mode consumed by the next step, a ``done`` flag the
extra ask set back to False, counting flags passed down the step), each rule can be
right while no place says which turns exist: deleting one reset that way left 58 tests
passing.

::

    OPEN ──FORCE──> FORCED ──TURN_ENDED──> OPEN        (forcing is asked turn by turn)
    OPEN | FORCED ──ANSWERED | FAULT──> DONE
    OPEN | FORCED ──BUDGET_SPENT──> SPENT ──GRANT_EXTRA──> EXTRA ──(any)──> DONE

* ``OPEN``: a free turn. Commands run, nodes are recorded, an answer passes the answer
  gates (``EmissionGate``) while budget remains; a rejected turn costs the format penalty.
* ``FORCED``: the next turn must be an answer (``ForcedAnswer``'s last ``reserve``
  steps). Nothing runs, no node is recorded, the gates are not consulted; a refused
  reply costs a step but no penalty — the model was asked for one thing and the step
  it loses is the price.
* ``SPENT``: the budget ended without an answer. The episode is over (``step`` raises)
  unless the one extra ask is granted.
* ``EXTRA``: the one extra answer-only turn after ``SPENT``; it takes no step of the
  budget, and whatever it brings, the episode ends after it.
* ``DONE``: over — an answer was released, the infrastructure failed, or the extra ask
  went unanswered.
"""

from __future__ import annotations

from enum import StrEnum

from vera_env.errors import ResetNeeded

__all__ = ["Event", "Phase", "advance"]


class Phase(StrEnum):
    """Where an episode is; see the module docstring."""

    OPEN = "open"
    FORCED = "forced"
    SPENT = "spent"
    EXTRA = "extra"
    DONE = "done"

    @property
    def answer_only(self) -> bool:
        """A turn in this phase is read only for its answer: nothing runs."""
        return self in (Phase.FORCED, Phase.EXTRA)

    @property
    def counts_step(self) -> bool:
        """A turn in this phase takes one step of the budget."""
        return self in (Phase.OPEN, Phase.FORCED)

    @property
    def penalised(self) -> bool:
        """A rejected turn in this phase costs the format penalty."""
        return self is Phase.OPEN

    @property
    def ended(self) -> bool:
        """No turn may be played (``step`` raises ``ResetNeeded``)."""
        return self in (Phase.SPENT, Phase.DONE)


class Event(StrEnum):
    """What moves an episode from one phase to the next."""

    FORCE = "force"                # a wrapper demands an answer in the next turn
    GRANT_EXTRA = "grant_extra"    # a wrapper grants the one extra ask
    ANSWERED = "answered"          # a turn released an answer
    FAULT = "fault"                # the infrastructure failed (unscorable)
    BUDGET_SPENT = "budget_spent"  # a turn without an answer used the last step
    TURN_ENDED = "turn_ended"      # a turn without an answer, budget left


_NEXT: dict[tuple[Phase, Event], Phase] = {
    (Phase.OPEN, Event.FORCE): Phase.FORCED,
    (Phase.FORCED, Event.FORCE): Phase.FORCED,
    (Phase.SPENT, Event.GRANT_EXTRA): Phase.EXTRA,
    **{(phase, event): Phase.DONE for phase in (Phase.OPEN, Phase.FORCED, Phase.EXTRA)
       for event in (Event.ANSWERED, Event.FAULT)},
    (Phase.OPEN, Event.TURN_ENDED): Phase.OPEN,
    (Phase.FORCED, Event.TURN_ENDED): Phase.OPEN,
    (Phase.OPEN, Event.BUDGET_SPENT): Phase.SPENT,
    (Phase.FORCED, Event.BUDGET_SPENT): Phase.SPENT,
    (Phase.EXTRA, Event.BUDGET_SPENT): Phase.DONE,
}


def advance(phase: Phase, event: Event) -> Phase:
    """The phase after ``event`` in ``phase``.

    Example:
        >>> advance(Phase.SPENT, Event.GRANT_EXTRA)
        <Phase.EXTRA: 'extra'>

    Raises:
        ResetNeeded: ``event`` cannot happen in ``phase`` (a turn asked of an episode
            that has ended, or a second extra ask).
    """
    try:
        return _NEXT[(phase, event)]
    except KeyError:
        raise ResetNeeded(f"cannot {event.value.replace('_', ' ')} in phase "
                          f"{phase.value!r}" + ("; call reset()" if phase.ended else "")
                          ) from None
