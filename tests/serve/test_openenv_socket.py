"""``OpenEnvSocket``: OpenEnv's wire against a scripted WebSocket server on 127.0.0.1.

The real server (``vera-env serve``) is exercised through ``VeraRemoteEnv`` in
``test_client.py``; here a scripted peer produces the failures a real one rarely does
on cue: a reply later than the timeout, a socket closed between requests, a refusal
whose error frame is queued before the close.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.server import Request, Response, ServerConnection, serve

from vera_env.serve.openenv_socket import ErrorFrame, OpenEnvSocket, ws_url

Handler = Callable[[ServerConnection], None]


@contextlib.contextmanager
def scripted(handler: Handler, *, refuse_unauthorized: bool = False) -> Iterator[str]:
    """Serve ``handler`` (one call per connection) on a free port; yields the base URL."""
    def authorize(conn: ServerConnection, request: Request) -> Response | None:
        if refuse_unauthorized and request.headers.get("Authorization") != "Bearer t0k":
            return conn.respond(401, "missing token\n")
        return None

    with serve(handler, "127.0.0.1", 0, process_request=authorize) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.socket.getsockname()[1]}"
        finally:
            server.shutdown()
            thread.join(timeout=10)


def echo(conn: ServerConnection) -> None:
    """Answer each request with an observation naming its type and this connection."""
    with contextlib.suppress(ConnectionClosed):
        for raw in conn:
            message = json.loads(raw)
            if message["type"] == "close":
                return
            conn.send(json.dumps({"type": "observation", "data": {
                "observation": {"echo": message, "conn": str(conn.id)}, "reward": None,
                "done": False}}))


def open_socket(url: str, message_timeout_s: float = 5.0, **headers: str) -> OpenEnvSocket:
    return OpenEnvSocket(url, headers=headers or None, connect_timeout_s=5.0,
                         message_timeout_s=message_timeout_s)


@pytest.mark.parametrize("base,expected", [
    ("http://127.0.0.1:8000", "ws://127.0.0.1:8000/ws"),
    ("https://env.example/prefix/", "wss://env.example/prefix/ws"),
    ("ws://h:1", "ws://h:1/ws"),
    ("127.0.0.1:8000", "ws://127.0.0.1:8000/ws"),
])
def test_ws_url_maps_http_base_to_session_endpoint(base, expected):
    assert ws_url(base) == expected


def test_ws_url_unknown_scheme_raises_value_error():
    with pytest.raises(ValueError, match=r"http\(s\):// or ws\(s\)://, got 'ftp://h'"):
        ws_url("ftp://h")


def test_constructing_socket_opens_no_connection():
    connections: list[ServerConnection] = []
    with scripted(connections.append) as url:
        open_socket(url)
        time.sleep(0.2)
    assert connections == []


def test_request_sends_frame_and_returns_reply_data_on_one_session():
    with scripted(echo) as url:
        sock = open_socket(url)
        first = sock.request({"type": "reset", "data": {"task_id": "t"}})
        second = sock.request({"type": "step", "data": {"text": "x"}})
        sock.close()
    assert first["observation"]["echo"] == {"type": "reset", "data": {"task_id": "t"}}
    assert second["observation"]["echo"] == {"type": "step", "data": {"text": "x"}}
    assert first["observation"]["conn"] == second["observation"]["conn"]


def test_error_frame_raises_error_frame_with_message_and_code():
    def fail(conn: ServerConnection) -> None:
        conn.recv()
        conn.send(json.dumps({"type": "error", "data": {
            "message": "ResetNeeded: call reset", "code": "EXECUTION_ERROR"}}))
        conn.recv()  # the client's close frame

    with scripted(fail) as url:
        sock = open_socket(url)
        with pytest.raises(ErrorFrame, match="call reset") as err:
            sock.request({"type": "step", "data": {"text": "x"}})
        sock.close()
    assert (err.value.message, err.value.code) == ("ResetNeeded: call reset", "EXECUTION_ERROR")


def test_refusal_queued_before_close_is_read_not_lost():
    def refuse(conn: ServerConnection) -> None:
        conn.send(json.dumps({"type": "error", "data": {
            "message": "Server at capacity: 1/1 sessions active.", "code": "CAPACITY_REACHED"}}))
        conn.close()

    with scripted(refuse) as url:
        sock = open_socket(url)
        time.sleep(0.3)  # let the close arrive before the request is sent
        with pytest.raises(ErrorFrame, match="Server at capacity") as err:
            sock.request({"type": "reset", "data": {}})
        sock.close()
    assert err.value.code == "CAPACITY_REACHED"


def test_timed_out_reply_drops_socket_so_next_request_never_reads_it():
    def late_then_echo(conn: ServerConnection) -> None:
        if not hasattr(late_then_echo, "done"):
            late_then_echo.done = True  # type: ignore[attr-defined]
            conn.recv()
            time.sleep(0.6)  # past the client's timeout, then the stale reply
            with contextlib.suppress(ConnectionClosed):
                conn.send(json.dumps({"type": "observation", "data": {"observation": "stale"}}))
            return
        echo(conn)

    with scripted(late_then_echo) as url:
        sock = open_socket(url, message_timeout_s=0.3)
        with pytest.raises(TimeoutError):
            sock.request({"type": "step", "data": {"text": "slow"}})
        reply = sock.request({"type": "reset", "data": {}})
        sock.close()
    assert reply["observation"]["echo"] == {"type": "reset", "data": {}}


def test_socket_closed_by_server_is_replaced_on_next_request():
    def one_reply(conn: ServerConnection) -> None:
        raw = conn.recv()
        conn.send(json.dumps({"type": "observation", "data": {
            "observation": {"echo": json.loads(raw), "conn": str(conn.id)}}}))
        conn.close()  # e.g. idle expiry

    with scripted(one_reply) as url:
        sock = open_socket(url)
        first = sock.request({"type": "reset", "data": {}})
        time.sleep(0.3)  # the close reaches the client
        second = sock.request({"type": "reset", "data": {}})
        sock.close()
    assert first["observation"]["conn"] != second["observation"]["conn"]


def test_headers_travel_on_the_upgrade_request():
    with scripted(echo, refuse_unauthorized=True) as url:
        with pytest.raises(InvalidStatus, match="401"):
            open_socket(url).request({"type": "state"})
        sock = open_socket(url, Authorization="Bearer t0k")
        assert sock.request({"type": "state"})["observation"]["echo"] == {"type": "state"}
        sock.close()


def test_close_sends_close_frame_once_and_is_idempotent():
    received: list[str] = []

    def record(conn: ServerConnection) -> None:
        with contextlib.suppress(ConnectionClosed):
            for raw in conn:
                received.append(json.loads(raw)["type"])
                if received[-1] != "close":
                    conn.send(json.dumps({"type": "observation", "data": {}}))

    with scripted(record) as url:
        sock = open_socket(url)
        sock.request({"type": "reset", "data": {}})
        sock.close()
        sock.close()
        time.sleep(0.2)
    assert received == ["reset", "close"]
