"""A check's guarantees hold on both of its paths: a fresh sandbox and the check server.

``run_check`` on the plain ``bwrap`` backend starts a sandbox per check; on
``bwrap-server`` (the default) it goes through the workspace's long-lived, read-only
check server (``server``). Every guarantee test runs on both (the ``box`` fixture),
and on the server path also asserts that a check server ran its checks (``served``,
or the pid a check printed), so a silent fallback to a fresh sandbox cannot make it
pass. Removing a defence fails its test on the server path (tried: ``/work`` bound
writable, no entropy binds, no network-counter or SysV replacement, no rerun).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from processes import processes_with
from sandbox_helpers import FAST, data_files, processes_of, requires_bwrap, snapshot

from vera_env.sandbox import BwrapSandbox, BwrapWorkspace, ExecResult
from vera_env.sandbox import server as server_module
from vera_env.sandbox.server import ServerSandbox, ServerWorkspace

pytestmark = requires_bwrap

PATHS = {"fresh": BwrapSandbox, "server": ServerSandbox}

SYSV = ("python3 -c 'import ctypes; l = ctypes.CDLL(None); "
        "print(l.shmget(0x5645, 0, 0), l.shmget(0x5645, 4096, 0o1600))'; echo $$")
LOOPBACK = ("python3 -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 5000)); "
            "s.listen(); c = socket.create_connection((\"127.0.0.1\", 5000)); "
            "a, _ = s.accept(); a.close(); c.close()'")
NET_STATE = "grep lo: /proc/net/dev; cat /proc/net/tcp /proc/net/snmp"
ENTROPY = ("python3 -c 'import random, os, uuid; print(random.random(), os.urandom(4).hex(), "
           "uuid.uuid4())'; echo $RANDOM; cat /proc/sys/kernel/random/uuid; "
           "head -c8 /dev/random | od -An -tx1; seq 1 20 | shuf | head -3; "
           "seq 1 20 | sort -R | head -3")


@pytest.fixture(scope="module", params=sorted(PATHS))
def box(request: pytest.FixtureRequest) -> Iterator[BwrapSandbox]:
    sandbox = PATHS[request.param](FAST)
    yield sandbox
    sandbox.close()


@pytest.fixture
def ws(box: BwrapSandbox, data_dir: Path) -> Iterator[BwrapWorkspace]:
    with box.stage(data_files(data_dir)) as workspace:
        yield workspace


@pytest.fixture(scope="module")
def reference() -> Iterator[BwrapSandbox]:
    """The plain backend: what a check saw before the check server existed."""
    sandbox = BwrapSandbox(FAST)
    yield sandbox
    sandbox.close()


def served(ws: BwrapWorkspace) -> bool:
    """Whether the checks so far went where this path sends them."""
    if isinstance(ws, ServerWorkspace):
        return ws.check_server_pid is not None
    return not hasattr(ws, "check_server_pid")


def test_check_cannot_write_the_workspace(ws: BwrapWorkspace):
    ws.run("cat table.tsv > mine.tsv")  # the agent's file: writable to its commands
    before = snapshot(ws.path)
    touched = ws.run_check("touch /work/x; echo $?")
    sorted_ = ws.run_check("sort -r -o mine.tsv mine.tsv; echo $?")
    removed = ws.run_check("rm -f mine.tsv; echo > new.txt; echo $?")
    assert "Read-only file system" in touched.stderr and touched.stdout == "1\n"
    assert "Read-only file system" in sorted_.stderr and sorted_.stdout == "2\n"
    assert removed.stdout != "0\n" and snapshot(ws.path) == before and served(ws)


def test_check_writes_to_tmp_and_shm_do_not_reach_the_next_check(ws: BwrapWorkspace):
    ws.run_check("echo x > /tmp/a; mkdir /tmp/d; echo y > /dev/shm/b; echo z > $HOME/c")
    assert ws.run_check("ls -A /tmp /dev/shm").stdout == "/dev/shm:\n\n/tmp:\n"
    assert served(ws)


def test_background_jobs_and_daemons_of_a_check_are_dead_before_the_next(ws: BwrapWorkspace):
    started = ws.run_check("setsid nohup sleep 2101.5 >/dev/null 2>&1 & sleep 2102.5 & "
                           "echo started")
    assert (started.status, started.stdout) == ("ok", "started\n") and started.duration_s < 2
    assert processes_with("sleep 2101.5") == [] and processes_with("sleep 2102.5") == []
    assert "sleep" not in ws.run_check("ps -e -o args=").stdout and served(ws)


def test_sysv_ipc_of_a_check_is_gone_with_no_trace_in_the_next(ws: BwrapWorkspace):
    first = ws.run_check(SYSV).stdout.split()
    second = ws.run_check(SYSV).stdout.split()
    # The key is unknown to the second check, and the id sequence did not move on.
    assert first[0] == second[0] == "-1" and first[1] == second[1] != "-1"
    # A check that made an IPC object replaces the server: its pid says where it ran.
    assert (first[2] != "1") == (second[2] != "1") == isinstance(ws, ServerWorkspace)


def test_network_use_of_a_check_is_not_visible_to_the_next(ws: BwrapWorkspace):
    untouched = ws.run_check(NET_STATE).stdout
    used = ws.run_check(LOOPBACK)
    assert used.status == "ok" and used.exit_code == 0, used.stderr
    assert ws.run_check(NET_STATE).stdout == untouched and served(ws)


def test_check_timeout_kills_the_tree_and_reports_a_timeout(ws: BwrapWorkspace):
    result = ws.run_check("setsid sleep 2103.5 & sleep 2104.5", timeout_s=0.5)
    assert (result.status, result.timed_out, result.exit_code) == ("timeout", True, 137)
    assert processes_with("sleep 2103.5") == [] and processes_with("sleep 2104.5") == []
    assert ws.run_check("echo next").stdout == "next\n" and served(ws)


@pytest.mark.parametrize("path", sorted(PATHS))
def test_check_output_cap_kills_and_the_next_check_runs(path: str):
    limits = FAST.model_copy(update={"max_output_bytes": 100_000})
    with PATHS[path](limits) as small, small.stage({}) as ws:
        result = ws.run_check("yes")
        assert result.status == "output_limit" and result.stdout_truncated
        assert ws.run_check("echo ok").stdout == "ok\n" and served(ws)


def test_check_rlimits_equal_the_fresh_check(ws: BwrapWorkspace, reference: BwrapSandbox):
    probe = "ulimit -c -v -u -f -n; python3 -c 'bytearray(2 * 1024 ** 3)' 2>&1 | tail -1"
    with reference.stage({}) as fresh:
        expected = fresh.run_check(probe).stdout
    assert "MemoryError" in expected and ws.run_check(probe).stdout == expected
    assert served(ws)


def test_check_entropy_equals_the_fresh_check(ws: BwrapWorkspace, reference: BwrapSandbox):
    with reference.stage({}) as fresh:
        expected = fresh.run_check(ENTROPY)
    assert expected.status == "ok" and expected.stderr == ""
    assert {ws.run_check(ENTROPY).stdout for _ in range(2)} == {expected.stdout}
    assert served(ws)


def test_empty_and_non_ascii_checks_equal_the_fresh_check(ws: BwrapWorkspace,
                                                          reference: BwrapSandbox):
    commands = ("", "echo h\u00e9llo \udcff | od -An -tx1", "printf '%s' \"$0\" $'\\xff'")
    with reference.stage({}) as fresh:
        expected = [fresh.run_check(c) for c in commands]
    got = [ws.run_check(c) for c in commands]
    assert [(r.status, r.exit_code, r.stdout) for r in got] == [
        (r.status, r.exit_code, r.stdout) for r in expected]
    assert expected[0].status == "ok" and "c3 a9" in expected[1].stdout and served(ws)


def test_agent_processes_are_out_of_a_checks_reach(ws: BwrapWorkspace):
    ran: list = []
    agent = threading.Thread(target=lambda: ran.append(ws.run("sleep 2105.5", timeout_s=20)))
    agent.start()
    try:
        deadline = time.monotonic() + 5
        while not processes_with("sleep 2105.5", settle_s=0) and time.monotonic() < deadline:
            time.sleep(0.02)
        probe = ws.run_check("ps -e -o args=; pkill -9 sleep; kill -9 -1; echo done")
        assert "2105.5" not in probe.stdout and probe.stdout.endswith("done\n")
        assert processes_with("sleep 2105.5", settle_s=0)  # still running
        assert served(ws)
    finally:
        ws.abort()
        agent.join(10)
    assert ran and ran[0].status == "killed"


def test_agent_writes_reach_the_next_check_read_only(ws: BwrapWorkspace):
    ws.run("echo 1 > a.txt")
    assert ws.run_check("cat a.txt").stdout == "1\n"
    ws.run("echo 2 > a.txt; mkdir -p d; echo 3 > d/b.txt")
    seen = ws.run_check("cat a.txt d/b.txt; echo 4 > d/b.txt")
    assert seen.stdout == "2\n3\n" and "Read-only" in seen.stderr
    assert (ws.path / "d" / "b.txt").read_text() == "3\n" and served(ws)


def test_concurrent_checks_on_one_workspace_each_get_their_result(ws: BwrapWorkspace):
    results: dict[int, ExecResult] = {}
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(
        i, ws.run_check(f"sleep 0.2; echo {i} $(ls /tmp) $$; touch /tmp/{i}")))
        for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    # Each saw an empty /tmp; on the server path the first got the server (its pid is
    # not 1) and the others a fresh sandbox each. (Its starter thread has exited, and
    # the server with it: ``--die-with-parent``.)
    said = {i: r.stdout.split() for i, r in results.items()}
    assert {i: words[0] for i, words in said.items()} == {i: str(i) for i in range(4)}
    assert all(len(words) == 2 for words in said.values())
    assert any(words[1] != "1" for words in said.values()) == isinstance(ws, ServerWorkspace)


def test_check_reruns_fresh_when_its_server_dies_with_its_starter_thread(
        sws: ServerWorkspace):
    started, release = threading.Event(), threading.Event()

    def starter() -> None:
        sws.run_check("true")  # the server's bwrap dies when this thread exits
        started.set()
        release.wait(10)

    first = threading.Thread(target=starter)
    first.start()
    assert started.wait(10) and sws.check_server_pid is not None
    deadline = time.monotonic() + 5
    results: list[ExecResult] = []
    second = threading.Thread(target=lambda: results.append(
        sws.run_check("sleep 0.61; echo $$ done")))
    second.start()
    while not processes_with("sleep 0.61", settle_s=0) and time.monotonic() < deadline:
        time.sleep(0.01)
    release.set()  # the starter exits while the check runs in its server
    first.join(5)
    second.join(10)
    assert results and (results[0].status, results[0].stdout) == ("ok", "1 done\n")


def test_close_kills_the_check_server_and_leaves_no_process(box: BwrapSandbox):
    ws = box.stage({})
    ws.run("true")
    ws.run_check("true")
    marker = str(ws.path)
    ws.close()
    assert processes_with(marker) == [] and not ws.path.exists()
    assert processes_of(box.host_ids[0]) == []


def test_abort_kills_a_running_check_and_stops_the_idle_server(ws: BwrapWorkspace):
    ran: list = []
    check = threading.Thread(target=lambda: ran.append(ws.run_check("sleep 2106.5")))
    check.start()
    deadline = time.monotonic() + 5
    while not processes_with("sleep 2106.5", settle_s=0) and time.monotonic() < deadline:
        time.sleep(0.02)
    ws.abort()
    check.join(10)
    assert ran and ran[0].status == "killed" and processes_with("sleep 2106.5") == []
    ws.abort()  # idle now: nothing of the workspace is left running
    assert processes_with(str(ws.path)) == [] and ws.run_check("echo again").stdout == "again\n"


# The server path only: which sandbox a check goes to.


@pytest.fixture
def sws(data_dir: Path) -> Iterator[ServerWorkspace]:
    with ServerSandbox(FAST) as sandbox, sandbox.stage(data_files(data_dir)) as workspace:
        yield workspace


def test_checks_share_one_check_server_apart_from_the_command_server(sws: ServerWorkspace):
    sws.run("true")
    sws.run_check("true")
    pid = sws.check_server_pid
    assert sws.run_check("echo $$").stdout != "1\n" and sws.check_server_pid == pid
    assert pid is not None and sws.server_pid not in (None, pid)


def test_check_with_an_overlay_takes_a_fresh_sandbox(sws: ServerWorkspace):
    mutant = sws.scratch_dir() / "mutant.txt"
    mutant.write_text("gamma\n")
    result = sws.run_check("cat notes.txt; echo $$", overlay={"notes.txt": mutant})
    assert result.stdout == "gamma\n1\n" and sws.check_server_pid is None
    assert sws.run_check("cat notes.txt").stdout == "alpha\nbeta\n"


def test_plain_bwrap_backend_keeps_a_fresh_sandbox_per_check(reference: BwrapSandbox):
    with reference.stage({}) as ws:
        assert [ws.run_check("echo $$").stdout for _ in range(2)] == ["1\n", "1\n"]


def test_check_server_that_cannot_start_falls_back_to_fresh(monkeypatch):
    def broken(sandbox, path, *, writable=True):
        return lambda lockdown, socket_fd: [*sandbox.base_args(), "--", "false"]

    monkeypatch.setattr(server_module, "_argv_builder", broken)
    with ServerSandbox(FAST) as sandbox, sandbox.stage({}) as ws:
        assert ws.run_check("echo fine; echo $$").stdout == "fine\n1\n"
        assert "did not start" in sandbox.server_failure and ws.check_server_pid is None
