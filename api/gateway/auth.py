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
from api.ratelimits import count_app_client
from transforms import app_session
from warehouse.db import utcnow
from warehouse.workspaces import App, app_by_id, app_for_key

F = TypeVar("F", bound=Callable[..., Any])


def require_app(*, token_allowed: bool = True, user: str | None = None) -> App:
    """The app of the `x-app-key` header, or of the `x-app-token` app-session token where
    allowed (sent instead of the key): 401 when missing, unknown, revoked, expired, or minted
    for another user (`user`, by default the `x-user-id` header)."""
    key = request.headers.get("x-app-key", "").strip()
    token = request.headers.get("x-app-token", "").strip() if token_allowed else ""
    if not key and token:
        app = _app_of_token(token, request.headers.get("x-user-id", "").strip() if user is None else user)
    else:
        if not key:
            raise ApiError(401, "Missing x-app-key: send the app's publishable key (pk_...)")
        with state().db.read() as conn:
            found = app_for_key(conn, key)
        if found is None:
            raise ApiError(401, "Invalid x-app-key (unknown or revoked)")
        app = found
    count_app_client(app.publishable_key)
    return app


def _app_of_token(token: str, user: str) -> App:
    secret = state().settings.app_session_secret
    claims = app_session.verify(secret.encode(), token, now=utcnow()) if secret else None
    if claims is None:
        raise ApiError(401, "Invalid x-app-token (malformed, expired or not minted here)")
    if claims.user_id != user:
        raise ApiError(401, "Invalid x-app-token: it was minted for another x-user-id")
    with state().db.read() as conn:
        app = app_by_id(conn, claims.app_id)
    if app is None:
        raise ApiError(401, "Invalid x-app-token: its app was revoked")
    return app


def require_user(*fallbacks: str | None) -> str:
    """The user: the `x-user-id` header, else the first non-blank fallback (query parameters
    where the spec allows them: the header wins). 401 when none, or when over 200 characters."""
    for candidate in (request.headers.get("x-user-id"), *fallbacks):
        user = (candidate or "").strip()
        if user:
            if len(user) > 200:
                raise ApiError(401, "Invalid user identity: at most 200 characters")
            return user
    also = " (or the userId / anonymousId query parameter where accepted)" if fallbacks else ""
    raise ApiError(401, f"Missing user identity: send the user's id in the x-user-id header{also}")


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
