"""Text that crosses a boundary: what the model may write, and what the harness emits.

Two guarantees live here, each applied once where text crosses a boundary.

**What the model writes is plain text.** A NUL, a zero-width space or a bidi override
in a turn is invisible in every log and every transcript viewer, yet it changes what
runs: ``NO\\u200bDE kind=qc ...`` is prose, not a node, so the model loses its node
unawares; ``CHECK range "n" :: test $(wc -l < da\\u200bta.tsv) ...`` names a file
that does not exist; ``FINAL ANSWER: TP53\\u200b`` fails an exact grader while reading
as right. `invisible_problem` finds the first such character in a turn and says, in
words addressed to the model, where it is and how to fix it
(``vera_env.wire.protocol.parse_emission`` rejects the turn with that message).

**What the harness emits is valid UTF-8 and JSON.** File names are bytes, and Python
keeps a byte that is not UTF-8 as a lone surrogate. Observed: a file named
``$(printf 'x\\377.tsv')`` put ``'x\\udcff.tsv'`` into the workspace listing of the
observation; encoding the observation then raised ``UnicodeEncodeError`` in the
tokenizer, in the HTTP body of ``vera_env.llm`` and in ``RecordEpisode``, and in
``vera-env eval`` the attempt became status ``error``, excluded from the run — an
opt-out from a wrong answer that any model could find. `safe_text` escapes lone
surrogates visibly (``x\\xff.tsv``); `safe_json` does it for every string inside an
``info`` dict or a record; `shell_word` shows a file name the way a shell would accept
it back (``$'x\\xff.tsv'``), so the model can still open the file it sees listed.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

__all__ = ["describe_char", "invisible_problem", "json_line", "safe_json", "safe_text",
           "shell_word"]

# Characters a turn may not contain: they are invisible or unprintable, so neither the
# model nor a person reading the transcript can see what they change. Generated from
# the Unicode 14 categories named on each line.
_INVISIBLE_CLASS = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f"                       # controls but tab, newline (Cc)
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"  # format characters (Cf)
    "\u2028\u2029"                                          # line/paragraph separators
    "\u034f\u115f\u1160\u3164\uffa0"                        # invisible joiner and fillers
    "\ud800-\udfff"                                         # unpaired surrogates (Cs)
)
_INVISIBLE = re.compile(f"[{_INVISIBLE_CLASS}]")
_SURROGATE = re.compile("[\ud800-\udfff]")
# A file name holding one of these is shown quoted; inside the quotes, \\ and ' are
# escaped too.
_UNSHOWABLE = re.compile(f"[{_INVISIBLE_CLASS}\t\n]")
_QUOTED = re.compile(f"[{_INVISIBLE_CLASS}\t\n\\\\']")
_CONTROL_NAMES = {0x00: "NUL", 0x07: "BEL", 0x08: "BACKSPACE", 0x0B: "VERTICAL TAB",
                  0x0C: "FORM FEED", 0x0D: "CARRIAGE RETURN", 0x1B: "ESCAPE", 0x7F: "DELETE"}
_SNIPPET_CHARS = 60


def describe_char(char: str) -> str:
    """Name one character for a message: ``U+200B ZERO WIDTH SPACE``, ``U+0000 NUL``."""
    point = ord(char)
    if 0xD800 <= point <= 0xDFFF:
        name = "UNPAIRED SURROGATE (an undecodable byte)"
    else:
        name = _CONTROL_NAMES.get(point, "") or unicodedata.name(char, "CONTROL CHARACTER")
    return f"U+{point:04X} {name}"


def invisible_problem(text: str) -> str:
    """The error for a turn that holds an invisible or control character; "" if none.

    Rejected: NUL and the other control characters except tab and newline, format
    characters (zero-width space, non-joiner and joiner U+200B..U+200D, word joiner
    U+2060, byte-order mark U+FEFF, bidi marks and overrides, soft hyphen, tag
    characters), line and paragraph separators, invisible fillers and unpaired
    surrogates. The message names the character, the line and the fix.

    Args:
        text: A turn's visible text (reasoning already removed), newlines normalised.

    Returns:
        A message addressed to the model, or "" when the text is plain.
    """
    found = _INVISIBLE.search(text)
    if found is None:
        return ""
    at = found.start()
    line_start = text.rfind("\n", 0, at) + 1
    line_end = text.find("\n", at)
    line = text[line_start:line_end if line_end >= 0 else len(text)]
    column = at - line_start
    shown = line[max(0, column - _SNIPPET_CHARS // 2):column + _SNIPPET_CHARS // 2]
    return (f"Line {text.count(chr(10), 0, at) + 1} of your turn ({shown!r}) contains "
            f"{describe_char(found.group())}, an invisible or control character that "
            "changes what runs or is graded while looking like nothing. Retype that line "
            "as plain text; to put such a byte into a file, write it as an escape in the "
            "command (printf '\\000', $'\\xff').")


def _escape_surrogate(match: re.Match[str]) -> str:
    point = ord(match.group())
    if 0xDC80 <= point <= 0xDCFF:  # a byte that was not UTF-8, kept by surrogateescape
        return f"\\x{point - 0xDC00:02x}"
    return f"\\u{point:04x}"


def safe_text(text: str) -> str:
    """``text`` made encodable as UTF-8: each unpaired surrogate becomes a visible escape.

    A byte that was not UTF-8 (a surrogate U+DC80..U+DCFF, as ``os.listdir`` and
    ``surrogateescape`` decoding produce) becomes ``\\xNN``; any other unpaired
    surrogate becomes ``\\udNNN``. Everything else is unchanged; valid text is
    returned as is.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(_escape_surrogate, text)
    return text


def safe_json(value: Any) -> Any:
    """``value`` with `safe_text` applied to every string in it (keys too), recursively.

    Dicts stay dicts, lists and tuples become lists; other values are returned as they
    are, so a value that is not JSON (a float NaN, an object) still fails loudly where
    it is serialised rather than being hidden here.
    """
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {safe_json(k): safe_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [safe_json(v) for v in value]
    return value


# JSON leaves these raw with ensure_ascii=False, and str.splitlines() (and JavaScript
# before ES2019) breaks a line at them: one record of a .jsonl file would read as two.
_LINE_BREAKS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def json_line(value: Any) -> str:
    """``value`` as one line of JSON Lines, whatever its strings hold.

    Strings go through `safe_json` (valid UTF-8), and the characters that some readers
    take for a line break (U+2028, U+2029, U+0085) are escaped, so the line is one line
    for ``str.splitlines``, for a file iterator and for JavaScript alike. No newline is
    appended.
    """
    return json.dumps(safe_json(value), ensure_ascii=False,
                      separators=(",", ":")).translate(_LINE_BREAKS)


def _shell_escape(match: re.Match[str]) -> str:
    char = match.group()
    point = ord(char)
    if char in "\\'":
        return "\\" + char
    if char == "\n":
        return "\\n"
    if char == "\t":
        return "\\t"
    if point < 0x80:
        return f"\\x{point:02x}"
    if 0xDC80 <= point <= 0xDCFF:
        return f"\\x{point - 0xDC00:02x}"
    return f"\\u{point:04x}" if point <= 0xFFFF else f"\\U{point:08x}"


def shell_word(name: str) -> str:
    """A file name as the model should see it: as is when plain, else ``$'...'``.

    A name holding an undecodable byte, a control character (newline, tab) or an
    invisible one is shown as a bash ANSI-C quoted word, ``$'x\\xff.tsv'`` style with
    ``\\xNN`` and ``\\uNNNN`` escapes: visible, on one line, and accepted back by the
    shell. Plain names, spaces included, are shown unchanged.
    """
    if _UNSHOWABLE.search(name) is None:
        return name
    return "$'" + _QUOTED.sub(_shell_escape, name) + "'"
