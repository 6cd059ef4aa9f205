"""Secrets at rest: every secret FloKit keeps is sealed with a key derived from the one instance key.

One instance key (ARCHITECTURE, "Decisions for the second wave") and a key per purpose derived
from it with HKDF-SHA256 (RFC 5869): a provider credential sealed for "integration-credentials"
cannot be opened as anything else, and no purpose's key reveals another's. Sealing is AES-256-GCM
(authenticated: a flipped bit, a value copied to another row, or another instance's key fails to
open rather than decrypt to garbage); `context` is bound as associated data, so a sealed value
copied to another row (another integration id) does not open there.

The nonce is 96 random bits per seal, as NIST SP 800-38D recommends for a key that seals fewer
than 2^32 values; randomness here is the cipher's requirement, not data a user sees.
"""

from __future__ import annotations

import base64
import os
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

# A sealed value: "v1." + base64url(nonce || ciphertext || tag). The version names the scheme, so
# a later one can be read beside it.
VERSION: Final = "v1"
NONCE_BYTES: Final = 12
KEY_BYTES: Final = 32
# The instance key is at least this long: 256 bits of randomness as 43 base64url characters.
MIN_INSTANCE_KEY_CHARS: Final = 43


class SealError(ValueError):
    """A sealed value that does not open: another key, another purpose or context, or altered."""


def derive_key(instance_key: str, purpose: str) -> bytes:
    """The 256-bit key of one purpose (HKDF-SHA256, the purpose as `info`)."""
    hkdf = HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=f"flokit/{purpose}".encode())
    return hkdf.derive(instance_key.encode())


def seal(instance_key: str, purpose: str, plaintext: bytes, *, context: str = "") -> str:
    nonce = os.urandom(NONCE_BYTES)
    sealed = AESGCM(derive_key(instance_key, purpose)).encrypt(nonce, plaintext, context.encode())
    return f"{VERSION}.{base64.urlsafe_b64encode(nonce + sealed).decode().rstrip('=')}"


def unseal(instance_key: str, purpose: str, sealed: str, *, context: str = "") -> bytes:
    version, _, body = sealed.partition(".")
    if version != VERSION or not body:
        raise SealError(f"not a sealed value of scheme {VERSION}")
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except ValueError as exc:
        raise SealError("not a sealed value: bad encoding") from exc
    if len(raw) <= NONCE_BYTES:
        raise SealError("not a sealed value: too short")
    try:
        return AESGCM(derive_key(instance_key, purpose)).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], context.encode())
    except InvalidTag as exc:
        raise SealError("the sealed value does not open with this instance key, purpose and context") from exc
