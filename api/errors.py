"""One place that renders every error, in the shape of the surface that was called.

v1 answers `{"error": <code>, "message": <text>}`; the gateway, passthrough and ingest
surfaces keep the production shape `{"error": <message>}` (spec "Errors"). Only the operator
dashboard (any path under /dashboard, when that surface is served) answers with an HTML page, a
person reading it in a browser: the dashboard registers its renderer as `DASHBOARD_PAGE`, and
routing errors (404, 405) reach it here too, since they never reach a blueprint's handler.
Werkzeug's HTTP exceptions and unhandled exceptions are all rendered here.

A repository's refusal (`warehouse.errors`) is mapped here, once: NotFound is 404, Conflict
(and its subclasses) 409, with the exception's message; no route catches its own.

An unhandled exception that is the operational database being unavailable
(`warehouse.availability`) answers 503 with Retry-After on every surface and logs one line per
kind of failure per interval, without traceback; any other is a bug: 500, traceback logged.
"""

from __future__ import annotations

import logging

from flask import Flask, Response, current_app, g, request
from pydantic import BaseModel
from werkzeug.exceptions import HTTPException

from api.logs import RateLimitedLog
from api.responses import json_response
from warehouse.availability import Unavailable, unavailable
from warehouse.errors import Conflict, NotFound, WarehouseError

log = logging.getLogger("flokit.api")

# Seconds a client is asked to wait when the database is unavailable: a restart or failover
# takes seconds, and a sooner retry would only add load to a database coming back.
RETRY_AFTER_S = 5
_OUTAGE_LOG = "flokit.outage_log"
# Called with no arguments on every 401 (api/ratelimits.py counts them per client address).
FAILED_AUTHENTICATION = "flokit.failed_authentication"
# Called with (status, message) for an error on a dashboard path; answers an HTML page.
DASHBOARD_PAGE = "flokit.dashboard_page"

V1_CODES = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "invalid_request",
    422: "invalid_request",
    429: "rate_limited",
    500: "internal_error",
    503: "service_unavailable",
}


# Each refusal of warehouse/errors.py, most specific class first (the first match wins).
WAREHOUSE_STATUS: tuple[tuple[type[WarehouseError], int], ...] = ((NotFound, 404), (Conflict, 409))


class V1Error(BaseModel):
    """v1 error body (ARCHITECTURE.md codes)."""

    error: str
    message: str


class GatewayError(BaseModel):
    """Gateway, passthrough and ingest error body: the production shape `{error: <message>}`."""

    error: str


class ApiError(Exception):
    """Raise anywhere in a request to answer with this status, code and message."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code or V1_CODES.get(status, "error")


def is_v1_request() -> bool:
    return request.blueprint == "v1" or request.path == "/v1" or request.path.startswith("/v1/")


def is_dashboard_request() -> bool:
    return request.path == "/dashboard" or request.path.startswith("/dashboard/")


def error_response(status: int, message: str, code: str | None = None) -> Response:
    page = current_app.extensions.get(DASHBOARD_PAGE)
    if page is not None and is_dashboard_request():
        response: Response = page(status, message)
        return response
    body = (
        V1Error(error=code or V1_CODES.get(status, "error"), message=message)
        if is_v1_request()
        else GatewayError(error=message)
    )
    return json_response(body, status)


def _http_message(exc: HTTPException) -> str:
    if is_v1_request():
        if exc.code == 404:
            return f"No such resource: {request.method} {request.path}"
        if exc.code == 405:
            return f"Method {request.method} is not allowed on {request.path}"
        if exc.code == 413:
            return "Request body is too large"
        return exc.description or exc.name
    if is_dashboard_request():
        return exc.description or exc.name
    return exc.name


def log_outage(outage: Unavailable) -> None:
    """One warning per kind of outage per interval in this process (`RateLimitedLog`)."""
    current_app.extensions[_OUTAGE_LOG].warning(
        outage.kind,
        "database unavailable",
        {
            "kind": outage.kind,
            "detail": outage.detail,
            "request_id": g.get("request_id"),
            "method": request.method,
            "path": request.path,
            "status": 503,
        },
    )


def retry_later(response: Response) -> Response:
    response.status_code = 503
    response.headers["Retry-After"] = str(RETRY_AFTER_S)
    return response


def unavailable_response() -> Response:
    if is_v1_request():
        message = f"The database is unavailable; retry in {RETRY_AFTER_S} seconds"
        return retry_later(error_response(503, message))
    return retry_later(error_response(503, "Service Unavailable"))


def register_error_handlers(app: Flask) -> None:
    app.extensions[_OUTAGE_LOG] = RateLimitedLog(log)  # per app: one per gunicorn worker

    @app.errorhandler(ApiError)
    def _api_error(exc: ApiError) -> Response:
        response = error_response(exc.status, exc.message, exc.code)
        retry_after = getattr(exc, "retry_after", None)  # a rate limit (api/ratelimits.py)
        if retry_after is not None:
            response.headers["Retry-After"] = str(retry_after)
        if exc.status == 401:
            failed = app.extensions.get(FAILED_AUTHENTICATION)
            if failed is not None:
                failed()
        return response

    @app.errorhandler(WarehouseError)
    def _refused(exc: WarehouseError) -> Response:
        for kind, status in WAREHOUSE_STATUS:
            if isinstance(exc, kind):
                return error_response(status, str(exc))
        return _unhandled(exc)  # a refusal with no status of its own is a bug: 500

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException) -> Response:
        response = error_response(exc.code or 500, _http_message(exc))
        allow = getattr(exc, "valid_methods", None)
        if allow:
            response.headers["Allow"] = ", ".join(sorted(allow))
        return response

    @app.errorhandler(Exception)
    def _unhandled(exc: Exception) -> Response:
        outage = unavailable(exc)
        if outage is not None:
            log_outage(outage)
            return unavailable_response()
        log.exception(
            "unhandled exception",
            extra={"request_id": g.get("request_id"), "method": request.method, "path": request.path},
        )
        if is_v1_request():
            return error_response(500, "Internal server error; quote the X-Request-Id when reporting it")
        return error_response(500, "Internal Server Error")
