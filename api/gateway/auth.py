"""Gateway identity: the app's publishable key (`x-app-key`) and the user (`x-user-id`).

Errors keep the gateway shape `{error: <message>}`. The key is not a secret (spec), so it is
looked up as is; it scopes the request to one app and, through it, one workspace.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar, cast

from flask import g, request

from api.context import state
from api.errors import ApiError
from warehouse.workspaces import App, app_for_key

F = TypeVar("F", bound=Callable[..., Any])


def require_app() -> App:
    """The app of the `x-app-key` header: 401 when missing, unknown or revoked."""
    key = request.headers.get("x-app-key", "").strip()
    if not key:
        raise ApiError(401, "Missing x-app-key: send the app's publishable key (pk_...)")
    with state().db.read() as conn:
        app = app_for_key(conn, key)
    if app is None:
        raise ApiError(401, "Invalid x-app-key (unknown or revoked)")
    return app


def require_user() -> str:
    """The `x-user-id` header: 401 when missing or blank."""
    user = request.headers.get("x-user-id", "").strip()
    if not user:
        raise ApiError(401, "Missing x-user-id: send the user's id in the x-user-id header")
    if len(user) > 200:
        raise ApiError(401, "Invalid x-user-id: at most 200 characters")
    return user


def require_app_user(view: F) -> F:
    """Authenticate before the body is validated (an unauthenticated caller learns nothing about
    what a valid body looks like): `current_app_user()` then gives the app and the user."""

    @wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        g.gateway_app, g.gateway_user = require_app(), require_user()
        return view(*args, **kwargs)

    return cast(F, wrapper)


def current_app_user() -> tuple[App, str]:
    return g.gateway_app, g.gateway_user
