"""Getting the conclusion out of a model's text, and refusing what is not one.

Every rule here exists because a real run recorded a non-answer as an answer, which
turns a run that should have been *excluded* into one graded *confidently wrong*:

* The graded answer was ``'Norovirus GII</command>'``: a closing tag the grader was
  never meant to see. It was judged correct by luck; an exact-match grader would have
  failed it. `strip_markup` peels such tags and fences, repeatedly, because models
  stack them (``X</command>```).
* Asked to commit, a model replied with the next command it wanted to run,
  ``awk -F'\\t' 'NR>1{print $2}' alcohol.txt | head -5``, and a naive extractor filed it
  as the answer. `looks_like_a_command` catches this, and is kept precise because
  answers in this field are full of ``>`` (``chr7:55,191,822 G>A``), dots and dashes.
* A prefilled continuation came back empty and the recorded answer was the literal
  ``FINAL ANSWER:``, which passed a length check. `answer_is_usable` refuses the
  echoed prefix, stubs (``N/A``, ``TBD``, ``...``) and text without a letter or digit.
* A reasoning model wrote ``FINAL ANSWER:`` inside its ``<think>`` block; mining it
  takes a guess made while thinking for the conclusion. Reasoning is stripped first.

``ANSWER_PREFIX`` and `strip_reasoning` are defined in `vera_env.wire.protocol`, because
`parse_emission` needs them and imports point from here to there, and re-exported here.
"""

from __future__ import annotations

import re

from vera_env.wire.protocol import ANSWER_PREFIX, strip_reasoning

__all__ = [
    "ANSWER_PREFIX",
    "answer_is_usable",
    "extract_answer",
    "looks_like_a_command",
    "strip_markup",
    "strip_reasoning",
]

_TAG_NAMES = (r"(?:command|node|check|think|thinking|reasoning|answer|final_answer"
              r"|tool_call|tool_response)")
# A tag or a leaked special token, matched only from the last "<" before the end:
# every peel costs a bounded amount, so even a megabyte of tags peels in linear time.
_TAG = re.compile(rf"</?{_TAG_NAMES}\b[^<>]{{0,80}}>|<\|[^<>|\s]{{1,40}}\|>|</s>", re.I)
_TAG_MAX = 100
_LEADING = re.compile(rf"</?{_TAG_NAMES}\b[^<>]{{0,80}}>|```+[\w+.-]*(?=\n)|```+", re.I)
_DANGLING_HEAD = re.compile(r"\*+(?=\s)")
_WRAPPERS = "*`"
_ECHOED_PREFIX = re.compile(r"(?:[\s*`]*FINAL ANSWER:)+", re.I)

# After the answer, anything that starts a protocol construct is not part of it.
_PROTOCOL_AFTER = re.compile(r"(?i:<command>)|^[ \t]*(?:NODE|CHECK)\b", re.M)

_STUBS = frozenset({"...", "\u2026", "n/a", "unknown", "tbd", "-", "--", "?",
                    "answer", "final answer", "your answer", "the answer"})
# Case matters for these: "NA" is R's missing value, "Na" is sodium.
_STUBS_EXACT = frozenset({"NA", "NaN", "nan"})
_PLACEHOLDER = re.compile(r"<[A-Za-z _-]{1,40}>")
_ALNUM = re.compile(r"[^\W_]")

_TOOLS = (
    "awk gawk mawk sed grep egrep zgrep rg cat zcat bzcat xzcat head tail wc sort uniq "
    "cut tr paste ls cd find xargs echo printf python python3 Rscript perl bash sh pip "
    "conda gzip gunzip tar unzip samtools bcftools bedtools blastn blastp makeblastdb "
    "seqkit jq diff comm md5sum du mkdir rm cp mv touch tee").split()
_TOOL = "(?:" + "|".join(_TOOLS) + ")"
# A tool word alone is English ("cat", "head and neck"); it is a command only when an
# argument that only shell would write follows: a flag, a quote, $, a path, a * glob,
# . or .., or a file name with a letter extension.
_SHELL_ARG = r"""(?:-\S|['"$/]|\.\.?(?=[/\s]|$)|[^\s*]*\*|[^\s.]*\.[A-Za-z]\w{0,6}\b)"""
_COMMAND_START = re.compile(  # an optional subcommand word: samtools view -c x.bam
    rf"^[ \t]*(?:\$[ \t]+)?{_TOOL}(?:[ \t]+[a-z]+)?[ \t]+{_SHELL_ARG}", re.M)
_COMMAND_ANYWHERE = re.compile(
    rf"\|[ \t]*{_TOOL}\b|&&|\$\(|(?i:<command>)|;[ \t]*(?:do|then)\b")


def extract_answer(text: str) -> str:
    """Return the text after the last ``FINAL ANSWER:``, or "" if there is none.

    Reasoning blocks are dropped first. The answer runs to the end of the turn (with a
    prefilled prefix the model often starts it on the next line), but stops where a
    ``<command>`` block or a NODE/CHECK line begins: in the forced-answer phase such a
    reply still carries an answer worth keeping, and the rest is not part of it.
    This reads a reply meant to be only an answer; a whole turn, whose ``<command>``
    may ``echo`` the prefix, goes through `vera_env.wire.protocol.parse_emission`.

    Args:
        text: A model's reply, raw.

    Returns:
        The answer, stripped of surrounding whitespace; markup is left to
        `strip_markup`.
    """
    visible = strip_reasoning(text)
    at = visible.rfind(ANSWER_PREFIX)
    if at < 0:
        return ""
    answer = visible[at + len(ANSWER_PREFIX):]
    cut = _PROTOCOL_AFTER.search(answer)
    return (answer[:cut.start()] if cut else answer).strip()


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _run(text: str, start: int, end: int, char: str, *, backwards: bool,
         limit: int | None = None) -> int:
    """Length of the run of `char` at the start (or end) of text[start:end], capped."""
    n, cap = 0, end - start if limit is None else min(limit, end - start)
    while n < cap and text[end - 1 - n if backwards else start + n] == char:
        n += 1
    return n


def _peel(text: str, start: int, end: int) -> tuple[int, int]:
    """Remove one layer of markup from text[start:end]; the same bounds if none."""
    if text.endswith(">", start, end):
        lt = text.rfind("<", max(start, end - _TAG_MAX), end)
        if lt >= 0 and _TAG.fullmatch(text, lt, end):
            return start, lt
    fence = _run(text, start, end, "`", backwards=True)
    if fence >= 3:
        return start, end - fence
    head = _LEADING.match(text, start, end)
    if head:
        return head.end(), end
    for char in _WRAPPERS:  # a symmetric **bold**, *italic* or `code` wrapper
        # Count the closing run first and cap the opening one by it, so a long run on
        # one side only is never re-counted on every pass.
        n = _run(text, start, end, char, backwards=True)
        n = _run(text, start, end, char, backwards=False, limit=n)
        if n and end - start > 2 * n:
            return start + n, end - n
    head = _DANGLING_HEAD.match(text, start, end)
    if head:
        return head.end(), end
    tail = _run(text, start, end, "*", backwards=True)
    if tail and tail < end - start and text[end - tail - 1].isspace():
        return start, end - tail
    return start, end


def strip_markup(text: str) -> str:
    """Remove the protocol tags, fences and emphasis a model leaves around an answer.

    Peels, until nothing changes: trailing and leading protocol tags
    (``</command>``, ``<answer>``...), leaked special tokens (``<|im_end|>``, ``</s>``),
    code fences, a symmetric ``**bold**``, ``*italic*`` or ```code``` wrapper, and the
    dangling ``**`` left by ``**FINAL ANSWER:** x``. A trailing period is kept: graders
    normalise it, and it can belong to the answer (``E. coli``).

    Args:
        text: An extracted answer.

    Returns:
        The answer without markup, stripped of surrounding whitespace.
    """
    start, end = _trim(text, 0, len(text))
    while True:
        peeled = _trim(text, *_peel(text, start, end))
        if peeled == (start, end):
            return text[start:end]
        start, end = peeled


def looks_like_a_command(text: str) -> bool:
    """True if `text` reads as shell rather than as an answer to a question.

    Signals: a line that starts with a known tool followed by a shell-only argument
    (``awk -F...``, ``head -5 x``, ``python3 script.py``, an optional ``$ `` prompt),
    a pipe into a known tool, ``&&``, ``$(``, ``; do``/``; then``, or a ``<command>``
    tag. ``>`` alone is not a signal: ``G>A`` and ``mt-Nd1 > 5%`` are answers.

    Args:
        text: Candidate answer text.

    Returns:
        Whether the text is a command the model meant to run.
    """
    return bool(_COMMAND_START.search(text) or _COMMAND_ANYWHERE.search(text))


def answer_is_usable(text: str) -> bool:
    """Whether an extracted answer may be recorded as the run's conclusion.

    Refuses, after stripping reasoning and markup: the echoed prefix (possibly
    repeated) with nothing after it, stubs (``...``, ``N/A``, ``unknown``, ``TBD``,
    ``-``), template placeholders (``<answer>``), text with no letter or digit, and
    shell commands. Short answers are fine: ``B`` for a choice, ``0`` for a count.
    ``None`` is usable, because "none of them" can be the right answer.

    Args:
        text: The candidate answer, as `extract_answer` returns it (an echoed prefix
            at its start is tolerated).

    Returns:
        True if the text should be graded.
    """
    answer = strip_markup(strip_reasoning(text))
    echoed = _ECHOED_PREFIX.match(answer)
    if echoed:
        answer = strip_markup(answer[echoed.end():])
    if not _ALNUM.search(answer):
        return False
    core = answer.rstrip(":.").strip()
    if core.lower() in _STUBS or core in _STUBS_EXACT or _PLACEHOLDER.fullmatch(answer):
        return False
    return not looks_like_a_command(answer)
