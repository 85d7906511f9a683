"""The persistent-sandbox fast path (``sandbox="bwrap-server"``): same results, same boundary.

The rest of tests/sandbox passes against it too (run them with ``BwrapSandbox``
replaced by ``ServerSandbox``), except the two that assert that no process of the
sandbox uid exists while a workspace is open: an idle server is such a process by design.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from processes import processes_with
from sandbox_helpers import BWRAP_REASON, FAST

from vera_env.errors import SandboxError
from vera_env.sandbox import BwrapSandbox, make_sandbox
from vera_env.sandbox import server as server_module
from vera_env.sandbox.server import ServerSandbox, ServerWorkspace

pytestmark = pytest.mark.skipif(bool(BWRAP_REASON), reason=f"bwrap unusable: {BWRAP_REASON}")

SAME_AS_PER_COMMAND = (
    "echo hi; echo err >&2; exit 3",
    "id -un; echo $HOME; pwd; hostname",
    "yes | head -2",  # SIGPIPE restored: yes dies quietly, exit 0
    "ulimit -c -v -u -f",
    "env | sort",
    "ls / /work; cat /etc/passwd",
    "echo $(( 6 * 7 )) > answer.txt && cat answer.txt && rm answer.txt",
)


@pytest.fixture(scope="module")
def box() -> Iterator[ServerSandbox]:
    sandbox = ServerSandbox(FAST)
    yield sandbox
    sandbox.close()


@pytest.fixture
def ws(box: ServerSandbox) -> Iterator[ServerWorkspace]:
    with box.stage({}) as workspace:
        yield workspace


def server_pid(ws: ServerWorkspace) -> int | None:
    return ws.server_pid


def test_make_sandbox_bwrap_server_builds_the_fast_path():
    sandbox = make_sandbox("bwrap-server", FAST)
    try:
        assert isinstance(sandbox, ServerSandbox) and sandbox.name == "bwrap"
    finally:
        sandbox.close()


def test_results_equal_the_per_command_sandbox(ws: ServerWorkspace):
    with BwrapSandbox(FAST) as plain_box, plain_box.stage({}) as plain:
        for command in SAME_AS_PER_COMMAND:
            fast, slow = ws.run(command), plain.run(command)
            assert (fast.stdout, fast.stderr, fast.exit_code, fast.status) == (
                slow.stdout, slow.stderr, slow.exit_code, slow.status), command
    assert server_pid(ws) is not None  # they really went through the server


def test_commands_share_one_server_and_the_workspace(ws: ServerWorkspace):
    ws.run("echo 1 > kept.txt")
    pid = server_pid(ws)
    assert ws.run("cat kept.txt").stdout == "1\n"
    assert server_pid(ws) == pid


def test_background_jobs_and_daemons_die_with_their_command(ws: ServerWorkspace):
    result = ws.run("setsid nohup sleep 2001.5 >/dev/null 2>&1 & sleep 2002.5 & echo started")
    assert (result.status, result.stdout) == ("ok", "started\n") and result.duration_s < 2
    assert processes_with("sleep 2001.5") == [] and processes_with("sleep 2002.5") == []
    # One command, no pipe: bash execs ps (`ps | sort` raced sort's exec, seeing "bash").
    assert sorted(ws.run("ps -e -o comm=").stdout.split()) == ["ps", "python3"]


def test_command_is_not_pid_1_so_it_can_signal_itself(ws: ServerWorkspace):
    # The one visible difference: per command, the command was the namespace's pid 1,
    # which ignores signals it has no handler for, so `kill -9 $$` did nothing (exit 0).
    assert ws.run("kill -9 $$").exit_code == 137


def test_tmp_dev_shm_and_new_dev_entries_do_not_survive_a_command(ws: ServerWorkspace):
    ws.run("echo x > /tmp/a; echo y > /dev/shm/b; echo z > /dev/c")
    assert ws.run("ls -A /tmp /dev/shm; test -e /dev/c || echo gone").stdout == (
        "/dev/shm:\n\n/tmp:\ngone\n")


def test_changed_sandbox_state_gets_a_fresh_server(ws: ServerWorkspace):
    ws.run("true")
    pid = server_pid(ws)
    ws.run("chmod 000 /tmp; rm /dev/ptmx; ln -s /work /dev/ptmx")
    assert ws.run("touch /tmp/x && readlink /dev/ptmx").stdout == "pts/ptmx\n"
    assert server_pid(ws) not in (None, pid)  # replaced before the next command ran


def test_zygote_cannot_be_read_traced_or_signalled_by_commands(ws: ServerWorkspace):
    ws.run("true")
    pid = server_pid(ws)
    probe = ws.run("cat /proc/1/environ; head -c1 /proc/1/mem; "
                   "kill -INT 1; kill -TERM 1; kill -HUP 1; kill -USR1 1; echo sent")
    assert "Permission denied" in probe.stderr and probe.stdout.endswith("sent\n")
    assert ws.run("echo alive").stdout == "alive\n" and server_pid(ws) == pid


def test_timeout_kills_the_tree_and_the_next_command_gets_a_fresh_server(ws: ServerWorkspace):
    ws.run("true")
    pid = server_pid(ws)
    result = ws.run("setsid sleep 2003.5 & sleep 2004.5", timeout_s=0.5)
    assert (result.status, result.timed_out, result.exit_code) == ("timeout", True, 137)
    assert processes_with("sleep 2003.5") == [] and processes_with("sleep 2004.5") == []
    assert ws.run("echo next").stdout == "next\n" and server_pid(ws) not in (None, pid)


def test_output_limit_kills_and_recovers(box: ServerSandbox):
    limits = FAST.model_copy(update={"max_output_bytes": 100_000})
    with ServerSandbox(limits) as small, small.stage({}) as ws:
        result = ws.run("yes")
        assert result.status == "output_limit"
        assert ws.run("echo ok").stdout == "ok\n"


def test_abort_from_another_thread_kills_the_command(ws: ServerWorkspace):
    box: list = []
    thread = threading.Thread(target=lambda: box.append(ws.run("sleep 2005.5")))
    thread.start()
    deadline = time.monotonic() + 5
    while not processes_with("sleep 2005.5", settle_s=0) and time.monotonic() < deadline:
        time.sleep(0.02)
    ws.abort()
    thread.join(5)
    assert box and box[0].status == "killed" and processes_with("sleep 2005.5") == []
    assert ws.run("echo after").stdout == "after\n"
    ws.abort()  # idle: the server itself is stopped, nothing of the workspace runs
    assert processes_with(str(ws.path)) == [] and ws.run("echo again").stdout == "again\n"


def test_close_kills_the_server_and_refuses_more(box: ServerSandbox):
    ws = box.stage({})
    ws.run("true")
    marker = str(ws.path)
    assert processes_with(marker, settle_s=0)
    ws.close()
    assert processes_with(marker) == [] and not ws.path.exists()
    with pytest.raises(SandboxError, match="closed"):
        ws.run("true")


def test_forgotten_workspace_is_cleaned_by_its_finalizer(box: ServerSandbox):
    import gc

    ws = box.stage({})
    ws.run("true")
    marker, root = str(ws.path), ws.path.parent
    del ws
    gc.collect()
    assert processes_with(marker) == [] and not root.exists()


def test_checks_never_use_the_command_server(ws: ServerWorkspace):
    result = ws.run_check("touch /work/x 2>&1; echo $$")
    assert "Read-only file system" in result.stdout and not result.stdout.endswith("\n1\n")
    assert server_pid(ws) is None  # the check server is another (test_check_server)
    assert ws.check_server_pid is not None


def test_concurrent_runs_fall_back_to_a_fresh_sandbox(ws: ServerWorkspace):
    results: list = []
    threads = [threading.Thread(target=lambda i=i: results.append(ws.run(f"echo {i}")))
               for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(r.stdout for r in results) == ["0\n", "1\n", "2\n", "3\n"]


def test_server_that_cannot_start_falls_back_to_per_command(monkeypatch):
    def broken(sandbox, path, *, writable=True):
        return lambda info_fd, socket_fd, seccomp=None: [*sandbox.base_args(), "--", "false"]

    monkeypatch.setattr(server_module, "_argv_builder", broken)
    with ServerSandbox(FAST) as sandbox, sandbox.stage({}) as ws:
        assert ws.run("echo fine").stdout == "fine\n"
        assert "did not start" in sandbox.server_failure


def test_server_commands_see_the_same_constant_entropy_as_per_command_runs(ws) -> None:
    probe = ("python3 -c 'import random, os; print(random.random(), os.urandom(4).hex())'; "
             "echo $RANDOM; cat /proc/sys/kernel/random/uuid; seq 1 20 | shuf | head -3")
    served = {ws.run(probe).stdout for _ in range(2)}
    assert len(served) == 1 and served == {ws.run_check(probe).stdout}
