"""The Flask app factory: `gunicorn "api.app:create_app()"`.

Surfaces (`FLOKIT_SURFACES`) decide which blueprints exist, so that production can deploy
the v1 API, the gateway and the ingest gateway as separate services from one codebase.
No database connection is opened here: gunicorn may fork after this runs.
"""

from __future__ import annotations

from typing import IO

from flask import Flask, Request
from flask.wrappers import Response
from werkzeug.utils import cached_property

from api.context import EXTENSION, AppState
from api.errors import ApiError, log_outage, register_error_handlers, retry_later
from api.limits import BoundedJSONProvider, JsonTooDeep, input_stream
from api.logs import configure_logging, register_request_logging
from api.openapi import Health, NotReady, operation, register_openapi
from api.ratelimits import register_rate_limits
from api.report_reader import reports_not_ready
from api.responses import respond
from warehouse.availability import probe
from warehouse.db import database_for
from warehouse.settings import Settings


class JsonRequest(Request):
    """Every body read goes through `stream` (and every JSON parse through the app's
    `BoundedJSONProvider`; api/limits.py): no route can read a chunked body cut at the size
    limit, or parse JSON nested past the depth limit."""

    @cached_property
    def stream(self) -> IO[bytes]:
        if self.shallow:
            raise RuntimeError("This request was created with 'shallow=True': reading the body is disabled.")
        return input_stream(self.environ, self.max_content_length)

    def on_json_loading_failed(self, e: ValueError | None) -> object:
        if isinstance(e, JsonTooDeep):
            raise ApiError(400, str(e))
        raise ApiError(400, "Request body is not valid JSON")


def register_blueprints(app: Flask, settings: Settings) -> None:
    if "v1" in settings.surfaces:
        from api.v1 import blueprint as v1

        app.register_blueprint(v1)
    if "gateway" in settings.surfaces:
        from api.gateway import blueprint as gateway
        from api.passthrough import blueprint as passthrough

        app.register_blueprint(gateway)
        app.register_blueprint(passthrough)
    if "processor" in settings.surfaces and "gateway" not in settings.surfaces:
        # Beside the gateway, the gateway's passthrough routes hand requests to it in-process.
        from api.notifications import blueprint as processor

        app.register_blueprint(processor)
    if "ingest" in settings.surfaces:
        from api.ingest import blueprint as ingest

        app.register_blueprint(ingest)
    if "dashboard" in settings.surfaces:
        from api.dashboard import register_dashboard

        register_dashboard(app, settings)


def create_app(settings: Settings | None = None) -> Flask:
    settings = settings or Settings.from_env()
    configure_logging()
    app = Flask("flokit")
    app.request_class = JsonRequest
    app.json = BoundedJSONProvider(app)
    app.json.sort_keys = False  # keep the spec's field order
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.extensions[EXTENSION] = AppState(settings=settings, db=database_for(settings.database_url))

    register_request_logging(app)
    register_error_handlers(app)
    register_rate_limits(app, settings)

    @app.get("/healthz")
    @operation(summary="Liveness: the process answers", responses={200: Health}, tags=["meta"], database=False)
    def healthz() -> Response:
        return respond(Health(status="ok"))

    @app.get("/readyz")
    @operation(
        summary="Readiness: the operational database answers, and the published reports can be served",
        description="One cheap statement on a new connection, given up after about 4 s. 503 (with "
        "Retry-After) while the database is unavailable: take this instance out of rotation, not restart it. "
        "With FLOKIT_LAKE_URL=s3://…, also 503 (reason `reports: …`) while this host holds no copy of the "
        "published reports and the object store is unreachable.",
        responses={200: Health, 503: NotReady},
        tags=["meta"],
    )
    def readyz() -> Response:
        outage = probe(settings.database_url)
        if outage is not None:
            log_outage(outage)
            return retry_later(respond(NotReady(status="unavailable", reason=outage.kind), 503))
        no_reports = reports_not_ready() if "v1" in settings.surfaces or "dashboard" in settings.surfaces else None
        if no_reports is not None:
            return retry_later(respond(NotReady(status="unavailable", reason=f"reports: {no_reports}"), 503))
        return respond(Health(status="ok"))

    register_blueprints(app, settings)
    # The document covers exactly the API surfaces this process serves (one per production deploy);
    # the dashboard's pages are for people in a browser, not an API.
    apis = tuple(s for s in settings.surfaces if s != "dashboard")
    register_openapi(app, surfaces=apis, descriptions=_SURFACE_TEXT)
    return app


_SURFACE_TEXT = {
    "v1": "v1 REST API (design-partner preview): Bearer API keys, errors as {error, message}.",
    "gateway": "Paywall and entitlement gateway and provider webhook passthrough: errors as {error}.",
    "ingest": "Measurement ingest gateway for attribution vendors: errors as {error}.",
    "processor": "Provider notification processor (the passthrough's downstream; served on the gateway's "
    "provider paths when both run in one process): errors as {error}.",
}
