"""The shipped nginx front (deploy/nginx/) in front of a real FloKit under gunicorn.

nginx runs with a throwaway nginx.conf whose server block is `include`s of the shipped
`flokit-proxy.conf` itself, and whose http-level part (connection zone, upstream) is cut from the
shipped `flokit.conf`, so what is tested is what ships; only the TLS lines are left out. Checked
through nginx, as a client would notice: the configuration loads, /healthz answers, a spoofed
X-Forwarded-For never reaches the passthrough's downstream, an oversized body is refused 413 in
JSON by nginx before FloKit sees it, bodies still on their way hold no gunicorn connection,
too many requests from one address are refused 429 in JSON, and half-sent request heads neither
reach gunicorn nor slow /healthz down, and are closed after nginx's header timeout.

nginx is Debian's `nginx` package: missing, these tests skip, or fail when
FLOKIT_TEST_REQUIRE_NGINX=1 (as `make test` runs them).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psutil
import pytest
import requests

from tests.support import GunicornServer, free_port, gunicorn_server, http_ok, wait_for
from tests.support.nginx import SHIPPED, SNIPPET, nginx_binary, nginx_test, stop, write_conf
from tests.support.webhook_receiver import Receiver, running_receiver
from warehouse.settings import Settings

pytestmark = pytest.mark.e2e

SNIPPET_INSTALLED = "/etc/nginx/flokit-proxy.conf"  # where flokit.conf includes it from

HEADER_TIMEOUT_S = 10  # client_header_timeout in flokit-proxy.conf
PER_ADDRESS = 100  # limit_conn flokit_perip in flokit-proxy.conf
MAX_BODY = 1024 * 1024  # client_max_body_size 1m, the API's own limit too
WEBHOOK = "/webhooks/ios_store"  # passthrough path without credentials or signature headers


@pytest.fixture
def nginx() -> str:
    return nginx_binary()


@dataclass
class Front:
    base: str  # nginx
    port: int
    gunicorn: GunicornServer
    downstream: Receiver
    error_log: Path

    def gunicorn_paths(self) -> list[str]:
        """The path of every request FloKit logged (its access lines)."""
        paths = []
        for line in self.gunicorn.stderr.read_text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("logger") == "flokit.api.access":
                paths.append(entry["path"])
        return paths


@pytest.fixture
def front(nginx: str, settings: Settings, workspace: dict[str, Any], tmp_path: Path) -> Iterator[Front]:
    """Downstream receiver <- FloKit (one gunicorn worker, trusting one proxy) <- nginx."""
    with running_receiver() as downstream:
        configured = replace(settings, trusted_proxies=1, passthrough_url=downstream.url)
        env = {**os.environ, **configured.child_env()}
        with gunicorn_server(env, workers=1, log_dir=tmp_path) as gunicorn:
            upstream_port = int(gunicorn.base.rsplit(":", 1)[1])
            prefix = tmp_path / "nginx"
            prefix.mkdir()
            port = free_port()
            conf = write_conf(prefix, port, upstream_port)
            checked = nginx_test(nginx, prefix, conf)
            assert checked.returncode == 0, checked.stderr
            with (prefix / "output.log").open("wb") as output:
                process = subprocess.Popen(
                    [nginx, "-p", f"{prefix}/", "-c", str(conf), "-g", "daemon off;"],
                    stdout=output,
                    stderr=subprocess.STDOUT,
                )
                try:
                    base = f"http://127.0.0.1:{port}"
                    wait_for(http_ok(f"{base}/healthz"), 15, "nginx /healthz", process)
                    yield Front(base, port, gunicorn, downstream, prefix / "error.log")
                finally:
                    stop(process)


def client_source() -> str:
    """A loopback address other than nginx's own (127.0.0.1) where the system has one (Linux has
    all of 127/8), so the address nginx saw is told apart from the address FloKit's socket saw."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.2", 0))
        except OSError:
            return "127.0.0.1"
    return "127.0.0.2"


def connect(front: Front, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", front.port), timeout=10, source_address=(source, 0))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_response(sock: socket.socket, limit_s: float) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response with a Content-Length, read within `limit_s`."""
    sock.settimeout(limit_s)
    deadline = time.monotonic() + limit_s
    data = b""
    while b"\r\n\r\n" not in data or len(data) < _expected_length(data):
        assert time.monotonic() < deadline, f"no whole response within {limit_s}s: {data!r}"
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a whole response: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
    return int(status_line.split(" ")[1]), headers, body


def _expected_length(data: bytes) -> int:
    head, _, _ = data.partition(b"\r\n\r\n")
    match = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    return len(head) + 4 + (int(match.group(1)) if match else 0)


def test_nginx_accepts_the_shipped_proxy_settings(nginx: str, tmp_path: Path) -> None:
    conf = write_conf(tmp_path, free_port(), free_port())
    result = nginx_test(nginx, tmp_path, conf)
    assert result.returncode == 0, result.stderr
    assert "test is successful" in result.stderr


def test_nginx_accepts_the_whole_shipped_file_with_a_certificate(nginx: str, tmp_path: Path) -> None:
    """flokit.conf as shipped (TLS server including the snippet, the port 80 redirect), with a
    throwaway certificate and the snippet's path in this checkout: `nginx -t` binds no port."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is needed to make a throwaway certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *[openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=flokit.test"],
            *["-keyout", str(key), "-out", str(cert)],
        ],
        capture_output=True,
        timeout=60,
        check=True,
    )
    shipped = SHIPPED.read_text()
    for path in ("/etc/ssl/certs/flokit.pem", "/etc/ssl/private/flokit.key", f"include {SNIPPET_INSTALLED};"):
        assert path in shipped, path
    site = tmp_path / "flokit.conf"
    site.write_text(
        shipped.replace("/etc/ssl/certs/flokit.pem", str(cert))
        .replace("/etc/ssl/private/flokit.key", str(key))
        .replace(f"include {SNIPPET_INSTALLED};", f"include {SNIPPET};")
    )
    conf = tmp_path / "nginx.conf"
    conf.write_text(
        f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\nevents {{}}\nhttp {{ include {site}; }}\n"
    )
    result = nginx_test(nginx, tmp_path, conf)
    assert result.returncode == 0, result.stderr


def test_healthz_answers_through_nginx(front: Front) -> None:
    response = requests.get(f"{front.base}/healthz", timeout=5)
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response.headers["Server"].startswith("nginx") and "X-Request-Id" in response.headers  # both on the way
    assert front.gunicorn_paths().count("/healthz") >= 1


def test_a_spoofed_forwarded_for_never_reaches_the_downstream(front: Front) -> None:
    """nginx replaces X-Forwarded-For with the address it saw; FloKit, trusting one proxy, forwards
    that address downstream (and X-Forwarded-Host/-Proto as nginx wrote them)."""
    source = client_source()
    body = b'{"signedPayload": "eyJhbGciOiJFUzI1NiJ9.e30.c2ln"}'
    connection = http.client.HTTPConnection("127.0.0.1", front.port, timeout=10, source_address=(source, 0))
    try:
        connection.request(
            "POST",
            WEBHOOK + "?attempt=1",
            body=body,
            headers={
                "Content-Type": "application/json",
                "X-Forwarded-For": "6.6.6.6",
                "X-Real-IP": "6.6.6.6",
                "Forwarded": "for=6.6.6.6;host=evil.example;proto=https",
                "X-Forwarded-Host": "evil.example",
                "X-Forwarded-Proto": "gopher",
            },
        )
        response = connection.getresponse()
        assert (response.status, response.read()) == (200, b"ok")
    finally:
        connection.close()
    (received,) = front.downstream.requests
    assert received.path == WEBHOOK + "?attempt=1" and received.body == body
    assert received.header("X-Forwarded-For") == source
    assert received.header("X-Forwarded-Host") == "127.0.0.1"  # nginx's $host: the Host header, no port
    assert received.header("X-Forwarded-Proto") == "http"
    assert received.all("X-Real-IP") == [] and received.all("Forwarded") == []


def test_a_body_over_1_mib_is_refused_413_in_json_by_nginx(front: Front) -> None:
    # At the limit: nginx buffers it and FloKit forwards it whole.
    at_limit = b"{" + b" " * (MAX_BODY - 2) + b"}"
    response = requests.post(
        f"{front.base}{WEBHOOK}", data=at_limit, headers={"Content-Type": "application/json"}, timeout=30
    )
    assert response.status_code == 200
    assert [len(r.body) for r in front.downstream.requests] == [MAX_BODY]

    # Past it: nginx answers from the head alone, without waiting for the body (had it
    # forwarded, it would first wait for the body; FloKit's own 413 carries X-Request-Id).
    with connect(front) as sock:
        sock.sendall(
            f"POST {WEBHOOK} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {MAX_BODY + 10}\r\n\r\n".encode()
        )
        started = time.monotonic()
        status, headers, body = read_response(sock, 5)
        waited = time.monotonic() - started
    assert status == 413 and waited < 2
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == {"error": "Request Entity Too Large"}
    assert "x-request-id" not in headers

    # The same sent whole, as a client library would.
    response = requests.post(
        f"{front.base}{WEBHOOK}",
        data=at_limit + b" " * 10,
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert response.status_code == 413 and response.json() == {"error": "Request Entity Too Large"}
    assert len(front.downstream.requests) == 1  # only the body at the limit
    assert front.gunicorn_paths().count(WEBHOOK) == 1


def gunicorn_connections(front: Front) -> int:
    """Established TCP connections to gunicorn's port (nginx's, kept alive or carrying a request)."""
    port = int(front.gunicorn.base.rsplit(":", 1)[1])
    return sum(
        1
        for c in psutil.net_connections("tcp")
        if c.status == psutil.CONN_ESTABLISHED and c.laddr and c.laddr.port == port
    )


def test_bodies_on_their_way_stay_in_nginx_and_past_100_per_address_is_429_in_json(front: Front) -> None:
    """Requests whose bodies are still on their way hold no gunicorn connection (nginx reads each
    body whole first), and each holds one of its address's 100 slots: the next is refused."""
    head = f"POST {WEBHOOK} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\n\r\n{{".encode()
    held = []
    try:
        for _ in range(PER_ADDRESS):
            sock = connect(front)
            held.append(sock)
            sock.sendall(head)
        time.sleep(0.5)  # nginx has read every head
        assert gunicorn_connections(front) <= 2  # at most the kept-alive ones of earlier probes
        response = requests.get(f"{front.base}/healthz", timeout=5)
        assert response.status_code == 429
        assert response.json() == {"error": "Too many connections from this address"}
        assert response.headers["Retry-After"] == "1"
    finally:
        for sock in held:
            sock.close()
    wait_for(http_ok(f"{front.base}/healthz"), 5, "healthz once the connections are closed")
    assert front.downstream.requests == []
    assert WEBHOOK not in front.gunicorn_paths()


def test_half_sent_heads_stay_in_nginx_and_are_closed_after_its_header_timeout(front: Front) -> None:
    slow = []
    try:
        opened = time.monotonic()
        for _ in range(30):
            sock = connect(front)
            slow.append(sock)
            sock.sendall(b"GET /slow-client HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        # /healthz keeps answering promptly while they hang.
        probes = 0
        while time.monotonic() - opened < 3:
            started = time.monotonic()
            response = requests.get(f"{front.base}/healthz", timeout=1)
            assert response.status_code == 200 and time.monotonic() - started < 1
            probes += 1
            time.sleep(0.25)
        assert probes >= 5
        # nginx closes each one once its header timeout has passed (a reset, as
        # reset_timedout_connection asks, or a 408).
        for sock in slow:
            sock.settimeout(max(0.1, opened + HEADER_TIMEOUT_S + 5 - time.monotonic()))
            try:
                answer = sock.recv(65536)
            except ConnectionResetError:
                answer = b""
            except TimeoutError:
                pytest.fail(f"a half-sent head was still open {HEADER_TIMEOUT_S + 5}s later")
            assert answer == b"" or answer.startswith(b"HTTP/1.1 408"), answer
        assert time.monotonic() - opened >= HEADER_TIMEOUT_S - 1  # not before the timeout
    finally:
        for sock in slow:
            sock.close()
    assert "/slow-client" not in front.gunicorn_paths()  # nginx forwarded none of them
    assert requests.get(f"{front.base}/healthz", timeout=5).status_code == 200
