"""Transcripts as token ids: chat-template suffixes, transcripts for SFT (no model)."""

from __future__ import annotations

import pytest

from vera_env.training.transcripts import IGNORE, ChatFormat, tokenize_transcript


@pytest.fixture(scope="module")
def fmt(tokenizer) -> ChatFormat:
    return ChatFormat(tokenizer)


def test_chat_format_concatenation_equals_the_template_rendering(tokenizer, fmt):
    turn = "<command>ls</command>"
    ids = fmt.first("obs one") + fmt.encode(turn) + [tokenizer.eos_token_id] \
        + fmt.observation("obs two")
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": "obs one"}, {"role": "assistant", "content": turn},
         {"role": "user", "content": "obs two"}],
        add_generation_prompt=True, tokenize=True, return_dict=False)
    assert ids == list(rendered)


def test_chat_format_without_template_raises(tokenizer):
    class NoTemplate:
        chat_template = None

    with pytest.raises(ValueError, match="no chat_template"):
        ChatFormat(NoTemplate())


def test_tokenize_transcript_labels_only_the_actions(tokenizer, fmt):
    observations, actions = ["first view", "second view"], ["<command>ls</command>", "FINAL ANSWER: 3"]
    ((ids, labels),) = tokenize_transcript(fmt, observations, actions)
    trained = [t for t, label in zip(ids, labels, strict=False) if label != IGNORE]
    assert all(label in (IGNORE, t) for t, label in zip(ids, labels, strict=False))
    assert tokenizer.decode(trained) == "<command>ls</command><|im_end|>FINAL ANSWER: 3<|im_end|>"
    assert "second view" in tokenizer.decode([t for t, label in zip(ids, labels, strict=False)
                                              if label == IGNORE])
    turns = tokenize_transcript(fmt, observations, actions, layout="turns")
    assert len(turns) == 2 and turns[1][0][:len(fmt.first("second view"))] == fmt.first("second view")
    with pytest.raises(ValueError, match="one observation per action"):
        tokenize_transcript(fmt, observations, actions[:1])


def test_tokenize_transcript_turns_not_to_learn_are_context_only(tokenizer, fmt):
    observations = ["first view", "error on screen", "fixed"]
    actions = ["<command>cat nope</command>", "<command>cat data</command>", "FINAL ANSWER: 3"]
    learn = [False, True, True]
    ((ids, labels),) = tokenize_transcript(fmt, observations, actions, learn=learn)
    trained = tokenizer.decode([t for t, label in zip(ids, labels, strict=True) if label != IGNORE])
    assert trained == "<command>cat data</command><|im_end|>FINAL ANSWER: 3<|im_end|>"
    assert "cat nope" in tokenizer.decode(ids)  # still the context of the next turn
    turns = tokenize_transcript(fmt, observations, actions, layout="turns", learn=learn)
    assert [tokenizer.decode([t for t, label in zip(i, lab, strict=True) if label != IGNORE])
            for i, lab in turns] == ["<command>cat data</command><|im_end|>",
                                     "FINAL ANSWER: 3<|im_end|>"]
    with pytest.raises(ValueError, match="one learn flag per action"):
        tokenize_transcript(fmt, observations, actions, learn=learn[:2])


@pytest.mark.parametrize("template", ["qwen2_5.jinja", "qwen3.jinja"])
def test_chat_format_suffix_with_real_model_templates(tokenizer, template):
    # Qwen3 re-renders the earlier assistant turn (drops an empty <think>): the suffix
    # must still be exactly the template's user block and assistant header.
    import copy
    from pathlib import Path

    import trl

    tok = copy.deepcopy(tokenizer)
    tok.chat_template = (Path(trl.__file__).parent / "chat_templates" / template).read_text()
    fmt = ChatFormat(tok)
    assert tok.decode(fmt.observation("obs two")) == \
        "\n<|im_start|>user\nobs two<|im_end|>\n<|im_start|>assistant\n"
    assert tok.decode(fmt.first("obs one")).endswith("obs one<|im_end|>\n<|im_start|>assistant\n")


def test_tokenize_transcript_turns_context_is_the_evaluation_prompt_prefill_unlabelled(fmt,
                                                                                      tokenizer):
    from vera_env.policies.chat import prompt_ids

    observations = ["QUESTION: q\nYour turn:", "QUESTION: q\nSTOP INVESTIGATING."]
    actions = ["<command>ls</command>", "FINAL ANSWER: 7"]
    (first, ids_first), (second, labels) = [
        (ids, labels) for ids, labels in tokenize_transcript(
            fmt, observations, actions, "turns", prefills=["", "FINAL ANSWER: "],
            system_prompt="S")]
    context = prompt_ids(tokenizer, observations[1], prefill="FINAL ANSWER: ",
                         system_prompt="S")
    assert second[:len(context)] == context
    assert all(label == IGNORE for label in labels[:len(context)])
    assert tokenizer.decode([t for t, label in zip(second, labels, strict=False) if label != IGNORE]) == (
        "7<|im_end|>")
    assert first[:len(prompt_ids(tokenizer, observations[0], system_prompt="S"))] == prompt_ids(
        tokenizer, observations[0], system_prompt="S")
