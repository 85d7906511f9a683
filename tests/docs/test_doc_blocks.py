"""Every runnable code block in README.md and docs/ runs and exits 0 (doc_blocks.py says how).

Blocks that must not run carry ``<!-- not-run: reason -->``; a marker without a reason
fails here, so "not run" is always a stated decision, never a silent gap.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from doc_blocks import ROOT, Block, DocBlockError, pages, parse, run_block

BLOCKS = {page: parse(page, page.read_text(encoding="utf-8")) for page in pages()}
RUNNABLE = {page: [b for b in blocks if b.runs] for page, blocks in BLOCKS.items()}
TIMEOUT_S = 300.0


def test_doc_blocks_found_in_readme_and_docs_pages():
    every = [b for blocks in BLOCKS.values() for b in blocks]
    assert ROOT / "README.md" in BLOCKS and len(BLOCKS) >= 10
    assert sum(b.runs for b in every) >= 20
    assert any(b.runs and b.lang == "python" for b in RUNNABLE[ROOT / "README.md"])


def test_doc_blocks_not_run_markers_all_state_a_reason():
    marked = [b for blocks in BLOCKS.values() for b in blocks if b.not_run is not None]
    for block in marked:  # the list, for whoever reads the log (-s)
        print(f"not run: {block.where}: {block.not_run}")
    assert [b.where for b in marked if not b.not_run] == []


_INSTALLS = ("pip install", "make install", "make demo", "make test", "apt-get install")
_RUNS_IT = ("tests/", "make test", ".ci/run")


def test_doc_blocks_that_install_run_or_name_the_route_that_does():
    # A newcomer's first command failed as documented (`pip install vera-env`: not on the
    # index; `make demo` on a PEP 668 python): an install line nobody runs goes stale.
    installs = [b for blocks in BLOCKS.values() for b in blocks
                if b.lang in ("bash", "sh") and any(word in b.code for word in _INSTALLS)]
    assert len(installs) >= 5
    unnamed = [f"{b.where}: {b.not_run}" for b in installs
               if b.not_run is not None and not any(route in b.not_run for route in _RUNS_IT)]
    assert unnamed == []


def test_doc_pages_never_install_vera_env_from_the_index():
    # vera-env is not published: `pip install vera-env` or 'vera-env[extra]' fails as written.
    index_route = re.compile(r"pip install ['\"]?vera-env\b")
    found = [f"{page.relative_to(ROOT)}:{n}" for page in [*pages(), ROOT / "training" / "README.md"]
             for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
             if index_route.search(line) and "once vera-env is published" not in line]
    assert found == []


@pytest.mark.parametrize("page", [p for p, blocks in RUNNABLE.items() if blocks],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_doc_blocks_of_page_run_and_exit_zero(page: Path, tmp_path: Path):
    failures = []
    for block in RUNNABLE[page]:
        outcome = run_block(block, tmp_path, TIMEOUT_S)
        print(f"{outcome.seconds:6.1f} s  {block.where}")
        if outcome.returncode != 0:
            failures.append(f"{block.where} exited {outcome.returncode}:\n{outcome.output[-3000:]}")
    assert failures == []


# --- the parser itself: what it refuses, so that no block escapes unclassified ---


def _parse(text: str) -> list[Block]:
    return parse(Path("page.md"), text)


def test_parse_marker_with_reason_marks_the_block_below_not_run():
    blocks = _parse("<!-- not-run: needs a model endpoint -->\n```bash\nvllm serve M\n```\n")
    assert [(b.lang, b.not_run, b.runs) for b in blocks] == [("bash", "needs a model endpoint", False)]


def test_parse_marker_without_reason_is_recorded_empty():
    assert _parse("<!-- not-run: -->\n```python\nprint(1)\n```\n")[0].not_run == ""


def test_parse_output_fence_is_kept_but_never_run():
    blocks = _parse("```text\npolicy  task\n```\n```python\nprint(1)\n```\n")
    assert [(b.lang, b.runs, b.line) for b in blocks] == [("text", False, 1), ("python", True, 4)]


def test_parse_fence_without_language_raises():
    with pytest.raises(DocBlockError, match="page.md:1: fence language ''"):
        _parse("```\necho hi\n```\n")


def test_parse_indented_fence_raises():
    with pytest.raises(DocBlockError, match="indented fence"):
        _parse("- a list item:\n  ```bash\n  echo hi\n  ```\n")


def test_parse_marker_not_directly_above_a_fence_raises():
    with pytest.raises(DocBlockError, match="directly above a fence"):
        _parse("<!-- not-run: needs a GPU -->\n\n```bash\necho hi\n```\n")


def test_parse_unterminated_fence_raises():
    with pytest.raises(DocBlockError, match="unterminated"):
        _parse("```python\nprint(1)\n")


def test_run_block_failing_command_reports_its_exit_status(tmp_path: Path):
    block = _parse("```bash\nfalse\necho never\n```\n")[0]
    outcome = run_block(block, tmp_path, 30.0)
    assert (outcome.returncode, outcome.output) == (1, "")


def test_run_block_unset_variable_fails_under_nounset(tmp_path: Path):
    outcome = run_block(_parse("```sh\necho $NOT_SET_ANYWHERE_42\n```\n")[0], tmp_path, 30.0)
    assert outcome.returncode != 0 and "unbound variable" in outcome.output
