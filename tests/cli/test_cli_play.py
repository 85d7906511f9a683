"""vera-env play, driven through a pseudo-terminal as a person would drive it."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

from vera_env.tasks import load_tasks

REPO = Path(__file__).resolve().parents[2]


class Terminal:
    """A subprocess on a pty: type lines, wait for text on the screen."""

    def __init__(self, argv: list[str]) -> None:
        self.master, slave = os.openpty()
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=REPO,
                                     start_new_session=True, close_fds=True)
        os.close(slave)
        self.screen = ""

    def expect(self, text: str, since: int = 0, timeout_s: float = 60.0) -> str:
        """Wait until ``text`` appears on the screen after offset ``since``."""
        deadline = time.monotonic() + timeout_s
        while text not in self.screen[since:]:
            left = deadline - time.monotonic()
            assert left > 0, f"never saw {text!r}; screen ends with:\n{self.screen[-3000:]}"
            ready, _, _ = select.select([self.master], [], [], min(left, 0.5))
            if ready:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:  # the child closed the terminal
                    chunk = b""
                if not chunk and self.proc.poll() is not None:
                    assert text in self.screen, f"exited before {text!r}:\n{self.screen[-3000:]}"
                self.screen += chunk.decode(errors="replace")
        return self.screen

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def close(self) -> int:
        """Wait for the exit, reading what is still printed (a full pty blocks the child)."""
        deadline = time.monotonic() + 30
        try:
            while self.proc.poll() is None and time.monotonic() < deadline:
                ready, _, _ = select.select([self.master], [], [], 0.2)
                if ready:
                    try:
                        self.screen += os.read(self.master, 65536).decode(errors="replace")
                    except OSError:
                        break
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, 9)
            return self.proc.wait(timeout=30)
        finally:
            os.close(self.master)


def test_play_a_task_through_a_terminal_reaches_a_right_answer():
    task = load_tasks("builtin").get("seq.motif_count.easy.s0")
    term = Terminal([sys.executable, "-m", "vera_env.cli", "play", "--task-id", task.id,
                     "--max-steps", "6", "--wrappers", "forced,gate", "--reserve", "1"])
    try:
        screen = term.expect("your turn")
        # The observation is shown as the model sees it: question, files, protocol, state.
        assert "QUESTION: How many times does the motif" in screen
        assert "seqs.fa.gz" in screen and "(no nodes yet)" in screen
        for turn in task.solution:
            start = len(term.screen)
            term.type(turn + "\n.\n")
            if not turn.startswith("FINAL ANSWER"):
                term.expect("your turn", since=start)
                assert "harness: step" in term.screen[start:]
        screen = term.expect("verification reward:", since=start)
        assert "status: ok; correct: yes" in screen
        n = task.solution[-2].count("\nCHECK ")  # the last node's checks, as typed
        assert f"checks {n}/{n} passed" in screen     # the harness ran the typed checks
    finally:
        assert term.close() == 0


def test_play_end_of_input_quits_without_grading():
    term = Terminal([sys.executable, "-m", "vera_env.cli", "play", "--max-steps", "3"])
    try:
        term.expect("your turn")
        term.type("\x04")   # Ctrl-D on an empty turn
        screen = term.expect("nothing was graded")
        assert "you left before answering" in screen
    finally:
        assert term.close() == 0
