"""Tests for vera_env.wire.answers: extracting, cleaning and refusing final answers."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vera_env.wire import protocol
from vera_env.wire.answers import (
    ANSWER_PREFIX,
    answer_is_usable,
    extract_answer,
    looks_like_a_command,
    strip_markup,
    strip_reasoning,
)

AWK_INCIDENT = "awk -F'\\t' 'NR>1{print $2}' alcohol.txt | head -5"
# Asked for a single FINAL ANSWER line, a model kept trying to act instead.
BIGBANG_INCIDENT = "I need to identify the bacterium ... <tool_call> </think>"


def test_answers_reexports_protocol_prefix_and_reasoning_stripper() -> None:
    assert ANSWER_PREFIX == "FINAL ANSWER:" == protocol.ANSWER_PREFIX
    assert strip_reasoning is protocol.strip_reasoning


# --- extract_answer -----------------------------------------------------------------


@pytest.mark.parametrize("text, answer", [
    ("FINAL ANSWER: 5076.02", "5076.02"),
    ("no prefix here", ""),
    ("", ""),
    ("FINAL ANSWER:", ""),
    ("FINAL ANSWER: first\nFINAL ANSWER: second", "second"),
    ("FINAL ANSWER:\n  Escherichia coli  \n", "Escherichia coli"),
    ("FINAL ANSWER: BRCA1\nTP53", "BRCA1\nTP53"),
    ("I checked.\nFINAL ANSWER: Norovirus GII</command>", "Norovirus GII</command>"),
    ("FINAL ANSWER: E. coli\n<command>ls</command>", "E. coli"),
    ("FINAL ANSWER: E. coli <command>ls</command>", "E. coli"),
    ('FINAL ANSWER: 0.42\nNODE kind=answer summary="0.42"', "0.42"),
    ('FINAL ANSWER: 0.42\nCHECK range "x" :: echo True', "0.42"),
])
def test_extract_answer_text_after_last_prefix(text: str, answer: str) -> None:
    assert extract_answer(text) == answer


@pytest.mark.parametrize("text, answer", [
    ("<think>FINAL ANSWER: Salmonella?</think>FINAL ANSWER: E. coli", "E. coli"),
    ("<think>so FINAL ANSWER: Salmonella</think>\nI am not sure yet.", ""),
    ("reasoning, FINAL ANSWER: guess</think>FINAL ANSWER: Listeria", "Listeria"),
    ("FINAL ANSWER: Listeria <think>or FINAL ANSWER: Salmonella", "Listeria"),
])
def test_extract_answer_never_mines_reasoning(text: str, answer: str) -> None:
    assert extract_answer(text) == answer


# --- strip_markup -------------------------------------------------------------------


@pytest.mark.parametrize("text, clean", [
    ("Norovirus GII</command>", "Norovirus GII"),
    ("X</command>```", "X"),
    ("X\n</command>\n```\n", "X"),
    ("X</command></command>", "X"),
    ("**Escherichia coli**", "Escherichia coli"),
    ("*E. coli*", "E. coli"),
    ("`BRCA1`", "BRCA1"),
    ("```\n0.42\n```", "0.42"),
    ("```text\n0.42\n```", "0.42"),
    ("** Norovirus GII", "Norovirus GII"),
    ("Norovirus GII **", "Norovirus GII"),
    ("<answer>TP53</answer>", "TP53"),
    ("TP53<|im_end|>", "TP53"),
    ("TP53</s>", "TP53"),
    ("TP53</think>", "TP53"),
    ("TP53<tool_call>", "TP53"),
    ("5076.02.", "5076.02."),
    ("  E. coli.  ", "E. coli."),
    ("*1/*1", "*1/*1"),
    ("HLA-A*02:01", "HLA-A*02:01"),
    ("mt-Nd1 > 5%", "mt-Nd1 > 5%"),
    ("chr7:55,191,822 G>A", "chr7:55,191,822 G>A"),
    ("a <b> c", "a <b> c"),
    ("", ""),
    ("```", ""),
    ("**", "**"),
])
def test_strip_markup_peels_tags_fences_and_wrappers(text: str, clean: str) -> None:
    assert strip_markup(text) == clean


def test_strip_markup_norovirus_incident() -> None:
    """Incident: the graded answer was 'Norovirus GII</command>'."""
    reply = "FINAL ANSWER: Norovirus GII</command>"
    assert strip_markup(extract_answer(reply)) == "Norovirus GII"
    assert strip_markup(protocol.parse_emission(reply).answer) == "Norovirus GII"


# --- looks_like_a_command -----------------------------------------------------------


@pytest.mark.parametrize("text", [
    AWK_INCIDENT,
    "zcat counts.mtx.gz | wc -l",
    "cd /work && ls",
    "python3 -c 'print(1)'",
    "python3 analysis.py",
    "Rscript -e 'mean(x)'",
    "$ ls -la",
    "echo $(cat n.txt)",
    "head -5 alcohol.txt",
    "cut -f2 data.tsv",
    "grep -c '^>' reads.fasta",
    "ls *.tsv",
    "find . -name '*.gz'",
    "for f in a b; do wc -l $f; done",
    "<command>ls</command>",
    "I would run:\nsamtools view -c reads.bam",
    "E. coli | sort",
])
def test_looks_like_a_command_detects_shell(text: str) -> None:
    assert looks_like_a_command(text)


@pytest.mark.parametrize("text", [
    "Escherichia coli", "0.42", "5076.02", "BRCA1", "chr7:55,191,822 G>A", "mt-Nd1 > 5%",
    "cat", "head and neck squamous cell carcinoma", "sort of enriched", "0|1",
    "p < 0.05", "HLA-A*02:01", "T cells > B cells", "echo", "python 3", "Find the gene",
    "cut-off of 0.05", "Norovirus GII", "grep",
])
def test_looks_like_a_command_spares_answers(text: str) -> None:
    assert not looks_like_a_command(text)


# --- answer_is_usable ---------------------------------------------------------------


@pytest.mark.parametrize("text", [
    AWK_INCIDENT,  # incident: the next command filed as the answer
    "FINAL ANSWER:",  # incident: an empty prefilled continuation
    "FINAL ANSWER: ",
    "final answer:",
    "FINAL ANSWER: FINAL ANSWER:",
    "**FINAL ANSWER:**",
    "", "   ", "...", "\u2026", "N/A", "n/a.", "NA", "NaN", "unknown", "Unknown.", "TBD", "-",
    "--", "?", "???", "!!", "<answer>", "<your answer>", "answer", "Final answer",
    "```\n```", "</command>", "<think>E. coli</think>", "<think>still thinking",
    "zcat x.gz | wc -l",
])
def test_answer_is_usable_refuses_non_answers(text: str) -> None:
    assert not answer_is_usable(text)


@pytest.mark.parametrize("text", [
    "Escherichia coli", "0.42", "5076.02", "BRCA1", "chr7:55,191,822 G>A",
    "mt-Nd1 > 5%", "cat", "B", "0", "7", "None", "Norovirus GII</command>",
    "**E. coli**", "FINAL ANSWER: 42", "final answer: Listeria", "BRCA1\nTP53",
    "p < 0.05", "HLA-A*02:01", "\u03b1-synuclein", "GII.4", "Na", "Unknown primary site",
])
def test_answer_is_usable_accepts_real_answers(text: str) -> None:
    assert answer_is_usable(text)


@pytest.mark.parametrize("reply", [AWK_INCIDENT, AWK_INCIDENT.replace("\\t", "\t"),
                                   f"{ANSWER_PREFIX} {AWK_INCIDENT}"])
def test_answer_is_usable_awk_command_incident(reply: str) -> None:
    """Incident: asked to commit, the model replied with its next command."""
    assert looks_like_a_command(strip_markup(extract_answer(reply) or reply))
    assert not answer_is_usable(extract_answer(reply) or reply)


def test_answer_is_usable_reply_that_kept_acting_incident() -> None:
    """Incident: a forced reply that only reasoned and reached for a tool has no answer."""
    assert extract_answer(BIGBANG_INCIDENT) == ""
    assert strip_reasoning(BIGBANG_INCIDENT) == ""
    assert not answer_is_usable(BIGBANG_INCIDENT)


def test_answer_is_usable_bare_prefix_incident() -> None:
    """Incident: a prefilled continuation came back empty; the record read 'FINAL ANSWER:'."""
    reply = ANSWER_PREFIX + " "
    assert not answer_is_usable(reply)
    assert not answer_is_usable(extract_answer(reply))


# --- properties ---------------------------------------------------------------------

ANY_CHAR = st.integers(0, 0x10FFFF).map(chr)
FRAGMENTS = ["</command>", "<command>", "```", "**", "*", "`", "<think>", "</think>",
             "<|im_end|>", "FINAL ANSWER:", "\n", " ", "x", "| head", "&&", "$(", "awk -F",
             "\x00", "\ud800", ">", "<", "NODE ", "CHECK "]
FUNCTIONS = [extract_answer, strip_markup, strip_reasoning, answer_is_usable,
             looks_like_a_command]


@settings(max_examples=300, database=None)
@given(st.one_of(st.text(alphabet=ANY_CHAR, max_size=200),
                 st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=5), max_size=30)
                 .map("".join)))
def test_answer_functions_never_raise(text: str) -> None:
    assert isinstance(extract_answer(text), str)
    assert isinstance(strip_reasoning(text), str)
    assert isinstance(answer_is_usable(text), bool)
    assert isinstance(looks_like_a_command(text), bool)
    cleaned = strip_markup(text)
    assert strip_markup(cleaned) == cleaned  # peeling is complete: a fixed point
    assert len(cleaned) <= len(text)


@settings(max_examples=200, database=None)
@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789 .,:%>-", min_size=1,
               max_size=40).filter(lambda s: s == s.strip()))
def test_extract_answer_round_trips_prefix(answer: str) -> None:
    assert extract_answer(f"<command>ls</command>\n{ANSWER_PREFIX} {answer}") == answer
    assert protocol.parse_emission(f"{ANSWER_PREFIX} {answer}").answer == answer


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("unit", ["</command>", "*", "`", "x", " ", "<think>",
                                  "FINAL ANSWER:", "awk -F", "a\n", "|", "<", "**x "])
def test_answer_functions_megabyte_without_catastrophic_backtracking(function, unit: str) -> None:  # type: ignore[no-untyped-def]
    text = (unit * (1_000_000 // len(unit) + 1))[:1_000_000]
    started = time.perf_counter()
    function(text)
    assert time.perf_counter() - started < 10.0  # quadratic on 1 MB: minutes; not a speed test
