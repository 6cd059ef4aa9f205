"""The reference verifier for `Service-Signature` (standard library only: copy it freely).

    verdict = verify(raw_body, request.headers.getlist("Service-Signature"), [secret], now_ms)
    if not verdict: return 400  # verdict.reason says why

Rules (spec "Outbound webhook signature"), checked in this order:
1. Unsigned (no header, empty header, empty list) -> `unsigned`. A LIST of header values (what a
   receiver gets from `headers.getlist(...)` / `get_all(...)`) with more than one entry -> a second
   signature header field -> `duplicate_header`. A plain string is one header field.
2. Header at most 1024 characters; 1 or 2 secrets, each a non-empty string of at most 4096
   characters; raw body (bytes) at most 262144 bytes.
3. Grammar: comma-separated `name=value` items, no spaces, no empty items; names are lowercase
   `[a-z][a-z0-9]*`. Names other than `t` and `v1` are ignored (forward compatibility for
   future schemes, like Stripe's `v0`), but still count toward the length bound.
4. Exactly one `t`: `0` or 1-16 digits without a leading zero, at most 2**53-1 (a safe integer).
5. 1 to 8 `v1` values, each exactly 64 lowercase hex characters.
6. |now_ms - t| <= 300000 (5 minutes either way; inclusive).
7. Accept when any `v1` equals HMAC-SHA256(secret, "<t>." + raw_body) for any secret; every
   comparison is `hmac.compare_digest`, and all pairs are compared (no early exit).
Note: `t` is Unix MILLISECONDS, unlike Stripe's seconds.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass

MAX_BODY_BYTES = 262_144
MAX_HEADER_CHARS = 1024
MAX_SECRET_CHARS = 4096
MAX_SECRETS = 2
MAX_V1 = 8
TOLERANCE_MS = 300_000
MAX_SAFE_INTEGER = 2**53 - 1

_ITEM = re.compile(r"([a-z][a-z0-9]*)=([^,=\s]*)")
_TIMESTAMP = re.compile(r"0|[1-9][0-9]{0,15}")
_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Verdict:
    """`ok` and, when not ok, a short machine-readable `reason`. Truthy exactly when ok."""

    ok: bool
    reason: str = "ok"

    def __bool__(self) -> bool:
        return self.ok


def _reject(reason: str) -> Verdict:
    return Verdict(False, reason)


def _one_header(signature_header: str | Sequence[str] | None) -> str | Verdict:
    """The header's one value, or why there is none (absent, empty, sent twice, not text)."""
    if signature_header is None:
        return _reject("unsigned")
    if not isinstance(signature_header, str):
        values = list(signature_header)
        if len(values) > 1:
            return _reject("duplicate_header")
        if not values:
            return _reject("unsigned")
        signature_header = values[0]
    if not isinstance(signature_header, str):
        return _reject("malformed_header")
    if signature_header == "":
        return _reject("unsigned")
    if len(signature_header) > MAX_HEADER_CHARS:
        return _reject("header_too_long")
    return signature_header


def _bad_inputs(raw_body: bytes, secrets: Sequence[str], now_ms: int) -> Verdict | None:
    """A refusal for inputs a caller got wrong (the secrets, the body's type and size, the clock)."""
    if isinstance(secrets, str) or not 1 <= len(secrets) <= MAX_SECRETS:
        return _reject("bad_secrets")
    if any(not isinstance(s, str) or not s or len(s) > MAX_SECRET_CHARS for s in secrets):
        return _reject("bad_secrets")
    if not isinstance(raw_body, bytes | bytearray | memoryview):
        return _reject("body_not_bytes")
    if len(raw_body) > MAX_BODY_BYTES:
        return _reject("body_too_large")
    if isinstance(now_ms, bool) or not isinstance(now_ms, int):
        return _reject("bad_clock")
    return None


def _parse(header: str) -> tuple[str, list[str]] | Verdict:
    """The header's one timestamp and its `v1` signatures, or why the header is refused."""
    timestamps: list[str] = []
    signatures: list[str] = []
    for item in header.split(","):
        match = _ITEM.fullmatch(item)
        if match is None:
            return _reject("malformed_header")
        name, value = match.groups()
        if name == "t":
            timestamps.append(value)
        elif name == "v1":
            signatures.append(value)
    if not timestamps:
        return _reject("missing_timestamp")
    if len(timestamps) > 1:
        return _reject("duplicate_timestamp")
    t_text = timestamps[0]
    if _TIMESTAMP.fullmatch(t_text) is None or int(t_text) > MAX_SAFE_INTEGER:
        return _reject("malformed_timestamp")
    if not signatures:
        return _reject("no_signature")
    if len(signatures) > MAX_V1:
        return _reject("too_many_signatures")
    if any(_HEX64.fullmatch(v) is None for v in signatures):
        return _reject("malformed_signature")
    return t_text, signatures


def verify(
    raw_body: bytes,
    signature_header: str | Sequence[str] | None,
    secrets: Sequence[str],
    now_ms: int,
) -> Verdict:
    """Verify one request; see the module docstring for every rule and bound.

    The checks run in the order the refusal reasons are documented: the header first, then the
    caller's inputs, then the header's contents, the clock, and last the signatures."""
    header = _one_header(signature_header)
    if isinstance(header, Verdict):
        return header
    refused = _bad_inputs(raw_body, secrets, now_ms)
    if refused is not None:
        return refused
    parsed = _parse(header)
    if isinstance(parsed, Verdict):
        return parsed
    t_text, signatures = parsed
    if abs(now_ms - int(t_text)) > TOLERANCE_MS:
        return _reject("timestamp_out_of_tolerance")

    message = t_text.encode("ascii") + b"." + bytes(raw_body)
    matched = False
    for secret in secrets:
        expected = hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()
        for candidate in signatures:
            # `|=` rather than `or`: every pair is compared, so timing says nothing about which matched.
            matched |= hmac.compare_digest(expected, candidate)
    return Verdict(True) if matched else _reject("signature_mismatch")
