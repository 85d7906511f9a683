"""vera-env rescore: stored answers graded again, episodes not rerun, the run untouched."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from vera_env.cli import main
from vera_env.evaluation.rundir import RunDir
from vera_env.tasks import load_tasks


def test_rescore_with_task_graders_changes_nothing(oracle_run, tmp_path, capsys):
    out = tmp_path / "same"
    assert main(["rescore", str(oracle_run), "--out", str(out)]) == 0
    assert "0 verdict(s) changed" in capsys.readouterr().out
    assert json.loads((out / "summary.json").read_text())["accuracy"] == 1.0


def test_rescore_with_another_grader_flips_verdicts_and_scores(oracle_run, tmp_path, capsys):
    before = (oracle_run / "results.jsonl").read_bytes()
    out = tmp_path / "strict"
    grader = '{"kind": "regex", "pattern": "never"}'
    assert main(["rescore", str(oracle_run), "--grader", grader, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "4 verdict(s) changed" in printed and "True -> False" in printed
    assert (oracle_run / "results.jsonl").read_bytes() == before
    old = {(a.task_id, a.attempt_index): a for a in RunDir(oracle_run).attempts()}
    new = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    for row in new:
        was = old[(row["task_id"], row["attempt_index"])]
        assert row["correct"] is False and row["steps"] == was.to_dict()["steps"]
        # The harness's verification reward stays; the correctness part is gone.
        assert abs(row["score"] - (was.score - 1.0)) < 1e-9
    summary = json.loads((out / "summary.json").read_text())
    assert summary["accuracy"] == 0.0 and summary["rescored"]["changed"] == 4
    assert len((out / "changes.jsonl").read_text().splitlines()) == 4


def test_rescore_rejects_a_bad_grader_and_a_missing_run(oracle_run, tmp_path, capsys):
    assert main(["rescore", str(oracle_run), "--grader", '{"kind": "vibes"}']) == 2
    assert "kind" in capsys.readouterr().err
    assert main(["rescore", str(tmp_path / "nothing")]) == 2
    assert "not an eval run folder" in capsys.readouterr().err


def test_rescore_of_an_unscorable_grade_becomes_scorable(oracle_run, tmp_path):
    from vera_env.evaluation.rescore import rescore_attempt

    attempt = RunDir(oracle_run).attempts()[0]
    attempt.correct, attempt.unscorable, attempt.score = None, True, None
    new, detail = rescore_attempt(attempt, load_tasks("builtin"))
    assert new.correct is True and not new.unscorable and new.score > 1.0 and detail


class _Judge(BaseHTTPRequestHandler):
    """An OpenAI-compatible judge that fails every answer, and records what it was asked."""

    protocol_version = "HTTP/1.1"
    asked: list = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).asked.append(body["messages"])
        payload = json.dumps({"choices": [{"message": {"content": "No match.\nSCORE: 0"}}]})
        self.send_response(200)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload.encode())


def test_rescore_with_an_llm_judge_on_loopback(oracle_run, tmp_path, capsys):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Judge)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        grader = '{"kind": "llm", "rubric": "Score 1 only if the answer equals {truth}."}'
        code = main(["rescore", str(oracle_run), "--grader", grader, "--out", str(tmp_path),
                     "--judge-base-url", f"http://127.0.0.1:{server.server_address[1]}/v1",
                     "--judge-model", "judge"])
    finally:
        server.shutdown()
        server.server_close()
    assert code == 0 and "4 verdict(s) changed" in capsys.readouterr().out
    truths = {t.answer for t in load_tasks("builtin")}
    prompts = [" ".join(m["content"] for m in asked) for asked in _Judge.asked]
    assert len(prompts) == 4 and all("{truth}" not in p for p in prompts)
    assert all(any(f"equals {t}." in p for t in truths) for p in prompts)
