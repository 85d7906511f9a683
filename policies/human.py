"""A person at a terminal as the policy: ``vera-env play``.

Playing a task yourself is the fastest way to learn what the model is up against: the
player sees the observation exactly as the model receives it (the same text, nothing
added inside it) and types a raw turn in the wire format. Between observations a short
line marked ``harness:`` says what the last turn earned — information the model only
gets through the next observation.

A turn spans several lines (commands, heredocs, NODE and CHECK lines); it ends with a
line holding only ``.`` (or end of input after some text). End of input with nothing
typed quits: the episode is recorded as ``provider`` (the policy could not produce a
turn), never as a wrong answer. When the harness forces an answer, the prefill
(``FINAL ANSWER: ``) is shown as the start of the turn and prepended to what is typed.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from vera_env import info as keys
from vera_env.errors import PolicyError

__all__ = ["END_OF_TURN", "HumanPolicy"]

END_OF_TURN = "."
_RULE = "-" * 78


class HumanPolicy:
    """Read each turn from a terminal.

    Args:
        stdin: Where turns are read (default ``sys.stdin``).
        stdout: Where observations are shown (default ``sys.stdout``).
        show_harness: Print one ``harness:`` line with the last step's reward and checks.
    """

    def __init__(self, stdin: TextIO | None = None, stdout: TextIO | None = None, *,
                 show_harness: bool = True) -> None:
        self._in = stdin or sys.stdin
        self._out = stdout or sys.stdout
        self.show_harness = show_harness

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """Show ``observation``, read a turn.

        Raises:
            PolicyError: End of input before any text (the player quit).
        """
        write = self._out.write
        if self.show_harness and info.get(keys.STEP):
            write(_harness_line(info) + "\n")
        write(f"{_RULE}\n{observation}\n{_RULE}\n")
        prefill = str(info.get(keys.PREFILL) or "")
        write(f"your turn (end with a line holding only '{END_OF_TURN}'; "
              "Ctrl-D on an empty turn quits)\n")
        if prefill:
            write(f"the harness has started your turn with {prefill!r}; type the rest\n")
        write("> " + prefill)
        self._out.flush()
        lines = self._read_turn()
        if lines is None:
            raise PolicyError("the player quit (end of input)")
        return prefill + "\n".join(lines)

    def _read_turn(self) -> list[str] | None:
        lines: list[str] = []
        while True:
            line = self._in.readline()
            if not line:  # end of input
                return lines or None
            line = line.rstrip("\r\n")
            if line.strip() == END_OF_TURN:
                return lines
            lines.append(line)
            self._out.write("> ")
            self._out.flush()


def _harness_line(info: dict[str, Any]) -> str:
    parts = info.get(keys.REWARD_PARTS) or {}
    checks = info.get(keys.CHECKS) or []
    passed = sum(1 for c in checks if c.get("passed"))
    reward = (float(parts.get("verification") or 0.0) + float(parts.get("correctness") or 0.0)
              - float(parts.get("penalty") or 0.0))
    text = (f"harness: step {info.get(keys.STEP)}, reward {reward:+.3f} "
            f"(verification {float(parts.get('verification', 0.0)):.3f})")
    if checks:
        text += f", checks {passed}/{len(checks)} passed"
    if info.get(keys.ERROR):
        text += f", turn rejected: {info[keys.ERROR]}"
    return text
