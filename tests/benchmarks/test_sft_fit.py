"""``benchmarks/sft_fit.py`` scores the teacher's own tokens, per turn, by teacher forcing.

Two stand-in models over the real tiny tokenizer and chat format: one whose argmax is
always the next token of the sequence (it reproduces every turn: accuracy 1, exact 1,
log p near 0) and one whose argmax never is (accuracy 0, exact 0, log p the margin
paid on every label token).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from extras import require

require("torch", "transformers", extra="training")

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _module():
    spec = importlib.util.spec_from_file_location("sft_fit", ROOT / "benchmarks" / "sft_fit.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["sft_fit"] = module
    spec.loader.exec_module(module)
    return module


class Oracle:
    """Logits that put ``margin`` on the next token of the input (or, if ``wrong``, on
    the token after it plus one)."""

    def __init__(self, vocab: int, *, wrong: bool = False, margin: float = 30.0) -> None:
        self.vocab, self.wrong, self.margin = vocab, wrong, margin

    def eval(self) -> None:
        return None

    def __call__(self, ids: torch.Tensor) -> SimpleNamespace:
        seq = ids[0]
        nxt = torch.cat([seq[1:], seq[:1]])
        target = (nxt + 1) % self.vocab if self.wrong else nxt
        logits = torch.zeros(1, len(seq), self.vocab)
        logits[0, torch.arange(len(seq)), target] = self.margin
        return SimpleNamespace(logits=logits)


ROWS = [{"observations": ["QUESTION: how many lines?\nYour turn:", "output: 12\nYour turn:"],
         "actions": ["<command>wc -l < data.txt</command>", "FINAL ANSWER: 12"],
         "prefills": ["", ""]},
        {"observations": ["QUESTION: the mean?\nYour turn:", "output: 3.5\nYour turn:"],
         "actions": ["<command>awk '{s+=$1} END{print s/NR}' x</command>", "FINAL ANSWER: 3.5"],
         "prefills": ["", ""]}]


@pytest.fixture(scope="module")
def fit():
    from vera_env.training.tiny import tiny_tokenizer

    return _module(), tiny_tokenizer()


def test_a_model_that_predicts_every_token_fits_exactly(fit):
    module, tokenizer = fit
    table = module.score_model(Oracle(len(tokenizer)), tokenizer, ROWS)
    assert sorted(table) == [0, 1]
    for turn in table.values():
        assert turn["turns"] == 2
        assert turn["token_accuracy"] == 1.0
        assert turn["exact"] == 1.0
        assert turn["nll"] < 1e-6
        assert -1e-3 < turn["median_logp"] <= 0.0


def test_a_model_that_is_always_wrong_scores_zero(fit):
    module, tokenizer = fit
    table = module.score_model(Oracle(len(tokenizer), wrong=True), tokenizer, ROWS)
    for turn in table.values():
        assert turn["token_accuracy"] == 0.0
        assert turn["exact"] == 0.0
        # Every label token pays the margin: log p(turn) is about -30 per token.
        assert turn["nll"] == pytest.approx(30.0, abs=0.01)
        assert turn["median_logp"] < -30.0 * (turn["median_tokens"] - 1)
