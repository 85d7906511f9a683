"""The three scripts end to end from their flags, on the tiny model (CPU, no hub)."""

from __future__ import annotations

import math

import pytest

from vera_env.training.arguments import field_docs, parse_args
from vera_env.training.scripts import collect, grpo, sft


def test_parse_args_reads_flags_and_uses_field_docstrings_as_help(capsys):
    args = parse_args(grpo.Args, ["--tiny", "--wrappers", "forced", "gate", "--no-save-final",
                                  "--learning-rate", "3e-6"])
    assert args.tiny and args.wrappers == ("forced", "gate") and not args.save_final
    assert args.learning_rate == 3e-6 and args.num_generations == 4
    assert field_docs(grpo.Args)["max_turn_tokens"] == "Tokens one model turn may sample (both layouts)."
    with pytest.raises(SystemExit):
        parse_args(collect.Args, ["--policy", "gpt"])
    assert "{oracle,brief,analyst,careless,openai,transformers}" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(grpo.Args, ["--help"])
    assert "Tokens one model turn may sample (both layouts)." in capsys.readouterr().out


def phases(err: str, script: str) -> list[str]:
    """The messages of ``script``'s phase lines in ``err``, prefix dropped."""
    return [line.split("] ", 1)[1] for line in err.splitlines()
            if line.startswith(f"[{script} +")]


def assert_in_order(lines: list[str], *starts: str) -> None:
    """Each of ``starts`` begins some line, each after the one before."""
    at = -1
    for start in starts:
        found = next((i for i in range(at + 1, len(lines)) if lines[i].startswith(start)), None)
        assert found is not None, f"no {start!r} after line {at} in {lines}"
        at = found


def test_collect_then_sft_then_grpo_from_flags(tmp_path, capsys):
    """Each script says what it is doing on stderr, phase by phase: ``grpo --tiny``
    showed nothing for seven minutes but a bar at 0/2."""
    rollouts = tmp_path / "oracle.jsonl"
    rows = collect.main(parse_args(collect.Args, [
        "--policy", "oracle", "--num-tasks", "2", "--output", str(rollouts)]))
    assert rollouts.is_file() and all(r["correct"] for r in rows)
    captured = capsys.readouterr()
    assert "2 correct" in captured.out and "[collect" not in captured.out
    assert_in_order(phases(captured.err, "collect"),
                    "playing 2 episodes (2 tasks x 1 attempts, 4 at a time) with policy oracle",
                    "collected 2/2 episodes (2 correct; latest ")

    trainer = sft.main(parse_args(sft.Args, [
        "--tiny", "--rollouts", str(rollouts), "--train-steps", "1",
        "--gradient-accumulation-steps", "1", "--max-length", "2048",
        "--output-dir", str(tmp_path / "sft")]))
    assert math.isfinite(trainer.state.log_history[0]["loss"])
    assert (tmp_path / "sft" / "config.json").is_file()
    assert_in_order(phases(capsys.readouterr().err, "sft"),
                    "loading 1 rollout file(s)", "building the tiny model and tokenizer",
                    "tokenizing 2 episodes (turns layout)", "starting the trainer",
                    "training: 1 optimizer steps", "step 1/1: optimizer step done (loss ",
                    f"saving the model to {tmp_path / 'sft'}", "done in ")

    trainer = grpo.main(parse_args(grpo.Args, [
        "--tiny", "--num-prompts", "2", "--env-max-steps", "4", "--num-generations", "2",
        "--per-device-train-batch-size", "2", "--steps-per-generation", "1",
        "--train-steps", "1", "--max-completion-length", "1200", "--max-turn-tokens", "16",
        "--output-dir", str(tmp_path / "grpo")]))
    logged = trainer.state.log_history[0]
    assert math.isfinite(logged["loss"]) and "rewards/verification_reward/mean" in logged
    assert (tmp_path / "grpo" / "tokenizer.json").is_file()
    assert_in_order(phases(capsys.readouterr().err, "grpo"),
                    "loading the task source (builtin)", "building the tiny model and tokenizer",
                    "model ready: ", "starting the environments (sandbox auto) and the trainer",
                    "training: 1 optimizer steps", "step 1/1: rolling out 2 episodes",
                    "starting 1 more environments (2 in all, one per episode)",
                    "step 1/1: rolled out 2 episodes in ",
                    "step 1/1: optimizer step done (loss ",
                    f"saving the model to {tmp_path / 'grpo'}", "done in ")


def test_grpo_without_model_or_tiny_says_what_to_give():
    with pytest.raises(SystemExit, match="--model PATH"):
        grpo.load_model(grpo.Args())
    with pytest.raises(SystemExit, match="needs a saved model"):
        grpo.load_model(grpo.Args(tiny=True, beta=0.04))


def test_throughput_reports_where_a_step_went(tmp_path):
    from vera_env.training.scripts import throughput

    report = throughput.main(parse_args(throughput.Args, [
        "--train-steps", "1", "--num-generations", "2", "--per-device-train-batch-size", "2",
        "--steps-per-generation", "1", "--num-prompts", "2", "--env-max-steps", "4",
        "--max-turn-tokens", "8", "--output-dir", str(tmp_path)]))
    assert report["episodes"] == 2 and len(report["step_s"]) == 1
    assert report["sample_s"] > 0 and report["env_s"] > 0 and report["rounds"] >= 1
