"""Opaque, type-prefixed identifiers (`ws_`, `act_`, `evt_`, ...) and API key material.

Ids carry 128 bits of randomness in base32 lowercase: URL-safe, case-insensitive-safe, short.
Randomness is an input like any other: callers may pass `token` for deterministic tests.
"""

from __future__ import annotations

import base64
import hashlib
import secrets

# The longest id a column holds and a request field accepts: ours are at most 31 characters
# (`sync_` + 26), so 40 leaves room for a longer prefix without a migration.
ID_MAX_LENGTH = 40

PREFIXES = frozenset(
    {"ws", "key", "app", "act", "int", "sync", "evt", "dlv", "whe", "req", "grt", "ntf", "adacct", "adsync", "exp"}
)


def _b32(raw: bytes) -> str:
    return base64.b32encode(raw).decode("ascii").rstrip("=").lower()


def new_id(prefix: str, token: bytes | None = None) -> str:
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}")
    return f"{prefix}_{_b32(token if token is not None else secrets.token_bytes(16))}"


def new_api_key(token: bytes | None = None) -> str:
    """A secret v1 API key: `flk_` then 256 bits of randomness."""
    return "flk_" + _b32(token if token is not None else secrets.token_bytes(32))


def new_publishable_key(token: bytes | None = None) -> str:
    """An app's publishable key (`pk_`): identifies the app, not a secret."""
    return "pk_" + _b32(token if token is not None else secrets.token_bytes(20))


def hash_api_key(key: str) -> str:
    """SHA-256 hex of a key: what we store and look up. A fast hash is right here because keys
    are 256-bit random strings, not guessable passwords."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def key_prefix(key: str) -> str:
    return key[:12]
