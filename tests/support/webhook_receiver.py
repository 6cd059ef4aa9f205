"""A real HTTP receiver on 127.0.0.1 for webhook tests and benchmarks.

Records every request (path, every header field in order, raw body, receive time) and answers
with the status set per path (default 200), so tests can make an endpoint fail and recover.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@dataclass(frozen=True)
class Received:
    path: str
    headers: list[tuple[str, str]]
    body: bytes
    received_at: float
    now_ms: int  # the receiver's clock at receipt (wall clock + the test's clock offset), for verify()

    def header(self, name: str) -> str:
        values = self.all(name)
        assert len(values) == 1, f"{name}: {values}"
        return values[0]

    def all(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # The default listen backlog (5) resets connections when 32 senders connect at once.
    request_queue_size = 128

    def handle_error(self, request: object, client_address: object) -> None:
        """A sender killed mid-request (fault tests) resets its connections: not worth a traceback."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class Receiver:
    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.status: dict[str, int] = {}
        self.offset_s = 0.0  # tests that move the sender's clock move the receiver's too
        self.on_receive: Callable[[Received], None] | None = None  # e.g. forward to another process
        # A fake upstream's answer (status, body) computed from the request; None: "ok", by path.
        self.respond: Callable[[Received], tuple[int, bytes]] | None = None
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, like real receivers
            # Headers and body go out in separate writes; without TCP_NODELAY each answer on a
            # kept-alive connection waits ~40 ms for the client's delayed ACK.
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver._lock:
                    now = time.time()
                    received = Received(
                        self.path, list(self.headers.items()), body, now, int((now + receiver.offset_s) * 1000)
                    )
                    receiver.requests.append(received)
                    if receiver.on_receive is not None:
                        receiver.on_receive(received)
                    status, answer = receiver.status.get(self.path, 200), b"ok"
                    respond = receiver.respond
                if respond is not None:
                    status, answer = respond(received)
                self.send_response(status)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: object) -> None:  # quiet test output
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def at(self, path: str) -> list[Received]:
        with self._lock:
            return [r for r in self.requests if r.path == path]


@contextmanager
def running_receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    thread = threading.Thread(target=receiver.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A receiver for one test (import this fixture by name into a test module's `__all__`)."""
    with running_receiver() as r:
        yield r
