"""vera-env report: the HTML is rendered by headless Chromium and the result is checked."""

from __future__ import annotations

import dataclasses
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

from vera_env.cli import main
from vera_env.cli.report import find_browser
from vera_env.evaluation.graph_svg import _FILL
from vera_env.evaluation.rundir import RunDir
from vera_env.tasks import load_tasks

needs_browser = pytest.mark.skipif(
    find_browser() is None, reason="no Chromium (scripts/install.sh installs it for make test)")


def read_png(path: Path) -> np.ndarray:
    """The pixels (height x width x channels) of an 8-bit non-interlaced RGB(A) PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0
    bpp = 3 if colour == 2 else 4
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(height, width * bpp + 1)
    out = np.zeros((height, width * bpp), np.uint8)
    prev = np.zeros(width * bpp, np.uint8)
    for y in range(height):
        kind, line = raw[y, 0], raw[y, 1:].astype(np.int64)
        if kind == 1:    # Sub: running sum along each channel
            line = np.cumsum(line.reshape(width, bpp), axis=0).reshape(-1)
        elif kind == 2:  # Up
            line = line + prev
        elif kind in (3, 4):  # Average, Paeth: pixel by pixel
            line = _unfilter_slow(kind, line, prev.astype(np.int64), bpp)
        out[y] = (line % 256).astype(np.uint8)
        prev = out[y]
    return out.reshape(height, width, bpp)


def _unfilter_slow(kind: int, line: np.ndarray, prev: np.ndarray, bpp: int) -> np.ndarray:
    line = line.copy()
    for i in range(len(line)):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        if kind == 3:
            line[i] = (line[i] + (a + b) // 2) % 256
        else:
            pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) % 256
    return line


def count_colour(pixels: np.ndarray, hex_colour: str) -> int:
    """Pixels of exactly this colour."""
    rgb = np.frombuffer(bytes.fromhex(hex_colour.lstrip("#")), np.uint8)
    return int(np.all(pixels[:, :, :3] == rgb, axis=2).sum())


def test_report_html_is_self_contained_and_names_what_held(oracle_run):
    assert main(["report", str(oracle_run)]) == 0
    html = (oracle_run / "report.html").read_text()
    outside = html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "<svg" in html and "http://" not in outside and "https://" not in outside
    assert "<script" not in html
    assert "seq.motif_count.easy.s0" in html and "passed" in html


@needs_browser
def test_report_rendered_by_chromium_shows_table_graph_and_failed_check(oracle_run, tmp_path):
    # A wrong attempt with a failed check, beside the oracle's right ones.
    attempts = RunDir(oracle_run).attempts()
    good = next(a for a in attempts if a.attempt_index == 0 and a.steps[0].node
                and a.steps[0].node.checks)
    bad = dataclasses.replace(good, attempt_index=1, correct=False, answer="wrong-answer")
    truth = load_tasks("builtin").get(good.task_id).answer
    node = bad.steps[0].node
    assert node is not None
    kind = node.checks[0].kind
    node = dataclasses.replace(
        node, summary="a finding whose check FAILED",
        checks=(dataclasses.replace(node.checks[0], passed=False, detail="printed False"),))
    bad.steps = [dataclasses.replace(bad.steps[0], node=node), *bad.steps[1:]]
    results = tmp_path / "results.jsonl"
    kept = [a for a in attempts if (a.task_id, a.attempt_index) != (bad.task_id, 1)]
    results.write_text("".join(a.to_json() + "\n" for a in [*kept, bad]))
    html, png = tmp_path / "report.html", tmp_path / "report.png"
    assert main(["report", str(oracle_run), "--results", str(results), "--out", str(html),
                 "--episode", f"{bad.task_id}:0", "--episode", f"{bad.task_id}:1",
                 "--png", str(png), "--png-height", "2600"]) == 0
    # What the browser parsed (the DOM after load) carries the table and the graph text.
    dom = subprocess.run([find_browser(), "--headless", "--no-sandbox", "--disable-gpu",
                          "--dump-dom", html.as_uri()], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    for text in ("accuracy (95% CI)", "pass@2", "75.0%", bad.task_id, f"expected <b>{truth}</b>",
                 "a finding whose check FAILED", f"✗ {kind}", "✓ ", "wrong-answer"):
        assert text in dom, text
    pixels = read_png(png)
    assert pixels.shape[:2] == (2600, 1280)
    # The picture shows green (all checks held), red (a failed check) node boxes, and
    # a red "wrong" cell in the task table.
    assert count_colour(pixels, _FILL["pass"]) > 5000
    assert count_colour(pixels, _FILL["mixed"]) + count_colour(pixels, _FILL["fail"]) > 2000
