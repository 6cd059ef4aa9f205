"""Requests gunicorn itself refuses before the API sees them (request line too long, too many or
too large header fields, malformed, unsupported transfer coding) answer JSON like the API, not
gunicorn's HTML page; the limits are the ones `flokit up` runs with (api/gunicorn_conf.py)."""

import json
import os
import socket
from http import HTTPStatus
from pathlib import Path

import pytest
import requests

from api import gunicorn_conf
from tests.support import gunicorn_server
from warehouse.settings import Settings

pytestmark = pytest.mark.e2e


def raw(base: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send bytes as they are (no client would send most of these) and read the whole answer."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
    return int(status_line.split(" ")[1]), headers, body


def test_gunicorns_own_refusals_are_json(settings: Settings, tmp_path: Path) -> None:
    env = {**os.environ, **settings.child_env()}
    line = gunicorn_conf.limit_request_line
    with gunicorn_server(env, workers=1, log_dir=tmp_path) as server:
        cases = {
            # A query string past the request-line limit.
            414: b"GET /ingest/attribution_provider_a?q=" + b"x" * line + b" HTTP/1.1\r\nHost: a\r\n\r\n",
            # One header field too many, then one field too long.
            431: b"GET /healthz HTTP/1.1\r\nHost: a\r\n"
            + b"".join(b"X-N%d: 1\r\n" % i for i in range(gunicorn_conf.limit_request_fields + 1))
            + b"\r\n",
            400: b"GARBAGE\r\n\r\n",
            501: b"POST /webhooks/ios_store HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: br, chunked\r\n\r\n",
        }
        for status, request in cases.items():
            got, headers, body = raw(server.base, request)
            assert got == status, (status, body[:200])
            assert headers["content-type"] == "application/json", (status, headers)
            assert int(headers["content-length"]) == len(body)
            answer = json.loads(body)
            assert set(answer) == {"error", "message"} and answer["message"], answer
            assert answer["error"] == HTTPStatus(status).phrase  # e.g. "Not Implemented" for 501
        long_field = b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-Big: " + b"y" * gunicorn_conf.limit_request_field_size
        got, headers, body = raw(server.base, long_field + b"\r\n\r\n")
        assert got == 431 and json.loads(body)["error"] == "Request Header Fields Too Large"
        # What the API does accept still reaches it: a request line and a header at the limits.
        path = "/healthz?q=" + "x" * (line - len("GET /healthz?q= HTTP/1.1"))
        assert len(f"GET {path} HTTP/1.1") == line
        ok = requests.get(server.base + path, headers={"X-Big": "y" * 4000}, timeout=10)
        assert ok.status_code == 200 and ok.json() == {"status": "ok"}
    assert server.process.returncode == 0, server.stderr.read_text()[-2000:]


def test_flokit_up_runs_gunicorn_with_the_same_configuration() -> None:
    from cli.up import children

    argv = children(Settings(data_dir=Path("/nonexistent"), database_url="sqlite://"), 2)[0].argv
    assert argv[argv.index("--config") + 1] == gunicorn_conf.__file__
