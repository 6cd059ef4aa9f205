"""The operator dashboard: server-rendered pages at /dashboard/, htmx only enhancing them.

A person in a browser, signed in with a one-time link (`auth.py`), works here on what the v1
API and `flokit admin` offer, through the same `warehouse` functions. What differs from the
other surfaces, and why:
- errors are HTML pages (api/errors.py asks `DASHBOARD_PAGE` for any /dashboard path);
- the pages stay out of the OpenAPI document (api/openapi/document.py): they are not an API;
- every response carries a strict Content-Security-Policy (no inline script or style, nothing
  from another origin), `nosniff`, and `no-store` on pages (some show secrets); the vendored
  files, whose names carry their versions, are cached for a year;
- POSTs carry a CSRF token (Flask-WTF, checked in this blueprint only: the other surfaces'
  POSTs authenticate with keys and secrets, never cookies).
"""

from __future__ import annotations

from flask import Blueprint, Flask, Response, request

from api.errors import DASHBOARD_PAGE, is_dashboard_request
from warehouse.settings import Settings

blueprint = Blueprint(
    "dashboard",
    __name__,
    url_prefix="/dashboard",
    static_folder="static",
    static_url_path="/static",
    template_folder="templates",
)

# common.md "Decided for this slice": sent on every dashboard response, pages and errors alike.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
# The vendored files' names carry their versions (htmx-2.0.11.min.js): a new version is a new URL.
VENDOR_CACHE = "public, max-age=31536000, immutable"
# app.js, app.css and the icon keep their names across releases: the browser revalidates them.
OWN_ASSET_CACHE = "no-cache"


def register_dashboard(app: Flask, settings: Settings) -> None:
    """The blueprint, its sign-in and CSRF machinery, its headers and its HTML error pages."""
    from api.dashboard import (  # noqa: F401  (routes register on import)
        actions,
        auth,
        customers,
        experiments,
        integrations,
        keys,
        pages,
        paywalls,
        reports,
        subscriptions,
        webhooks,
    )

    auth.configure(app, settings)
    app.register_blueprint(blueprint)
    app.extensions[DASHBOARD_PAGE] = pages.error_page

    @app.after_request
    def _dashboard_headers(response: Response) -> Response:
        if not is_dashboard_request():
            return response
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        # The login address carries its token: it must not leave in a Referer (the confirmation
        # page, and its POST, whose redirect would pass the page's address on). Elsewhere the
        # origin is kept, which Flask-WTF's HTTPS check of a POST's Referer needs.
        login = request.endpoint in ("dashboard.login", "dashboard.sign_in")
        response.headers["Referrer-Policy"] = "no-referrer" if login else "same-origin"
        if request.endpoint == "dashboard.static":
            vendored = (request.view_args or {}).get("filename", "").startswith("vendor/")
            response.headers["Cache-Control"] = VENDOR_CACHE if vendored else OWN_ASSET_CACHE
        else:
            response.headers["Cache-Control"] = "no-store"
        return response
