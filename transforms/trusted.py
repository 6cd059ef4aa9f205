"""Signed entitlement answers (issue 36 part 1): the pure parts, no database and no clock.

A request to an entitlement read that carries `x-nonce` gets an answer signed with Ed25519 by an
*intermediate* key, and the intermediate's public key comes with the answer, certified by the
long-lived *root* key an app pins (RevenueCat's Trusted Entitlements design). A proxy on the
device can rewrite the body or the keys it sees, but it cannot make the pinned root vouch for its
own key, so the app detects the forgery.

This module holds what both sides must agree on byte for byte: the nonce's syntax, the signed
message, the intermediate's chain (`public key (32) || expiry (4, big-endian Unix seconds) ||
root signature (64) over the first 36 bytes`), and the key ids (RFC 7638 thumbprints), so the
reference verifier in docs/trusted-entitlements.md and the server cannot drift apart silently.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

MESSAGE_VERSION: Final = "flokit-entitlement-v1"
NONCE_MIN_BYTES: Final = 12
NONCE_MAX_BYTES: Final = 32
PUBLIC_KEY_BYTES: Final = 32
SIGNATURE_BYTES: Final = 64
EXPIRY_BYTES: Final = 4
CHAIN_BYTES: Final = PUBLIC_KEY_BYTES + EXPIRY_BYTES + SIGNATURE_BYTES  # 100

# Standard base64 (RFC 4648 §4): padding optional, nothing else (no whitespace, no URL alphabet).
_STANDARD_B64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")


class InvalidNonce(ValueError):
    """An `x-nonce` that is not 12 to 32 bytes in standard base64."""


class InvalidChain(ValueError):
    """An intermediate chain of the wrong size or not signed by the given root."""


def check_nonce(raw: str) -> str:
    """`raw` as sent when it is standard base64 (padding optional) of 12 to 32 bytes; else
    InvalidNonce. The value is signed as sent, not re-encoded, so the client compares what it
    made; validating it keeps the answer's message unambiguous and rejects a client bug early."""
    if not raw or not _STANDARD_B64.fullmatch(raw):
        raise InvalidNonce("x-nonce must be 12 to 32 random bytes in standard base64")
    unpadded = raw.rstrip("=")
    if len(unpadded) % 4 == 1 or (raw != unpadded and len(raw) % 4):
        raise InvalidNonce("x-nonce must be 12 to 32 random bytes in standard base64 (bad length or padding)")
    try:
        decoded = base64.b64decode(unpadded + "=" * (-len(unpadded) % 4), validate=True)
    except binascii.Error as exc:
        raise InvalidNonce("x-nonce must be 12 to 32 random bytes in standard base64") from exc
    if not NONCE_MIN_BYTES <= len(decoded) <= NONCE_MAX_BYTES:
        raise InvalidNonce(f"x-nonce must decode to 12 to 32 bytes, got {len(decoded)}")
    return raw


def message(*, nonce: str, method: str, target: str, user_id: str, time_ms: str, body: bytes) -> bytes:
    """The bytes the intermediate key signs: the lines joined by "\\n". No line can hold a raw
    newline (header values and request targets cannot), so the framing is unambiguous."""
    lines = (MESSAGE_VERSION, nonce, method, target, user_id, time_ms, hashlib.sha256(body).hexdigest())
    return "\n".join(lines).encode()


def raw_public(key: Ed25519PrivateKey | Ed25519PublicKey) -> bytes:
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return public.public_bytes(Encoding.Raw, PublicFormat.Raw)


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def kid(public_key: bytes) -> str:
    """The key id: the RFC 7638 thumbprint of the OKP JWK (required members, sorted, no
    whitespace), so anyone holding the public key can recompute it and no registry is needed."""
    canonical = json.dumps({"crv": "Ed25519", "kty": "OKP", "x": b64url(public_key)}, separators=(",", ":"))
    return b64url(hashlib.sha256(canonical.encode()).digest())


def jwk(public_key: bytes) -> dict[str, str]:
    """The public JWK of an Ed25519 key (RFC 8037 §2); `alg` is RFC 9864's fully specified name."""
    return {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": b64url(public_key),
        "kid": kid(public_key),
        "alg": "Ed25519",
        "use": "sig",
    }


def certify(root: Ed25519PrivateKey, intermediate_public: bytes, expires_at_s: int) -> bytes:
    """The intermediate's chain: public key || expiry || the root's signature over both."""
    if len(intermediate_public) != PUBLIC_KEY_BYTES:
        raise ValueError("an Ed25519 public key is 32 bytes")
    certified = intermediate_public + expires_at_s.to_bytes(EXPIRY_BYTES, "big")
    return certified + root.sign(certified)


def open_chain(chain: bytes, root_public: bytes) -> tuple[bytes, int]:
    """The intermediate public key and its expiry (Unix seconds) when `root_public` signed them;
    else InvalidChain. The server checks its own chains with it; the doc's verifier does the same."""
    if len(chain) != CHAIN_BYTES:
        raise InvalidChain(f"an intermediate chain is {CHAIN_BYTES} bytes, got {len(chain)}")
    certified, signature = chain[: PUBLIC_KEY_BYTES + EXPIRY_BYTES], chain[PUBLIC_KEY_BYTES + EXPIRY_BYTES :]
    try:
        Ed25519PublicKey.from_public_bytes(root_public).verify(signature, certified)
    except InvalidSignature as exc:
        raise InvalidChain("the intermediate key is not signed by this root") from exc
    return certified[:PUBLIC_KEY_BYTES], int.from_bytes(certified[PUBLIC_KEY_BYTES:], "big")
