from hypothesis import given, settings
from hypothesis import strategies as st

from vera_env.observation.budget import clip_middle, count_tokens, fit_tokens


def test_clip_middle_short_text_unchanged():
    assert clip_middle("abc", 10) == "abc"


def test_clip_middle_keeps_head_and_tail_with_marker():
    text = "HEAD" + "x" * 10_000 + "Traceback: boom"
    out = clip_middle(text, 200)
    assert len(out) <= 200
    assert out.startswith("HEAD")
    assert out.endswith("Traceback: boom")
    assert "middle elided" in out


@given(st.text(), st.integers(min_value=0, max_value=500))
@settings(max_examples=200)
def test_clip_middle_never_exceeds_budget(text, budget):
    assert len(clip_middle(text, budget)) <= max(budget, 0)


def test_count_tokens_grows_with_text_and_is_zero_for_empty():
    assert count_tokens("") == 0
    assert count_tokens("zcat counts.mtx.gz | wc -l") > 5
    assert count_tokens("a " * 100) == 100


@given(st.text(min_size=0, max_size=3000), st.integers(min_value=1, max_value=300))
@settings(max_examples=100)
def test_fit_tokens_fits_budget(text, budget):
    assert count_tokens(fit_tokens(text, budget)) <= budget
