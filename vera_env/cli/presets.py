"""Settings bundles of ``vera-env eval`` (``--preset``), and a help text that shows defaults.

Why presets. The eval defaults fit a served 8B model on a GPU (30 steps, 2,048-token
turns, 4 episodes at once). Measured on a 2-core CPU with a small local model they
take hours per episode: a user's first run looked hung and was killed. ``cpu-small``
is the set that finishes: fewer steps, short turns, the compact observation (a short
prompt is most of a CPU model's time), one episode at a time.

A preset only fills what the command line left unset: every flag it touches has no
parser default (``None``), so "the user typed ``--max-steps 30``" and "the user typed
nothing" stay different, and an explicit flag always wins. The base defaults live in
`BASE_DEFAULTS`, which `resolve_preset` applies last and `DefaultsHelpFormatter` prints
next to each preset's value.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["BASE_DEFAULTS", "PRESETS", "DefaultsHelpFormatter", "Preset", "preset_help",
           "resolve_preset"]


@dataclass(frozen=True, slots=True)
class Preset:
    """Values a preset gives the flags left unset.

    Attributes:
        max_steps: Step budget per episode.
        max_tokens: Completion cap per turn.
        observation_variant: ``full`` or ``compact``.
        concurrency: Episodes in flight at once.
        description: One line for ``--help``.
    """

    max_steps: int
    max_tokens: int
    observation_variant: str
    concurrency: int
    description: str = ""

    def values(self) -> dict[str, Any]:
        """The settings, by ``argparse`` destination (the description left out)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "description"}


BASE_DEFAULTS = Preset(max_steps=30, max_tokens=2048, observation_variant="full",
                       concurrency=4, description="a served model on a GPU")
"""What the preset-able flags are when neither they nor ``--preset`` are given."""

PRESETS: dict[str, Preset] = {
    "cpu-small": Preset(max_steps=12, max_tokens=512, observation_variant="compact",
                        concurrency=1,
                        description="a small local model on CPU"),
}


def resolve_preset(args: argparse.Namespace) -> argparse.Namespace:
    """A copy of ``args`` whose unset preset-able flags hold the preset's (or the base) value.

    Raises:
        ValueError: ``args.preset`` names no preset.
    """
    name = getattr(args, "preset", None)
    if name is not None and name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; presets are {sorted(PRESETS)}")
    preset = PRESETS[name] if name else BASE_DEFAULTS
    resolved = vars(args).copy()
    for dest, value in preset.values().items():
        if resolved.get(dest) is None:
            resolved[dest] = value
    return argparse.Namespace(**resolved)


def preset_help() -> str:
    """``--preset``'s help: what each preset sets."""
    parts = [f"{name}: " + ", ".join(f"--{k.replace('_', '-')} {v}"
                                     for k, v in p.values().items()) + f" ({p.description})"
             for name, p in PRESETS.items()]
    return "settings for a kind of model; explicit flags override them. " + "; ".join(parts)


class DefaultsHelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the module docstring's layout and appends each option's default to its help.

    ``argparse.ArgumentDefaultsHelpFormatter`` would print ``(default: None)`` for the
    preset-able flags (their parser default is None on purpose); here they show the base
    default and each preset's value instead. Flags (``store_true``) and options whose
    help already names a default are left alone.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if not action.option_strings or action.nargs == 0 or "default" in text.lower():
            return text
        base = BASE_DEFAULTS.values()
        if action.dest in base:
            presets = "; ".join(f"--preset {n}: {p.values()[action.dest]}"
                                for n, p in PRESETS.items())
            return f"{text} (default: {base[action.dest]}; {presets})".lstrip()
        if action.default is None or action.default is argparse.SUPPRESS:
            return text
        if isinstance(action.default, tuple):
            shown = ",".join(action.default) or "none"
        else:
            shown = "%(default)s" if action.default != "" else '""'
        return f"{text} (default: {shown})".lstrip()
