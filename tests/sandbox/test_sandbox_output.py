"""StreamCapture and ExecResult rendering: bounded, both ends kept, honest markers."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from vera_env.sandbox import ExecResult, SandboxLimits
from vera_env.sandbox.output import StreamCapture, elision_marker


def test_stream_capture_short_output_returned_whole() -> None:
    capture = StreamCapture(100)
    capture.feed(b"hello\n")
    capture.feed(b"world\n")
    assert capture.text() == "hello\nworld\n"
    assert not capture.truncated


def test_stream_capture_long_output_keeps_head_tail_and_counts_elided() -> None:
    capture = StreamCapture(200)
    body = "".join(f"{i:05d}\n" for i in range(10_000))
    for start in range(0, len(body), 777):
        capture.feed(body[start:start + 777].encode())
    text = capture.text()
    assert capture.truncated
    assert len(text) <= 200
    head, _, rest = text.partition("\n...[")
    tail = rest.split("]...\n", 1)[1]
    assert body.startswith(head) and body.endswith(tail)
    elided = len(body) - len(head) - len(tail)
    assert elision_marker(elided) in text


def test_stream_capture_utf8_split_across_chunks_decoded_once() -> None:
    capture = StreamCapture(100)
    data = "é—ok".encode()
    for byte in data:
        capture.feed(bytes([byte]))
    assert capture.text() == "é—ok"


def test_stream_capture_invalid_bytes_replaced_not_raised() -> None:
    capture = StreamCapture(100)
    capture.feed(b"\xff\xfe ok")
    assert capture.text() == "\ufffd\ufffd ok"


def test_stream_capture_budget_too_small_rejected() -> None:
    with pytest.raises(ValueError, match="max_chars must be"):
        StreamCapture(10)


def test_exec_result_tool_output_marks_stderr_and_exit() -> None:
    result = ExecResult("out\n", "boom\n", 2, False, 0.1)
    assert result.as_tool_output() == "out\n[stderr]\nboom\n[exit 2]"


def test_exec_result_tool_output_success_is_plain_stdout() -> None:
    assert ExecResult("3\n", "", 0, False, 0.1).as_tool_output() == "3"


def test_exec_result_tool_output_timeout_says_tree_killed() -> None:
    result = ExecResult("", "", 137, True, 2.04, status="timeout")
    assert result.as_tool_output() == "[timed out after 2.0s: process tree killed]"


def test_exec_result_tool_output_output_limit_names_bytes() -> None:
    result = ExecResult("yyy", "", 137, False, 0.3, status="output_limit", bytes_read=2048)
    assert result.as_tool_output().endswith(
        "[output limit: stopped reading after 2048 bytes: process tree killed; "
        "write large output to a file instead]"
    )


def test_sandbox_limits_unknown_field_rejected() -> None:
    with pytest.raises(ValidationError, match="extra"):
        SandboxLimits(timeout=3)  # type: ignore[call-arg]


def test_sandbox_limits_nonpositive_timeout_rejected() -> None:
    with pytest.raises(ValidationError, match="greater than 0"):
        SandboxLimits(timeout_s=0)
