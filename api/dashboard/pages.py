"""Rendering shared by every dashboard view: pages, errors, and who is signed in."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol
from urllib.parse import urlencode

from flask import Response, g, make_response, render_template, request
from pydantic import ValidationError

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


def bad_query(exc: ValidationError) -> Response:
    """The 400 page for a list's query string that does not validate: its first problem, by field."""
    error = exc.errors()[0]
    return error_page(400, f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}")


class Paged(Protocol):
    """A list's validated query string: where the page starts and how many rows it holds."""

    offset: int
    limit: int


def paging(
    here: str, filters: Mapping[str, str], query: Paged, *, page_size: int, shown: int, total: int
) -> dict[str, Any]:
    """What the pager of a filtered list shows (`_macros.html` `pager`), spread into `page(...)`.

    The range on this page (1-based; 0 when the page is empty) and the previous and next pages'
    URLs, None at either end. The URLs keep the filters, and the limit only where it is not the
    default, so that the links stay short and the same as the filter form's.
    """
    offset, limit = query.offset, query.limit
    kept: dict[str, str] = dict(filters)
    if limit != page_size:
        kept["limit"] = str(limit)

    def url(at: int) -> str:
        return here + "?" + urlencode({**kept, "offset": at})

    return {
        "first": offset + 1 if shown else 0,
        "last": offset + shown,
        "prev_url": url(max(0, offset - limit)) if offset > 0 else None,
        "next_url": url(offset + limit) if offset + shown < total else None,
    }
