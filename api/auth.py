"""Small stackable decorators for authentication and permission."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar, cast

from flask import current_app, g, request

from api.context import state
from api.errors import ApiError
from api.openapi import AUTH_ATTR
from api.ratelimits import rate_limits
from warehouse.db import utcnow
from warehouse.workspaces import KEY_USE_RESOLUTION, Principal, authenticate, note_key_used

F = TypeVar("F", bound=Callable[..., Any])
KEY_USE = "flokit.key_use"


class KeyUse:
    """When this process last recorded each key's use: v1 writes `last_used_at` at most once per
    key per `KEY_USE_RESOLUTION` and worker (and the UPDATE's own condition makes it once across
    workers), so a busy key costs one small write a minute, not one per request."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._written: dict[str, float] = {}

    def due(self, key_id: str) -> bool:
        now = time.monotonic()
        with self._lock:
            if now - self._written.get(key_id, float("-inf")) < KEY_USE_RESOLUTION.total_seconds():
                return False
            self._written[key_id] = now
            return True


def _note_use(key_id: str) -> None:
    uses = current_app.extensions.setdefault(KEY_USE, KeyUse())
    if uses.due(key_id):
        with state().db.write() as conn:
            note_key_used(conn, key_id=key_id, now=utcnow())


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
            _note_use(principal.key_id)
            if write and not principal.can_write:
                raise ApiError(403, "This API key is read-only; this request needs a read-write key")
            g.principal = principal
            return view(*args, **kwargs)

        setattr(wrapper, AUTH_ATTR, "write" if write else "read")  # the OpenAPI document's security
        return cast(F, wrapper)

    return decorate


def principal() -> Principal:
    return g.principal
