"""Text at the boundaries: invisible characters refused with a fix; emitted text valid UTF-8."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vera_env.wire.protocol import parse_emission
from vera_env.wire.text import describe_char, invisible_problem, json_line, safe_json, safe_text, shell_word

# The characters issue 11 names, and the like.
ISSUE_CHARS = ["\x00", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"]
LIKE = ["\u202e", "\u2066", "\u00ad", "\U000e0041", "\u2028", "\x1b", "\x85", "\ud800",
        "\udcff", "\u3164", "\u180e", "\r"]
PLAIN = ["µ", "é", "→", "中文", "🧬", "\u0301", "\u00a0", "\t", "½", "×"]
NODE = 'NODE kind=qc summary="14 of 20 cells pass QC" artifact=qc.txt'
CHECK = 'CHECK range "14 kept" :: test $(wc -l < qc.txt) -eq 14 && echo True || echo False'


@pytest.mark.parametrize("char", ISSUE_CHARS + LIKE)
def test_invisible_problem_names_the_character_line_and_fix(char: str) -> None:
    message = invisible_problem(f"first line\nsecond{char}line")
    assert f"U+{ord(char):04X}" in message and message.startswith("Line 2 of your turn")
    assert "Retype that line as plain text" in message and "printf" in message


@pytest.mark.parametrize("char", PLAIN)
def test_invisible_problem_accepts_visible_text(char: str) -> None:
    assert invisible_problem(f"{NODE}{char}\n{CHECK}") == ""


def test_describe_char_names() -> None:
    assert describe_char("\u200b") == "U+200B ZERO WIDTH SPACE"
    assert describe_char("\x00") == "U+0000 NUL"
    assert describe_char("\udcff").startswith("U+DCFF UNPAIRED SURROGATE")


@pytest.mark.parametrize("turn", [
    "<command>echo hi\u200b</command>",                    # command
    f"NO\u200bDE{NODE[4:]}\n{CHECK}",                          # a NODE line the parser would miss
    f"{NODE}\n{CHECK[:20]}\u2060{CHECK[20:]}",                 # CHECK line
    "FINAL ANSWER: TP53\ufeff",                             # answer
    "<command>printf 'a\x00b'</command>",                   # NUL
])
def test_parse_emission_rejects_invisible_characters_in_every_part(turn: str) -> None:
    emission = parse_emission(turn)
    assert "invisible or control character" in emission.error
    assert not (emission.command or emission.kind or emission.answer)


def test_parse_emission_ignores_invisible_characters_inside_reasoning() -> None:
    emission = parse_emission("<think>zero\u200bwidth</think>\n<command>ls</command>")
    assert emission.error == "" and emission.command == "ls"


def test_safe_text_escapes_undecodable_bytes_visibly() -> None:
    name = os.fsdecode(b"x\xff.tsv")
    assert name == "x\udcff.tsv"
    assert safe_text(name) == "x\\xff.tsv" and safe_text("a\ud800b") == "a\\ud800b"
    valid = "µ → 中文 🧬"
    assert safe_text(valid) is valid


@given(st.text(alphabet=st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF),
               max_size=60))
def test_safe_text_output_always_encodes(text: str) -> None:
    safe_text(text).encode("utf-8")


def test_safe_json_escapes_keys_and_nested_values() -> None:
    value = {"a\udcff": ["b\ud800", ("c\udcfe", 1, None, 2.5, True)], "n": {"m": "\udc80"}}
    out = safe_json(value)
    assert out == {"a\\xff": ["b\\ud800", ["c\\xfe", 1, None, 2.5, True]], "n": {"m": "\\x80"}}
    json.dumps(out, ensure_ascii=False).encode("utf-8")


def test_json_line_is_one_line_for_every_reader() -> None:
    record = {"action": "a\u2028b\u2029c\x85d\ne\udcff", "n": 1}
    line = json_line(record)
    assert len(line.splitlines()) == 1 and "\n" not in line
    assert json.loads(line) == {"action": "a\u2028b\u2029c\x85d\ne\\xff", "n": 1}
    line.encode("utf-8")


@pytest.mark.parametrize("raw", [b"x\xff.tsv", b"new\nline.tsv", b"tab\tname", b"it's\n",
                                 b"zw\xe2\x80\x8bsp", b"back\\slash\xfe", b"\x1b[31mred"])
def test_shell_word_names_the_same_file_to_bash(raw: bytes) -> None:
    name = os.fsdecode(raw)
    word = shell_word(name)
    assert word.isprintable() and "\n" not in word
    word.encode("utf-8")
    out = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, check=True,
                         env={"LC_ALL": "C.UTF-8", "PATH": os.environ["PATH"]})
    assert out.stdout == raw


@pytest.mark.parametrize("name", ["data.tsv", "a b.tsv", "-n.tsv", "µ.csv", "it's.txt"])
def test_shell_word_leaves_plain_names_alone(name: str) -> None:
    assert shell_word(name) == name


_PIECES = st.sampled_from(["<command>", "</command>", "ls", "\n", 'NODE kind=qc summary="s"',
                           'CHECK range "r" :: echo True', "FINAL ANSWER: 4", "<think>",
                           "</think>", *ISSUE_CHARS, *LIKE, *PLAIN])


@given(st.lists(_PIECES | st.text(max_size=5), max_size=12).map("".join))
def test_parse_emission_never_passes_an_invisible_character_on(text: str) -> None:
    emission = parse_emission(text)
    parts = [emission.command, emission.summary, emission.artifact, emission.answer,
             *emission.parents, *(c.name + c.command for c in emission.checks)]
    assert all(invisible_problem(part) == "" for part in parts)
    emission.error.encode("utf-8")  # quoted model text is repr-escaped in every message
