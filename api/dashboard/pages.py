"""Rendering shared by every dashboard view: pages, errors, and who is signed in."""

from __future__ import annotations

from typing import Any

from flask import Response, g, make_response, render_template, request

# The titles of the error pages a person can meet, by status.
TITLES = {
    400: "Bad request",
    401: "Sign-in needed",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    410: "Link no longer valid",
    413: "Request too large",
    429: "Too many requests",
    500: "Something went wrong",
    503: "Service unavailable",
}
# Shown wherever someone needs a link: the one way in.
LOGIN_COMMAND = "flokit admin login-link --as you@example.com"


def is_htmx() -> bool:
    """An htmx request (it wants a fragment to swap, not a whole page)."""
    return request.headers.get("HX-Request") == "true"


def page(template: str, status: int = 200, **context: Any) -> Response:
    """A rendered template with its status: a whole page, or a partial (a queue row) for htmx."""
    return make_response(render_template(template, **context), status)


def error_page(status: int, message: str) -> Response:
    """The HTML page for an error on a dashboard path (api/errors.py `DASHBOARD_PAGE`)."""
    title = TITLES.get(status, "Error")
    return page(
        "dashboard/error.html",
        status,
        title=title,
        message=message,
        code=status,
        signed_in=g.get("operator") is not None,
        login_command=LOGIN_COMMAND,
    )
