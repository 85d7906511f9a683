"""``Recording``: what the rollout asks of a recorded policy is what the policy offers,
found through protocols (no attribute forwarding)."""

from __future__ import annotations

from typing import Any

from vera_env.policy import AsyncPolicy, EpisodeAware, ReportsUsage
from vera_env.training.collection import MarksMistakes, Recording


class Plain:
    def act(self, observation: str, info: dict[str, Any]) -> str:
        return "<command>ls</command>"


class Rich(Plain):
    """Keeps episode state, reports usage, marks its first turn a mistake, and is async."""

    def __init__(self) -> None:
        self.begun: list[dict[str, Any]] = []
        self.turns = 0

    def begin_episode(self, info: dict[str, Any]) -> None:
        self.begun.append(info)

    def last_usage(self) -> tuple[int | None, int | None]:
        return 11, 7

    def deliberate_mistake(self, action: str, info: dict[str, Any]) -> bool:
        self.turns += 1
        return self.turns == 1

    async def aact(self, observation: str, info: dict[str, Any]) -> str:
        raise AssertionError("a recording must never be played past through aact")


def test_recording_of_a_plain_policy_reports_no_usage_and_learns_every_turn():
    recording = Recording(Plain())
    recording.begin_episode({"task_id": "t"})  # nothing to tell: no error
    assert recording.act("obs", {"prefill": "FINAL ANSWER:"}) == "<command>ls</command>"
    assert recording.last_usage() == (None, None)
    assert (recording.observations, recording.prefills, recording.learn) == \
        (["obs"], ["FINAL ANSWER:"], [True])


def test_recording_passes_on_episode_start_usage_and_deliberate_mistakes():
    policy = Rich()
    assert isinstance(policy, MarksMistakes)
    recording = Recording(policy)
    recording.begin_episode({"task_id": "t"})
    recording.act("first", {})
    recording.act("second", {})
    assert policy.begun == [{"task_id": "t"}]
    assert recording.last_usage() == (11, 7)
    assert recording.learn == [False, True]


def test_recording_is_never_an_async_policy_even_around_one():
    recording = Recording(Rich())
    assert isinstance(Rich(), AsyncPolicy)
    assert not isinstance(recording, AsyncPolicy)
    assert isinstance(recording, EpisodeAware) and isinstance(recording, ReportsUsage)
