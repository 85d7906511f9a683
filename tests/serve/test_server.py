"""``vera-env serve`` as a process: killed with SIGKILL mid-episode, stopped with SIGTERM.

The incidents: orphaned sandboxes after a crash (TRL #6427/#6430) and a client that
hangs on a dead server. A SIGKILLed server runs none of its cleanup: its sandbox
processes must die with it (bwrap's ``--die-with-parent``), its client must get an
error at once, and the next server to start must remove the workspaces it left.
"""

from __future__ import annotations

import asyncio
import signal
import threading

from ors.client import AsyncORS
from processes import owned_roots, processes_with
from serve_helpers import ServerProcess, eventually

from vera_env.serve import RemoteEnvError, VeraRemoteEnv
from vera_env.tasks import load_tasks

TASK_ID = load_tasks("builtin").ids()[0]


def step_in_background(env: VeraRemoteEnv, text: str) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["result"] = env.step(text)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def wait_started(marker: str) -> None:
    """Wait until a sandboxed command whose command line has ``marker`` runs."""
    assert eventually(lambda: processes_with(marker, settle_s=0), timeout_s=30), \
        f"the command {marker!r} never started"


def test_sigkill_mid_episode_client_errors_and_restart_reaps_the_workspace():
    server = ServerProcess("--max-steps", "6")
    restarted = None
    try:
        env = VeraRemoteEnv(server.url, message_timeout_s=300)
        env.reset(options={"task_id": TASK_ID})
        marker = "sleep 41.25"
        thread, outcome = step_in_background(env, f"<command>{marker}</command>")
        wait_started(marker)
        roots = owned_roots(server.proc.pid)
        assert len(roots) == 1 and any(roots[0].iterdir()), "no workspace under the root"
        assert server.signal(signal.SIGKILL) == -signal.SIGKILL
        thread.join(timeout=60)
        assert not thread.is_alive(), "the client hung on a dead server"
        assert isinstance(outcome.get("error"), RemoteEnvError)
        assert processes_with(marker, settle_s=5.0) == []  # the sandbox died with the server
        assert roots[0].exists()  # nothing ran the dead server's cleanup...
        # ...so the next start removes its workspace (on a shared machine any other
        # vera_env process may have reaped it first: the property is that it is gone)
        restarted = ServerProcess("--max-steps", "6")
        assert not roots[0].exists()
        env.close()
    finally:
        server.stop()
        if restarted is not None:
            restarted.stop()


def test_sigterm_mid_step_kills_the_sandbox_and_leaves_no_workspace():
    server = ServerProcess("--max-steps", "6", "--shutdown-grace-s", "1")
    try:
        env = VeraRemoteEnv(server.url, message_timeout_s=300)
        env.reset(options={"task_id": TASK_ID})
        marker = "sleep 42.75"
        thread, outcome = step_in_background(env, f"<command>{marker}</command>")
        wait_started(marker)
        # uvicorn shuts down gracefully, then re-raises the signal to exit with it
        assert server.signal(signal.SIGTERM) in (0, -signal.SIGTERM)
        assert '"message": "server stopped"' in server.text()
        thread.join(timeout=60)
        assert isinstance(outcome.get("error"), RemoteEnvError)
        assert processes_with(marker, settle_s=5.0) == []
        assert owned_roots(server.proc.pid) == []
        assert '"sessions_closed": 1' in server.text()
        env.close()
    finally:
        server.stop()


def test_ors_client_gets_an_error_not_a_hang_when_the_server_is_killed():
    server = ServerProcess("--protocol", "ors", "--max-steps", "6")
    marker = "sleep 43.5"

    async def episode() -> BaseException:
        client = AsyncORS(base_url=server.url)
        env = client.environment("vera")
        async with env.session(split="train", index=0) as session:
            call = asyncio.ensure_future(
                session.call_tool("shell", {"command": marker}))
            await asyncio.to_thread(wait_started, marker)
            server.signal(signal.SIGKILL)
            try:
                await asyncio.wait_for(call, timeout=120)
            except TimeoutError:
                raise AssertionError("the ORS client hung on a dead server") from None
            except Exception as exc:  # noqa: BLE001 - the error is the point
                return exc
        raise AssertionError("the call succeeded on a killed server")

    try:
        error = asyncio.run(episode())
        assert error is not None
        assert processes_with(marker, settle_s=5.0) == []
    finally:
        server.stop()
