"""Signing outbound webhooks: our `Service-Signature` and, opt-in, Standard Webhooks headers.

Secrets look like `whsec_<base64 of 32 random bytes>`, the Standard Webhooks convention, so one
secret string configures both schemes:
- `Service-Signature` (the spec's scheme): HMAC-SHA256 keyed with the WHOLE secret string
  (UTF-8, prefix included) over `<t>.<raw body>`, `t` in Unix MILLISECONDS, lowercase hex.
- Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature`): HMAC-SHA256 keyed
  with the base64-DECODED part after `whsec_` over `<event id>.<t in seconds>.<raw body>`,
  `v1,<base64>` entries separated by spaces; `webhook-id` is the event id (stable across retries).
During a rotation overlap both secrets sign, giving two `v1` values in each scheme.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets as _secrets
from collections.abc import Sequence

SECRET_PREFIX = "whsec_"  # noqa: S105  (a prefix, not a secret)


def new_signing_secret(token: bytes | None = None) -> str:
    """`whsec_` + base64 of 256 random bits (deterministic when `token` is given, for tests)."""
    raw = token if token is not None else _secrets.token_bytes(32)
    return SECRET_PREFIX + base64.b64encode(raw).decode("ascii")


def service_v1(secret: str, t_ms: int, body: bytes) -> str:
    return hmac.new(secret.encode("utf-8"), f"{t_ms}.".encode("ascii") + body, hashlib.sha256).hexdigest()


def service_signature(body: bytes, secrets: Sequence[str], t_ms: int) -> str:
    """The `Service-Signature` value: `t=<ms>,v1=<hex>[,v1=<hex>]`, one v1 per signing secret."""
    if not 1 <= len(secrets) <= 2:
        raise ValueError("an endpoint signs with its active secret and at most one retiring secret")
    return ",".join([f"t={t_ms}", *(f"v1={service_v1(s, t_ms, body)}" for s in secrets)])


def standard_key(secret: str) -> bytes:
    """The Standard Webhooks HMAC key for one of our secrets: base64-decoded, prefix dropped."""
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def standard_signature(body: bytes, secrets: Sequence[str], msg_id: str, t_s: int) -> str:
    """The `webhook-signature` value: space-separated `v1,<base64>` entries."""
    signed = f"{msg_id}.{t_s}.".encode() + body
    return " ".join(
        "v1," + base64.b64encode(hmac.new(standard_key(s), signed, hashlib.sha256).digest()).decode("ascii")
        for s in secrets
    )


def request_headers(
    *,
    body: bytes,
    secrets: Sequence[str],
    now_ms: int,
    event_id: str,
    delivery_id: str,
    attempt: int,
    standard_webhooks: bool = False,
) -> dict[str, str]:
    """Every header of one physical send. Timestamp and signatures are fresh per call."""
    headers = {
        "Content-Type": "application/json",
        "Service-Signature": service_signature(body, secrets, now_ms),
        "Service-Event-Id": event_id,
        "Service-Delivery-Id": delivery_id,
        "Service-Attempt": str(attempt),
        "Idempotency-Key": event_id,
    }
    if standard_webhooks:
        t_s = now_ms // 1000
        headers |= {
            "webhook-id": event_id,
            "webhook-timestamp": str(t_s),
            "webhook-signature": standard_signature(body, secrets, event_id, t_s),
        }
    return headers
