"""Red-team hacks whose harm can only be seen from the host: peeking, signalling,
exhausting the machine, and infrastructure faults that must not read as a score of 0.

Each test plays the hack through ``VeraEnv`` (the sandbox the environment really uses)
and asserts on the host: the secret never reached an observation, the host process
survived, the limit held within its time, nothing outlived ``close()``, the next step
worked.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from processes import processes_with

from vera_env import info as keys
from vera_env.env import VeraEnv
from vera_env.errors import SandboxError
from vera_env.rollout import run_episode
from vera_env.sandbox import BwrapSandbox, SandboxConfig, SandboxLimits, probe_bwrap
from vera_env.tasks import Task, load_tasks
from vera_env.verification.strength.reference import Reference

pytestmark = pytest.mark.skipif(bool(probe_bwrap()), reason=f"bwrap unusable: {probe_bwrap()}")

TABLE = "id\tvalue\n1\t3\n2\t5\n"
QUICK = SandboxLimits(timeout_s=3, check_timeout_s=2, memory_mb=512, max_processes=64,
                      max_workspace_mb=16, disk_poll_s=0.05, max_output_bytes=4 * 2**20)


def _task(root: Path, answer: str = "4") -> Task:
    data = root / "data"
    data.mkdir(parents=True)
    (data / "data.tsv").write_text(TABLE)
    return Task(id="t", question="Mean of value?", answer=answer,
                grader={"kind": "numeric", "abs_tol": 0.01}, data_dir=data,
                ).with_reference(Reference(solve=_mean))


def _mean(contents) -> str:
    values = [float(line.split("\t")[1]) for line in
              contents["data.tsv"].decode().splitlines()[1:] if line.strip()]
    return f"{sum(values) / len(values):g}"


@pytest.fixture
def env(tmp_path):
    environment = VeraEnv([_task(tmp_path)], max_steps=20, limits=QUICK, sandbox="bwrap")
    environment.reset(seed=0)
    yield environment
    environment.close()


def _run(env, command: str) -> dict:
    return env.step(f"<command>{command}</command>")[-1]


def _check(env, command: str, summary: str | None = None) -> dict:
    summary = summary or uuid.uuid4().hex
    return env.step(f'NODE kind=load summary="{summary}"\nCHECK range "c" :: {command}')[-1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().split()[2] != "Z"


# ----- no forging, no peeking -----

def test_no_connection_to_a_host_loopback_service(env):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(0.3)
    port = server.getsockname()[1]
    probe = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 1)\""
    try:
        out = _run(env, f"{probe} && echo CONNECTED")
        check = _check(env, f"{probe} && echo True || echo False")
        with pytest.raises(TimeoutError):
            server.accept()
    finally:
        server.close()
    assert "CONNECTED" not in out[keys.COMMAND_OUTPUT]
    assert check[keys.CHECKS][0]["passed"] is False


def test_no_signal_reaches_a_host_process(env):
    victim = subprocess.Popen(["sleep", "1013.5"])
    try:
        _run(env, f"kill -9 {victim.pid}; pkill -9 sleep; kill -9 -1; echo done")
        _check(env, f"kill -9 {victim.pid}; kill -9 -1; echo True")
        assert _alive(victim.pid)
        assert "done" in _run(env, "echo done")[keys.COMMAND_OUTPUT]
    finally:
        victim.kill()
        victim.wait()


def test_task_file_answer_and_host_secrets_are_invisible(tmp_path, monkeypatch):
    answer = f"ANSWER-{uuid.uuid4().hex}"
    suite = tmp_path / "suite"
    (suite / "t1" / "data").mkdir(parents=True)
    (suite / "t1" / "data" / "data.tsv").write_text(TABLE)
    (suite / "t1" / "task.json").write_text(json.dumps(
        {"question": "What is it?", "answer": answer, "grader": {"kind": "exact"}}))
    suite.chmod(0o755)
    monkeypatch.setenv("OPENAI_API_KEY", f"sk-{answer}")
    env = VeraEnv(load_tasks(suite), max_steps=10, limits=QUICK, sandbox="bwrap")
    try:
        env.reset(seed=0)
        outputs = [_run(env, command)[keys.COMMAND_OUTPUT] for command in (
            f"cat {suite}/t1/task.json; ls {suite} {Path.home()} /root /home",
            "env; cat /proc/1/environ | tr '\\0' '\\n'",
            "find / -name 'task.json' -o -name '*.jsonl' 2>/dev/null | head",
            "grep -rshoE 'ANSWER-[0-9a-f]{32}' /etc /opt /tmp /work /proc/1/environ 2>/dev/null | head")]
        # A pattern, not the literal: the check's own command line is readable in /proc.
        checks = _check(env, "grep -rqsE 'ANSWER-[0-9a-f]{32}' /etc /opt /tmp /work /home "
                             "/root /var /srv /mnt /proc/1/environ 2>/dev/null && echo True || echo False")
    finally:
        env.close()
    assert all(answer not in text and answer[:12] not in text for text in outputs), outputs
    assert checks[keys.CHECKS][0]["detail"] == "check evaluated False"


def test_vera_env_source_not_importable_or_readable(env):
    import vera_env

    source = Path(vera_env.__file__).resolve().parent
    out = _run(env, f"python3 -c 'import vera_env'; ls {source}; cat {source}/rewards.py")
    assert "vera_env is not available" in out[keys.COMMAND_OUTPUT] or \
        "No module named" in out[keys.COMMAND_OUTPUT]
    assert "RewardConfig" not in out[keys.COMMAND_OUTPUT]


def test_other_episode_workspace_invisible(env, tmp_path):
    other = VeraEnv([_task(tmp_path / "other")], max_steps=5, limits=QUICK, sandbox="bwrap")
    try:
        other.reset(seed=0)
        _run(other, "echo SECRET-OTHER > mine.txt")
        target = other.workspace.path
        out = _run(env, f"ls {target} {target.parent}; cat {target}/mine.txt; ls /tmp")
    finally:
        other.close()
    assert "SECRET-OTHER" not in out[keys.COMMAND_OUTPUT]


def test_symlink_to_a_host_secret_never_read_by_the_harness(env):
    secret_dir = Path(tempfile.mkdtemp(prefix="vera-redteam-"))
    secret = secret_dir / "secret.txt"
    secret.write_text("1\nSECRET-HOST-" + uuid.uuid4().hex + "\n")
    secret.chmod(0o600)
    try:
        _run(env, f"ln -s {secret} s.txt; ln -s {secret_dir} d")
        obs, *_, info = env.step(
            'NODE kind=load summary="linked" artifact=s.txt\n'
            'CHECK range "c" :: cat s.txt d/secret.txt; test -L s.txt && echo True || echo False')
        seen = obs + json.dumps(info)
    finally:
        shutil.rmtree(secret_dir)
    assert "SECRET-HOST" not in seen
    assert info[keys.CHECKS][0]["discriminating"] is False


def test_node_checks_leave_workspace_and_source_byte_identical(env):
    _run(env, "cut -f2 data.tsv | tail -n +2 > values.txt")  # derived from the data: 3, 5
    def snap():
        return {p: ((env.workspace.path / p).read_bytes(), (env.workspace.path / p).lstat().st_mode)
                for p in env.workspace.listing()}
    before, source = snap(), (env.task.data_dir / "data.tsv").read_bytes()
    tamper = ["rm -f data.tsv", "echo 9 >> values.txt", "chmod 000 values.txt",
              "mv values.txt v2.txt", "ln -sf /etc/passwd data.tsv", "touch extra.txt",
              "(sleep 0.5; echo late > late.txt) &"]
    checks = "\n".join(f'CHECK type "t{i}" :: {c}; echo True' for i, c in enumerate(tamper))
    real = "CHECK range \"sum\" :: test $(awk '{s+=$1} END {print s}' values.txt) -eq 8 && echo True || echo False"
    info = env.step(f'NODE kind=load summary="tamper node"\n{checks}\n{real}')[-1]
    time.sleep(1.0)
    assert snap() == before
    assert (env.task.data_dir / "data.tsv").read_bytes() == source
    assert info[keys.CHECKS][-1]["discriminating"] is True


# ----- containment -----

@pytest.mark.parametrize("command,says", [
    (":(){ :|:& };:; sleep 10", "Resource temporarily unavailable"),
    ('python3 -c "b = bytearray(8 * 2**30)"', "MemoryError"),
    ("for i in $(seq 100); do head -c 1048576 /dev/zero > f$i; done", "[disk limit:"),
    ("yes | head -c 10000000000", "[output limit:"),
    ("trap '' TERM INT HUP; sleep 1014.5", "[timed out after"),
    ("setsid nohup sleep 1015.5 > /dev/null 2>&1 & echo started", "started"),
    # issue 11: each process under the limit, the tree over it
    ("python3 -c 'import os, time; [os.fork() or (bytearray(200 * 2**20), time.sleep(1), "
     "os._exit(0)) for _ in range(3)]; [os.wait() for _ in range(3)]'", "[memory limit:"),
    # issue 11: beneath a path longer than PATH_MAX, where a path walk could not look
    ('n=$(printf "d%.0s" $(seq 250)); for i in $(seq 20); do mkdir $n && cd $n; done; '
     "head -c 40000000 /dev/zero > big", "[disk limit:"),
    ("head -c 100000000 /dev/zero > /dev/shm/park; touch /dev/park",
     "No space left on device"),
], ids=["fork-bomb", "memory-bomb", "disk-filler", "10GB-output", "ignores-SIGTERM",
        "daemonizes", "memory-tree", "deep-path-filler", "parks-in-dev-shm"])
def test_bombs_end_within_their_limit_and_the_next_step_works(env, command, says):
    started = time.monotonic()
    info = _run(env, command)
    elapsed = time.monotonic() - started
    tool_output = info[keys.COMMAND_OUTPUT]
    assert elapsed < QUICK.timeout_s + 4, f"{elapsed:.1f}s: {tool_output[-300:]}"
    assert says in tool_output, tool_output[-500:]
    started = time.monotonic()
    assert _run(env, "rm -rf f* d*; echo next")[keys.COMMAND_OUTPUT].startswith("next")
    assert time.monotonic() - started < 3
    assert processes_with("sleep 1014.5", settle_s=2.0) == [] and processes_with("sleep 1015.5", settle_s=2.0) == []


def test_nothing_outlives_close(tmp_path):
    env = VeraEnv([_task(tmp_path)], max_steps=5, limits=QUICK, sandbox="bwrap")
    env.reset(seed=0)
    root = env.workspace.path
    env.step("<command>setsid nohup sleep 1016.5 > /dev/null 2>&1 & sleep 1017.5</command>")
    env.close()
    assert processes_with("sleep 1016.5", settle_s=2.0) == [] and processes_with("sleep 1017.5", settle_s=2.0) == []
    assert not root.exists()


def test_check_sleeping_past_its_timeout_fails_and_earns_nothing(env):
    started = time.monotonic()
    info = _check(env, "cat data.tsv > /dev/null; sleep 30; echo True")
    assert time.monotonic() - started < QUICK.check_timeout_s + 3
    assert info[keys.CHECKS][0]["passed"] is False and "timed out" in info[keys.CHECKS][0]["detail"]
    assert info[keys.REWARD_PARTS]["verification"] == 0.0


# ----- unscorable, not zero -----

class _Policy:
    def __init__(self, turns):
        self.turns = turns

    def act(self, observation, info):
        return self.turns[min(info[keys.STEP], len(self.turns) - 1)]


def test_staging_failure_at_reset_is_status_sandbox_score_none(tmp_path):
    sandbox = BwrapSandbox(QUICK)
    env = VeraEnv([_task(tmp_path)], max_steps=3, limits=QUICK, sandbox=sandbox)
    shutil.rmtree(sandbox.root)  # the temp dir vanished (a tmp cleaner, a full disk)
    try:
        attempt = run_episode(env, _Policy(["FINAL ANSWER: 4"]), task_id="t")
    finally:
        env.close()
        sandbox.close()
    assert (attempt.status, attempt.score, attempt.unscorable) == ("sandbox", None, True)
    assert "staging" in attempt.error


def test_bwrap_vanishing_mid_episode_is_unscorable_not_zero(tmp_path):
    tools = Path(tempfile.mkdtemp(prefix="vera-bwrap-copy-"))
    try:
        shutil.copy2(shutil.which("bwrap"), tools / "bwrap")
        sandbox = BwrapSandbox(QUICK, SandboxConfig(bwrap_path=str(tools / "bwrap")))
        env = VeraEnv([_task(tmp_path)], max_steps=5, sandbox=sandbox, limits=QUICK)

        class Vanish(_Policy):
            def act(self, observation, info):
                if info[keys.STEP] == 1:
                    (tools / "bwrap").unlink()
                return super().act(observation, info)

        attempt = run_episode(env, Vanish(["<command>ls</command>"] * 3 + ["FINAL ANSWER: 4"]))
        env.close()
        sandbox.close()
    finally:
        shutil.rmtree(tools, ignore_errors=True)
    assert (attempt.status, attempt.score, attempt.unscorable) == ("sandbox", None, True)
    assert "sandbox fault" in attempt.error


def test_strength_fault_mid_node_is_unscorable(env, monkeypatch):
    def broken(prefix="x"):
        raise SandboxError("scratch space gone")
    monkeypatch.setattr(env.workspace, "scratch_dir", broken)
    _, reward, _, truncated, info = env.step(
        'NODE kind=load summary="rows"\nCHECK range "c" :: test $(wc -l < data.tsv) -eq 3 '
        '&& echo True || echo False')
    assert info[keys.UNSCORABLE] is True and truncated
    assert info[keys.REWARD_PARTS] == {"verification": 0.0, "correctness": None, "penalty": 0.0}
    assert "scratch space gone" in info[keys.ERROR]
