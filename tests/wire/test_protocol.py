"""Tests for vera_env.wire.protocol: the wire format, its error messages, and verdicts."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vera_env.wire.protocol import (
    ANSWER_PREFIX,
    CHECK_KINDS,
    NODE_KINDS,
    PROTOCOL,
    CheckSpec,
    Emission,
    parse_emission,
    strip_reasoning,
    verdict_from_output,
)

DESIGN_EXAMPLE = (
    "<command>zcat counts.mtx.gz | wc -l</command>\n"
    'NODE kind=qc summary="14,203 of 34,460 cells pass QC" artifact=qc.mtx parents=n1\n'
    'CHECK conservation "genes preserved" :: test $(zcat genes.tsv.gz|wc -l) -eq 18082 '
    "&& echo True || echo False\n"
    "FINAL ANSWER: 14203"
)
NODE = 'NODE kind=qc summary="kept 90 of 100 rows" artifact=kept.tsv'
CHECK = 'CHECK conservation "rows kept" :: test $(wc -l < kept.tsv) -eq 91 && echo True'


def rejected(text: str) -> str:
    """Parse `text`, assert it was rejected with nothing else set, return the error."""
    emission = parse_emission(text)
    assert emission.error, f"expected a rejection for {text!r}"
    assert emission == Emission(error=emission.error)
    return emission.error


# --- the well-formed turn -----------------------------------------------------------


def test_parse_emission_design_example_gives_every_field() -> None:
    emission = parse_emission(DESIGN_EXAMPLE)
    assert emission == Emission(
        command="zcat counts.mtx.gz | wc -l",
        kind="qc",
        summary="14,203 of 34,460 cells pass QC",
        artifact="qc.mtx",
        parents=("n1",),
        checks=(CheckSpec("conservation", "genes preserved",
                          "test $(zcat genes.tsv.gz|wc -l) -eq 18082 && echo True || echo False"),),
        answer="14203",
    )
    assert emission.declares_node


@pytest.mark.parametrize("text, expected", [
    ("<command>ls -la</command>", Emission(command="ls -la")),
    ("<command>\ncd data\nwc -l *.tsv\n</command>", Emission(command="cd data\nwc -l *.tsv")),
    ("Let me look first. <command>ls</command> then decide.", Emission(command="ls")),
    (f"{ANSWER_PREFIX} Escherichia coli", Emission(answer="Escherichia coli")),
    (f"{NODE}\n{CHECK}", Emission(kind="qc", summary="kept 90 of 100 rows",
                                  artifact="kept.tsv", checks=(CheckSpec(
                                      "conservation", "rows kept",
                                      "test $(wc -l < kept.tsv) -eq 91 && echo True"),))),
    (f"{NODE}", Emission(kind="qc", summary="kept 90 of 100 rows", artifact="kept.tsv")),
])
def test_parse_emission_any_single_part_is_a_turn(text: str, expected: Emission) -> None:
    assert parse_emission(text) == expected


def test_parse_emission_command_only_does_not_declare_node() -> None:
    assert not parse_emission("<command>ls</command>").declares_node


def test_parse_emission_windows_line_endings_and_lone_cr_are_lines() -> None:
    crlf = DESIGN_EXAMPLE.replace("\n", "\r\n")
    assert parse_emission(crlf) == parse_emission(DESIGN_EXAMPLE)
    assert parse_emission(DESIGN_EXAMPLE.replace("\n", "\r")) == parse_emission(DESIGN_EXAMPLE)


def test_parse_emission_leading_whitespace_before_node_and_check_is_fine() -> None:
    emission = parse_emission(f"   {NODE}\n\t{CHECK}")
    assert emission.kind == "qc" and len(emission.checks) == 1


def test_parse_emission_command_tag_is_case_insensitive() -> None:
    assert parse_emission("<COMMAND>ls</Command>").command == "ls"


# --- NODE fields --------------------------------------------------------------------


@pytest.mark.parametrize("parents, expected", [
    ("n1,n2", ("n1", "n2")),
    ("n1, n2", ("n1", "n2")),
    ("n1 ,  n2 ,n3", ("n1", "n2", "n3")),
    ('"n1, n2"', ("n1", "n2")),
    ("[n1, n2]", ("n1", "n2")),
    ("", ()),
])
def test_parse_emission_parents_tolerate_spaces_quotes_brackets(
        parents: str, expected: tuple[str, ...]) -> None:
    emission = parse_emission(f'NODE kind=load summary="x" parents={parents}')
    assert emission.parents == expected


def test_parse_emission_parents_before_other_keys_with_spaces() -> None:
    emission = parse_emission('NODE parents=n1, n2 kind=test summary="p = 0.03" artifact=t.txt')
    assert (emission.parents, emission.kind, emission.summary, emission.artifact) == (
        ("n1", "n2"), "test", "p = 0.03", "t.txt")


def test_parse_emission_summary_keeps_inner_quotes_and_equals() -> None:
    emission = parse_emission('NODE kind=qc summary="the "good" cells: p=0.03, n>1000" parents=n1')
    assert emission.summary == 'the "good" cells: p=0.03, n>1000'
    assert emission.parents == ("n1",)


@pytest.mark.parametrize("line, artifact", [
    ('NODE kind=qc summary="x" artifact=qc.mtx', "qc.mtx"),
    ('NODE kind=qc summary="x" artifact="my file.txt"', "my file.txt"),
    ('NODE kind=qc summary="x" artifact=out.tsv trailing words', "out.tsv"),
    ('NODE kind=qc summary="x"', ""),
])
def test_parse_emission_artifact_forms(line: str, artifact: str) -> None:
    assert parse_emission(line).artifact == artifact


@pytest.mark.parametrize("line", [
    'NODE kind=QC summary="x"', 'NODE kind="qc" summary="x"', "NODE kind=qc summary='x'",
    'NODE kind = qc summary = "x"', 'NODE kind=qc summary=x'])
def test_parse_emission_node_kind_and_summary_spellings_accepted(line: str) -> None:
    emission = parse_emission(line)
    assert (emission.kind, emission.summary) == ("qc", "x")


# --- rejected turns: each message names the fix ------------------------------------


@pytest.mark.parametrize("text, fix", [
    ("I think the answer is probably E. coli.", "<command>...</command>"),
    ("```bash\nls -la\n```", "code fences are not run"),
    ("<command>ls -la", "End it with </command>"),
    ("ls -la</command>", "Open the block with exactly <command>"),
    ('<command timeout="5">ls</command>', "Open the block with exactly <command>"),
    ("<command>ls</command>\n<command>pwd</command>", "one <command>...</command> block"),
    ("<command>   </command>", "Put the shell command between the tags"),
    ("<command>ls\nNODE kind=qc summary=\"x\"</command>", "put it after that"),
    ('<command>ls\nCHECK range "x" :: echo True</command>', "Close the block with </command>"),
    (f"<command>{ANSWER_PREFIX} 42</command>", "Close the block with </command>"),
    ("NODE kind=qc summary=\"x\"\nNODE kind=test summary=\"y\"", "one node per turn"),
    ('CHECK range "x" :: echo True', "Add NODE kind=<kind>"),
    (f'{CHECK}\n{NODE}', "Move them under the NODE line"),
    ('NODE summary="x"', "Add kind= with one of: load, qc"),
    ('NODE kind=cleanup summary="x"', "Use one of: load, qc, transform, test, interpret, answer"),
    ("NODE kind=qc artifact=a.txt", 'Add summary="..."'),
    ('NODE kind=qc summary=""', 'Add summary="..."'),
    (f'{NODE}\nCHECK sanity "x" :: echo True', "Use one of: conservation, range, invariance, type"),
    (f'{NODE}\nCHECK range "" :: echo True', "Put what must be true between the quotes"),
    (f'{NODE}\nCHECK range "x" ::   ', "Write a one-line shell command"),
    (f'{NODE}\n- {CHECK}', "no bullet, number, quote mark, # or backtick"),
    (f'`{NODE}`', "Rewrite"),
    (f"{ANSWER_PREFIX}   ", "Write the answer after the prefix"),
    (f"{ANSWER_PREFIX} 42\n<command>ls</command>", "put it last"),
    (f"{ANSWER_PREFIX} 42\n{NODE}", "put it last"),
    ("<command>printf 'a\x00b'</command>", "Retype that line as plain text"),
    (f'{NODE}\nCHECK range "x" :: echo \ud800', "Retype that line as plain text"),
])
def test_parse_emission_rejection_tells_the_fix(text: str, fix: str) -> None:
    assert fix in rejected(text)


def test_parse_emission_malformed_checks_are_counted_and_shown() -> None:
    text = f'{NODE}\n{CHECK}\nCHECK range rows :: echo True\nCHECK range "x" echo True'
    error = rejected(text)
    assert error.startswith("2 CHECK line(s) malformed; each must read: CHECK <kind>")
    assert "CHECK range rows :: echo True" in error


@pytest.mark.parametrize("line", [
    'CHECK range "x"',  # no :: sentinel
    "CHECK range 'x' :: echo True",  # single quotes
    'CHECK "x" :: echo True',  # no kind
    "CHECK: rows kept",  # prose shaped like a check
    "CHECK range \u201cx\u201d :: echo True",  # curly quotes
])
def test_parse_emission_check_not_in_strict_form_is_malformed(line: str) -> None:
    assert "1 CHECK line(s) malformed" in rejected(f"{NODE}\n{line}")


def test_parse_emission_unknown_kind_is_listed_back() -> None:
    assert "'cleanup'" in rejected('NODE kind=cleanup summary="x"')


def test_parse_emission_non_str_raises_type_error() -> None:
    with pytest.raises(TypeError, match="expects a str, got bytes"):
        parse_emission(b"<command>ls</command>")  # type: ignore[arg-type]


# --- incidents ----------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    '<check kind="range" name="length > 1000" command="python3 -c "print(1)""/>',
    '<node kind="qc" summary="cells">\n<check name="length > 1000">x</check>\n</node>',
    '<command>ls</command>\n<check kind="type" command="python3 -c "import sys"">',
])
def test_parse_emission_xml_tags_rejected_with_fix(text: str) -> None:
    """Incident: XML attributes lost `name="length > 1000"` and `command="python3 -c "`."""
    error = rejected(text)
    assert "XML-style" in error
    assert 'NODE kind=<kind> summary="<finding>"' in error
    assert 'CHECK <kind> "<name>" :: <one-line command' in error


def test_parse_emission_check_with_xml_breaking_characters_is_verbatim() -> None:
    """The strings the XML format cut short survive the :: line intact."""
    command = ("python3 -c \"import sys; s=open('a.fa').read(); "
               "print(len(s) > 1000 and s.count('>') < 5)\"")
    emission = parse_emission(f'{NODE}\nCHECK range "length > 1000" :: {command}')
    assert emission.checks == (CheckSpec("range", "length > 1000", command),)


@pytest.mark.parametrize("command", [
    "grep -c '<node ' network.xgmml | awk '{print ($1 > 3)}'",
    'grep -q "<command>" log.txt && echo False || echo True',
    'grep -q "</command>" log.txt && echo False || echo True',
    f'grep -c "{ANSWER_PREFIX}" notes.txt | xargs test 0 -eq && echo True',
    "python3 -c \"print('a::b'.count('::') == 1)\"",
])
def test_parse_emission_text_after_sentinel_is_opaque(command: str) -> None:
    emission = parse_emission(f'{NODE}\nCHECK type "c" :: {command}')
    assert emission.checks == (CheckSpec("type", "c", command),)
    assert not emission.answer and not emission.command


def test_parse_emission_echoed_template_checks_do_not_count() -> None:
    """Incident: echoed instruction lines counted as checks and inflated counts fivefold."""
    echo = "\n".join([
        'CHECK CHECKKIND "WHAT MUST BE TRUE" :: ONE-LINE COMMAND PRINTING True OR False',
        "CHECK range \"n reads\" :: grep -c '^>' reads.fasta",
        "CHECK range \"n reads\" :: test $(grep -c '^>' reads.fasta) -eq 1042 "
        "&& echo True || echo False",
        "CHECK type \"sequence\" :: python3 -c \"print(seq[:50])\"",
        "CHECK type \"starts with ATG\" :: python3 -c "
        "\"print(open('g.fa').readlines()[1].startswith('ATG'))\"",
    ])
    emission = parse_emission(f"{echo}\n<command>wc -l kept.tsv</command>\n{NODE}\n{CHECK}")
    assert not emission.error
    assert len(emission.checks) == 1
    assert emission.checks[0].name == "rows kept"


def test_parse_emission_echoed_protocol_never_inflates_checks() -> None:
    """Echoing this project's own PROTOCOL before a real block adds no check."""
    emission = parse_emission(f"{PROTOCOL}\n<command>ls</command>\n{NODE}\n{CHECK}")
    assert emission.error
    assert not emission.checks
    assert not emission.answer


def test_parse_emission_protocol_text_alone_is_rejected() -> None:
    error = rejected(PROTOCOL)
    assert "Unknown node kind '<kind>'" in error


# --- the command block --------------------------------------------------------------


def test_parse_emission_inside_command_is_never_protocol() -> None:
    """A heredoc with XML, FINAL ANSWER text and NODE words runs as shell, untouched."""
    command = ("cat > net.xml <<'EOF'\n<node id=\"a\"/>\n<check/>\nEOF\n"
               f"echo \"{ANSWER_PREFIX} not yet\"\necho 'NODE count: 3'")
    emission = parse_emission(f"<command>{command}</command>")
    assert emission == Emission(command=command)


def test_parse_emission_node_line_may_come_before_the_command() -> None:
    emission = parse_emission(f"{NODE}\n<command>wc -l kept.tsv</command>\n{CHECK}")
    assert emission.command == "wc -l kept.tsv" and len(emission.checks) == 1


def test_parse_emission_checks_below_node_separated_by_command_belong_to_it() -> None:
    emission = parse_emission(f"{NODE}\n<command>ls</command>\n{CHECK}\n{CHECK}")
    assert len(emission.checks) == 2


def test_parse_emission_node_after_closing_tag_on_same_line_counts() -> None:
    emission = parse_emission(f"<command>ls</command>{NODE}")
    assert emission.command == "ls" and emission.kind == "qc"


# --- answers ------------------------------------------------------------------------


@pytest.mark.parametrize("text, answer", [
    (f"{ANSWER_PREFIX} 42", "42"),
    (f"{ANSWER_PREFIX} first\n{ANSWER_PREFIX} second", "second"),
    (f"{ANSWER_PREFIX}\nEscherichia coli", "Escherichia coli"),
    (f"{ANSWER_PREFIX} BRCA1\nTP53\nEGFR", "BRCA1\nTP53\nEGFR"),
    (f"**{ANSWER_PREFIX}** Norovirus GII", "** Norovirus GII"),
    (f"{ANSWER_PREFIX} Norovirus GII</command>", "Norovirus GII</command>"),
    (f"<command>ls</command>\n{ANSWER_PREFIX} chr7:55,191,822 G>A", "chr7:55,191,822 G>A"),
])
def test_parse_emission_answer_is_rest_of_turn_after_last_prefix(text: str, answer: str) -> None:
    emission = parse_emission(text)
    assert not emission.error
    assert emission.answer == answer


def test_parse_emission_prefix_inside_node_or_check_is_not_an_answer() -> None:
    emission = parse_emission(
        f'NODE kind=answer summary="{ANSWER_PREFIX} 42 is supported"\n'
        f'CHECK type "{ANSWER_PREFIX} is numeric" :: python3 -c "print(float(42) > 0)"')
    assert not emission.error and not emission.answer
    assert emission.summary == f"{ANSWER_PREFIX} 42 is supported"
    assert emission.checks[0].name == f"{ANSWER_PREFIX} is numeric"


def test_parse_emission_answer_with_node_and_command() -> None:
    emission = parse_emission(DESIGN_EXAMPLE)
    assert emission.answer == "14203" and emission.command and emission.kind


def test_parse_emission_answer_inside_reasoning_is_never_mined() -> None:
    text = f"<think>maybe {ANSWER_PREFIX} Salmonella\n<command>rm -rf x</command></think>ok"
    assert "nothing happened" in rejected(text)
    emission = parse_emission(
        f"<think>{ANSWER_PREFIX} guess</think>\n<command>ls</command>")
    assert emission == Emission(command="ls")


# --- reasoning ----------------------------------------------------------------------


@pytest.mark.parametrize("text, visible", [
    ("<think>draft</think>answer", "answer"),
    ("<thinking>a</thinking> b <reasoning>c</reasoning> d", "b  d"),
    ("<THINK>a</THINK>b", "b"),
    ("template put the opening tag in the prompt</think>\nvisible", "visible"),
    ("visible <think>ran out of tokens FINAL ANSWER: x", "visible"),
    ("<think>never closed", ""),
    ("<think>a <think>nested</think> still</think>after", "after"),
    ("a</think>b</think>c", "bc"),
    ("no reasoning here", "no reasoning here"),
])
def test_strip_reasoning_drops_blocks(text: str, visible: str) -> None:
    assert strip_reasoning(text) == visible


# --- verdicts -----------------------------------------------------------------------


@pytest.mark.parametrize("stdout, verdict", [
    ("True\n", True), ("False\n", False), ("TRUE", True), ("false", False),
    ("1", True), ("0", False), ("yes", True), ("No", False), ("pass", True),
    ("FAIL", False), ("passed", True), ("failed", False), ("ok", True), ("OK\r\n", True),
    ("n=1042\nTrue", True), ("diagnostics\nFalse\n\n   \n", False),
    ("50%\r100%\rTrue", True), ("  True  ", True),
])
def test_verdict_from_output_reads_last_nonempty_line(stdout: str, verdict: bool) -> None:
    assert verdict_from_output(stdout) is verdict


@pytest.mark.parametrize("stdout", [
    "", "\n\n", "1042", "True\n1042", "True\n0.42", "/work/kept.tsv", "True.",
    "[1] TRUE", "true false", "None", "ATGCGT", "True\nTraceback (most recent call last)",
])
def test_verdict_from_output_measurement_is_none(stdout: str) -> None:
    """A check that prints True and then a count must not pass: only the last line counts."""
    assert verdict_from_output(stdout) is None


# --- PROTOCOL -----------------------------------------------------------------------


@pytest.mark.parametrize("needle", [
    *NODE_KINDS, *CHECK_KINDS, "::", "ONE line", "read-only", "WRONG:", "RIGHT:",
    "real filenames", "would FAIL", "earns nothing", "only record of this step",
    "not the activity", "Never re-declare", f"{ANSWER_PREFIX} <answer>", "True or False",
    "<command>", "script",
])
def test_protocol_text_teaches_the_rules(needle: str) -> None:
    assert needle in PROTOCOL


def test_protocol_right_examples_parse_as_valid_checks() -> None:
    rights = [line.split("RIGHT:", 1)[1].strip() for line in PROTOCOL.splitlines()
              if line.strip().startswith("RIGHT:")]
    wrongs = [line.split("WRONG:", 1)[1].strip() for line in PROTOCOL.splitlines()
              if line.strip().startswith("WRONG:")]
    assert len(rights) == len(wrongs) == 2
    emission = parse_emission("\n".join([NODE, *rights, *wrongs]))
    assert not emission.error
    assert len(emission.checks) == 4


def test_protocol_example_lines_are_not_protocol_lines_when_echoed() -> None:
    """The WRONG/RIGHT examples are prefixed, so an echo cannot make them checks."""
    examples = "\n".join(line for line in PROTOCOL.splitlines() if "WRONG:" in line
                         or "RIGHT:" in line)
    emission = parse_emission(f"{examples}\n{NODE}\n{CHECK}")
    assert len(emission.checks) == 1


# --- properties ---------------------------------------------------------------------

FRAGMENTS = [
    "<command>", "</command>", "<COMMAND>", "NODE ", "NODE kind=qc", " kind=", "qc",
    ' summary="', '"', "'", " artifact=", " parents=", "n1,", " n2", "CHECK ", "range ",
    "CHECK range \"x\" :: ", " :: ", "::", "echo True", "FINAL ANSWER:", "FINAL ANSWER: ",
    "\n", "\r\n", "\r", " ", "\t", "<think>", "</think>", "<reasoning>", "<node", "<check ",
    "/>", ">", "<", "- ", "`", "```", "#", "1. ", "\x00", "\ud800", "\udfff", "\u2028",
    "\x85", "x", "True", "=", ",",
]
ANY_CHAR = st.integers(0, 0x10FFFF).map(chr)


def _assert_well_formed(emission: Emission) -> None:
    assert isinstance(emission, Emission)
    if emission.error:
        assert emission == Emission(error=emission.error)
        return
    assert emission.command or emission.kind or emission.answer
    assert emission.kind in ("", *NODE_KINDS)
    assert not emission.checks or emission.kind
    for check in emission.checks:
        assert check.kind in CHECK_KINDS and check.name and check.command
        assert "\n" not in check.command and "\x00" not in check.command
    assert "\x00" not in emission.command


@settings(max_examples=400, database=None)
@given(st.text(alphabet=ANY_CHAR, max_size=300))
def test_parse_emission_never_raises_on_arbitrary_text(text: str) -> None:
    _assert_well_formed(parse_emission(text))


@settings(max_examples=400, database=None)
@given(st.binary(max_size=300).map(lambda b: b.decode("utf-8", "surrogateescape")))
def test_parse_emission_never_raises_on_decoded_binary(text: str) -> None:
    _assert_well_formed(parse_emission(text))


@settings(max_examples=600, database=None)
@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=6), max_size=40).map("".join))
def test_parse_emission_never_raises_on_protocol_fragments(text: str) -> None:
    _assert_well_formed(parse_emission(text))


ADVERSARIAL = [
    "a\n", "<\n", "<", " ", "\n", "<command>", "</command>", "<command>x\n", "<think>",
    "</think>", "NODE\n", "CHECK\n", 'CHECK range "x" :: y\n', "CHECK range \"", "- CHECK\n",
    "FINAL ANSWER:", "<node", "kind=", " kind=a", '"', "::", "1", "\r\n", "\r", "`", "#",
    'NODE kind=qc summary="', "CHECK " + "a" * 50, "\ud800",
]
MEGABYTE = 1_000_000


def _megabyte(unit: str) -> str:
    return (unit * (MEGABYTE // len(unit) + 1))[:MEGABYTE]


@settings(max_examples=30, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from(ADVERSARIAL), st.sampled_from(["", DESIGN_EXAMPLE, NODE + "\n"]))
def test_parse_emission_megabyte_input_parses_without_catastrophic_backtracking(unit: str, head: str) -> None:
    text = head + _megabyte(unit)
    started = time.perf_counter()
    emission = parse_emission(text)
    assert time.perf_counter() - started < 10.0  # quadratic on 1 MB: minutes; not a speed test
    _assert_well_formed(emission)


def test_parse_emission_megabyte_of_checks_under_a_node_is_linear() -> None:
    text = f"{NODE}\n" + _megabyte(f"{CHECK}\n").rsplit("\n", 1)[0]
    started = time.perf_counter()
    emission = parse_emission(text)
    assert time.perf_counter() - started < 10.0  # quadratic on 1 MB: minutes; not a speed test
    assert len(emission.checks) == text.count("\nCHECK ")


@pytest.mark.parametrize("unit", ["True\n", "x" * 99 + "\n", " ", "\r"])
def test_verdict_from_output_megabyte_without_catastrophic_backtracking(unit: str) -> None:
    started = time.perf_counter()
    verdict_from_output(_megabyte(unit))
    assert time.perf_counter() - started < 10.0  # quadratic on 1 MB: minutes; not a speed test


# --- round trip: an Emission rendered back into the wire format parses to itself ----

_SHELL = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789 \t$|&;<>=-_./,:'\"*(){}[]",
                 min_size=1, max_size=30)
_PROSE = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 "
                          "\"',.:;%>=+-()/", min_size=1, max_size=40)
_NODE_KEY = re.compile(r"(?<!\S)(kind|summary|artifact|parents)\s*=")
_REASONING = re.compile(r"</?(think|thinking|reasoning)\s*>", re.I)


def _stripped(text: str) -> bool:
    return bool(text) and text == text.strip()


def _shell_ok(text: str) -> bool:
    low = text.lower()
    return _stripped(text) and "command>" not in low and not _REASONING.search(text)


commands = st.lists(_SHELL, min_size=1, max_size=4).map("\n".join).filter(_shell_ok)
summaries = _PROSE.filter(lambda s: _stripped(s) and not _NODE_KEY.search(s)
                          and ANSWER_PREFIX not in s)
check_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789 <>'|:=%.-", min_size=1,
                      max_size=30).filter(_stripped)
check_commands = (st.lists(_SHELL | st.sampled_from(["<command>", "</command>", "<node ",
                                                     ANSWER_PREFIX, "::", "NODE kind=qc"]),
                           min_size=1, max_size=6)
                  .map("".join).filter(lambda c: _stripped(c) and not _REASONING.search(c)))
answers = st.lists(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789 .,:%>-",
                           min_size=1, max_size=20), min_size=1, max_size=3).map(
    "\n".join).filter(_stripped)


@st.composite
def emissions(draw: st.DrawFn) -> Emission:
    command = draw(st.one_of(st.just(""), commands))
    answer = draw(st.one_of(st.just(""), answers))
    if not draw(st.booleans()):
        if not (command or answer):
            command = "ls"
        return Emission(command=command, answer=answer)
    checks = draw(st.lists(st.builds(CheckSpec, st.sampled_from(CHECK_KINDS), check_names,
                                     check_commands), max_size=4))
    return Emission(command=command, kind=draw(st.sampled_from(NODE_KINDS)),
                    summary=draw(summaries),
                    artifact=draw(st.one_of(st.just(""), st.from_regex(r"[\w.-]{1,20}",
                                                                       fullmatch=True))),
                    parents=tuple(draw(st.lists(st.from_regex(r"n[0-9]{1,3}", fullmatch=True),
                                                max_size=3))),
                    checks=tuple(checks), answer=answer)


def render(emission: Emission) -> str:
    """Write an Emission back in the wire format, as a model following PROTOCOL would."""
    lines = [f"<command>\n{emission.command}\n</command>"] if emission.command else []
    if emission.kind:
        node = f'NODE kind={emission.kind} summary="{emission.summary}"'
        node += f" artifact={emission.artifact}" if emission.artifact else ""
        node += f" parents={','.join(emission.parents)}" if emission.parents else ""
        lines.append(node)
        lines += [f'CHECK {c.kind} "{c.name}" :: {c.command}' for c in emission.checks]
    if emission.answer:
        lines.append(f"{ANSWER_PREFIX} {emission.answer}")
    return "\n".join(lines)


@settings(max_examples=500, database=None)
@given(emissions())
def test_parse_emission_round_trips_rendered_emission(emission: Emission) -> None:
    assert parse_emission(render(emission)) == emission
