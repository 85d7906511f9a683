"""Real servers on 127.0.0.1 for the serve tests: the app under uvicorn in a thread, or
``vera-env serve`` in a subprocess (for the tests that kill it), and process checks."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import uvicorn

ROOT = Path(__file__).resolve().parents[2]


DRINKS = "id\tgroup\tdrinks\n1\ta\t3\n2\tb\t5\n3\ta\t7\n4\tb\t-999\n"
NODE = ("<command>grep -v -- -999 drinks.tsv | tail -n +2 | "
        "awk '{s+=$3} END {print s/NR}'</command>\n"
        'NODE kind=transform summary="mean drinks without the -999 code is 5" '
        "artifact=drinks.tsv\n"
        'CHECK range "three valid rows" :: test $(grep -vc -- -999 drinks.tsv) -eq 4 '
        "&& echo True || echo False")


@contextlib.contextmanager
def running(app: object) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free loopback port; yields its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False,
                                           ws="websockets-sansio", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        assert not thread.is_alive(), "the server did not stop"


class ServerProcess:
    """``vera-env serve`` in a subprocess; ``url`` comes from its "listening" log line."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.log = tempfile.NamedTemporaryFile(mode="w+", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vera_env.cli", "serve", "--port", "0", *args],
            cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
        try:
            self.url = self._wait_listening()
        except BaseException:
            self.stop()  # never leave a half-started server behind
            raise

    def _wait_listening(self) -> str:
        deadline = time.monotonic() + 60
        url = ""
        while time.monotonic() < deadline and self.proc.poll() is None:
            for line in Path(self.log.name).read_text().splitlines():
                if line.startswith("{") and '"listening"' in line:
                    url = json.loads(line)["url"]
                if url and '"Application startup complete."' in line:
                    return url
            time.sleep(0.1)
        raise AssertionError(f"the server did not start:\n{self.text()}")

    def text(self) -> str:
        """Everything the server wrote."""
        return Path(self.log.name).read_text()

    def signal(self, sig: int) -> int:
        """Send ``sig`` and wait for the process to end; returns its exit code."""
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=60)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.signal(signal.SIGKILL)
        os.unlink(self.log.name)


def eventually(check, timeout_s: float = 10.0):
    """Poll ``check()`` until it is truthy (server-side cleanup follows a client's close)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)
