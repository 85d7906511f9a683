"""``benchmarks/learning_curve.py --smoke`` runs every stage end to end, and resumes.

The tiny random model learns nothing; what is held is the plumbing the real run depends
on: checkpoint -> held-out list -> collect -> SFT -> GRPO in two chunks (the second
``--resume``s the first) -> an evaluation after each, every column with an interval
around its estimate, on a step axis 0, 1, 2 -- and a second invocation redoes nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from extras import require

require("trl", "torch", "transformers", extra="training")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "learning_curve.py"
COLUMNS = ("accuracy", "reward", "verification", "format_error_rate", "mean_turns",
           "canary_value_rate", "fingerprint_node_share", "released_share", "forced_share",
           "two_earning_node_share", "repeated_evidence_node_share")


def _run(out: Path) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1",
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--out", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads((out / "results.json").read_text())


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("learning_curve")
    return out, _run(out)


def test_smoke_evaluates_after_sft_and_each_grpo_chunk(smoke):
    _, data = smoke
    points = sorted((v for k, v in data.items() if k.startswith("eval_")),
                    key=lambda v: v["step"])
    assert [p["step"] for p in points] == [0, 1, 2]
    assert "--resume" in data["grpo_2"]["command"] and "--resume" not in data["grpo_1"]["command"]
    assert data["heldout"]["n"] == 2
    assert all(int(i.rsplit(".s", 1)[1]) >= 100000 for i in data["heldout"]["ids"])


def test_smoke_every_column_has_an_interval_around_its_estimate(smoke):
    _, data = smoke
    for step in (0, 1, 2):
        columns = data[f"eval_{step}"]["columns"]
        for name in COLUMNS:
            col = columns[name]
            assert set(col) == {"mean", "lo", "hi", "n"}
            if col["mean"] is not None:
                assert col["lo"] <= col["mean"] <= col["hi"]
        assert columns["accuracy"]["n"] + columns["excluded"]["n"] == 2
        assert columns["mean_turns"]["mean"] >= 1


def test_smoke_each_grpo_chunk_records_the_groups_it_played(smoke):
    """Each chunk summarises only its own generations of the appended rollout dump."""
    out, data = smoke
    dumped = {(json.loads(line)["step"], json.loads(line)["episode"])
              for line in (out / "rollouts.jsonl").read_text().splitlines()}
    assert {step for step, _ in dumped} == {0, 1}
    for chunk in ("grpo_1", "grpo_2"):
        groups = data[chunk]["groups"]
        assert groups["episodes"] == 2 and groups["groups"] == 1  # one group of 2 a step
        assert groups["mixed"] + groups["all_right"] + groups["all_wrong"] == 1
        assert 0 <= groups["verification_mixed"] <= 1 and 0 <= groups["zero_std"] <= 1
        (logged,) = data[chunk]["step_log"]  # the run's per-step log, copied
        assert logged["step"] == data[chunk]["steps"]
        assert {"frac_reward_zero_std", "reward_default", "env/correct"} <= set(logged)
        played = [tuple(map(int, v.split("/"))) for v in groups["per_type"].values()]
        assert sum(n for _, n in played) == 2 and sum(r for r, _ in played) == groups["right"]


def test_smoke_grpo_chunks_keep_one_constant_learning_rate(smoke):
    """A run trained in chunks has one schedule: with TRL's linear default each chunk's
    schedule ran to 0, so the resumed chunk started at half the rate."""
    out, data = smoke
    rates = [json.loads(line)["learning_rate"]
             for line in (out / "grpo" / "curve.jsonl").read_text().splitlines()
             if "learning_rate" in json.loads(line)]
    assert len(rates) == 2 and rates[0] == rates[1] == float(data["args"]["learning_rate"])


def test_smoke_stages_record_wall_time_and_a_rerun_redoes_nothing(smoke):
    out, data = smoke
    for stage in ("checkpoint", "collect", "sft", "grpo_1", "grpo_2", "eval_0", "eval_2"):
        assert data[stage]["wall_s"] >= 0
    again = _run(out)
    assert {k: v for k, v in again.items() if k not in ("args", "plot")} == {
        k: v for k, v in data.items() if k not in ("args", "plot")}


def test_smoke_plots_the_curve_as_a_png(smoke):
    out, data = smoke
    png = out / "learning_curve.png"
    assert data["plot"]["png"] == str(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_reward_column_is_the_episode_reward_and_old_records_gain_it(smoke, tmp_path):
    """``reward`` is the mean over scored attempts of the summed step rewards (what GRPO
    trains on); a record written before the column existed is recomputed from its
    attempts file, and points that have it are left alone."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import learning_curve as lc

    from vera_env.evaluation.metrics import is_excluded
    from vera_env.rollout import Attempt

    _, data = smoke
    attempts = [Attempt.from_json(line) for line in
                Path(data["eval_0"]["attempts"]).read_text().splitlines() if line]
    scored = [a for a in attempts if not is_excluded(a)]
    expected = sum(sum(s.reward for s in a.steps) for a in scored) / len(scored)
    assert data["eval_0"]["columns"]["reward"]["mean"] == pytest.approx(expected)

    old = {k: v for k, v in data["eval_0"]["columns"].items() if k != "reward"}
    (tmp_path / "results.json").write_text(json.dumps(
        {"eval_0": data["eval_0"] | {"columns": old}, "eval_1": data["eval_1"]}))
    rec = lc.Record(tmp_path, None)
    lc.refresh_columns(rec)
    again = json.loads((tmp_path / "results.json").read_text())
    assert again["eval_0"]["columns"]["reward"] == data["eval_0"]["columns"]["reward"]
    assert again["eval_1"] == data["eval_1"]


def test_heldout_set_follows_its_difficulties_and_a_run_keeps_its_set(tmp_path):
    """The held-out set is every type at ``--heldout-difficulties``; a folder whose
    evaluations were made on another set refuses to be continued on this one, and a
    record from before the option counts as warmup + easy."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import learning_curve as lc

    from vera_env.tasks.builtin import TASK_TYPES

    medium = lc.parse_args(["--out", str(tmp_path), "--heldout-difficulties", "medium",
                            "--heldout-seeds", "2"])
    ids = lc.heldout(medium, lc.Record(tmp_path, None))
    assert len(ids) == 2 * len(TASK_TYPES) and all(".medium.s1000" in i for i in ids)
    assert lc.Record(tmp_path, None).data["heldout"]["difficulties"] == ["medium"]
    with pytest.raises(SystemExit, match="holds out"):
        lc.heldout(lc.parse_args(["--out", str(tmp_path)]), lc.Record(tmp_path, None))

    old = tmp_path / "old"
    old.mkdir()
    (old / "results.json").write_text(json.dumps({"heldout": {"ids": ["x"], "n": 1}}))
    assert lc.heldout(lc.parse_args(["--out", str(old)]), lc.Record(old, None)) == ["x"]
    with pytest.raises(SystemExit, match="holds out"):
        lc.heldout(lc.parse_args(["--out", str(old), "--heldout-difficulties", "medium"]),
                   lc.Record(old, None))


def test_prep_flags_reach_collect_and_sft_and_grpo_steps_0_stops_after_eval_0(tmp_path,
                                                                             monkeypatch):
    """``--analyst-evidence`` goes to collect (and into its record), ``--sft-lora-alpha``
    and ``--grpo-lora-alpha`` beside their ranks; ``--grpo-steps 0`` trains no GRPO."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import learning_curve as lc

    commands: list[list[str]] = []

    def fake_run(cmd, log):
        commands.append(cmd)
        return cmd

    monkeypatch.setattr(lc, "_run", fake_run)
    args = lc.parse_args(["--out", str(tmp_path), "--analyst-evidence", "0.35",
                          "--sft-lora-rank", "16", "--sft-lora-alpha", "24",
                          "--grpo-lora-rank", "8", "--grpo-lora-alpha", "16", "--grpo-steps", "0"])
    rec = lc.Record(tmp_path, None)
    trained = lc.collect_and_sft(tmp_path / "model", args, rec)
    collect, sft = commands
    assert collect[collect.index("--analyst-evidence") + 1] == "0.35"
    assert rec.data["collect"]["analyst_evidence"] == 0.35
    assert sft[sft.index("--lora-rank") + 1] == "16" and sft[sft.index("--lora-alpha") + 1] == "24"
    assert trained == (tmp_path / "model", (tmp_path / "sft",))
    assert list(range(args.chunk, args.grpo_steps + 1, args.chunk)) == []  # main's GRPO loop
    monkeypatch.setattr(lc, "training_groups", lambda *a: {})
    monkeypatch.setattr(lc, "step_log", lambda *a: [])
    lc.grpo_chunk(trained, 20, args, rec)
    grpo = commands[-1]
    assert grpo[grpo.index("--lora-rank") + 1] == "8" and grpo[grpo.index("--lora-alpha") + 1] == "16"
    assert grpo[grpo.index("--adapter") + 1] == str(tmp_path / "sft")
    default = lc.parse_args(["--out", str(tmp_path)])
    assert default.analyst_evidence == 0.0 and default.sft_lora_alpha == 32
    ids = ["mtx.doublets.easy.s100000", "vcf.titv.easy.s100001"]
    _, evaluated = lc._evaluate_cli(tmp_path / "merged", 0, ids, args)
    # The builtin source, which makes each id with its family's reference (an exported
    # suite kept four families' references, so nine families' checks earned nothing).
    assert evaluated[evaluated.index("--tasks") + 1] == "builtin"
    assert evaluated[evaluated.index("--task-ids") + 1] == ",".join(ids)


def test_eval_at_evaluates_only_the_chosen_chunk_ends(tmp_path, monkeypatch):
    """Every chunk trains; only the ``--eval-at`` steps (and eval_0) are evaluated."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import learning_curve as lc

    chunks, evals = [], []
    monkeypatch.setattr(lc, "checkpoint", lambda args, rec: tmp_path / "model")
    monkeypatch.setattr(lc, "heldout", lambda args, rec: ["x"])
    monkeypatch.setattr(lc, "collect_and_sft", lambda model, args, rec: (model, ()))
    monkeypatch.setattr(lc, "grpo_chunk", lambda start, steps, args, rec: chunks.append(steps))
    monkeypatch.setattr(lc, "evaluate", lambda trained, step, ids, args, rec: evals.append(step))
    monkeypatch.setattr(lc, "plot", lambda args, rec: "")
    base = ["--out", str(tmp_path), "--results", str(tmp_path / "copy.json"),
            "--grpo-steps", "40", "--chunk", "20"]
    lc.main([*base, "--eval-at", "40"])
    assert chunks == [20, 40] and evals == [0, 40]
    chunks.clear(), evals.clear()
    lc.main(base)
    assert chunks == [20, 40] and evals == [0, 20, 40]
