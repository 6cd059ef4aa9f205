"""The gunicorn worker the API runs in (`api/gunicorn_conf.py` names it): gunicorn's threaded
worker, with requests read whole by its event loop so that slow and idle clients cost no thread.

gunicorn's sync worker serves one connection per process and reads with no deadline: four
sockets that sent half a request header left every surface unanswered until gunicorn killed the
workers 30 s later. Its threaded worker (`gthread`) still hands each new connection to a thread
that blocks reading the request head. `EdgeWorker` instead keeps a connection in its event loop
(a `selectors` poller, non-blocking `recv`) until the whole request has arrived: the head (up to
`HEAD_BUFFER_BYTES`) and the body, by its `Content-Length` or followed chunk by chunk (answering
`Expect: 100-continue` itself). Only then is the request parsed and served, from memory. So:

- an idle connection costs a file descriptor until the header timeout closes it;
- a client sending its head or body slowly costs its buffered bytes, and is answered 408 (JSON)
  and closed when the header or body timeout passes;
- a body over the limit is answered 413 from its head (or from the chunk that crosses it), in
  the shape of the surface its path names, without reading the rest.

With one thread (`FLOKIT_WORKER_THREADS=1`, the default) the loop serves each whole request
itself, as the sync worker did but never waiting on a client: no hand-off between threads and
no contention for the GIL, which on a 2-core host made every surface faster than the sync
worker, where 4 or 8 threads were slower on database-bound requests (docs/benchmarks.md).
More threads pay off where requests wait on something slow (the
passthrough's and the receipt check's downstream, up to 10 s each): then a pool serves them,
and the thread's reads still honour the body deadline (`DeadlineSocket`).

The production front (`deploy/nginx/flokit.conf`) buffers requests too; this worker is what
keeps a FloKit reachable without it standing.

`JsonErrors` answers what gunicorn refuses itself (414 request line too long, 431 header fields,
400 malformed, 501 transfer coding, 408 too slow) with the API's JSON error shape
`{"error": <HTTP reason phrase>, "message": <what was wrong>}` instead of gunicorn's HTML page.

Built on gunicorn's internals (`gthread.TConn`, `ThreadWorker._keepalive_after`,
`SocketUnreader.take_buffered`, `http2.negotiation`) as they are in gunicorn 27: pyproject.toml
pins that major, and a new one is adopted by reading its gthread.py against this module. The
tunables are `Settings` (warehouse/settings.py), read once per worker.
"""

from __future__ import annotations

import errno
import json
import re
import selectors
import socket
import time
from collections import deque
from concurrent import futures
from contextlib import suppress
from functools import partial
from http import HTTPStatus
from typing import Any

from gunicorn import util
from gunicorn.http.unreader import SocketUnreader
from gunicorn.http2 import negotiation
from gunicorn.workers.gthread import STOP_KEEPALIVE_LINGER, TConn, ThreadWorker
from gunicorn.workers.sync import SyncWorker
from werkzeug.exceptions import RequestTimeout

from warehouse.settings import Settings

# A request head larger than this is handed to a thread as it is (gunicorn's parser then answers
# 414 or 431 against its own limits); real heads are a few KB.
HEAD_BUFFER_BYTES = 64 * 1024
# At most this many bytes of requests held in one worker's loop; past it, new bodies are read by
# their thread (against the body timeout) rather than buffered.
BUFFER_BUDGET_BYTES = 64 * 1024 * 1024
# How often the loop looks for connections past their deadline.
SWEEP_INTERVAL_S = 0.25

_HEAD_END = b"\r\n\r\n"
_CHUNK_LINE_BYTES = 4096  # a chunk-size line (with extensions) longer than this is malformed
_READY, _WAIT = object(), object()  # verdicts on a connection's buffered bytes
_CHUNKED = -1
_FIELD = re.compile(rb"\r\n(content-length|transfer-encoding|expect)[ \t]*:[ \t]*([^\r]*)", re.IGNORECASE)


class ReadTimeout(RequestTimeout):
    """A request did not arrive within its deadline: a werkzeug `RequestTimeout`, so that where
    the application reads the body it answers 408 in the surface's shape. Not an `OSError`:
    werkzeug would take that for a disconnected client, and gunicorn for a socket fault."""

    def __init__(self, what: str, seconds: float) -> None:
        super().__init__(f"The request {what} did not arrive within {seconds:g} seconds")


class _Page:
    """Stands in for the client socket while gunicorn writes its error page, to learn its status."""

    def __init__(self) -> None:
        self.data = b""

    def gettimeout(self) -> float:
        return 0.0

    def sendall(self, data: bytes) -> None:
        self.data += data


def json_error(status: HTTPStatus, message: str) -> bytes:
    """A whole HTTP/1.1 response in gunicorn-level refusals' shape, closing the connection."""
    return _response(status, {"error": status.phrase, "message": message})


def _response(status: HTTPStatus, answer: dict[str, str]) -> bytes:
    body = json.dumps(answer).encode()
    head = (
        f"HTTP/1.1 {status.value} {status.phrase}\r\nConnection: close\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1") + body


class JsonErrors:
    """Mixed into a gunicorn worker: its own refusals are answered as JSON."""

    cfg: Any
    log: Any

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        if isinstance(exc, ReadTimeout):
            # A slow client, not a fault: no traceback in the log.
            self.log.info("Request from %s timed out: %s", addr, exc.description)
            response = json_error(HTTPStatus.REQUEST_TIMEOUT, str(exc.description))
        else:
            page = _Page()
            # gunicorn decides the status, logs the error and the access line as usual; only the
            # page it writes is replaced.
            super().handle_error(req, page, addr, exc)  # type: ignore[misc]
            try:
                status = HTTPStatus(int(page.data.split(b" ", 2)[1]))
            except (ValueError, IndexError):
                status = HTTPStatus.INTERNAL_SERVER_ERROR
            response = json_error(status, self._message(status, exc))
        try:
            util.write_nonblock(client, response)
        except Exception:  # the client is gone, as gunicorn's own page would have found
            self.log.debug("Failed to send error message.")

    def _message(self, status: HTTPStatus, exc: BaseException) -> str:
        if status == 414:
            return (
                f"The request line (method, path and query string) is longer than {self.cfg.limit_request_line} bytes"
            )
        if status == 431:
            return (
                f"At most {self.cfg.limit_request_fields} header fields of at most "
                f"{self.cfg.limit_request_field_size} bytes each are accepted"
            )
        if status >= 500 and status != 501:
            return status.phrase  # a server fault: nothing of its detail goes to the client
        return str(exc) or status.phrase


class JsonErrorWorker(JsonErrors, SyncWorker):
    """gunicorn's sync worker with JSON refusals: one connection per process, no read deadline.
    Only for comparison (`tests/bench/surfaces.py`) or behind a front that buffers whole requests."""


class DeadlineSocket:
    """The client socket as the request parser reads it: every `recv` waits at most until the
    request's deadline, then raises `ReadTimeout`. Everything else is the socket's own."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.deadline: float | None = None
        self.seconds = 0.0
        self._timeout: float | None = None  # what a caller set (gunicorn bounds its body drain)

    def arm(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def recv(self, size: int) -> bytes:
        timeout = self._timeout
        if self.deadline is not None:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise ReadTimeout("body", self.seconds)
            timeout = remaining if timeout is None else min(timeout, remaining)
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(size)
        except TimeoutError:  # socket.timeout
            if self.deadline is not None and time.monotonic() >= self.deadline:
                raise ReadTimeout("body", self.seconds) from None
            raise
        finally:
            self.sock.settimeout(None)  # responses are written blocking, as gunicorn expects

    def settimeout(self, value: float | None) -> None:
        self._timeout = value

    def gettimeout(self) -> float | None:
        return self._timeout

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


class EdgeConn(TConn):
    """A connection whose request bytes the event loop reads before a thread parses them."""

    def __init__(self, cfg: Any, sock: socket.socket, client: Any, server: Any) -> None:
        super().__init__(cfg, sock, client, server)
        self.buffered = bytearray()
        self.deadline = 0.0
        self.scanned = 0  # the head's end was looked for in buffered[:scanned]
        self.body_start: int | None = None  # where the body starts in buffered, once the head is in
        self.need = 0  # bytes of buffered that make the request whole (_CHUNKED: follow the chunks)
        self.chunk_pos = 0  # where the next chunk-size line starts in buffered
        self.chunk_payload = 0  # body bytes in the chunks followed so far
        self.reader: DeadlineSocket | None = None
        self.read_seconds = 0.0  # how long the thread may wait for what the loop did not read

    def init(self) -> None:
        super().init()
        if self.is_http2:
            return
        unreader = getattr(self.parser, "unreader", None)
        if isinstance(unreader, SocketUnreader):
            if self.reader is None:
                self.reader = DeadlineSocket(unreader.sock)
                unreader.sock = self.reader
            self.reader.arm(self.read_seconds)
            if self.buffered:
                unreader.unread(bytes(self.buffered))
                self.buffered.clear()


class EdgeWorker(JsonErrors, ThreadWorker):
    """gunicorn's threaded worker whose event loop reads each request before a thread serves it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The same settings the application reads (FLOKIT_HEADER_TIMEOUT_S, FLOKIT_BODY_TIMEOUT_S
        # and the body limit Flask enforces), so the loop and the app never disagree on a limit.
        settings = Settings.from_env()
        self.header_timeout = settings.header_timeout_s
        self.body_timeout = settings.body_timeout_s
        self.max_body = settings.max_body_bytes
        self.reading: dict[EdgeConn, None] = {}  # connections the loop is reading, oldest first
        # One thread: requests run in the loop's own thread, one after the other, as in the
        # sync worker (no hand-off between threads, no GIL contention); more: a pool.
        self.inline = self.cfg.threads <= 1
        self._ready: deque[EdgeConn] = deque()  # whole requests waiting for the loop's thread
        self._serving = False
        self.buffered_bytes = 0
        self._swept = 0.0

    # -- connections enter the loop -------------------------------------------------------

    def accept(self, listener: socket.socket) -> None:
        try:
            client_sock, client_addr = listener.accept()
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        conn = EdgeConn(self.cfg, client_sock, client_addr, listener.getsockname())
        if self.cfg.is_ssl or negotiation.prior_knowledge_allowed(self.cfg, client_addr):
            # TLS and HTTP/2 are read by their own machinery in the thread (FloKit runs neither:
            # nginx terminates TLS in front of it).
            client_sock.setblocking(True)
            self.enqueue_req(conn)
            return
        self._read(conn, self.header_timeout)

    def _read(self, conn: EdgeConn, seconds: float) -> None:
        """Keep `conn` in the loop until a request is whole, for `seconds` at most."""
        conn.sock.setblocking(False)
        conn.deadline = time.monotonic() + seconds
        conn.scanned = 0
        conn.body_start = None
        conn.need = 0
        conn.chunk_payload = 0
        self.reading[conn] = None
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_readable, conn))

    def _on_readable(self, conn: EdgeConn, _sock: Any) -> None:
        self._receive(conn)

    def _receive(self, conn: EdgeConn) -> bool:
        """Read what the client sent, and act on it. False when nothing was waiting."""
        try:
            data = conn.sock.recv(HEAD_BUFFER_BYTES)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            self._close(conn)
            return True
        if not data:  # the client closed
            self._close(conn)
            return True
        if not conn.buffered and conn.initialized:
            # A kept-alive connection's next request started: it has the header timeout to
            # finish its head, not what was left of the keep-alive wait.
            conn.deadline = time.monotonic() + self.header_timeout
        conn.buffered += data
        self.buffered_bytes += len(data)
        self._advance(conn)
        return True

    def _advance(self, conn: EdgeConn) -> None:
        """Hand the request to a thread once it is whole, refuse it from here, or keep reading."""
        verdict = self._verdict(conn)
        if verdict is _READY:
            self._hand_over(conn)
        elif isinstance(verdict, bytes):
            self._close(conn, verdict)

    def _verdict(self, conn: EdgeConn) -> object:
        buf = conn.buffered
        if conn.body_start is None:
            # Look only at what was not looked at (less the 3 bytes an end may straddle): a
            # client sending its head a byte at a time must not cost the loop quadratic scans.
            end = buf.find(_HEAD_END, max(0, conn.scanned - 3))
            conn.scanned = len(buf)
            if end < 0:
                return _WAIT if len(buf) <= HEAD_BUFFER_BYTES else self._head_too_long(buf)
            conn.body_start = end + 4
            conn.deadline = time.monotonic() + self.body_timeout
            framing = self._framing(conn, end)
            if framing is not None:
                return framing
        if self.buffered_bytes > BUFFER_BUDGET_BYTES and not self.inline:
            return _READY  # the thread reads the rest, against the body timeout
        if conn.need == _CHUNKED:
            return self._chunked(conn)
        return _READY if len(buf) >= conn.need else _WAIT

    def _framing(self, conn: EdgeConn, head_end: int) -> object:
        """How the body is framed, from the head: sets `conn.need`, or returns the verdict."""
        head = bytes(conn.buffered[: head_end + 2])
        fields: dict[bytes, list[bytes]] = {}
        for name, value in _FIELD.findall(head):
            fields.setdefault(name.lower(), []).append(value.strip())
        encodings, lengths = fields.get(b"transfer-encoding", []), set(fields.get(b"content-length", []))
        if len(encodings) > 1 or len(lengths) > 1 or (encodings and lengths):
            return _READY  # ambiguous framing: gunicorn's parser refuses it (400) from the head
        expect = fields.get(b"expect", [])
        if expect:
            if [e.lower() for e in expect] != [b"100-continue"]:
                return _READY  # gunicorn's parser answers 417 from the head
            # The client waits for this before sending the body: the loop answers it, and the
            # field is renamed (same length, in place) so that gunicorn does not answer it again.
            with suppress(OSError):
                conn.sock.send(b"HTTP/1.1 100 Continue\r\n\r\n")
            at = head.lower().index(b"\r\nexpect") + 2
            conn.buffered[at : at + 6] = b"X-Sent"
        if encodings:
            if encodings[0].lower() != b"chunked":
                return _READY  # gunicorn's parser answers 501 from the head
            conn.need = _CHUNKED
            conn.chunk_pos = conn.body_start or 0
            return None
        declared = lengths.pop() if lengths else b"0"
        if not declared.isdigit():
            return _READY  # gunicorn's parser answers 400 from the head
        if int(declared) > self.max_body:
            return self._too_large(head)
        conn.need = (conn.body_start or 0) + int(declared)
        return None

    def _chunked(self, conn: EdgeConn) -> object:
        """Follow the chunks buffered so far: whole at the last chunk and its trailer."""
        buf = conn.buffered
        while True:
            pos = conn.chunk_pos
            line_end = buf.find(b"\r\n", pos)
            if line_end < 0:
                return _WAIT if len(buf) - pos <= _CHUNK_LINE_BYTES else _READY  # the parser: 400
            size_field = bytes(buf[pos:line_end]).split(b";", 1)[0].strip()
            if not size_field or size_field.strip(b"0123456789abcdefABCDEF"):
                return _READY  # a malformed size: the parser answers 400 from what is buffered
            size = int(size_field, 16)
            if size == 0:  # the last chunk, then trailer fields (if any) and an empty line
                if buf[line_end + 2 : line_end + 4] == b"\r\n" or buf.find(_HEAD_END, line_end) >= 0:
                    return _READY
                return _WAIT if len(buf) - line_end <= HEAD_BUFFER_BYTES else _READY
            if conn.chunk_payload + size > self.max_body:
                return self._too_large(bytes(buf[:pos]))
            data_end = line_end + 2 + size
            if len(buf) < data_end + 2:
                return _WAIT
            if buf[data_end : data_end + 2] != b"\r\n":
                return _READY  # a chunk longer than its size: the parser answers 400
            conn.chunk_payload += size
            conn.chunk_pos = data_end + 2

    def _too_large(self, head: bytes) -> bytes:
        """413 from the loop, in the shape of the surface the request line names (as the API's)."""
        target = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b""
        if target == b"/v1" or target.startswith((b"/v1/", b"/v1?")):
            body = {"error": "payload_too_large", "message": "Request body is too large"}
        else:
            body = {"error": "Request Entity Too Large"}
        return _response(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, body)

    def _head_too_long(self, buf: bytearray) -> bytes:
        line_end = buf.find(b"\r\n")
        too_long_line = line_end < 0 or line_end > self.cfg.limit_request_line
        status = HTTPStatus.REQUEST_URI_TOO_LONG if too_long_line else HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE
        return json_error(status, self._message(status, ValueError()))

    def _hand_over(self, conn: EdgeConn) -> None:
        self.poller.unregister(conn.sock)
        del self.reading[conn]
        self.buffered_bytes -= len(conn.buffered)
        conn.data_ready = True
        self.enqueue_req(conn)

    def _close(self, conn: EdgeConn, answer: bytes = b"") -> None:
        with suppress(KeyError, ValueError, OSError):  # not registered (any more)
            self.poller.unregister(conn.sock)
        self.reading.pop(conn, None)
        self.buffered_bytes -= len(conn.buffered)
        conn.buffered.clear()
        self.nr_conns -= 1
        if answer:
            with suppress(OSError):  # best effort: the client may be gone
                conn.sock.send(answer)
        conn.close()

    def murder_pending(self) -> None:
        """Also close the connections whose request did not arrive in time: silently when they
        sent nothing (idle or kept alive), with a 408 when they stopped half way."""
        super().murder_pending()
        now = time.monotonic()
        if now - self._swept < SWEEP_INTERVAL_S:
            return
        self._swept = now
        if not self.alive:
            # Stopping: a request a client may be sending has STOP_KEEPALIVE_LINGER to arrive.
            for conn in self.reading:
                conn.deadline = min(conn.deadline, now + STOP_KEEPALIVE_LINGER)
        expired = [c for c in self.reading if c.deadline <= now]
        for conn in expired:
            # What arrived while the loop was busy (serving, or over its other events) was not
            # late: read it before judging, or a request sent in time would be reset unread.
            while conn in self.reading and self._receive(conn):
                pass
            if conn not in self.reading or conn.deadline > time.monotonic():
                continue
            if not conn.buffered:
                self._close(conn)
                continue
            late_body = conn.body_start is not None
            what, seconds = ("body", self.body_timeout) if late_body else ("head", self.header_timeout)
            self.log.info("Request from %s timed out: its %s took over %g s", conn.client, what, seconds)
            self._close(conn, json_error(HTTPStatus.REQUEST_TIMEOUT, str(ReadTimeout(what, seconds).description)))

    # -- a thread serves the request -------------------------------------------------------

    def enqueue_req(self, conn: EdgeConn) -> None:
        if not self.inline:
            super().enqueue_req(conn)
            return
        # Serving a request can make another whole (pipelined bytes read ahead): queue it rather
        # than recurse, so that a thousand pipelined requests are a loop, not a deep stack.
        self._ready.append(conn)
        if self._serving:
            return
        self._serving = True
        try:
            while self._ready:
                ready = self._ready.popleft()
                done: futures.Future[Any] = futures.Future()
                try:
                    done.set_result(self.handle(ready))
                except BaseException as exc:  # handle() catches what a request raises; this is belt and braces
                    done.set_exception(exc)
                self.finish_request(ready, done)
                self.notify()  # a long run of requests must not look like a hung worker
        finally:
            self._serving = False

    def handle(self, conn: EdgeConn) -> Any:
        conn.read_seconds = self.body_timeout  # armed when the connection is set up for this request
        return super().handle(conn)

    def _keepalive_after(self, conn: EdgeConn, keepalive: bool) -> bool:
        """A body left unread past its deadline closes the connection (the request was answered)."""
        try:
            return bool(super()._keepalive_after(conn, keepalive))
        except ReadTimeout:
            return False

    def finish_request(self, conn: EdgeConn, fs: Any) -> None:
        """As gunicorn's, except that a kept-alive connection goes back to the loop to read its
        next request (starting with any bytes the last one read ahead)."""
        try:
            keep = fs.result() if not fs.cancelled() else False
        except Exception:
            keep = False
        if keep is not True or not self.alive or not isinstance(conn, EdgeConn) or conn.is_http2:
            super().finish_request(conn, fs)
            return
        try:
            ahead = conn.parser.unreader.take_buffered()
            if conn.reader is not None:
                conn.reader.deadline = None
            conn.buffered += ahead
            self.buffered_bytes += len(ahead)
            self._read(conn, self.cfg.keepalive if not ahead else self.header_timeout)
            if ahead:
                self._advance(conn)
        except Exception:
            self._close(conn)
