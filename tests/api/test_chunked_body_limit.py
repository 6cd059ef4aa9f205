"""Chunked request bodies (no Content-Length) over the 1 MiB limit, against a real gunicorn:
413 in the surface's error shape, and nothing stored or forwarded; under the limit they work.

Only a real server shows this: gunicorn de-chunks the body and marks the stream terminated
(`wsgi.input_terminated`), and Werkzeug then read such a body up to the limit and stopped, so a
longer one reached the routes cut at 1 MiB as if it had ended there."""

import json
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import requests

from tests.support import gunicorn_server
from tests.support.ingest import PATH as INGEST
from tests.support.ingest import callback, counts
from tests.support.webhook_receiver import Receiver, running_receiver
from warehouse.db import Database
from warehouse.settings import Settings

LIMIT = 1024 * 1024  # Settings.max_body_bytes
EVENTS = "/api/paywall/events"
WEBHOOK = "/webhooks/payment_processor"
TOO_LARGE = {"error": "Request Entity Too Large"}


@dataclass
class Served:
    base: str
    downstream: Receiver


@pytest.fixture
def served(settings: Settings, tmp_path: Path) -> Iterator[Served]:
    with running_receiver() as downstream:
        configured = replace(settings, surfaces=("v1", "gateway", "ingest"), passthrough_url=downstream.url)
        env = {**os.environ, **configured.child_env()}
        with gunicorn_server(env, workers=1, log_dir=tmp_path) as server:
            yield Served(server.base, downstream)


def chunked(base: str, path: str, body: bytes, **headers: str) -> requests.Response:
    """POST `body` with Transfer-Encoding: chunked (a generator body: no Content-Length)."""

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 64 * 1024):
            yield body[start : start + 64 * 1024]

    response = requests.post(base + path, data=chunks(), headers=headers, timeout=30)
    assert response.request.headers.get("Transfer-Encoding") == "chunked"
    assert "Content-Length" not in response.request.headers
    return response


def form(workspace: dict, size: int, **params: str) -> bytes:
    """An install callback as a form body of exactly `size` bytes (padded with an extra field)."""
    head = urlencode(callback(workspace, **params)) + "&pad="
    return (head + "x" * (size - len(head))).encode()


def events_json(workspace: dict, size: int) -> bytes:
    """A valid funnel-event batch, then whitespace up to exactly `size` bytes: cut anywhere in
    the padding, what is left is still valid JSON, so a truncated body would land the event."""
    event = {
        "event_type": "impression",
        "app_id": workspace["app_id"],
        "properties": {"paywall_id": "onboarding", "variant_id": "b"},
        "occurred_at": "2026-11-20T10:00:00Z",
    }
    text = json.dumps({"events": [event]}).encode()
    return text + b" " * (size - len(text))


def app_headers(workspace: dict) -> dict[str, str]:
    return {"x-app-key": workspace["app_key"], "x-user-id": "user-7", "Content-Type": "application/json"}


def test_chunked_bodies_over_the_limit_are_413_and_nothing_is_kept_or_forwarded(
    served: Served, workspace: dict, db: Database
) -> None:
    over = LIMIT + 1
    v1 = {"Authorization": f"Bearer {workspace['api_key_read_write']}", "Content-Type": "application/json"}
    sent = {
        "ingest": (INGEST, form(workspace, over), {"Content-Type": "application/x-www-form-urlencoded"}),
        "gateway": (EVENTS, events_json(workspace, over), app_headers(workspace)),
        "passthrough": (WEBHOOK, b"{" + b"x" * (over - 2) + b"}", {"Content-Type": "application/json"}),
        "v1": ("/v1/events", b"{}" + b" " * (over - 2), v1),
        # Well past the limit too (the rest of the body is never read).
        "passthrough, 3 MiB": (WEBHOOK, b"x" * (3 * LIMIT), {"Content-Type": "application/octet-stream"}),
    }
    answers = {}
    for name, (path, body, headers) in sent.items():
        r = chunked(served.base, path, body, **headers)
        is_json = r.headers.get("Content-Type", "").startswith("application/json")
        answers[name] = (r.status_code, r.json() if is_json else r.content)
    assert answers == {
        "ingest": (413, TOO_LARGE),
        "gateway": (413, TOO_LARGE),
        "passthrough": (413, TOO_LARGE),
        "v1": (413, {"error": "payload_too_large", "message": "Request body is too large"}),
        "passthrough, 3 MiB": (413, TOO_LARGE),
    }
    assert counts(db) == (0, 0)  # no dedup claim, no landed event (ingest callback or funnel event)
    assert [(r.path, len(r.body)) for r in served.downstream.requests] == []  # nothing forwarded


def test_chunked_bodies_up_to_the_limit_still_work(served: Served, workspace: dict, db: Database) -> None:
    small = form(workspace, 2000, adid="small")
    r = chunked(served.base, INGEST, small, **{"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 200 and r.json()["written"] == 1
    at_limit = form(workspace, LIMIT, adid="at-limit")
    r = chunked(served.base, INGEST, at_limit, **{"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 200 and r.json()["written"] == 1
    r = chunked(served.base, EVENTS, events_json(workspace, LIMIT), **app_headers(workspace))
    assert r.status_code == 200 and r.json() == {"accepted": 1}
    assert counts(db) == (3, 3)

    bodies: list[Any] = [b'{"type":"invoice.paid"}', b"{" + b"y" * (LIMIT - 2) + b"}"]
    for body in bodies:
        r = chunked(served.base, WEBHOOK, body, **{"Content-Type": "application/json"})
        assert r.status_code == 200 and r.content == b"ok"
    assert [received.body for received in served.downstream.requests] == bodies  # whole, byte for byte


def test_malformed_chunked_framing_is_400_not_500(served: Served, workspace: dict, db: Database) -> None:
    """A chunk whose data runs past its declared size: gunicorn's reader raises where the route
    reads the body, which was answered 500 with a traceback. It is the client's framing: 400."""
    host, port = served.base.removeprefix("http://").split(":")
    body = b"3\r\nabcdef\r\n0\r\n\r\n"  # 3 bytes declared, 6 sent: no CRLF where the chunk ends
    head = b"POST %s HTTP/1.1\r\nHost: a\r\nContent-Type: application/x-www-form-urlencoded\r\n" % INGEST.encode()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head + b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.split(b" ")[1] == b"400", answer[:300]
    assert json.loads(rest.partition(b"\r\n\r\n")[2]) == {"error": "Bad Request"}
    assert counts(db) == (0, 0)  # nothing claimed or landed
