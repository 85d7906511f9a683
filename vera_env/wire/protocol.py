"""The wire protocol: one model turn in, one `Emission` out.

The model declares what should be true of its analysis as CHECK lines, shell commands
the harness runs (`checks.py`), so the model cannot set its own score. An earlier
XML-shaped format lost a whole strength measurement to quoting: models wrote
``name="length > 1000"`` (the tag ended at the inner ``>``) and ``command="python3 -c "``
(the attribute ended at the inner quote and the program spilled into the body); each
became an unrunnable fragment scored as a failed check, indistinguishable from a wrong
analysis. So NODE and CHECK are lines, a CHECK is cut at the ``::`` sentinel, and what
follows is the command, verbatim: no quoting rule can cut it. Only ``<command>`` keeps
tags: it carries multi-line shell and has no attributes. Check commands are single-line;
longer logic goes in a script that a command writes.

Only CHECK lines below the NODE line belong to it: models echo the instruction template,
and scanning the whole turn turned echoed examples into checks, inflating a node's check
count fivefold and making its pass fraction meaningless.

The inside of ``<command>`` and the text after a CHECK's ``::`` are shell, never read as
protocol: a heredoc may hold ``<node>`` XML, ``echo "FINAL ANSWER: x"`` prints rather
than concludes, a check may grep for ``<command>``. A line inside the block that starts
like a NODE, CHECK or FINAL ANSWER line is rejected rather than run: the shell would
fail on it and the model would lose its node unawares.

Lines end at ``\\n`` (``\\r\\n``, ``\\r`` are normalised); parsing is linear in the input. A
malformed turn comes back as `Emission.error`, addressed to the model and naming the
fix, and carries nothing else, so no caller acts on half a turn. A turn holding a NUL,
a zero-width or another invisible character anywhere outside its reasoning is rejected
first (`vera_env.wire.text.invisible_problem`): ``NO\\u200bDE`` would be prose and the
node lost unawares, ``TP53\\u200b`` an answer that reads right and grades wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from vera_env.wire.text import invisible_problem

__all__ = ["ANSWER_PREFIX", "CHECK_KINDS", "NODE_KINDS", "PROTOCOL", "CheckSpec",
           "Emission", "parse_emission", "strip_reasoning", "verdict_from_output"]

NODE_KINDS: tuple[str, ...] = ("load", "qc", "transform", "test", "interpret", "answer")
CHECK_KINDS: tuple[str, ...] = ("conservation", "range", "invariance", "type")
ANSWER_PREFIX = "FINAL ANSWER:"

_TRUE_WORDS = frozenset({"true", "1", "yes", "pass", "passed", "ok"})
_FALSE_WORDS = frozenset({"false", "0", "no", "fail", "failed"})
_NODE_FORM = 'NODE kind=<kind> summary="<finding>" artifact=<file> parents=<n1,n2>'
_CHECK_FORM = 'CHECK <kind> "<name>" :: <one-line command printing True or False>'


@dataclass(frozen=True, slots=True)
class CheckSpec:
    """A declared check, not yet run: a `CHECK_KINDS` kind, a name, a one-line command."""

    kind: str
    name: str
    command: str


@dataclass(frozen=True, slots=True)
class Emission:
    """One parsed turn. When `error` is set, every other field is empty."""

    command: str = ""
    kind: str = ""
    summary: str = ""
    artifact: str = ""
    parents: tuple[str, ...] = ()
    checks: tuple[CheckSpec, ...] = ()
    answer: str = ""
    error: str = ""

    @property
    def declares_node(self) -> bool:
        """True if the turn declared a node, not only ran a command or answered."""
        return bool(self.kind)


PROTOCOL = f"""\
HOW TO ACT. Each turn, reply with any of these parts, in this order:
<command>
shell command(s) to run now in your working directory; several lines are fine
</command>
{_NODE_FORM}
{_CHECK_FORM}
{ANSWER_PREFIX} <answer>

You see the command's output next turn. Declare a node only for a result you have
established, one node per turn, with its CHECK lines directly below the NODE line;
parents= lists the ids of the earlier nodes it builds on.
Node kinds: {", ".join(NODE_KINDS)}.
Check kinds: conservation (a total preserved across a step), range (a value inside its
admissible bounds), invariance (a result that survives a harmless change, such as two
halves of the data), type (a value has the expected form).

Everything after :: is the check command, verbatim to the end of the line, so quotes,
<, > and | are safe there. A check is ONE line: for longer logic, write a script with a
command first and let the check run it (python3 check_counts.py). The harness runs every
check itself, with the working directory read-only: checks can read files but cannot
create or change any. A check's last output line must be True or False; one that prints
a measurement (a count, a number, a path), errors or times out FAILS. Compare, don't
measure:
  WRONG: CHECK range "read count" :: grep -c '^>' reads.fasta
  RIGHT: CHECK range "1042 reads" :: test "$(grep -c '^>' reads.fasta)" -eq 1042 && echo True || echo False
Use the real filenames in your directory, never placeholders. A strong check would FAIL
if your analysis were wrong: a total preserved across a filter, an estimate stable across
two halves of the data, a value inside its admissible range. One that passes whatever
the data say earns nothing:
  WRONG: CHECK type "output exists" :: test -f kept.txt && echo True || echo False
  RIGHT: CHECK range "QC keeps 20-90% of cells" :: python3 -c "k=len(open('kept.txt').readlines()); n=len(open('cells.txt').readlines()); print(0.2 < k/n < 0.9)"

The summary is the only record of this step you will see later: state the finding
("14,203 of 34,460 cells pass QC"), not the activity ("ran QC"). Never re-declare a node
you already have. Start NODE and CHECK lines at the beginning of the line: no bullets,
backticks or XML tags. When you are sure, end the turn with this line (everything after
the prefix is graded):
{ANSWER_PREFIX} <answer>"""

# Each error is read by the model, so each says what to do instead.
_NOTHING = ("Your turn had no <command> block, no NODE line and no FINAL ANSWER line, so "
            "nothing happened. Run shell as <command>...</command> (code fences are not "
            f"run), declare a finding as {_NODE_FORM} followed by {_CHECK_FORM}, or "
            f"finish with {ANSWER_PREFIX} <answer>")
_UNCLOSED = "Your <command> block is never closed, so nothing ran. End it with </command>."
_STRAY_CLOSE = ("Your turn has a </command> with no <command> before it, so nothing ran. "
                "Open the block with exactly <command> (no attributes).")
_TWO_COMMANDS = ("Your turn has more than one <command> block; one runs per turn. Put all "
                 "the commands in one <command>...</command> block, one per line.")
_EMPTY_COMMAND = "Your <command> block is empty. Put the shell command between the tags."
_IN_COMMAND = ("Line {n} of your <command> block is a {what} line, which the shell would "
               "try to run. Close the block with </command> and put it after that.")
_LEGACY = ("XML-style <node>/<check> tags are not accepted: quotes and > inside their "
           f"attributes cut commands short. Use lines:\n{_NODE_FORM}\n{_CHECK_FORM}")
_NOT_LAST = ("Your FINAL ANSWER is followed by a <command> block or a NODE/CHECK line. "
             "The answer ends the episode: put it last, or leave it out until that's done.")
_EMPTY_ANSWER = f"Your {ANSWER_PREFIX} line is empty. Write the answer after the prefix."
_DECORATED = ("{word} lines must start the line, with nothing before the word {word} (no "
              "bullet, number, quote mark, # or backtick). Rewrite: {line!r}")
_TWO_NODES = ("Your turn has {n} NODE lines; declare one node per turn (the next can "
              "follow next turn), and do not copy the example lines of the instructions.")
_CHECKS_NO_NODE = ("CHECK lines need a NODE line before them: a check verifies a node. "
                   f"Add {_NODE_FORM} above your CHECK lines.")
_CHECKS_BEFORE = ("Your CHECK lines come before the NODE line; only CHECK lines below it "
                  "belong to it. Move them under the NODE line.")
_NO_KIND = f"Your NODE line has no kind=. Add kind= with one of: {', '.join(NODE_KINDS)}."
_BAD_KIND = "Unknown node kind {kind!r}. Use one of: " + ", ".join(NODE_KINDS) + "."
_NO_SUMMARY = ('Your NODE line has no summary. Add summary="..." with the finding, e.g. '
               'summary="14,203 of 34,460 cells pass QC"; it is all you will see later.')
_MALFORMED = ("{n} CHECK line(s) malformed; each must read: " + _CHECK_FORM + " (CHECK "
              "first, a check kind, the name in straight double quotes, then :: and the "
              "command). First malformed line: {line!r}")
_BAD_CHECK_KIND = ("Unknown check kind {kind!r} in CHECK {name!r}. Use one of: "
                   + ", ".join(CHECK_KINDS) + ".")
_EMPTY_NAME = 'A CHECK line has an empty name. Put what must be true between the quotes.'
_EMPTY_CHECK = ("Check {name!r} has no command after ::. Write a one-line shell command "
                "that prints True or False after the ::.")

_OPEN = re.compile(r"<command>", re.I)
_CLOSE = re.compile(r"</command>", re.I)
_LEGACY_TAG = re.compile(r"</?(?:node|check)\b", re.I)
_REASONING_TAG = re.compile(r"<(/?)(think|thinking|reasoning)[ \t]*>", re.I)
_HEAD = re.compile(r"(NODE|CHECK)\b")
_DECORATION = " \t-*+>#`0123456789.)"
_CHECK_LINE = re.compile(r'CHECK[ \t]+(\w+)[ \t]+"([^"]*)"[ \t]*::(.*)')
_NODE_KEY = re.compile(r"(?<!\S)(kind|summary|artifact|parents)[ \t]*=")
_PARENT_SEP = re.compile(r"[\s,]+")


class _Rejected(Exception):
    """Unwinds the parser with the message for the model; never leaves this module."""


def strip_reasoning(text: str) -> str:
    """Return a turn's visible text, without ``<think>``/``<thinking>``/``<reasoning>``.

    A reasoning block is a draft: a ``FINAL ANSWER:`` or ``<command>`` in it must never
    be mined or run. A closing tag with no opening before it (templates that put
    ``<think>`` in the prompt) drops all before it; an opening tag never closed (tokens
    ran out while thinking) drops all after it. The result is stripped.
    """
    kept: list[str] = []
    pos, inside, depth, first = 0, "", 0, True
    for tag in _REASONING_TAG.finditer(text):
        closing, name = tag.group(1) == "/", tag.group(2).lower()
        if inside:
            if name == inside:
                depth += -1 if closing else 1
                if depth == 0:
                    inside, pos = "", tag.end()
        elif closing:
            if not first:  # a stray closing tag later on is only dropped itself
                kept.append(text[pos:tag.start()])
            pos = tag.end()
        else:
            kept.append(text[pos:tag.start()])
            inside, depth = name, 1
        first = False
    if not inside:
        kept.append(text[pos:])
    return "".join(kept).strip()


def _line_head(line: str) -> tuple[str, bool]:
    """Return ("NODE" | "CHECK" | "", decorated) for a line outside the command."""
    bare = line.lstrip()
    head = _HEAD.match(bare)
    if head:
        return head.group(1), False
    head = _HEAD.match(bare.lstrip(_DECORATION))
    return (head.group(1), True) if head else ("", False)


def _answer(region: str) -> str:
    """The text after the last prefix in `region`, which must end the turn.

    It runs to the end of the turn, not of the line: after a prefilled ``FINAL ANSWER: ``
    models often start the answer on the next line, and gene sets span lines. The price,
    commentary graded with the answer, is why PROTOCOL says all after the prefix is graded.
    """
    if _OPEN.search(region) or any(_line_head(line)[0] for line in region.split("\n")
                                   if "NODE" in line or "CHECK" in line):
        raise _Rejected(_NOT_LAST)
    return region[region.rfind(ANSWER_PREFIX) + len(ANSWER_PREFIX):].strip()


def _split_turn(text: str) -> tuple[str | None, list[str], str | None]:
    """Walk the lines once: (command body, NODE and CHECK lines, answer); None if absent."""
    lines, k = text.split("\n"), 0
    found: list[str] = []
    command: str | None = None
    body: list[str] | None = None  # the command's lines while inside the block
    while k < len(lines):
        line = lines[k]
        if body is not None:  # inside <command>: opaque until the closing tag
            close = _CLOSE.search(line) if "</" in line else None
            if close is None:
                body.append(line)
                k += 1
                continue
            command, body = "\n".join([*body, line[:close.start()]]), None
            lines[k] = line[close.end():]  # the rest of the line is outside again
            continue
        if ("NODE" in line or "CHECK" in line) and _line_head(line)[0]:
            found.append(line)  # NODE and CHECK lines are opaque
        elif "<" in line or ANSWER_PREFIX in line:
            opened, at = _OPEN.search(line), line.find(ANSWER_PREFIX)
            answer_first = at >= 0 and (opened is None or at < opened.start())
            cut = at if answer_first else opened.start() if opened else len(line)
            outside = line[:cut]
            if _CLOSE.search(outside):
                raise _Rejected(_STRAY_CLOSE)
            if _LEGACY_TAG.search(outside):
                raise _Rejected(_LEGACY)
            if answer_first:
                return command, found, _answer("\n".join([line[at:], *lines[k + 1:]]))
            if opened is not None:
                if command is not None:
                    raise _Rejected(_TWO_COMMANDS)
                body, lines[k] = [], line[opened.end():]
                continue
        k += 1
    if body is not None:
        raise _Rejected(_UNCLOSED)
    return command, found, None


def _validate_command(command: str) -> str:
    """Return the stripped command; reject an empty or protocol-bearing block."""
    command = command.strip()
    if not command:
        raise _Rejected(_EMPTY_COMMAND)
    for n, bare in enumerate((line.lstrip() for line in command.split("\n")), 1):
        for what, hit in (("NODE", bare.startswith("NODE") and "kind=" in bare),
                          ("CHECK", _CHECK_LINE.match(bare)),
                          (ANSWER_PREFIX, bare.startswith(ANSWER_PREFIX))):
            if hit:
                raise _Rejected(_IN_COMMAND.format(n=n, what=what))
    return command


def _unquote(value: str, *, token: bool = False) -> str:
    """Unquote (the last matching quote closes); else keep all, or the first word."""
    value = value.strip()
    if value[:1] in ('"', "'"):
        end = value.rfind(value[0])
        return (value[1:end] if end > 0 else value[1:]).strip()
    return value.split(maxsplit=1)[0] if token and value else value


def _node_fields(line: str) -> Emission:
    """Parse ``NODE key=value ...``; each value runs to the next known key."""
    body = line.strip()[len("NODE"):]
    keys = list(_NODE_KEY.finditer(body))
    raw: dict[str, str] = {}
    for i, key in enumerate(keys):
        end = keys[i + 1].start() if i + 1 < len(keys) else len(body)
        raw.setdefault(key.group(1), body[key.end():end])
    kind = _unquote(raw.get("kind", ""), token=True).lower()
    if not kind:
        raise _Rejected(_NO_KIND)
    if kind not in NODE_KINDS:
        raise _Rejected(_BAD_KIND.format(kind=kind))
    summary = _unquote(raw.get("summary", ""))
    if not summary:
        raise _Rejected(_NO_SUMMARY)
    parents = _unquote(raw.get("parents", "")).strip("[]")
    return Emission(kind=kind, summary=summary,
                    artifact=_unquote(raw.get("artifact", ""), token=True),
                    parents=tuple(p for p in _PARENT_SEP.split(parents) if p))


def _parse_checks(lines: list[str]) -> tuple[CheckSpec, ...]:
    matches = [_CHECK_LINE.match(line.strip()) for line in lines]
    bad = [line for line, m in zip(lines, matches, strict=False) if m is None]
    if bad:
        raise _Rejected(_MALFORMED.format(n=len(bad), line=bad[0].strip()[:100]))
    specs: list[CheckSpec] = []
    for m in matches:
        assert m is not None  # every line matched, or we raised above
        kind, name, command = m.group(1).lower(), m.group(2).strip(), m.group(3).strip()
        if kind not in CHECK_KINDS:
            raise _Rejected(_BAD_CHECK_KIND.format(kind=kind, name=name))
        if not name:
            raise _Rejected(_EMPTY_NAME)
        if not command:
            raise _Rejected(_EMPTY_CHECK.format(name=name))
        specs.append(CheckSpec(kind, name, command))
    return tuple(specs)


def _parse_node(lines: list[str]) -> Emission | None:
    """The NODE line with the CHECK lines below it (those above are echoed template)."""
    nodes: list[int] = []
    checks: list[int] = []
    for i, line in enumerate(lines):
        word, decorated = _line_head(line)
        if decorated:
            raise _Rejected(_DECORATED.format(word=word, line=line.strip()[:100]))
        (nodes if word == "NODE" else checks).append(i)
    if len(nodes) > 1:
        raise _Rejected(_TWO_NODES.format(n=len(nodes)))
    if not nodes:
        if checks:
            raise _Rejected(_CHECKS_NO_NODE)
        return None
    node = _node_fields(lines[nodes[0]])
    below = [lines[i] for i in checks if i > nodes[0]]
    if checks and not below:
        raise _Rejected(_CHECKS_BEFORE)
    return replace(node, checks=_parse_checks(below))


def parse_emission(text: str) -> Emission:
    """Parse one raw model turn into a command, an optional node with checks, an answer.

    Reasoning is dropped first. A turn may carry any of the parts (a NODE line with its
    checks alone is fine) but must carry one. Never raises on a str: a malformed turn
    comes back with only `Emission.error` set, a message telling the model the fix.

    Raises:
        TypeError: `text` is not a str (a caller's bug, not model text).
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_emission expects a str, got {type(text).__name__}")
    text = strip_reasoning(text.replace("\r\n", "\n").replace("\r", "\n"))
    unreadable = invisible_problem(text)
    if unreadable:
        return Emission(error=unreadable)
    try:
        command, lines, answer = _split_turn(text)
        command = "" if command is None else _validate_command(command)
        node = _parse_node(lines)
        if answer == "":
            raise _Rejected(_EMPTY_ANSWER)
        if not (command or node or answer):
            raise _Rejected(_NOTHING)
    except _Rejected as rejected:
        return Emission(error=str(rejected))
    return replace(node or Emission(), command=command, answer=answer or "")


def verdict_from_output(stdout: str) -> bool | None:
    """Read a check's last non-empty stdout line as a boolean literal.

    True for true/1/yes/pass/passed/ok, False for false/0/no/fail/failed (any case),
    None otherwise, which the caller must fail, never skip. Only the last line counts:
    scanning upwards (as the seed did) would pass a check printing ``True`` and then a
    count, whose final word is a measurement, not a verdict.
    """
    tail = stdout.rstrip()
    word = tail[max(tail.rfind("\n"), tail.rfind("\r")) + 1:].strip().lower()
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    return None
