"""Small stackable decorators for authentication and permission."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar, cast

from flask import g, request

from api.context import state
from api.errors import ApiError
from api.openapi import AUTH_ATTR
from api.ratelimits import rate_limits
from warehouse.workspaces import Principal, authenticate

F = TypeVar("F", bound=Callable[..., Any])


def _bearer_token() -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def require_key(*, write: bool = False) -> Callable[[F], F]:
    """v1 authentication: a valid Bearer key (401), with read-write scope when `write` (403)."""

    def decorate(view: F) -> F:
        @wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            token = _bearer_token()
            if token is None:
                raise ApiError(401, "Missing API key: send Authorization: Bearer <API_KEY>")
            with state().db.read() as conn:
                principal = authenticate(conn, token)
            if principal is None:
                raise ApiError(401, "Invalid API key (unknown, rotated or revoked)")
            rate_limits().hit("api_key", principal.key_id)
            if write and not principal.can_write:
                raise ApiError(403, "This API key is read-only; this request needs a read-write key")
            g.principal = principal
            return view(*args, **kwargs)

        setattr(wrapper, AUTH_ATTR, "write" if write else "read")  # the OpenAPI document's security
        return cast(F, wrapper)

    return decorate


def principal() -> Principal:
    return g.principal
