"""No address randomisation inside the sandbox: a stack address is no coin (issue 19)."""

from __future__ import annotations

import ctypes
import threading

import pytest
from sandbox_helpers import FAST, requires_bwrap

from vera_env.sandbox import BwrapSandbox, ServerSandbox
from vera_env.sandbox.entropy import fixed_address_layout

_ADDR_NO_RANDOMIZE = 0x0040000


def _personality() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.personality.restype = ctypes.c_int
    libc.personality.argtypes = [ctypes.c_ulong]
    return libc.personality(0xFFFFFFFF)


@requires_bwrap
@pytest.mark.parametrize("kind", [BwrapSandbox, ServerSandbox], ids=["bwrap", "bwrap-server"])
def test_stack_address_same_on_every_run_and_check(kind):
    with kind(FAST) as box, box.stage({}) as ws:
        runs = {ws.run("grep stack /proc/self/maps").stdout for _ in range(2)}
        checks = {ws.run_check("grep stack /proc/self/maps").stdout for _ in range(2)}
        layouts = {ws.run("cat /proc/self/maps").stdout for _ in range(2)}
    assert len(runs) == 1 and "[stack]" in runs.pop()
    assert len(checks) == 1 and len(layouts) == 1


def test_fixed_address_layout_touches_only_the_calling_thread_and_restores_it():
    before = _personality()
    seen: dict[str, int] = {}
    inside, looked = threading.Event(), threading.Event()

    def look() -> None:  # a thread that exists already, as the harness's others do
        inside.wait(10)
        seen["other"] = _personality()
        looked.set()

    other = threading.Thread(target=look)
    other.start()
    with fixed_address_layout():
        seen["inside"] = _personality()
        inside.set()
        looked.wait(10)
    other.join()
    assert seen["inside"] & _ADDR_NO_RANDOMIZE
    assert seen["other"] == before and _personality() == before
