"""What the model sees each step: task, bounded analysis, and a window of recent work.

Cost per step is O(state budget + window), not O(steps). The window is not optional:
a first version of the seed passed only the graph plus the latest tool output and scored
17.6% against the baseline's 37.7% — the model kept answering "cannot determine from the
provided analysis logs", because node summaries are lossy and drop the concrete handles
(filenames, column labels, sample ids) the next step needs. Compressing *old* context is
affordable; compressing *recent* context destroys the analysis. So the last four
commands and their outputs are shown, newest first in priority, within 12,000 chars.
"""

from __future__ import annotations

from typing import Sequence

from vera_env.observation.budget import clip_middle
from vera_env.observation.state import AnalysisState
from vera_env.wire.protocol import PROTOCOL
from vera_env.wire.text import safe_text, shell_word

__all__ = [
    "FORCED_INSTRUCTION",
    "RECENT_WINDOW",
    "RULES",
    "WINDOW_CHARS",
    "render_forced_prompt",
    "render_step_prompt",
    "render_window",
]

RECENT_WINDOW = 4
WINDOW_CHARS = 12_000
# A floor per output so that the newest outputs are never starved by a huge older one.
_MIN_SHARE_CHARS = 600
_MAX_LISTED_FILES = 60

RULES = """You are analysing data files in a shell workspace (your current directory, /work).
There is no network. Only commands you put in <command> run; each has a time limit.
Answer the question from the data, not from memory."""

FORCED_INSTRUCTION = (
    "Give your single best answer from the analysis above, even if you are not certain: "
    "an uncertain answer scores better than none, and no further commands will be run.\n\n"
    "Reply with exactly one line and nothing else:\nFINAL ANSWER: <answer>")


def render_window(recent: Sequence[tuple[str, str]], *, window: int = RECENT_WINDOW,
                  budget_chars: int = WINDOW_CHARS) -> str:
    """Render the last ``window`` (command, output) pairs within ``budget_chars``.

    The budget is spent newest-first: the latest output is what the next action builds
    on; older ones are partly summarised in the graph already. Each output is
    middle-clipped to its share, so both its head and its tail (a traceback) survive.

    Returns:
        The rendered block (oldest first, as a transcript reads), "" if ``recent`` is
        empty. Never longer than ``budget_chars``.
    """
    tail = list(recent)[-window:] if window > 0 else []
    if not tail:
        return ""
    blocks: list[str] = []
    left = budget_chars
    for i, (command, output) in enumerate(reversed(tail)):
        remaining = len(tail) - i
        share = left if remaining == 1 else max(_MIN_SHARE_CHARS, left // 2)
        cmd = clip_middle(command, max(0, min(share, left) // 4))
        block = f"$ {cmd}\n{clip_middle(output, max(0, min(share, left) - len(cmd) - 4))}\n"
        block = block[:left]
        if not block:
            break
        blocks.append(block)
        left -= len(block)
    return "".join(reversed(blocks)).rstrip("\n")


def _listing(files: Sequence[str]) -> str:
    # A name with an undecodable byte or a newline is shown as $'...', as bash takes it.
    shown = [f"- {shell_word(name)}" for name in files[:_MAX_LISTED_FILES]]
    if len(files) > _MAX_LISTED_FILES:
        shown.append(f"- ... and {len(files) - _MAX_LISTED_FILES} more")
    return "\n".join(shown) if shown else "(empty)"


def render_step_prompt(question: str, files: Sequence[str], state: AnalysisState,
                       recent: Sequence[tuple[str, str]], *, state_budget: int,
                       nudge: str = "", steps_left: int | None = None) -> str:
    """Assemble one step's observation.

    Args:
        question: The task's question.
        files: Relative paths of the files now in the workspace.
        state: The analysis graph.
        recent: (command, output) pairs, oldest first.
        state_budget: Tokens allowed for the rendered graph.
        nudge: Why the last turn was rejected, or what to fix; "" for none.
        steps_left: Steps remaining in the budget, shown when given.

    Returns:
        The observation text, valid UTF-8 (`vera_env.wire.text.safe_text`) whatever
        the commands printed or the files are called.
    """
    parts = [f"QUESTION: {question}", "", RULES, "",
             f"Files in /work:\n{_listing(files)}", "", PROTOCOL, "",
             "=== ANALYSIS SO FAR ===", state.render(state_budget), ""]
    window = render_window(recent)
    if window:
        shown = min(len(recent), RECENT_WINDOW)
        parts += [f"=== YOUR LAST {shown} COMMAND(S) AND OUTPUT ===", window, ""]
    if nudge:
        parts += [f"NOTE: {nudge}", ""]
    if steps_left is not None:
        parts.append(f"Steps left: {steps_left}.")
    parts.append("Emit your next block.")
    return safe_text("\n".join(parts))


def render_forced_prompt(question: str, state: AnalysisState, *, state_budget: int,
                         reason: str, nudge: str = "") -> str:
    """The observation that demands a final answer with no further commands.

    Exists because of the largest measured loss in the seed run: 22 of 73 problems
    (30%) produced no usable answer — 12 exhausted the budget, 10 were graded on an
    empty or stub emission. Those runs had done the analysis; they never committed.

    Args:
        question: The task's question.
        state: The analysis graph.
        state_budget: Tokens allowed for the rendered graph.
        reason: Why answering is forced now (the budget).
        nudge: Why the previous forced reply was refused, if it was.
    """
    parts = [f"QUESTION: {question}", "", "=== YOUR ANALYSIS ===",
             state.render(state_budget), "", f"STOP INVESTIGATING. {reason}"]
    if nudge:
        parts.append(f"NOTE: {nudge}")
    parts += [FORCED_INSTRUCTION]
    return safe_text("\n".join(parts))
