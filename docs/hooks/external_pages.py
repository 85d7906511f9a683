"""MkDocs hook: serve benchmarks/README.md and training/README.md as pages, read in place.

Both files live beside the code they describe: the benchmark scripts' results are
recorded in benchmarks/README.md, and training/README.md is the GPU recipe next to the
scripts. A copy under docs/ would drift from them, and a relative link out of docs/ is a
warning under ``--strict``. So the site adds them as generated files under
``external/`` (with the images they show), and the nav links them like any page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

# Where each file is read from (relative to the repository root) -> its path in the site.
EXTERNAL = {
    "benchmarks/README.md": "external/benchmarks/README.md",
    "training/README.md": "external/training/README.md",
}
IMAGES = ("benchmarks/results", "*.png")


def on_files(files: Files, config: Any) -> Files:
    """Add the external pages and the benchmark images to the site's files."""
    root = Path(config["config_file_path"]).resolve().parent
    for source, uri in EXTERNAL.items():
        files.append(File.generated(config, uri, abs_src_path=str(root / source)))
    folder, pattern = IMAGES
    for image in sorted((root / folder).rglob(pattern)):  # results/learning_curve/ too
        uri = f"external/{image.relative_to(root).as_posix()}"
        files.append(File.generated(config, uri, abs_src_path=str(image)))
    return files
