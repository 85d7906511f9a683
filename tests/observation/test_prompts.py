import pytest

from vera_env.observation.prompts import (
    COMPACT_WINDOW_CHARS,
    WINDOW_CHARS,
    render_forced_prompt,
    render_step_prompt,
    render_window,
)
from vera_env.observation.state import AnalysisState


def test_window_keeps_last_four_newest_has_room():
    recent = [(f"cmd{i}", f"out{i} " + "y" * 50_000 + f" END{i}") for i in range(6)]
    text = render_window(recent)
    assert len(text) <= WINDOW_CHARS
    assert "cmd0" not in text and "cmd1" not in text
    assert all(f"cmd{i}" in text for i in range(2, 6))
    assert "END5" in text  # the newest output keeps its tail
    assert text.index("cmd2") < text.index("cmd5")  # reads oldest first


def test_compact_window_is_smaller_so_a_printed_matrix_fits_a_small_model():
    """The compact variant (small models) keeps its window to 3,000 chars; full keeps 12,000.

    The output is the shape that broke a learning run: a matrix printed whole.
    """
    matrix = "\n".join(f"{i} {i % 97} {i * 7 % 113}" for i in range(2000)) + "\nLAST"
    recent = [("zcat matrix.mtx.gz", matrix)]
    compact, full = (render_step_prompt("q", ["matrix.mtx.gz"], AnalysisState(), recent,
                                        state_budget=100, variant=v)
                     for v in ("compact", "full"))
    compact_window = compact.split("OUTPUT ===\n", 1)[1].rsplit("\n\nYour turn:", 1)[0]
    full_window = full.split("OUTPUT ===\n", 1)[1].rsplit("\n\nEmit", 1)[0]
    assert len(compact_window) <= COMPACT_WINDOW_CHARS < len(full_window) <= WINDOW_CHARS
    assert compact_window.endswith("LAST") and full_window.endswith("LAST")  # tails kept
    assert "$ zcat matrix.mtx.gz" in compact_window


def test_window_empty():
    assert render_window([]) == ""


def test_step_prompt_has_question_files_protocol_state_and_nudge():
    text = render_step_prompt("How many cells?", ["counts.mtx.gz", "genes.tsv"],
                              AnalysisState(), [("ls", "counts.mtx.gz")], state_budget=500,
                              nudge="your last turn was rejected: x", steps_left=7)
    for piece in ("How many cells?", "- counts.mtx.gz", "NODE", "CHECK", "(no nodes yet)",
                  "$ ls", "NOTE: your last turn was rejected: x", "Steps left: 7"):
        assert piece in text


def test_step_prompt_lists_at_most_sixty_files():
    files = [f"f{i}.txt" for i in range(100)]
    text = render_step_prompt("q", files, AnalysisState(), [], state_budget=100)
    assert "- f59.txt" in text and "- f60.txt" not in text and "40 more" in text


def test_forced_prompt_demands_single_answer_line():
    text = render_forced_prompt("Which gene?", AnalysisState(), state_budget=100,
                                reason="You have used 48 of 50 steps.", nudge="not an answer")
    assert "STOP INVESTIGATING" in text and "FINAL ANSWER: <answer>" in text
    assert "NOTE: not an answer" in text and "<command>" not in text


def test_step_prompt_shows_odd_file_names_as_shell_words_and_stays_utf8():
    files = ["x\udcff.tsv", "new\nline.tsv", "plain.tsv", "-n.tsv"]
    text = render_step_prompt("q", files, AnalysisState(), [("ls", "x\udcff")], state_budget=100)
    text.encode("utf-8")
    for shown in ("- $'x\\xff.tsv'", "- $'new\\nline.tsv'", "- plain.tsv", "- -n.tsv"):
        assert shown in text

def test_compact_variant_names_real_kinds_and_files_with_no_placeholders():
    # Incident (issue 12): SmolLM2-135M copied the full rules' placeholders back
    # ("NODE kind=<kind> summary=\"<finding>\""), so every free turn was rejected.
    files = ["README.txt", "counts.mtx.gz", "genes.tsv"]
    full = render_step_prompt("How many cells?", files, AnalysisState(), [("ls", "x")],
                              state_budget=500, nudge="fix it", steps_left=3)
    compact = render_step_prompt("How many cells?", files, AnalysisState(), [("ls", "x")],
                                 state_budget=500, nudge="fix it", steps_left=3,
                                 variant="compact")
    assert "<kind>" in full and '"<finding>"' in full
    for placeholder in ("<kind>", "<finding>", "<file>", "<name>", "<answer>", "<n1"):
        assert placeholder not in compact
    for piece in ("How many cells?", "counts.mtx.gz", "$ ls", "NOTE: fix it", "Steps left: 3",
                  "(no nodes yet)", "<command>cat > q.sh <<'E'\nzcat counts.mtx.gz | wc -l\nE\nsh q.sh</command>",
                  "artifact=counts.mtx.gz", "load, qc, transform"):
        assert piece in compact
    assert len(compact) < len(full) / 2


def test_compact_example_lines_parse_as_a_node_with_a_check():
    from vera_env.wire.protocol import parse_emission

    text = render_step_prompt("q", ["values.txt"], AnalysisState(), [], state_budget=100,
                              variant="compact")
    lines = [line for line in text.splitlines() if line.startswith(("NODE", "CHECK"))]
    emission = parse_emission("\n".join(lines))
    assert emission.error == "" and emission.kind == "load"
    # The example check re-runs the saved computation: a pin of the file's line count,
    # the earlier example, was what a fine-tuned SmolLM2 wrote in 53 of 55 nodes.
    assert emission.checks[0].command.startswith('test "$(sh q.sh)" = "12"')
    assert "wc -l" not in emission.checks[0].command


def test_compact_example_command_runs_and_its_check_holds_on_its_output(tmp_path):
    import re
    import subprocess

    from vera_env.wire.protocol import parse_emission

    text = render_step_prompt("q", ["values.txt"], AnalysisState(), [], state_budget=100,
                              variant="compact")
    command = re.search(r"<command>(.*?)</command>", text, re.S).group(1)
    (tmp_path / "values.txt").write_text("a\nb\nc\n")
    printed = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True,
                             text=True, check=True).stdout.strip()
    assert printed == "3"
    lines = [line for line in text.splitlines() if line.startswith(("NODE", "CHECK"))]
    check = parse_emission("\n".join(lines)).checks[0].command.replace("12", printed)
    verdict = subprocess.run(["bash", "-c", check], cwd=tmp_path, capture_output=True, text=True)
    assert verdict.stdout.strip() == "True"


def test_forced_prompt_compact_and_unknown_variant_rejected():
    text = render_forced_prompt("How many?", AnalysisState(), state_budget=100,
                                reason="Budget spent.", variant="compact")
    assert "<answer>" not in text and "FINAL ANSWER:" in text and "Budget spent." in text
    with pytest.raises(ValueError, match="observation variant must be one of"):
        render_step_prompt("q", [], AnalysisState(), [], state_budget=10,
                           variant="tiny")  # type: ignore[arg-type]
