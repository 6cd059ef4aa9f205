"""App-session tokens (POST /api/paywall/token): minted for one app and one user, 15 minutes.

The token is self-contained and signed (HMAC-SHA256 over its claims with the service's secret),
so checking one needs no database row and no write per mint; it is opaque to apps. A token is
valid only with the `x-user-id` it was minted for, and only until it expires.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

TOKEN_TYPE = "app-session"  # noqa: S105  (the spec's token_type value, not a secret)
LIFETIME = timedelta(seconds=900)  # spec limits: app-session token life 15 minutes
PREFIX = "ast_"
_CONTEXT = b"flokit app-session v1\x1f"  # domain separation: this secret signs nothing else this way
MIN_SECRET_BYTES = 32


@dataclass(frozen=True)
class Claims:
    app_id: str
    user_id: str
    expires_at: datetime


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _sign(secret: bytes, payload: str) -> str:
    return _b64(hmac.new(secret, _CONTEXT + payload.encode("ascii"), hashlib.sha256).digest())


def mint(secret: bytes, *, app_id: str, user_id: str, now: datetime) -> tuple[str, Claims]:
    claims = Claims(app_id=app_id, user_id=user_id, expires_at=(now + LIFETIME).astimezone(UTC))
    body = {"a": app_id, "u": user_id, "x": int(claims.expires_at.timestamp())}
    payload = _b64(json.dumps(body, separators=(",", ":"), sort_keys=True).encode("utf-8"))
    return f"{PREFIX}{payload}.{_sign(secret, payload)}", claims


def verify(secret: bytes, token: str, *, now: datetime) -> Claims | None:
    """The claims of a token this secret signed and that has not expired; None for anything else
    (malformed, forged, tampered with, expired, or an expiry no clock can hold)."""
    if not token.startswith(PREFIX) or token.count(".") != 1 or len(token) > 2048:
        return None
    payload, signature = token[len(PREFIX) :].split(".")
    try:
        if not hmac.compare_digest(signature.encode("ascii"), _sign(secret, payload).encode("ascii")):
            return None
        body = json.loads(_unb64(payload))
        claims = Claims(
            app_id=str(body["a"]), user_id=str(body["u"]), expires_at=datetime.fromtimestamp(int(body["x"]), UTC)
        )
    except (ValueError, KeyError, TypeError, UnicodeError, OverflowError, OSError):
        # OverflowError/OSError: an expiry beyond the platform's time_t (e.g. 10**20), which only a
        # holder of the secret could have signed; still not a token we honour.
        return None
    return claims if now < claims.expires_at else None
