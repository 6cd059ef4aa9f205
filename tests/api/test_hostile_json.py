"""Hostile JSON bodies: deep nesting is a 400 in the surface's error shape, before anything walks
the structure recursively, and a large nested body costs a worker megabytes, not hundreds of them."""

import json
import tracemalloc
from typing import Any

from flask.testing import FlaskClient

RECEIPT = "/api/paywall/receipt"  # no key needed: anyone on the internet can send it
IOS = {"provider": "ios_store", "signedTransactionInfo": "eyJhbGciOi.e30.c2ln"}  # a compact JWS
MAX_JSON_DEPTH = 32  # docs/spec-decisions.md
TOO_DEEP = f"Request body is nested too deeply: at most {MAX_JSON_DEPTH} levels of objects and arrays"


def nested(levels: int, leaf: Any = 1) -> Any:
    """`levels` levels of objects and arrays, alternating, around `leaf`."""
    value = leaf
    for i in range(levels):
        value = {"a": value} if i % 2 else [value]
    return value


def raw(data: bytes, client: FlaskClient, path: str = RECEIPT, **headers: str) -> Any:
    return client.post(path, data=data, headers={"Content-Type": "application/json", "x-user-id": "u-1", **headers})


def long_key_chain(size: int = 971 * 1024, depth: int = 900) -> bytes:
    """The reported body: objects nested `depth` deep, each under a key of about a kilobyte."""
    key = "k" * (size // depth - 6)
    return (('{"' + key + '":') * depth + "1" + "}" * depth).encode()


def test_json_nested_ten_thousand_deep_is_400_on_the_gateway_not_500(client: FlaskClient, workspace: dict) -> None:
    for body in ("[" * 10_000 + "]" * 10_000, '{"a":' * 10_000 + "1" + "}" * 10_000, "[" * 10_000):
        r = raw(body.encode(), client)
        assert r.status_code == 400 and r.json == {"error": TOO_DEEP}
        # With a (valid) key too, and on the funnel events route.
        r = raw(body.encode(), client, "/api/paywall/events", **{"x-app-key": workspace["app_key"]})
        assert r.status_code == 400 and r.json == {"error": TOO_DEEP}


def test_json_nested_too_deep_is_400_on_v1_in_its_shape(client: FlaskClient, workspace: dict) -> None:
    event = '{"event": "e", "user_id": "u", "timestamp": "2026-11-21T00:00:00Z", "properties": {"x": %s}}'
    body = (event % ("[" * 10_000 + "]" * 10_000)).encode()
    r = raw(body, client, "/v1/events", Authorization=f"Bearer {workspace['api_key_read_write']}")
    assert r.status_code == 400 and r.json == {"error": "invalid_request", "message": TOO_DEEP}


def test_the_depth_limit_is_exactly_32_levels(client: FlaskClient) -> None:
    """The top-level object is level 1. 32 levels pass validation (then 422: no app has store identities here)."""
    at_limit = {**IOS, "extra": nested(MAX_JSON_DEPTH - 1)}
    assert raw(json.dumps(at_limit).encode(), client).status_code == 422
    over = {**IOS, "extra": nested(MAX_JSON_DEPTH)}
    r = raw(json.dumps(over).encode(), client)
    assert r.status_code == 400 and r.json == {"error": TOO_DEEP}
    # Brackets inside strings are text, not nesting; escaped quotes do not end a string.
    texty = {**IOS, "extra": "[{" * 5000 + '\\"[' * 100, "more": ["]}" * 5000]}
    assert raw(json.dumps(texty).encode(), client).status_code == 422
    # Other encodings JSON allows are read the same way as UTF-8.
    assert raw(json.dumps(over).encode("utf-16"), client).json == {"error": TOO_DEEP}
    assert raw(json.dumps(at_limit).encode("utf-16"), client).status_code == 422


def test_a_nul_deep_inside_is_still_named_by_its_path(client: FlaskClient) -> None:
    body = {**IOS, "extra": {"a": [1, {"b": ["ok", "x\x00"]}]}}
    r = raw(json.dumps(body).encode(), client)
    assert r.status_code == 400
    assert r.json == {"error": "Invalid body field 'extra.a.1.b.1': must not contain NUL characters"}
    key = {**IOS, "extra": {"a": [{"k\x00": 1}]}}
    assert raw(json.dumps(key).encode(), client).json["error"].startswith("Invalid body field 'extra.a.0.k")
    # Invalid JSON is still its own 400.
    assert raw(b'{"provider": ', client).json == {"error": "Request body is not valid JSON"}


def peak_memory(body: bytes, client: FlaskClient) -> tuple[Any, int]:
    """The answer to posting `body`, and the peak bytes Python allocated while serving it."""
    tracemalloc.start()
    try:
        r = raw(body, client)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return r, peak


def test_the_971_kb_nested_body_costs_megabytes_not_hundreds(client: FlaskClient) -> None:
    body = long_key_chain()
    assert 960 * 1024 < len(body) < 1024 * 1024  # under the body limit: this is about nesting
    raw(b"{}", client)  # the first request's one-off allocations (imports, caches) are not counted
    r, peak = peak_memory(body, client)
    assert peak < 16 * 1024 * 1024, f"peak {peak / 2**20:.0f} MiB"
    assert r.status_code == 400 and r.json == {"error": TOO_DEEP}


def test_a_wide_body_within_the_depth_limit_with_long_keys_stays_small(client: FlaskClient) -> None:
    """The NUL walk builds a path only for the NUL it found: 32 levels of 30 KB keys are not 32 copies."""
    key = "k" * 30_000
    value: Any = "x"
    for _ in range(MAX_JSON_DEPTH - 1):
        value = {key: value}
    body = json.dumps({**IOS, "extra": value}).encode()
    r, peak = peak_memory(body, client)
    assert peak < 8 * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB"
    assert r.status_code == 422  # valid: on to the (unconfigured) verifier
