"""Idle and slow clients against the API as it runs (gunicorn with `api.workers.EdgeWorker`):
they cost no thread, are answered 408 (JSON) and closed when their head or body is late, and
`/healthz` keeps answering meanwhile; requests that arrive in pieces, pipelined, kept alive,
chunked or behind `Expect: 100-continue` are still served whole.

Before the worker change, one socket that sent half a request header stopped a sync worker
until gunicorn killed it 30 s later."""

import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support import GunicornServer, gunicorn_server, http_ok, wait_for
from tests.support.up import flokit_up
from tests.support.webhook_receiver import running_receiver
from warehouse.db import close_database
from warehouse.settings import Settings

pytestmark = pytest.mark.e2e

TIMEOUT_S = 2.0  # the header and body timeouts these servers run with
RECEIPT = "/api/paywall/receipt"  # takes a JSON body without any key


def address(base: str) -> tuple[str, int]:
    host, port = base.removeprefix("http://").split(":")
    return host, int(port)


def read_all(sock: socket.socket, limit_s: float) -> bytes:
    """Everything the server sends until it closes the connection (or `limit_s` passes)."""
    sock.settimeout(limit_s)
    data = b""
    deadline = time.monotonic() + limit_s
    try:
        while time.monotonic() < deadline and (chunk := sock.recv(65536)):
            data += chunk
    except TimeoutError:
        pass
    return data


def responses(data: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """The HTTP/1.1 responses in `data`, in order (each with a Content-Length)."""
    out = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
        size = int(headers.get("content-length", "0"))
        out.append((int(status_line.split(" ")[1]), headers, rest[:size]))
        data = rest[size:]
    return out


@pytest.fixture(scope="module", params=[1, 4], ids=["loop-serves", "4-threads"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path
) -> Iterator[GunicornServer]:
    """One worker serving whole requests from its loop (the default), or handing them to 4 threads.
    One server per mode for the module's tests: each closes what it opened (or the server's
    timeouts close it) and reads no state another test writes, so a start each (most of their
    time) proved nothing more."""
    data_dir = tmp_path_factory.mktemp("slow-clients") / "data"
    data_dir.mkdir()
    shutil.copyfile(sqlite_template, data_dir / "flokit.db")
    configured = Settings(
        data_dir=data_dir,
        database_url=f"sqlite:///{data_dir / 'flokit.db'}",
        header_timeout_s=TIMEOUT_S,
        body_timeout_s=TIMEOUT_S,
        worker_threads=request.param,
    )
    env = {**os.environ, **configured.child_env()}
    with gunicorn_server(env, workers=1, log_dir=data_dir.parent) as running:
        yield running
    close_database(configured.database_url)


def connect(base: str) -> socket.socket:
    return socket.create_connection(address(base), timeout=10)


def test_a_late_head_is_answered_408_and_an_idle_connection_closed(server: GunicornServer) -> None:
    with connect(server.base) as half, connect(server.base) as idle:
        half.sendall(b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-Slow: ")
        started = time.monotonic()
        answer = responses(read_all(half, 10))
        waited = time.monotonic() - started
        assert [status for status, _, _ in answer] == [408]
        _, headers, body = answer[0]
        assert headers["content-type"] == "application/json" and headers["connection"] == "close"
        assert json.loads(body) == {
            "error": "Request Timeout",
            "message": f"The request head did not arrive within {TIMEOUT_S:g} seconds",
        }
        assert TIMEOUT_S - 0.5 <= waited <= TIMEOUT_S + 2
        assert read_all(idle, 10) == b""  # nothing sent, nothing answered: closed
    assert requests.get(f"{server.base}/healthz", timeout=5).status_code == 200


def test_a_late_body_is_answered_408(server: GunicornServer) -> None:
    with connect(server.base) as slow:
        slow.sendall(f"POST {RECEIPT} HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n{{".encode())
        answer = responses(read_all(slow, 10))
    assert [(status, json.loads(body)["message"]) for status, _, body in answer] == [
        (408, f"The request body did not arrive within {TIMEOUT_S:g} seconds")
    ]


def test_a_late_chunked_body_is_answered_408(server: GunicornServer) -> None:
    """Chunked bodies are followed chunk by chunk in the loop too: a stalled one holds no thread."""
    with connect(server.base) as slow:
        slow.sendall(f'POST {RECEIPT} HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{{"a":'.encode())
        answer = responses(read_all(slow, 10))
    assert [(status, json.loads(body)["message"]) for status, _, body in answer] == [
        (408, f"The request body did not arrive within {TIMEOUT_S:g} seconds")
    ]


def test_requests_in_pieces_pipelined_kept_alive_and_expecting_100_are_served(server: GunicornServer) -> None:
    health = b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"
    body = b'{"provider": "ios_store", "platform": "nokia"}'
    receipt = b"POST %s HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        RECEIPT.encode(),
        len(body),
        body,
    )
    with connect(server.base) as sock:
        # A head and a body in pieces, a pause between each (well within the timeouts).
        for piece in (receipt[:10], receipt[10:60], receipt[60:-5], receipt[-5:]):
            sock.sendall(piece)
            time.sleep(0.3)
        # Then three requests in one write, the last closing the connection.
        sock.sendall(health + receipt + health.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
        answer = responses(read_all(sock, 10))
    assert [status for status, _, _ in answer] == [400, 200, 400, 200]
    # The body arrived whole and was read: the answer is the one a client sending it at once gets.
    at_once = requests.post(server.base + RECEIPT, data=body, headers={"Content-Type": "application/json"}, timeout=5)
    assert at_once.status_code == 400 and "ios_store" in at_once.text
    assert answer[0][2] == answer[2][2] == at_once.content

    with connect(server.base) as sock:
        head = receipt.split(b"\r\n\r\n")[0]
        sock.sendall(head.replace(b"Host: a", b"Host: a\r\nExpect: 100-continue\r\nConnection: close") + b"\r\n\r\n")
        sock.settimeout(5)
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"  # the server asks for the body
        sock.sendall(body)
        assert [(status, content) for status, _, content in responses(read_all(sock, 10))] == [(400, at_once.content)]


def test_a_body_over_the_limit_is_413_from_its_head_in_the_surfaces_shape(server: GunicornServer) -> None:
    """Refused before a byte of it is read (the client sends none), as the API words it."""
    for path, expected in [
        ("/v1/actions", {"error": "payload_too_large", "message": "Request body is too large"}),
        (RECEIPT, {"error": "Request Entity Too Large"}),
    ]:
        with connect(server.base) as sock:
            sock.sendall(f"POST {path} HTTP/1.1\r\nHost: a\r\nContent-Length: {2 * 1024 * 1024}\r\n\r\n".encode())
            answer = responses(read_all(sock, 5))
        assert [(status, json.loads(body)) for status, _, body in answer] == [(413, expected)]
    # Chunked: refused at the chunk that crosses the limit.
    with connect(server.base) as sock:
        sock.sendall(b"POST %s HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" % RECEIPT.encode())
        sock.sendall(b"100000\r\n" + b"x" * 0x100000 + b"\r\n1\r\n")
        answer = responses(read_all(sock, 5))
    assert [(status, json.loads(body)) for status, _, body in answer] == [(413, {"error": "Request Entity Too Large"})]


def one_response(sock: socket.socket, limit_s: float) -> tuple[int, bytes]:
    """The next response on a kept-alive connection: (status, body); (0, b"") if it was closed."""
    sock.settimeout(limit_s)
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            return 0, b""
        if not chunk:
            return 0, b""
        data += chunk
    (status, headers, body), *_ = responses(data + b"")
    while len(body) < int(headers.get("content-length", "0")):
        body += sock.recv(65536)
    return status, body


def test_a_request_sent_while_the_worker_was_busy_is_served_not_reset(settings: Settings, tmp_path: Path) -> None:
    """One worker serving from its loop, busy 7 s with a passthrough whose downstream is slow: a
    kept-alive client that sent its next request 1 s into its 5 s keep-alive wait is answered
    when the worker is free again, not closed unread as if it had been idle."""
    with running_receiver() as downstream:

        def slow(_: Any) -> tuple[int, bytes]:
            time.sleep(7)
            return 200, b"ok"

        downstream.respond = slow
        env = {**os.environ, **replace(settings, passthrough_url=downstream.url).child_env()}
        health = b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"
        with gunicorn_server(env, workers=1, log_dir=tmp_path) as server, connect(server.base) as kept:
            kept.sendall(health)
            assert one_response(kept, 5)[0] == 200
            busy = threading.Thread(
                target=lambda: requests.post(f"{server.base}/webhooks/ios_store", data=b"{}", timeout=30)
            )
            busy.start()
            time.sleep(1)
            kept.sendall(health)
            assert one_response(kept, 15) == (200, b'{"status":"ok"}\n')
            busy.join()


@contextmanager
def attackers(base: str, idle: int, slow_heads: int, slow_bodies: int) -> Iterator[None]:
    """Connections that send nothing, a head a byte every half second, or a body the same way,
    reconnecting whenever the server closes them, until the block ends."""
    stop = threading.Event()

    def trickle(opening: bytes, drip: bytes) -> None:
        while not stop.is_set():
            try:
                with connect(base) as sock:
                    sock.sendall(opening)
                    while not stop.wait(0.5):
                        if drip:
                            sock.sendall(drip)
                        else:  # an idle client: only notice the server closing
                            sock.setblocking(False)
                            try:
                                if sock.recv(1) == b"":
                                    break
                            except BlockingIOError:
                                pass
            except OSError:
                time.sleep(0.05)

    kinds = (
        [(b"", b"")] * idle
        + [(b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-A: ", b"a")] * slow_heads
        + [(f"POST {RECEIPT} HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n".encode(), b"x")] * slow_bodies
    )
    threads = [threading.Thread(target=trickle, args=kind, daemon=True) for kind in kinds]
    for t in threads:
        t.start()
    try:
        time.sleep(1)  # every attacker connected
        yield
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=5)


def probe(base: str, seconds: float) -> list[float | None]:
    """GET /healthz every 0.25 s for `seconds`: each answer's latency, None for no 200 in 2 s."""
    latencies: list[float | None] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.monotonic()
        try:
            ok = requests.get(f"{base}/healthz", timeout=2).status_code == 200
        except requests.RequestException:
            ok = False
        latencies.append(time.monotonic() - started if ok else None)
        time.sleep(0.25)
    return latencies


def test_flokit_up_keeps_answering_healthz_under_idle_and_slow_clients(up_data_dir: Path) -> None:
    """The issue's attack against a real `flokit up` (one worker): 200 idle sockets, 100 heads and
    50 bodies sent a byte every half second, for longer than the timeouts several times over."""
    env = {"FLOKIT_HEADER_TIMEOUT_S": str(TIMEOUT_S), "FLOKIT_BODY_TIMEOUT_S": str(TIMEOUT_S)}
    with flokit_up(up_data_dir, env=env) as up, ExitStack() as stack:
        wait_for(http_ok(f"{up.api}/healthz"), 120, "flokit up /healthz", up.process)
        stack.enter_context(attackers(up.api, idle=200, slow_heads=100, slow_bodies=50))
        latencies = probe(up.api, 4 * TIMEOUT_S)
        answered = [s for s in latencies if s is not None]
        assert len(answered) == len(latencies) >= 10, latencies
        assert max(answered) < 1.0, latencies
    assert "timed out: its head took over" in up.log("api")  # the slow ones were closed, not served
