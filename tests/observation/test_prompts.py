from vera_env.observation.prompts import WINDOW_CHARS, render_forced_prompt, render_step_prompt, render_window
from vera_env.observation.state import AnalysisState


def test_window_keeps_last_four_newest_has_room():
    recent = [(f"cmd{i}", f"out{i} " + "y" * 50_000 + f" END{i}") for i in range(6)]
    text = render_window(recent)
    assert len(text) <= WINDOW_CHARS
    assert "cmd0" not in text and "cmd1" not in text
    assert all(f"cmd{i}" in text for i in range(2, 6))
    assert "END5" in text  # the newest output keeps its tail
    assert text.index("cmd2") < text.index("cmd5")  # reads oldest first


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
