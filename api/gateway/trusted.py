"""Signed entitlement answers (issue 36 part 1): the HTTP edge.

An entitlement read that carries `x-nonce` is answered with four headers (docs/trusted-
entitlements.md): `X-Signature-Time`, `X-Signature` (Ed25519 by the current intermediate key over
`transforms.trusted.message`), `X-Signature-Key-Id` and `X-Signature-Intermediate` (the key's
chain to the root). The signature covers the final body bytes, so `sign` runs on the built
response. Without `x-nonce` nothing changes.

The entitlement read is the gateway's hot path, so signing costs one SHA-256 and one Ed25519
signature: the intermediate's private key object and its base64 chain are kept per process
(`KeyRing`), re-read from the database at most once per `ttl` seconds, so a rotation reaches
every process within seconds and no request reads or parses a key.

`GET /api/paywall/keys` publishes the root and the unexpired intermediates as a JWKS, for
debugging and for servers; an app pins the root instead (a proxy on the device can rewrite this
answer too).
"""

from __future__ import annotations

import base64
import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from flask import Response, current_app, request
from pydantic import BaseModel, ConfigDict, Field

from api.context import state
from api.errors import ApiError
from api.gateway import blueprint
from api.openapi import operation
from api.ratelimits import per_address
from api.responses import respond
from transforms import trusted
from transforms.sealing import SealError
from warehouse.db import Database, utcnow
from warehouse.signing import keys

CACHE = "flokit.signing_keys"
NONCE_HEADER: Final = "x-nonce"
# How long a process keeps the intermediate before asking the database again: a rotation reaches
# every process within this, and the database sees one small read per process per interval.
KEY_TTL_S: Final = 5.0
# The JWKS may be cached by clients and proxies this long (rotation keeps old keys published).
JWKS_MAX_AGE_S: Final = 300

NONCE_DOC: Final = (
    "Optional. 12 to 32 random bytes in standard base64 (padding optional), new for every request. When sent, the "
    "answer is signed (X-Signature, X-Signature-Time, X-Signature-Key-Id, X-Signature-Intermediate; see "
    "docs/trusted-entitlements.md); anything else, empty included, is 400."
)
SIGNED_HEADERS_DOC: Final = (
    " With x-nonce, the answer carries X-Signature-Time (server time, ms), X-Signature (base64 Ed25519 signature "
    "by the intermediate key over the lines flokit-entitlement-v1, the x-nonce as sent, the method, the path and "
    "query as received, the user id, X-Signature-Time and the hex SHA-256 of the body, joined by \\n), "
    "X-Signature-Key-Id (the intermediate's kid) and X-Signature-Intermediate (base64 of its public key, 4-byte "
    "big-endian expiry and the root's signature over both). Never 304: a signed request always gets the full "
    "answer. 400: an invalid x-nonce; 503: signing keys not set up (flokit db upgrade)."
)

# The 200 answer's headers when the request sent x-nonce (the OpenAPI document lists them).
SIGNED_RESPONSE_HEADERS: Final = {
    "X-Signature-Time": "With x-nonce: the server's time when signing, in ms since the Unix epoch.",
    "X-Signature": "With x-nonce: base64 of the Ed25519 signature by the intermediate key over the signed message.",
    "X-Signature-Key-Id": "With x-nonce: the kid (RFC 7638 thumbprint) of the intermediate key that signed.",
    "X-Signature-Intermediate": "With x-nonce: base64 of the intermediate public key (32 bytes), its expiry "
    "(4 bytes, big-endian Unix seconds) and the root key's Ed25519 signature over those 36 bytes.",
}


@dataclass(frozen=True)
class _Loaded:
    signer: keys.Signer
    chain_b64: str
    expires_at_s: float
    fresh_until: float


class KeyRing:
    """The intermediate this process signs with, re-read at most once per `ttl` seconds (and at
    once when it expires); created on demand by the first signer when there is none."""

    def __init__(self, ttl: float = KEY_TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._loaded: _Loaded | None = None
        self._lock = threading.Lock()

    def signer(self, db: Database, instance_key: str) -> tuple[keys.Signer, str]:
        loaded, now = self._loaded, self._clock()
        if loaded is not None and loaded.fresh_until > now and loaded.expires_at_s > time.time():
            return loaded.signer, loaded.chain_b64
        with self._lock:
            loaded = self._loaded
            if loaded is not None and loaded.fresh_until > now and loaded.expires_at_s > time.time():
                return loaded.signer, loaded.chain_b64
            found = self._read(db, instance_key, loaded)
            self._loaded = _Loaded(
                signer=found,
                chain_b64=base64.b64encode(found.chain).decode(),
                expires_at_s=found.expires_at.timestamp(),
                fresh_until=now + self.ttl,
            )
            return found, self._loaded.chain_b64

    @staticmethod
    def _read(db: Database, instance_key: str, loaded: _Loaded | None) -> keys.Signer:
        at = utcnow()
        with db.read() as conn:
            found = keys.current_intermediate(conn, instance_key=instance_key, now=at)
        if found is not None:
            # The same key as before keeps its parsed object (nothing else changed in its row).
            return loaded.signer if loaded is not None and loaded.signer.kid == found.kid else found
        with db.write() as conn:
            return keys.signer(conn, instance_key=instance_key, now=at)


def _ring() -> KeyRing:
    found = current_app.extensions.get(CACHE)
    if found is None:
        found = current_app.extensions.setdefault(CACHE, KeyRing())
    return found


def requested_nonce() -> str | None:
    """The request's `x-nonce` when it has one (validated: 400 otherwise), else None."""
    raw = request.headers.get(NONCE_HEADER)
    if raw is None:
        return None
    try:
        return trusted.check_nonce(raw)
    except trusted.InvalidNonce as exc:
        raise ApiError(400, str(exc)) from None


def request_target() -> str:
    """The path and query string exactly as the client sent them (gunicorn's and werkzeug's
    RAW_URI), rebuilt from the parsed parts only when a server does not provide it."""
    raw = request.environ.get("RAW_URI") or request.environ.get("REQUEST_URI")
    if raw:
        return str(raw).encode("latin-1").decode("utf-8", "replace")
    query = request.query_string.decode("latin-1")
    return request.script_root + request.path + (f"?{query}" if query else "")


def sign(response: Response, *, nonce: str, user_id: str) -> Response:
    """Add the signature headers over the response's final body bytes."""
    settings = state().settings
    if not settings.instance_key:
        raise ApiError(503, "Signed answers are not available: the instance has no key yet (run flokit db upgrade)")
    try:
        signer, chain_b64 = _ring().signer(state().db, settings.instance_key)
    except keys.SigningKeysMissing:
        raise ApiError(503, "Signed answers are not available: no signing keys yet (run flokit db upgrade)") from None
    except SealError:
        raise ApiError(
            503, "Signed answers are not available: the signing keys do not open with this instance key"
        ) from None
    time_ms = str(time.time_ns() // 1_000_000)
    body = response.get_data()
    signed = trusted.message(
        nonce=nonce, method=request.method, target=request_target(), user_id=user_id, time_ms=time_ms, body=body
    )
    headers = response.headers
    # Vary set as text: `response.vary` parses and rebuilds the header, which costs here about as
    # much as the SHA-256 (profiled); the signature headers are new, so appended without a lookup.
    vary = headers.get("Vary")
    headers["Vary"] = f"{vary}, {NONCE_HEADER}" if vary else NONCE_HEADER
    headers.extend(
        (
            ("X-Signature-Time", time_ms),
            ("X-Signature", base64.b64encode(signer.private_key.sign(signed)).decode()),
            ("X-Signature-Key-Id", signer.kid),
            ("X-Signature-Intermediate", chain_b64),
        )
    )
    return response


class Jwk(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    kty: Literal["OKP"]
    crv: Literal["Ed25519"]
    x: str = Field(description="The raw 32-byte public key, base64url without padding.")
    kid: str = Field(description="RFC 7638 thumbprint; X-Signature-Key-Id names an intermediate by it.")
    alg: Literal["Ed25519"]
    use: Literal["sig"]
    flokit_role: Literal["root", "intermediate"] = Field(
        description="root: the key apps pin, it certifies intermediates; intermediate: signs answers."
    )
    flokit_expires_at: int | None = Field(
        description="Intermediates: the expiry in their chain (Unix seconds); null for the root."
    )


class Jwks(BaseModel):
    keys: list[Jwk]


@blueprint.get("/api/paywall/keys")
@per_address
@operation(
    summary="The keys that sign entitlement answers (JWKS)",
    description="The root key and the intermediates that have not expired (OKP/Ed25519, RFC 8037), newest first. "
    "For debugging and for servers: an app pins the root key (flokit admin signing-keys show) and checks each "
    "answer's intermediate against it, since a proxy on the device can rewrite this answer too. Cacheable for "
    f"{JWKS_MAX_AGE_S} s; a rotated intermediate stays listed until it expires. 503: no signing keys yet.",
    responses={200: Jwks},
    errors=(503,),
    tags=["entitlements"],
)
def signing_keys() -> Response:
    settings = state().settings
    if settings.instance_key:
        # The first call creates the intermediate, as the first signer would; without keys the
        # list below is empty or the root alone.
        with contextlib.suppress(keys.SigningKeysMissing, SealError):
            _ring().signer(state().db, settings.instance_key)
    with state().db.read() as conn:
        found = keys.published(conn, now=utcnow())
    if not found:
        raise ApiError(503, "No signing keys yet (run flokit db upgrade)")
    body = Jwks(
        keys=[
            Jwk(
                **trusted.jwk(k.public_key),
                flokit_role="root" if k.role == "root" else "intermediate",
                flokit_expires_at=int(k.expires_at.timestamp()) if k.expires_at is not None else None,
            )
            for k in found
        ]
    )
    response = respond(body)
    response.headers["Cache-Control"] = f"public, max-age={JWKS_MAX_AGE_S}"
    return response
