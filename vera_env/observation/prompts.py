"""What the model sees each step: task, bounded analysis, and a window of recent work.

Cost per step is O(state budget + window), not O(steps). The window is not optional:
a first version of the seed passed only the graph plus the latest tool output and scored
17.6% against the baseline's 37.7% — the model kept answering "cannot determine from the
provided analysis logs", because node summaries are lossy and drop the concrete handles
(filenames, column labels, sample ids) the next step needs. Compressing *old* context is
affordable; compressing *recent* context destroys the analysis. So the last four
commands and their outputs are shown, newest first in priority, within 12,000 chars.

Two variants share that content and differ only in how the rules are told. ``full`` is
the protocol in prose with placeholders (``NODE kind=<kind> ...``). ``compact`` exists
because of a measured failure: SmolLM2-135M-Instruct, given the full rules (about 900 of
its tokens, 85% boilerplate), copied the placeholders back (``NODE kind=<kind>
summary="<finding>"``), so every free turn was rejected, every GRPO group scored the
same and nothing could be learned. The compact rules fit in a few lines, name the kinds
instead of ``<kind>``, and show one runnable example per line form built on the task's
own first file, so a copied line is well-formed (and earns only what its check proves).
The example's check re-runs the saved computation (``q.sh``) rather than pinning a count
of the file: with a ``wc -l`` pin as the example, a SmolLM2 fine-tuned on analysis turns
still wrote that pin in 53 of 55 nodes (a fingerprint, which strength pays nothing) and
answered with the example's count (the learning run's second attempt).

``compact`` also keeps its window to ``COMPACT_WINDOW_CHARS`` (3,000): it is the variant
for small models, and SmolLM2 tokenizes digits one by one, so a 12,000-char window of
a matrix printed by ``zcat`` was an 11,676-token prompt, past its 8,192 positions (the
learning run's fourth attempt: 12 GB of RAM and minutes for one sampling round).
Rules, a 3,000-char window and the graph's token budget fit in 8k with a turn to spare.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

from vera_env.observation.budget import clip_middle
from vera_env.observation.state import AnalysisState
from vera_env.wire.protocol import CHECK_KINDS, NODE_KINDS, PROTOCOL
from vera_env.wire.text import safe_text, shell_word

__all__ = [
    "COMPACT_FORCED_INSTRUCTION",
    "COMPACT_WINDOW_CHARS",
    "FORCED_INSTRUCTION",
    "OBSERVATION_VARIANTS",
    "ObservationVariant",
    "RECENT_WINDOW",
    "RULES",
    "WINDOW_CHARS",
    "render_forced_prompt",
    "render_step_prompt",
    "render_window",
]

ObservationVariant = Literal["full", "compact"]
"""How the rules are told: ``full`` (prose protocol) or ``compact`` (see the docstring)."""
OBSERVATION_VARIANTS: tuple[str, ...] = get_args(ObservationVariant)

RECENT_WINDOW = 4
WINDOW_CHARS = 12_000
COMPACT_WINDOW_CHARS = 3_000
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

COMPACT_FORCED_INSTRUCTION = (
    "No more commands will run. Reply with one line: FINAL ANSWER: then the value the "
    "question asks for, your best estimate even if unsure.")

_COMPACT_RULES = """Each turn, write one or more of these lines, in this order:
<command>cat > q.sh <<'E'
{count}
E
sh q.sh</command>
NODE kind=load summary="the answer computed from the data is 12" artifact={file}
CHECK range "q.sh recomputes 12" :: test "$(sh q.sh)" = "12" && echo True || echo False
FINAL ANSWER: the value the question asks for
The command runs in /work; you see its output next turn. Put in q.sh the command that
computes what the question asks from the data. A NODE states one finding you saw in an
output, with its numbers. Each CHECK line under it is one shell command that prints
True only if the finding is right: re-run q.sh and compare with the value it printed,
in place of the example's 12. A check on a whole file (its lines, bytes or hash) earns
nothing.
Node kinds: {nodes}.
Check kinds: {checks}."""


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


def _check_variant(variant: str) -> str:
    if variant not in OBSERVATION_VARIANTS:
        raise ValueError(f"observation variant must be one of {list(OBSERVATION_VARIANTS)}, "
                         f"got {variant!r}")
    return variant


def _inline_listing(files: Sequence[str]) -> str:
    shown = list(files[:_MAX_LISTED_FILES])
    more = f" and {len(files) - _MAX_LISTED_FILES} more" if len(files) > _MAX_LISTED_FILES else ""
    return (", ".join(shown) + more) if shown else "(empty)"


def _compact_rules(files: Sequence[str]) -> str:
    """The compact rules, their examples built on the task's first data file."""
    data = [f for f in files if not f.upper().startswith("README")] or list(files) or ["data.txt"]
    file = data[0] if " " not in data[0] else f"'{data[0]}'"
    read = f"zcat {file}" if file.rstrip("'").endswith(".gz") else f"cat {file}"
    return _COMPACT_RULES.format(file=file, count=f"{read} | wc -l", nodes=", ".join(NODE_KINDS),
                                 checks=", ".join(CHECK_KINDS))


def render_step_prompt(question: str, files: Sequence[str], state: AnalysisState,
                       recent: Sequence[tuple[str, str]], *, state_budget: int,
                       nudge: str = "", steps_left: int | None = None,
                       variant: ObservationVariant = "full") -> str:
    """Assemble one step's observation.

    Args:
        question: The task's question.
        files: Relative paths of the files now in the workspace.
        state: The analysis graph.
        recent: (command, output) pairs, oldest first.
        state_budget: Tokens allowed for the rendered graph.
        nudge: Why the last turn was rejected, or what to fix; "" for none.
        steps_left: Steps remaining in the budget, shown when given.
        variant: ``full`` or ``compact`` rules (the module docstring says why).

    Returns:
        The observation text, valid UTF-8 (`vera_env.wire.text.safe_text`) whatever
        the commands printed or the files are called.

    Raises:
        ValueError: An unknown ``variant``.
    """
    if _check_variant(variant) == "compact":
        parts = [f"QUESTION: {question}", "", f"Files in /work: {_inline_listing(files)}",
                 "", _compact_rules(files), "", "ANALYSIS SO FAR:", state.render(state_budget),
                 ""]
    else:
        parts = [f"QUESTION: {question}", "", RULES, "",
                 f"Files in /work:\n{_listing(files)}", "", PROTOCOL, "",
                 "=== ANALYSIS SO FAR ===", state.render(state_budget), ""]
    window = render_window(recent, budget_chars=COMPACT_WINDOW_CHARS if variant == "compact"
                           else WINDOW_CHARS)
    if window:
        shown = min(len(recent), RECENT_WINDOW)
        parts += [f"=== YOUR LAST {shown} COMMAND(S) AND OUTPUT ===", window, ""]
    if nudge:
        parts += [f"NOTE: {nudge}", ""]
    if steps_left is not None:
        parts.append(f"Steps left: {steps_left}.")
    parts.append("Your turn:" if variant == "compact" else "Emit your next block.")
    return safe_text("\n".join(parts))


def render_forced_prompt(question: str, state: AnalysisState, *, state_budget: int,
                         reason: str, nudge: str = "",
                         variant: ObservationVariant = "full") -> str:
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
        variant: ``full`` or ``compact`` wording of the instruction.

    Raises:
        ValueError: An unknown ``variant``.
    """
    compact = _check_variant(variant) == "compact"
    parts = [f"QUESTION: {question}", "", "ANALYSIS SO FAR:" if compact else
             "=== YOUR ANALYSIS ===", state.render(state_budget), "",
             f"STOP INVESTIGATING. {reason}"]
    if nudge:
        parts.append(f"NOTE: {nudge}")
    parts += [COMPACT_FORCED_INSTRUCTION if compact else FORCED_INSTRUCTION]
    return safe_text("\n".join(parts))
