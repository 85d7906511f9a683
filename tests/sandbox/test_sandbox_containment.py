"""Containment completed (issue 11): memory per process tree, capped tmpfs, a disk walk
that fails closed, an inode limit, and no model text that locks the harness out.

Each test reproduces the measured gap with smaller numbers: three processes holding
4.5 GB under ``memory_mb=2048`` (here 3 x 200 MB under 256 MB), 400 MB written beneath
20 nested 250-character names under a 50 MB limit (here 40 MB under 16 MB), and
``chmod 000 /work`` turning every later step into a ``SandboxError``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import FAST, requires_bwrap, requires_root

from vera_env.errors import SandboxError
from vera_env.sandbox import BwrapSandbox, SandboxConfig, SandboxLimits
from vera_env.sandbox.cgroup import (
    CommandCgroup,
    MemoryCgroups,
    cgroup_mounts,
    own_cgroups,
    reap_orphans,
)
from vera_env.sandbox.disk import MAX_DEPTH, measure
from vera_env.sandbox.reaper import owner_tag
from vera_env.sandbox.server import ServerSandbox

BACKENDS = {"bwrap": BwrapSandbox, "server": ServerSandbox}
SMALL = SandboxLimits(timeout_s=20, check_timeout_s=10, memory_mb=256, max_processes=64,
                      max_workspace_mb=16, max_workspace_inodes=500)
HOLD = "python3 -c 'b = bytearray(200 * 2**20); import time; time.sleep(2)'"


@pytest.fixture(scope="module", params=sorted(BACKENDS))
def box(request: pytest.FixtureRequest) -> Iterator[BwrapSandbox]:
    sandbox = BACKENDS[request.param](SMALL)
    yield sandbox
    sandbox.close()


@requires_bwrap
@requires_root
def test_memory_of_the_whole_tree_is_limited(box: BwrapSandbox):
    assert box.memory_scope in ("cgroup v1", "cgroup v2")
    with box.stage({}) as ws:
        result = ws.run(f"{HOLD} & {HOLD} & {HOLD} & wait; echo done")
        assert result.status == "memory_limit" and "Killed" in result.stderr
        assert "[memory limit: the command's processes together" in result.as_tool_output()
        assert ws.run("echo next").stdout == "next\n"
        check = ws.run_check(f"{HOLD} & {HOLD} & wait; echo True")
        assert check.status == "memory_limit"


@requires_bwrap
@requires_root
def test_tmp_files_count_against_the_tree_memory(box: BwrapSandbox):
    with box.stage({}) as ws:
        result = ws.run("head -c 200000000 /dev/zero > /tmp/a; "
                        "python3 -c 'b = bytearray(150 * 2**20)'; echo exit=$?")
        assert result.status == "memory_limit" and "exit=137" in result.stdout


@requires_bwrap
def test_without_cgroups_memory_is_per_process_and_that_is_warned():
    config = SandboxConfig(memory_cgroup=False)
    with pytest.warns(UserWarning, match="memory is limited per process only"):
        box = BwrapSandbox(SMALL, config)
    with box, box.stage({}) as ws:
        assert box.memory_scope == "process" and box.memory is None
        result = ws.run(f"{HOLD} & {HOLD} & wait; echo done")
        assert (result.status, result.stdout) == ("ok", "done\n")  # the gap, as warned


@requires_bwrap
@requires_root
def test_memory_cgroups_are_removed_on_close():
    with BwrapSandbox(SMALL) as box, box.stage({}) as ws:
        ws.run("true")
        root = box.memory.root
        assert (root / "c0").is_dir()
    assert not root.exists()


@requires_root
def test_memory_cgroups_of_a_dead_harness_are_reaped():
    parent, _version, reason = MemoryCgroups.find()
    assert parent is not None, reason
    dead = parent / f"vera-{owner_tag(1).split('-')[0]}-999999999-1-0"  # no such pid
    (dead / "c0").mkdir(parents=True)
    assert reap_orphans(parent) == [dead] and not dead.exists()


@requires_root
def test_attaching_a_process_that_already_exited_is_no_error():
    """bwrap that fails to set up a sandbox exits before the harness places it: that is
    no cgroup fault (the start failure reports bwrap's own message). A cgroup that is
    gone still is."""
    parent, version, reason = MemoryCgroups.find()
    assert parent is not None, reason
    cgroups = MemoryCgroups(parent, version, 64 * 2**20)
    try:
        leaf = cgroups.acquire()
        gone = subprocess.Popen(["true"])
        gone.wait()
        leaf.attach(gone.pid)  # reaped: no such process
        assert leaf.members() == []
        with pytest.raises(SandboxError, match="cannot move the sandbox into"):
            CommandCgroup(leaf.path / "missing", version).attach(os.getpid())
    finally:
        cgroups.close()


def test_cgroup_discovery_reads_v1_and_v2_layouts():
    own = own_cgroups("12:memory:/harness/a\n3:cpu,cpuacct:/\n0::/user.slice/s.scope\n")
    assert own == {"memory": "/harness/a", "cpu": "/", "cpuacct": "/", "": "/user.slice/s.scope"}
    mounts = cgroup_mounts(
        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
        "42 31 0:39 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n")
    assert mounts == {"memory": ("/", "/sys/fs/cgroup/memory"),
                      "cgroup2": ("/", "/sys/fs/cgroup/unified")}


def test_configured_cgroup_parent_that_is_no_cgroup_is_refused(tmp_path: Path):
    assert MemoryCgroups.find(tmp_path) == (None, 0, f"{tmp_path} is not a memory cgroup")


def test_oom_kills_read_from_the_kernel_counters(tmp_path: Path):
    (tmp_path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 2\noom_kill 2\n")
    assert CommandCgroup(tmp_path, 1).oom_kills() == 3
    assert CommandCgroup(tmp_path, 2).oom_kills() == 2


@requires_bwrap
def test_writes_beneath_names_past_path_max_are_measured(box: BwrapSandbox):
    with box.stage({}) as ws:
        result = ws.run('n=$(printf "d%.0s" $(seq 250)); for i in $(seq 20); do '
                        'mkdir $n && cd $n; done; pwd | wc -c; '
                        'head -c 40000000 /dev/zero > big; echo wrote')
        assert int(result.stdout.split()[0]) > 4096  # past PATH_MAX
        assert result.status == "disk_limit", result.as_tool_output()
        assert ws.run("rm -rf d*; echo cleaned").stdout == "cleaned\n"


@requires_bwrap
def test_tree_deeper_than_the_walk_fails_closed_until_removed(box: BwrapSandbox):
    with box.stage({}) as ws:
        deep = ws.run(f"for i in $(seq {MAX_DEPTH + 2}); do mkdir x && cd x; done; echo deep")
        assert deep.status == "disk_limit"
        assert ws.run("echo still").status == "disk_limit"  # nothing runs unmeasured
        assert ws.run("rm -rf x; echo cleaned").status == "ok"
        assert ws.run("echo fine").stdout == "fine\n"


@requires_bwrap
def test_inode_limit_stops_a_file_flood(box: BwrapSandbox):
    with box.stage({}) as ws:
        assert ws.run("seq 2000 | xargs touch; echo made").status == "disk_limit"
        assert ws.run("rm -f [0-9]*; echo cleaned").stdout == "cleaned\n"
        assert ws.run("seq 100 | xargs touch; echo made").stdout == "made\n"


@requires_bwrap
def test_locked_workspace_directory_does_not_lock_out_the_harness(box: BwrapSandbox):
    with box.stage({}) as ws:
        assert ws.run("chmod 000 /work; echo locked").stdout == "locked\n"
        assert ws.run("echo next").stdout == "next\n"
        assert ws.run_check("echo True").stdout == "True\n"


def test_measure_stops_past_a_threshold_and_counts_links_once(tmp_path: Path):
    for i in range(50):
        (tmp_path / f"f{i}").write_bytes(b"x")
    os.link(tmp_path / "f0", tmp_path / "link")
    full = measure(tmp_path)
    assert (full.inodes, full.complete, full.stopped) == (50, True, False)
    early = measure(tmp_path, stop_inodes=10)
    assert (early.inodes, early.stopped) == (11, True)


def test_measure_of_a_tree_deeper_than_the_walk_is_incomplete(tmp_path: Path):
    deep = tmp_path.joinpath(*["d"] * (MAX_DEPTH + 1))
    deep.mkdir(parents=True)
    (deep / "hidden").write_bytes(b"x" * 100_000)
    assert measure(tmp_path).complete is False
    assert measure(tmp_path.joinpath(*["d"] * 2)).complete is True


def test_measure_of_an_unreadable_directory_is_incomplete():
    base = Path(tempfile.mkdtemp(prefix="vera-measure-"))
    try:
        base.chmod(0o755)
        (base / "open").mkdir(mode=0o755)
        (base / "locked").mkdir(mode=0o755)
        (base / "locked" / "f").write_bytes(b"x")
        (base / "locked").chmod(0)
        # root reads everything, so measure as an unprivileged user: readable, then not
        pid = os.fork()
        if pid == 0:  # the child only walks and exits
            if os.geteuid() == 0:
                os.setresuid(65534, 65534, 65534)
            found = (measure(base).complete, measure(base / "open").complete)
            os._exit(0 if found == (False, True) else 1)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    finally:
        (base / "locked").chmod(0o700)
        shutil.rmtree(base)


@requires_root
def test_no_warning_where_cgroups_work():
    assert MemoryCgroups.find()[0] is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        box = BwrapSandbox(FAST)
    box.close()
