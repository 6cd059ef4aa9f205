"""The reference verifier on every rule and bound (each limit and one past it), signing
round-trips (hypothesis), envelopes, the Standard Webhooks mapping and the backoff schedule."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook

from transforms.webhooks.backoff import MAX_ATTEMPTS, RETRY_DELAYS_S, next_attempt_at, retry_delay
from transforms.webhooks.envelope import EVENT_TYPES, UnknownEventType, envelope, freeze
from transforms.webhooks.signing import (
    new_signing_secret,
    request_headers,
    service_signature,
    service_v1,
    standard_signature,
)
from transforms.webhooks.verify import MAX_SAFE_INTEGER, verify

SECRET = new_signing_secret(bytes(range(32)))
OTHER = new_signing_secret(bytes(range(1, 33)))
BODY = b'{"id":"evt_1","type":"action.approved"}'
NOW = 1_763_700_000_000


def sig(t: int | str, body: bytes = BODY, secret: str = SECRET) -> str:
    return hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()


def header(t: int | str = NOW, *v1: str) -> str:
    return ",".join([f"t={t}", *(f"v1={v}" for v in (v1 or (sig(t),)))])


GOOD = header()
PADDING_V1 = "0" * 64  # well-formed, never matches


def long_secret(n: int) -> str:
    return "whsec_" + "a" * (n - 6)


# (name, body, header, secrets, now_ms, expected reason)
CASES = [
    ("valid", BODY, GOOD, [SECRET], NOW, "ok"),
    ("missing header", BODY, None, [SECRET], NOW, "unsigned"),
    ("empty header", BODY, "", [SECRET], NOW, "unsigned"),
    ("empty header list", BODY, [], [SECRET], NOW, "unsigned"),
    ("one header in a list", BODY, [GOOD], [SECRET], NOW, "ok"),
    ("second signature header field", BODY, [GOOD, GOOD], [SECRET], NOW, "duplicate_header"),
    ("wrong secret", BODY, GOOD, [OTHER], NOW, "signature_mismatch"),
    ("either of two secrets", BODY, GOOD, [OTHER, SECRET], NOW, "ok"),
    ("second v1 matches", BODY, header(NOW, PADDING_V1, sig(NOW)), [SECRET], NOW, "ok"),
    ("zero secrets", BODY, GOOD, [], NOW, "bad_secrets"),
    ("three secrets", BODY, GOOD, [SECRET, OTHER, SECRET], NOW, "bad_secrets"),
    ("empty secret", BODY, GOOD, [""], NOW, "bad_secrets"),
    ("secret as bare string", BODY, GOOD, SECRET, NOW, "bad_secrets"),
    # secret length: 4096 accepted, 4097 rejected
    ("secret 4096 chars", BODY, header(NOW, sig(NOW, secret=long_secret(4096))), [long_secret(4096)], NOW, "ok"),
    (
        "secret 4097 chars",
        BODY,
        header(NOW, sig(NOW, secret=long_secret(4097))),
        [long_secret(4097)],
        NOW,
        "bad_secrets",
    ),
    # body size: 262144 accepted, 262145 rejected
    ("body 262144 bytes", b"x" * 262_144, header(NOW, sig(NOW, b"x" * 262_144)), [SECRET], NOW, "ok"),
    ("body 262145 bytes", b"x" * 262_145, header(NOW, sig(NOW, b"x" * 262_145)), [SECRET], NOW, "body_too_large"),
    ("body as str", BODY.decode(), GOOD, [SECRET], NOW, "body_not_bytes"),
    ("empty body signed", b"", header(NOW, sig(NOW, b"")), [SECRET], NOW, "ok"),
    # v1 count: 8 accepted, 9 rejected
    ("8 v1 values", BODY, header(NOW, *[PADDING_V1] * 7, sig(NOW)), [SECRET], NOW, "ok"),
    ("9 v1 values", BODY, header(NOW, *[PADDING_V1] * 8, sig(NOW)), [SECRET], NOW, "too_many_signatures"),
    ("no v1", BODY, f"t={NOW}", [SECRET], NOW, "no_signature"),
    # v1 shape: exactly 64 lowercase hex
    ("v1 uppercase hex", BODY, header(NOW, sig(NOW).upper()), [SECRET], NOW, "malformed_signature"),
    ("v1 63 chars", BODY, header(NOW, sig(NOW)[:63]), [SECRET], NOW, "malformed_signature"),
    ("v1 65 chars", BODY, header(NOW, sig(NOW) + "0"), [SECRET], NOW, "malformed_signature"),
    ("v1 empty", BODY, f"t={NOW},v1=", [SECRET], NOW, "malformed_signature"),
    ("v1 not hex", BODY, header(NOW, "g" * 64), [SECRET], NOW, "malformed_signature"),
    # t: exactly one, 0 or 1-16 digits without leading zero, safe integer
    ("no t", BODY, f"v1={sig(NOW)}", [SECRET], NOW, "missing_timestamp"),
    ("two t", BODY, f"t={NOW},t={NOW},v1={sig(NOW)}", [SECRET], NOW, "duplicate_timestamp"),
    ("t zero", BODY, header(0, sig(0)), [SECRET], 0, "ok"),
    ("t leading zero", BODY, header(f"0{NOW}", sig(f"0{NOW}")), [SECRET], NOW, "malformed_timestamp"),
    ("t negative", BODY, header(-1, sig(-1)), [SECRET], 0, "malformed_timestamp"),
    ("t with plus", BODY, header(f"+{NOW}", sig(f"+{NOW}")), [SECRET], NOW, "malformed_timestamp"),
    ("t decimal", BODY, header(f"{NOW}.0", sig(f"{NOW}.0")), [SECRET], NOW, "malformed_timestamp"),
    ("t empty", BODY, f"t=,v1={sig(NOW)}", [SECRET], NOW, "malformed_timestamp"),
    ("t 16 digits safe", BODY, header(10**15, sig(10**15)), [SECRET], 10**15, "ok"),
    ("t 17 digits", BODY, header(10**16, sig(10**16)), [SECRET], 10**16, "malformed_timestamp"),
    ("t = 2**53-1", BODY, header(MAX_SAFE_INTEGER, sig(MAX_SAFE_INTEGER)), [SECRET], MAX_SAFE_INTEGER, "ok"),
    ("t = 2**53", BODY, header(2**53, sig(2**53)), [SECRET], 2**53, "malformed_timestamp"),
    # tolerance: +-300000 ms inclusive
    ("t 300000 ms old", BODY, GOOD, [SECRET], NOW + 300_000, "ok"),
    ("t 300001 ms old", BODY, GOOD, [SECRET], NOW + 300_001, "timestamp_out_of_tolerance"),
    ("t 300000 ms ahead", BODY, GOOD, [SECRET], NOW - 300_000, "ok"),
    ("t 300001 ms ahead", BODY, GOOD, [SECRET], NOW - 300_001, "timestamp_out_of_tolerance"),
    (
        "t in seconds (Stripe style)",
        BODY,
        header(NOW // 1000, sig(NOW // 1000)),
        [SECRET],
        NOW,
        "timestamp_out_of_tolerance",
    ),
    # grammar
    ("space after comma", BODY, f"t={NOW}, v1={sig(NOW)}", [SECRET], NOW, "malformed_header"),
    ("trailing comma", BODY, GOOD + ",", [SECRET], NOW, "malformed_header"),
    ("item without =", BODY, GOOD + ",v1", [SECRET], NOW, "malformed_header"),
    ("uppercase name", BODY, f"T={NOW},v1={sig(NOW)}", [SECRET], NOW, "malformed_header"),
    ("sha256= form", BODY, f"sha256={sig(NOW)}", [SECRET], NOW, "missing_timestamp"),
    ("unknown scheme ignored", BODY, GOOD + ",v0=abc", [SECRET], NOW, "ok"),
    ("only unknown scheme signs", BODY, f"t={NOW},v0={sig(NOW)}", [SECRET], NOW, "no_signature"),
    ("bool clock", BODY, GOOD, [SECRET], True, "bad_clock"),
]


def _header_of_length(n: int) -> str:
    base = GOOD + ",x="
    return base + "a" * (n - len(base))


CASES += [
    ("header 1024 chars", BODY, _header_of_length(1024), [SECRET], NOW, "ok"),
    ("header 1025 chars", BODY, _header_of_length(1025), [SECRET], NOW, "header_too_long"),
]


@pytest.mark.parametrize(
    ("body", "signature_header", "secrets", "now_ms", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_verifier_rules_and_bounds(body, signature_header, secrets, now_ms, reason) -> None:
    verdict = verify(body, signature_header, secrets, now_ms)
    assert verdict.reason == reason
    assert bool(verdict) is (reason == "ok")


@given(body=st.binary(max_size=2048), t=st.integers(0, MAX_SAFE_INTEGER), data=st.data())
def test_sign_then_verify_round_trips_and_any_changed_byte_fails(body: bytes, t: int, data: st.DataObject) -> None:
    signed = service_signature(body, [SECRET], t)
    assert verify(body, signed, [SECRET], t)
    if body:
        i = data.draw(st.integers(0, len(body) - 1))
        flip = data.draw(st.integers(1, 255))
        tampered = body[:i] + bytes([body[i] ^ flip]) + body[i + 1 :]
        assert verify(tampered, signed, [SECRET], t).reason == "signature_mismatch"
    j = data.draw(st.integers(0, len(signed) - 1))
    replacement = data.draw(st.sampled_from("0123456789abcdef=,t v"))
    changed = signed[:j] + replacement + signed[j + 1 :]
    if changed != signed:
        assert not verify(body, changed, [SECRET], t)


def test_rotation_signs_twice_and_each_secret_verifies_alone() -> None:
    value = service_signature(BODY, [SECRET, OTHER], NOW)
    assert value == f"t={NOW},v1={sig(NOW)},v1={sig(NOW, secret=OTHER)}"
    assert verify(BODY, value, [SECRET], NOW) and verify(BODY, value, [OTHER], NOW)
    with pytest.raises(ValueError, match="at most one retiring"):
        service_signature(BODY, [SECRET, OTHER, SECRET], NOW)


def test_documented_test_vector() -> None:
    """The vector printed in docs/webhooks.md."""
    secret = new_signing_secret(bytes(32))
    assert secret == "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
    body = (
        b'{"id":"evt_test","type":"action.approved","created_at":"2026-11-21T12:00:00.000Z",'
        b'"workspace_id":"ws_test","data":{}}'
    )
    assert service_v1(secret, 1763726400000, body) == VECTOR_V1
    assert standard_signature(body, [secret], "evt_test", 1763726400) == VECTOR_STANDARD
    # The standardwebhooks library itself signs the same bytes to the same value.
    stamp = datetime.fromtimestamp(1763726400, UTC)
    assert Webhook(secret).sign("evt_test", stamp, body.decode()) == VECTOR_STANDARD


VECTOR_V1 = "437b1bac2f9fe8ce7f742c0a29381a9449e4fb8a9218863384af828c033be67a"
VECTOR_STANDARD = "v1,+b4JPdgvyGQjrBfFOPQrEYapXGeI8aI9fgnET2+BGq0="


def test_request_headers_carry_everything_and_standard_webhooks_verify() -> None:
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    h = request_headers(
        body=BODY,
        secrets=[SECRET],
        now_ms=now_ms,
        event_id="evt_1",
        delivery_id="dlv_1",
        attempt=3,
        standard_webhooks=True,
    )
    assert h["Content-Type"] == "application/json"
    assert h["Service-Event-Id"] == h["Idempotency-Key"] == h["webhook-id"] == "evt_1"
    assert h["Service-Delivery-Id"] == "dlv_1" and h["Service-Attempt"] == "3"
    assert h["webhook-timestamp"] == str(now_ms // 1000)
    assert verify(BODY, h["Service-Signature"], [SECRET], now_ms)
    assert Webhook(SECRET).verify(BODY, h) == json.loads(BODY)
    plain = request_headers(body=BODY, secrets=[SECRET], now_ms=now_ms, event_id="e", delivery_id="d", attempt=1)
    assert not any(k.startswith("webhook-") for k in plain)


def test_standard_key_is_the_decoded_secret() -> None:
    body, t = b"{}", 1700000000
    expected = base64.b64encode(hmac.new(bytes(range(32)), b"msg_1.1700000000.{}", hashlib.sha256).digest()).decode()
    assert standard_signature(body, [SECRET], "msg_1", t) == f"v1,{expected}"


def test_envelope_is_frozen_compact_and_ordered() -> None:
    created = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    env = envelope(
        event_id="evt_1", event_type="action.approved", created_at=created, workspace_id="ws_1", data={"é": 1}
    )
    assert list(env) == ["id", "type", "created_at", "workspace_id", "data"]
    expected = '{"id":"evt_1","type":"action.approved","created_at":"2026-11-21T12:00:00.000Z",'
    assert freeze(env) == (expected + '"workspace_id":"ws_1","data":{"é":1}}').encode()
    test_env = envelope(
        event_id="e", event_type="integration.error", created_at=created, workspace_id="w", data={}, test=True
    )
    assert test_env["test"] is True
    assert len(EVENT_TYPES) == 9  # the spec's six and issue 35's experiment.started, stopped, srm_detected
    with pytest.raises(UnknownEventType):
        envelope(event_id="e", event_type="action.deleted", created_at=created, workspace_id="w", data={})


def test_backoff_schedule() -> None:
    assert RETRY_DELAYS_S == (30, 120, 600, 3600, 21600) and MAX_ATTEMPTS == 6
    assert [retry_delay(n) for n in range(1, 7)] == [timedelta(seconds=s) for s in RETRY_DELAYS_S] + [None]
    assert retry_delay(2, scale=0.5) == timedelta(seconds=60)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert next_attempt_at(1, now, 0) == now and next_attempt_at(6, now) is None
    with pytest.raises(ValueError, match="numbered from 1"):
        retry_delay(0)
