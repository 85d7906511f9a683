"""Owned workspace roots: a lease released while another is being taken."""

from __future__ import annotations

import threading

import pytest

from vera_env.sandbox import reaper
from vera_env.sandbox.reaper import RootLease


def test_lease_taken_while_an_older_lease_is_dropped_on_the_same_thread_keeps_its_root(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The garbage collector can run an old lease's finalizer on the thread that is in
    # the middle of taking a new one (seen: the suite hung there). It must neither
    # deadlock nor remove the root the new lease is about to hold.
    old = RootLease()
    making = reaper.owned_root

    def owned_root_while_old_is_collected(*args: object) -> object:
        old.release()  # what a finalizer run mid-__init__ does
        return making(*args)
    monkeypatch.setattr(reaper, "owned_root", owned_root_while_old_is_collected)

    leases: list[RootLease] = []
    taker = threading.Thread(target=lambda: leases.append(RootLease()), daemon=True)
    taker.start()
    taker.join(timeout=10)
    assert not taker.is_alive(), "taking a lease deadlocked on the lease lock"
    [new] = leases
    root = new.config.workspace_root
    assert root is not None and root.is_dir()
    new.release()
