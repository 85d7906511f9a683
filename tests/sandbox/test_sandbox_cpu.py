"""What a command got of the CPUs: its CPU time and its wait for a CPU, from its cgroup.

Strength budgets a node's runs in their own time (wall less the wait), which another
process's load cannot raise; these are the counters it reads.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import FAST, requires_bwrap, requires_root

from vera_env.sandbox import BwrapSandbox
from vera_env.sandbox.cgroup import CommandCgroup, MemoryCgroups
from vera_env.sandbox.process import CpuUsage
from vera_env.sandbox.server import ServerSandbox

BACKENDS = {"bwrap": BwrapSandbox, "server": ServerSandbox}
BURN = ("python3 -c 'import time\nt = time.process_time()\n"
        "while time.process_time() - t < 0.4: pass'")
PSI = "some avg10=1.00 avg60=0.50 avg300=0.10 total=250000\nfull avg10=0.00 total=0\n"


def test_cpu_read_from_a_v2_leaf_usage_and_pressure(tmp_path: Path):
    (tmp_path / "cpu.stat").write_text("usage_usec 1500000\nuser_usec 1000000\n")
    (tmp_path / "cpu.pressure").write_text(PSI)
    assert CommandCgroup(tmp_path, 2).cpu() == CpuUsage(1.5, 0.25)


def test_cpu_wait_unknown_without_psi_and_usage_unknown_without_cpu_stat(tmp_path: Path):
    (tmp_path / "cpu.stat").write_text("usage_usec 1500000\n")
    assert CommandCgroup(tmp_path, 2).cpu() == CpuUsage(1.5, None)
    assert CommandCgroup(tmp_path / "gone", 2).cpu() is None


def test_cpu_of_a_v1_leaf_is_read_from_its_paired_unified_leaf(tmp_path: Path):
    memory, account = tmp_path / "memory", tmp_path / "unified"
    memory.mkdir()
    account.mkdir()
    (account / "cpu.stat").write_text("usage_usec 2000000\n")
    (account / "cpu.pressure").write_text(PSI)
    assert CommandCgroup(memory, 1, account).cpu() == CpuUsage(2.0, 0.25)
    assert CommandCgroup(memory, 1).cpu() is None  # no unified hierarchy: not counted


@pytest.fixture(scope="module", params=sorted(BACKENDS))
def box(request: pytest.FixtureRequest) -> Iterator[BwrapSandbox]:
    sandbox = BACKENDS[request.param](FAST)
    yield sandbox
    sandbox.close()


def _counts_cpu(cgroups: MemoryCgroups) -> bool:
    with cgroups.lease() as leaf:
        return leaf.cpu() is not None


@requires_bwrap
@requires_root
def test_a_command_reports_the_cpu_its_tree_used_and_a_sleep_none(box: BwrapSandbox):
    if box.memory is None or not _counts_cpu(box.memory):
        pytest.skip("no cgroup that counts CPU on this machine")
    with box.stage({}) as ws:
        burn = ws.run_check(f"{BURN} & {BURN}; wait")  # two processes: the whole tree
        sleep = ws.run("sleep 0.4")
    assert burn.ok and burn.cpu_s is not None and 0.75 <= burn.cpu_s < 3.0
    assert sleep.ok and sleep.cpu_s is not None and sleep.cpu_s < 0.2
    if burn.cpu_wait_s is not None:  # PSI: the sleep never waited for a CPU
        assert sleep.cpu_wait_s is not None and sleep.cpu_wait_s < 0.2


@requires_root
def test_closing_the_cgroups_removes_the_paired_unified_leaves():
    parent, version, reason = MemoryCgroups.find()
    assert parent is not None, reason
    cgroups = MemoryCgroups(parent, version, 64 * 2**20)
    account = cgroups.account_root
    leaf = cgroups.acquire()
    child = subprocess.Popen(["sleep", "5"])
    try:
        leaf.attach(child.pid)
        if account is not None:
            assert child.pid in [int(p) for p in (leaf.account / "cgroup.procs")
                                 .read_text().split()]
    finally:
        cgroups.close()  # kills what is left in both leaves
        child.wait(timeout=5)
    assert account is None or not account.exists()
