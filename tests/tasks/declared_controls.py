"""The declared controls of a task's reference, built the way the strength check builds
them: shared by the builtin, real and perturbed reference tests."""

from __future__ import annotations

import random
from collections.abc import Iterator

from vera_env.verification.strength.reference import Reference
from vera_env.verification.strength.transforms import apply_control


def declared_controls(ref: Reference, files: dict[str, bytes]
                      ) -> Iterator[tuple[str, str, dict[str, bytes]]]:
    """Each file's declared control transforms, two draws each (fewer where a transform
    has nothing to vary): ``(file, transform, the files with that file varied)``."""
    for name, content in files.items():
        for transform in ref.controls_for(name):
            for draw in range(2):
                changed = apply_control(transform, name, content, random.Random(draw),
                                        ref.irrelevant.get(name))
                if changed is None:
                    break
                yield name, transform, {**files, name: changed}
