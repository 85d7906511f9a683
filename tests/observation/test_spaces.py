from vera_env.observation.spaces import FreeText


def test_free_text_contains_any_string_within_length():
    space = FreeText(100)
    assert space.contains("line\n$ µ → <command>")
    assert not space.contains("x" * 101)
    assert not space.contains(b"bytes")


def test_free_text_samples_are_contained_and_seeded():
    a, b = FreeText(500, seed=3), FreeText(500, seed=3)
    samples = [a.sample() for _ in range(50)]
    assert samples == [b.sample() for _ in range(50)]
    assert all(a.contains(s) for s in samples)
    assert any("<command>" in s for s in samples)
