"""phase.py: the turns an episode can be in, and the one transition table."""

from __future__ import annotations

import pytest

from vera_env.errors import ResetNeeded
from vera_env.phase import Event, Phase, advance


@pytest.mark.parametrize(("phase", "event", "after"), [
    (Phase.OPEN, Event.FORCE, Phase.FORCED),
    (Phase.FORCED, Event.FORCE, Phase.FORCED),
    (Phase.FORCED, Event.TURN_ENDED, Phase.OPEN),
    (Phase.OPEN, Event.TURN_ENDED, Phase.OPEN),
    (Phase.OPEN, Event.ANSWERED, Phase.DONE),
    (Phase.FORCED, Event.ANSWERED, Phase.DONE),
    (Phase.EXTRA, Event.ANSWERED, Phase.DONE),
    (Phase.OPEN, Event.FAULT, Phase.DONE),
    (Phase.OPEN, Event.BUDGET_SPENT, Phase.SPENT),
    (Phase.FORCED, Event.BUDGET_SPENT, Phase.SPENT),
    (Phase.SPENT, Event.GRANT_EXTRA, Phase.EXTRA),
    (Phase.EXTRA, Event.BUDGET_SPENT, Phase.DONE),
])
def test_advance_follows_the_table(phase, event, after):
    assert advance(phase, event) is after


@pytest.mark.parametrize(("phase", "event"), [
    (Phase.DONE, Event.FORCE),
    (Phase.SPENT, Event.FORCE),
    (Phase.DONE, Event.GRANT_EXTRA),
    (Phase.OPEN, Event.GRANT_EXTRA),
    (Phase.EXTRA, Event.GRANT_EXTRA),
    (Phase.SPENT, Event.ANSWERED),
])
def test_advance_refuses_what_the_table_does_not_list(phase, event):
    with pytest.raises(ResetNeeded, match="cannot"):
        advance(phase, event)


def test_every_phase_but_the_ends_is_reachable_from_open_and_ends_in_done():
    reached, frontier = {Phase.OPEN}, [Phase.OPEN]
    while frontier:
        phase = frontier.pop()
        for event in Event:
            try:
                nxt = advance(phase, event)
            except ResetNeeded:
                continue
            if nxt not in reached:
                reached.add(nxt)
                frontier.append(nxt)
    assert reached == set(Phase)


def test_phase_properties_say_what_a_turn_may_do():
    assert [p for p in Phase if p.answer_only] == [Phase.FORCED, Phase.EXTRA]
    assert [p for p in Phase if p.counts_step] == [Phase.OPEN, Phase.FORCED]
    assert [p for p in Phase if p.penalised] == [Phase.OPEN]
    assert [p for p in Phase if p.ended] == [Phase.SPENT, Phase.DONE]


def test_a_refusal_tells_an_ended_episode_to_reset_and_an_open_one_not():
    with pytest.raises(ResetNeeded) as ended:
        advance(Phase.DONE, Event.FORCE)
    assert str(ended.value) == "cannot force in phase 'done'; call reset()"
    with pytest.raises(ResetNeeded) as live:
        advance(Phase.OPEN, Event.GRANT_EXTRA)
    assert str(live.value) == "cannot grant extra in phase 'open'"
