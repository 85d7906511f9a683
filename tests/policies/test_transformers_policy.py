"""TransformersPolicy on a tiny model built from a config, with a tokenizer trained here.

No hub access: the model is random (a one-layer Qwen2), so the test asserts the
plumbing — the chat template and prefill make up the prompt, the reply starts with the
prefill, tokens are counted, an episode runs to an Attempt — not what the model says.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from vera_env.env import VeraEnv  # noqa: E402
from vera_env.errors import PolicyError  # noqa: E402
from vera_env.policies import TransformersPolicy  # noqa: E402
from vera_env.rollout import run_episode  # noqa: E402
from vera_env.wrappers import ForcedAnswer  # noqa: E402

TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<pad>", "<eos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["FINAL ANSWER: 5", "<command>wc -l alcohol.txt</command>",
                             "QUESTION: Mean drinks, ignoring -999?"] * 20, trainer)
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", eos_token="<eos>",
        padding_side="left")
    fast.chat_template = TEMPLATE
    config = transformers.Qwen2Config(vocab_size=len(fast), hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=1, num_attention_heads=2,
                                      num_key_value_heads=1, max_position_embeddings=8192,
                                      pad_token_id=fast.pad_token_id,
                                      eos_token_id=fast.eos_token_id)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    folder = tmp_path_factory.mktemp("tiny")
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return model, fast, folder


def test_prompt_uses_chat_template_then_prefill(tiny):
    model, tok, _ = tiny
    policy = TransformersPolicy(model, tok, system_prompt="sys")
    assert policy.prompt("obs", "FINAL ANSWER: ") == (
        "<|system|>sys<|end|><|user|>obs<|end|><|assistant|>FINAL ANSWER: ")


def test_act_returns_prefill_plus_generation_and_counts_tokens(tiny):
    model, tok, _ = tiny
    policy = TransformersPolicy(model, tok, max_new_tokens=6)
    text = policy.act("QUESTION: Mean drinks?", {"prefill": "FINAL ANSWER: "})
    assert text.startswith("FINAL ANSWER: ")
    prompt_tokens, completion_tokens = policy.last_usage()
    assert prompt_tokens > 5 and 1 <= completion_tokens <= 6


def test_a_long_prompt_is_clipped_in_its_observation_not_its_question(tiny):
    """``max_prompt_tokens`` clips the observation's middle: the question, the template
    and the prefill stay (keeping the last tokens used to drop the question)."""
    model, tok, _ = tiny
    policy = TransformersPolicy(model, tok, max_new_tokens=2, max_prompt_tokens=200)
    observation = "QUESTION: Mean drinks?\n" + "12 34 56\n" * 400 + "Your turn:"
    seen = []
    real = model.generate

    def spy(ids, **kwargs):  # this tokenizer has no decoder: map byte-level tokens back
        text = " ".join(tok.convert_ids_to_tokens(ids[0].tolist()))
        seen.append(text.replace(" ", "").replace("Ġ", " ").replace("Ċ", "\n"))
        return real(ids, **kwargs)

    model.generate = spy
    try:
        policy.act(observation, {"prefill": "FINAL ANSWER: "})
    finally:
        del model.generate
    prompt_tokens, _ = policy.last_usage()
    assert 150 <= prompt_tokens <= 200
    assert seen[0].startswith("<|user|>QUESTION: Mean drinks?")
    assert seen[0].endswith("<|assistant|>FINAL ANSWER: ") and "Your turn:" in seen[0]


def test_episode_with_a_saved_checkpoint_runs_to_an_attempt(tiny, alcohol_task):
    _, _, folder = tiny
    policy = TransformersPolicy.from_pretrained(str(folder), device="cpu", max_new_tokens=4,
                                                max_prompt_tokens=2048)
    env = ForcedAnswer(VeraEnv([alcohol_task], max_steps=2), reserve=1)
    attempt = run_episode(env, policy)
    env.close()
    assert attempt.status in ("ok", "max_steps", "format") and attempt.n_steps >= 2
    assert attempt.prompt_tokens > 0 and attempt.completion_tokens > 0
    forced_turns = [s.action for i, s in enumerate(attempt.steps)
                    if i > 0 and attempt.steps[i - 1].forcing]
    assert forced_turns and all(t.startswith("FINAL ANSWER: ") for t in forced_turns)


def test_missing_checkpoint_is_policy_error(tmp_path):
    with pytest.raises(PolicyError, match="cannot load"):
        TransformersPolicy.from_pretrained(str(tmp_path / "nothing"), device="cpu")


def test_eval_cli_runs_a_local_checkpoint(tiny, tmp_path, capsys):
    """It also says what it is doing: on CPU the load and the first turn took three
    minutes with no turn counter on the screen."""
    import json

    from vera_env.cli import main
    from vera_env.evaluation.rundir import RunDir

    _, _, folder = tiny
    out = tmp_path / "run"
    assert main(["eval", "--policy", "transformers", "--model", str(folder), "--limit", "1",
                 "--max-steps", "2", "--reserve", "1", "--max-tokens", "4",
                 "--concurrency", "1", "--out", str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    loading = err.index(f"loading the model from {folder} ...")
    loaded = next(i for i, line in enumerate(err) if line.startswith("loaded in "))
    first_turn = next(i for i, line in enumerate(err) if "turn 1: generating" in line)
    assert loading < loaded < first_turn and "0/1" in err[first_turn]
    (attempt,) = RunDir(out).attempts()
    assert attempt.status in ("ok", "max_steps", "format") and attempt.prompt_tokens > 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["settings"]["policy"] == "transformers" and summary["tokens_in"] > 0


def test_dtype_and_device_reach_the_loaded_model(tiny):
    """REAL_MODEL.md: ``--policy transformers`` had no device or dtype flag."""
    _, _, folder = tiny
    policy = TransformersPolicy.from_pretrained(str(folder), device="cpu", dtype="bfloat16",
                                                max_new_tokens=2)
    assert policy.model.dtype == torch.bfloat16 and policy.model.device.type == "cpu"
    policy.act("QUESTION: Mean drinks?", {})  # bf16 weights generate on the device
    assert 1 <= policy.last_usage()[1] <= 2
    with pytest.raises(PolicyError, match="dtype must be"):
        TransformersPolicy.from_pretrained(str(folder), device="cpu", dtype="float8")


def test_eval_cli_passes_device_and_dtype(tiny, tmp_path):
    from vera_env.cli import main
    from vera_env.evaluation.rundir import RunDir

    _, _, folder = tiny
    out = tmp_path / "run"
    assert main(["eval", "--policy", "transformers", "--model", str(folder), "--limit", "1",
                 "--max-steps", "1", "--reserve", "1", "--max-tokens", "2", "--device", "cpu",
                 "--dtype", "bfloat16", "--concurrency", "1", "--out", str(out)]) == 0
    (attempt,) = RunDir(out).attempts()
    assert attempt.completion_tokens is not None and attempt.completion_tokens > 0
