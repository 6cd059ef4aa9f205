"""Every error is JSON in the shape of its surface, with an X-Request-Id; never an HTML page."""

import dataclasses
import json
import logging

import pytest
from flask import Flask

from api.app import create_app
from warehouse.settings import Settings


@pytest.fixture
def app(settings: Settings) -> Flask:
    app = create_app(dataclasses.replace(settings, max_body_bytes=1024))

    @app.get("/v1/_probe/boom")
    def _v1_boom():
        raise RuntimeError("kaboom")

    @app.get("/_probe/boom")
    def _gateway_boom():
        raise RuntimeError("kaboom")

    @app.post("/v1/_probe/echo")
    def _echo():
        from flask import request

        return {"got": request.get_json()}

    return app


def _assert_v1(r, status: int, code: str) -> None:
    assert r.status_code == status
    assert r.content_type == "application/json"
    assert set(r.json) == {"error", "message"} and r.json["error"] == code and r.json["message"]
    assert r.headers["X-Request-Id"]


def _assert_gateway(r, status: int, message: str) -> None:
    assert r.status_code == status
    assert r.content_type == "application/json"
    assert r.json == {"error": message}
    assert r.headers["X-Request-Id"]


def test_unknown_routes(app: Flask) -> None:
    c = app.test_client()
    _assert_v1(c.get("/v1/nope"), 404, "not_found")
    _assert_gateway(c.get("/api/nope"), 404, "Not Found")
    _assert_gateway(c.get("/"), 404, "Not Found")


def test_wrong_method(app: Flask) -> None:
    c = app.test_client()
    r = c.delete("/v1/workspace")
    _assert_v1(r, 405, "method_not_allowed")
    assert "GET" in r.headers["Allow"]
    _assert_gateway(c.post("/healthz"), 405, "Method Not Allowed")


def test_body_over_limit(app: Flask) -> None:
    c = app.test_client()
    r = c.post("/v1/_probe/echo", data=b"x" * 2048, content_type="application/json")
    _assert_v1(r, 413, "payload_too_large")


def test_malformed_json(app: Flask) -> None:
    r = app.test_client().post("/v1/_probe/echo", data=b"{nope", content_type="application/json")
    _assert_v1(r, 400, "invalid_request")
    assert "not valid JSON" in r.json["message"]


def test_unhandled_exception_is_a_logged_500(app: Flask, caplog: pytest.LogCaptureFixture) -> None:
    c = app.test_client()
    with caplog.at_level(logging.ERROR, logger="flokit.api"):
        r = c.get("/v1/_probe/boom", headers={"X-Request-Id": "trace-123"})
    _assert_v1(r, 500, "internal_error")
    assert r.headers["X-Request-Id"] == "trace-123"
    record = next(rec for rec in caplog.records if rec.getMessage() == "unhandled exception")
    assert record.request_id == "trace-123" and record.exc_info
    assert "kaboom" not in json.dumps(r.json)
    _assert_gateway(c.get("/_probe/boom"), 500, "Internal Server Error")


def test_request_id_is_generated_or_echoed(app: Flask) -> None:
    c = app.test_client()
    assert c.get("/healthz").headers["X-Request-Id"].startswith("req_")
    assert c.get("/healthz", headers={"X-Request-Id": "abc-1"}).headers["X-Request-Id"] == "abc-1"
    # Unsafe ids (spaces, newlines, too long) are replaced, never echoed into headers and logs.
    assert c.get("/healthz", headers={"X-Request-Id": "a b"}).headers["X-Request-Id"].startswith("req_")


@pytest.mark.parametrize("surfaces", [("v1",), ("gateway",), ("ingest",)])
def test_healthz_on_every_surface_alone(settings: Settings, surfaces: tuple[str, ...]) -> None:
    app = create_app(dataclasses.replace(settings, surfaces=surfaces))
    c = app.test_client()
    r = c.get("/healthz")
    assert r.status_code == 200 and r.json == {"status": "ok"}
    v1 = c.get("/v1/workspace")
    assert v1.status_code == (401 if "v1" in surfaces else 404)
