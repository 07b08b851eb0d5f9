"""The connections ``fleetd serve`` holds are bounded (``fleetd.serving.connections``), tried
with raw sockets against the real process beside ``fleetd sim``: a request head that stalls is
answered 408 and closed within :data:`HEADER_SECONDS`; past ``api.maxConnections`` a new
connection is answered 503 ``too_many_connections`` and closed at once, and ``/livez`` answers
again once the held ones go; a body that stalls is answered 408 and its connection closed (it
used to stay open, a trickle after the 408 holding it for good). Before, 2,000 stalled heads
were all held after 240 s, and 20,000 used every descriptor: ``/livez`` stopped answering and
asyncio logged 200 MB of failed accepts."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fleetd.api.http_tools import MAX_WAITS_PER_CALLER
from fleetd.api.tools import BODY_READ_SECONDS
from fleetd.serving.connections import HEADER_SECONDS
from tests.integration.test_serve_process import OPERATOR, _drain, _line_with, beside_sim

MOST = 16  # api.maxConnections, its floor


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    with beside_sim(tmp_path, f"  maxConnections: {MOST}\n") as (port, _sim, serve):
        _line_with(serve, b"listening on")
        yield port, serve


def _open(port: int, sent: bytes = b"") -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", port), timeout=5)
    if sent:
        conn.sendall(sent)
    return conn


def _answer(conn: socket.socket, within: float) -> tuple[int, dict[str, object], float]:
    """The status, JSON body and arrival time (monotonic) of what the server says, read until
    it closes the connection (a timeout if it does not within ``within`` seconds)."""
    conn.settimeout(within)
    data = b""
    while chunk := conn.recv(65536):
        data += chunk
    closed_at = time.monotonic()
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert b"connection: close" in head.lower()
    return status, json.loads(body), closed_at


def test_a_stalled_request_head_is_answered_408_and_let_go(
    served: tuple[int, subprocess.Popen[bytes]],
) -> None:
    """A connection that says nothing, one that stops mid-headers and one that trickles a
    byte a second without ending its headers: each gets 408 ``request_timeout`` and is closed
    within the head deadline (plus slack), however it trickles."""
    port, serve = served
    threading.Thread(target=_drain, args=(serve,), daemon=True).start()
    started = time.monotonic()
    silent = _open(port)
    partial = _open(port, b"GET /livez HTTP/1.1\r\nHost: fleetd\r\n")
    trickle = _open(port, b"GET /livez HTTP/1.1\r\n")

    def drip() -> None:
        with contextlib.suppress(OSError):
            for _ in range(int(HEADER_SECONDS) + 5):
                trickle.sendall(b"X")
                time.sleep(1)

    threading.Thread(target=drip, daemon=True).start()
    for conn in (silent, partial, trickle):
        status, body, closed_at = _answer(conn, HEADER_SECONDS + 5)
        assert status == 408
        assert body["error"]["code"] == "request_timeout"  # type: ignore[index]
        assert HEADER_SECONDS - 1 <= closed_at - started <= HEADER_SECONDS + 3
        conn.close()
    with httpx.Client(timeout=5) as client:  # a request that arrives whole is served as ever
        assert client.get(f"http://127.0.0.1:{port}/livez").status_code == 200


def test_past_max_connections_a_new_one_is_refused_503_until_some_go(
    served: tuple[int, subprocess.Popen[bytes]],
) -> None:
    """``MOST`` connections held (each mid-request): the next ones are answered 503
    ``too_many_connections`` with ``Retry-After`` and closed at once, and one WARNING says
    so. A refused connection never counts against the bound, even while its client keeps it
    open (a stream of refused ones locked every caller out once the held ones were gone): as
    soon as the held ones close, ``/livez`` answers, and an INFO says how many were refused."""
    port, serve = served
    held = [_open(port, b"GET /livez HTTP/1.1\r\n") for _ in range(MOST)]
    time.sleep(0.3)
    refused = [_open(port, b"GET /livez HTTP/1.1\r\nHost: fleetd\r\n\r\n") for _ in range(MOST + 4)]
    status, body, _ = _answer(refused[0], 5)
    assert status == 503
    assert body["error"]["code"] == "too_many_connections"  # type: ignore[index]
    assert b"new ones are refused with 503" in _line_with(serve, b"refused with 503", timeout=5)
    for conn in held:  # the refused ones stay open on the client's side meanwhile
        conn.close()
    time.sleep(0.2)
    with httpx.Client(timeout=5) as client:
        assert client.get(f"http://127.0.0.1:{port}/livez").status_code == 200
    assert b"were refused with 503" in _line_with(serve, b"held again", timeout=5)
    threading.Thread(target=_drain, args=(serve,), daemon=True).start()
    for conn in refused:
        conn.close()


def test_a_long_poll_whose_caller_hung_up_lets_go_of_its_place(
    served: tuple[int, subprocess.Popen[bytes]],
) -> None:
    """A caller's ``MAX_WAITS_PER_CALLER`` long-polls hang up half a second in: its next
    long-poll waits (a hung-up one kept its place until the view moved, up to a minute of
    429s for a client that reconnected)."""
    port, serve = served
    threading.Thread(target=_drain, args=(serve,), daemon=True).start()
    auth = {"Authorization": f"Bearer {OPERATOR}"}
    with httpx.Client(timeout=5) as client:
        view = client.get(f"http://127.0.0.1:{port}/v1/fleet", headers=auth).json()["result"]
    version = view["viewVersion"]
    ask = (
        f"GET /v1/fleet?sinceVersion={version}&wait=60 HTTP/1.1\r\nHost: fleetd\r\n"
        f"Authorization: Bearer {OPERATOR}\r\n\r\n"
    ).encode()
    polls = [_open(port, ask) for _ in range(MAX_WAITS_PER_CALLER)]
    time.sleep(0.5)
    for conn in polls:
        conn.close()
    time.sleep(0.3)
    late = _open(port, ask)
    late.settimeout(1.0)
    with pytest.raises(TimeoutError):  # it waits: no 429
        late.recv(1)
    late.close()


def test_a_stalled_body_is_answered_408_and_its_connection_closed(
    served: tuple[int, subprocess.Popen[bytes]],
) -> None:
    """A tool call whose body stops after 10 of 100 bytes: 408 ``request_timeout`` at the body
    deadline, and the connection closed with it — a byte sent after the 408 no longer keeps it
    open."""
    port, serve = served
    threading.Thread(target=_drain, args=(serve,), daemon=True).start()
    head = (
        "POST /v1/tools/fleet_list HTTP/1.1\r\nHost: fleetd\r\n"
        f"Authorization: Bearer {OPERATOR}\r\ncontent-type: application/json\r\n"
        "content-length: 100\r\n\r\n"
    )
    conn = _open(port, head.encode() + b'{"a": 1234')
    started = time.monotonic()
    status, body, closed_at = _answer(conn, BODY_READ_SECONDS + 10)
    assert status == 408
    assert body["error"]["code"] == "request_timeout"  # type: ignore[index]
    assert closed_at - started <= BODY_READ_SECONDS + 3
    conn.close()
