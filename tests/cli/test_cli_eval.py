"""vera-env eval end to end, against a real OpenAI-compatible server on 127.0.0.1.

The server (``openai_stub.OracleServer``) replies with each task's reference solution,
found from the question in the prompt, so answers are right and the checks really run
in the sandbox. Faults are injected by request number.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from openai_stub import OracleServer

from vera_env.cli import main
from vera_env.evaluation.rundir import RunDir
from vera_env.tasks import load_tasks

REPO = Path(__file__).resolve().parents[2]
TASKS = load_tasks("builtin")
MAX_STEPS = 4   # with --reserve 1 the 4th step is forced: 4-turn solutions answer by prefill


def eval_args(server, out, *extra):
    return ["eval", "--base-url", server.base_url, "--model", "stub", "--tasks", "builtin",
            "--max-steps", str(MAX_STEPS), "--reserve", "1", "--out", str(out),
            "--wrappers", "forced,gate", *extra]


def keys(run):
    return [(a.task_id, a.attempt_index) for a in RunDir(run).attempts()]


def test_eval_end_to_end_retries_faults_prefills_and_runs_concurrently(tmp_path, capsys):
    out = tmp_path / "run"
    faults = {2: "500", 4: "429", 6: "drop", 9: "malformed"}
    with OracleServer(TASKS, max_steps=MAX_STEPS, faults=faults, delay_s=0.05) as server:
        code = main(eval_args(server, out, "--attempts", "2", "--concurrency", "3",
                              "--limit", "4", "--max-retries", "3"))
    assert code == 0
    assert sorted(server.served).count("ok") == len(server.served) - 4
    attempts = RunDir(out).attempts()
    assert sorted(keys(out)) == sorted({(t, k) for t in TASKS.ids()[:4] for k in (0, 1)})
    # 500, 429 and the dropped connection were retried: only the malformed body excluded one.
    provider = [a for a in attempts if a.status == "provider"]
    assert len(provider) == 1 and "malformed chat completion" in provider[0].error
    assert provider[0].score is None and provider[0].correct is None
    scored = [a for a in attempts if a.status != "provider"]
    assert all(a.status == "ok" and a.correct for a in scored)
    assert all(a.n_checks > 0 and a.prompt_tokens > 0 and a.completion_tokens > 0
               for a in scored)
    # Prefill: the forced turn was sent as a continued assistant message and the client
    # put the prefix back, so the released answer is right.
    prefilled = [b for b in server.requests if b.get("continue_final_message")]
    assert prefilled and all(b["messages"][-1]["content"] == "FINAL ANSWER: " for b in prefilled)
    # info["forcing"] describes the next observation: the step after one that set it was forced.
    forced = [a for a in scored if len(a.steps) > 1 and a.steps[-2].forcing]
    assert forced and all(a.steps[-1].action.startswith("FINAL ANSWER: ") for a in forced)
    # One message per turn: the observation, never the transcript.
    assert all([m["role"] for m in b["messages"]] in (["user"], ["user", "assistant"])
               for b in server.requests)
    assert server.peak_in_flight >= 2
    summary = json.loads((out / "summary.json").read_text())
    assert summary["statuses"]["provider"] == 1 and summary["excluded"] == 1
    assert summary["accuracy"] == 1.0 and summary["pass@2"] == 1.0
    assert summary["tokens_in"] > 0 and summary["mean_discriminating_checks"] > 0
    table = capsys.readouterr().out
    assert "pass@2" in table and "provider=1" in table
    for a in attempts:
        folder = RunDir(out).transcript_dir(a.task_id, a.attempt_index)
        lines = (folder / "transcript.jsonl").read_text().splitlines()
        assert json.loads(lines[0])["event"] == "reset"
        assert "QUESTION:" in json.loads(lines[0])["observation"]
        if a.status == "ok":
            assert (folder / "final_answer.txt").read_text() == a.answer
            assert "n1" in (folder / "graph.txt").read_text()


def test_eval_resume_after_kill_loses_and_duplicates_nothing(tmp_path):
    out = tmp_path / "run"
    with OracleServer(TASKS, max_steps=MAX_STEPS, delay_s=0.25) as server:
        args = eval_args(server, out, "--attempts", "2", "--concurrency", "2", "--limit", "3")
        proc = subprocess.Popen([sys.executable, "-m", "vera_env.cli", *args], cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)
        deadline = time.monotonic() + 90
        results = out / "results.jsonl"
        while time.monotonic() < deadline and proc.poll() is None:
            if results.exists() and results.read_text().count("\n") >= 2:
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        before = results.read_text()
        done_before = len(RunDir(out).attempts())
        assert 2 <= done_before < 6
        assert main([*args, "--resume"]) == 0
    after = results.read_text()
    assert after.startswith(before.rsplit("\n", 1)[0])  # what was recorded is kept as is
    got = keys(out)
    assert len(got) == len(set(got)) == 6
    assert all(a.status == "ok" and a.correct for a in RunDir(out).attempts())


def test_resume_refuses_other_settings_and_fresh_run_refuses_existing(tmp_path, capsys):
    out = tmp_path / "run"
    oracle = ["eval", "--policy", "oracle", "--limit", "1", "--max-steps", "10",
              "--out", str(out)]
    assert main(oracle) == 0
    assert main(oracle) == 2
    assert "--resume" in capsys.readouterr().err
    assert main([*oracle[:-4], "--max-steps", "12", "--out", str(out), "--resume"]) == 2
    assert "max_steps: was 10, now 12" in capsys.readouterr().err
    assert main([*oracle, "--resume"]) == 0          # same settings: nothing left to run
    assert len(keys(out)) == 1


def test_resume_retry_exclusions_reruns_provider_faults(tmp_path):
    out = tmp_path / "run"
    with OracleServer(TASKS, max_steps=MAX_STEPS, faults={1: "malformed"}) as server:
        args = eval_args(server, out, "--limit", "2", "--concurrency", "1")
        assert main(args) == 0
        assert sorted(a.status for a in RunDir(out).attempts()) == ["ok", "provider"]
        assert main([*args, "--resume"]) == 0
        assert sorted(a.status for a in RunDir(out).attempts()) == ["ok", "provider"]
        assert main([*args, "--resume", "--retry-exclusions"]) == 0
    assert sorted(a.status for a in RunDir(out).attempts()) == ["ok", "ok"]
    assert len(keys(out)) == 2


def test_unreachable_endpoint_fails_fast_before_any_episode(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["eval", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                 "--max-retries", "0", "--out", str(out)])
    assert code == 2
    assert "not usable" in capsys.readouterr().err
    assert not (out / "results.jsonl").exists()


def test_eval_failed_preflight_leaves_out_free_for_the_corrected_rerun(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["eval", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                 "--max-retries", "0", "--limit", "1", "--out", str(out)]) == 2
    assert "not usable" in capsys.readouterr().err
    assert not out.exists()  # no run.json: the rerun below is not "already holds a run"
    with OracleServer(TASKS, max_steps=MAX_STEPS) as server:
        assert main(eval_args(server, out, "--limit", "1")) == 0  # same --out, no --resume
    assert [(a.status, a.correct) for a in RunDir(out).attempts()] == [("ok", True)]
    assert RunDir(out).settings().base_url == server.base_url


@pytest.mark.parametrize("argv, match", [
    (["--policy", "openai"], "--base-url and --model"),
    (["--policy", "oracle", "--attempts", "0"], "--attempts must be >= 1")])
def test_bad_arguments_exit_2_with_reason(tmp_path, capsys, argv, match):
    assert main(["eval", "--out", str(tmp_path / "r"), *argv]) == 2
    assert match in capsys.readouterr().err


def test_unknown_wrapper_rejected_by_the_parser(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--policy", "oracle", "--out", str(tmp_path), "--wrappers", "forced,nope"])
    assert "unknown wrapper" in capsys.readouterr().err


def test_eval_scores_a_wrong_answer_after_an_undecodable_file_name(tmp_path):
    """Issue 11: lone surrogates in the observation broke the HTTP body; the attempt
    became an excluded ``error``, an opt-out from its wrong answer. It must be scored."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "data.tsv").write_text("id\tvalue\n1\t3\n2\t5\n")
    solution = ["<command>printf '3\\n' > \"$(printf 'x\\377.tsv')\"; ls</command>",
                "FINAL ANSWER: 999"]
    (tmp_path / "tasks.jsonl").write_text(json.dumps({
        "id": "odd-name", "question": "Mean of value in data.tsv?", "answer": "4",
        "grader": {"kind": "numeric"}, "data_dir": "data", "solution": solution}) + "\n")
    source = load_tasks(tmp_path / "tasks.jsonl")
    out = tmp_path / "run"
    with OracleServer(source, max_steps=MAX_STEPS) as server:
        args = eval_args(server, out)
        args[args.index("builtin")] = str(tmp_path / "tasks.jsonl")
        assert main(args) == 0
    [attempt] = RunDir(out).attempts()
    assert (attempt.status, attempt.correct, attempt.score) == ("ok", False, 0.0)
    assert "$'x\\xff.tsv'" in server.requests[1]["messages"][0]["content"]
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["scored"], summary["excluded"], summary["harness_errors"]) == (1, 0, [])


def test_eval_harness_error_is_loud_exit_4_row_and_summary(tmp_path, capsys, monkeypatch):
    def broken(ep, action, turn, rules):
        raise RuntimeError("a harness bug")

    monkeypatch.setattr("vera_env.env.play_turn", broken)
    out = tmp_path / "run"
    code = main(["eval", "--policy", "oracle", "--limit", "1", "--max-steps", "4",
                 "--wrappers", "none", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 4 and "harness error" in captured.err and "a harness bug" in captured.err
    assert "HARNESS ERRORS" in captured.out
    [attempt] = RunDir(out).attempts()
    assert attempt.status == "error" and "(at test_cli_eval.py:" in attempt.error
    summary = json.loads((out / "summary.json").read_text())
    assert summary["harness_errors"][0]["error"].startswith("RuntimeError: a harness bug")
