"""MkDocs hook: serve benchmarks/README.md and training/README.md as pages, read in place.

Both files live beside the code they describe: benchmarks/README.md is the index of the
benchmark scripts (their tables are the pages under docs/benchmarks/), and
training/README.md is the GPU recipe next to the scripts. A copy under docs/ would drift
from them, and a relative link out of docs/ is a warning under ``--strict``. So the site
adds them as generated files under ``external/`` (with the images they show), and the
nav links them like any page.

An external page links into docs/ as GitHub resolves it (``../docs/benchmarks/costs.md``
from benchmarks/README.md); in the site the page sits one folder deeper
(``external/benchmarks/``) and docs/ is the root, so ``on_page_markdown`` rewrites those
links to the site's path of the same page.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

# Where each file is read from (relative to the repository root) -> its path in the site.
EXTERNAL = {
    "benchmarks/README.md": "external/benchmarks/README.md",
    "training/README.md": "external/training/README.md",
}
IMAGES = ("benchmarks/results", "*.png")
_SITE_URI = {uri: source for source, uri in EXTERNAL.items()}


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


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Point an external page's links into docs/ at the site's pages."""
    source = _SITE_URI.get(page.file.src_uri)
    if source is None:
        return markdown
    up = "../" * source.count("/")  # from the file's folder to the repository root
    site_up = "../" * page.file.src_uri.count("/")  # from the page's folder to the site root
    return re.sub(r"\]\(" + re.escape(up + "docs/"), "](" + site_up, markdown)
