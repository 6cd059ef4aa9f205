"""Provider webhook passthrough: bytes and signature headers reach a real downstream unchanged;
its answer comes back as is; unreachable is 502, too slow is 504."""

import json
import time
from dataclasses import replace

from flask.testing import FlaskClient

from api.app import create_app
from api.passthrough.forward import FORWARDED_HEADERS, PATHS
from tests.support import free_port
from tests.support.webhook_receiver import running_receiver
from warehouse.settings import Settings

# A body whose every byte matters to a signature: odd spacing, key order, unicode, a trailing newline.
BODY = b'{"type":"invoice.paid",  "data":{"amount":1999,"name":"J\xc3\xbcrgen"}}\n'


def client_for(settings: Settings, url: str | None, timeout: float = 10.0) -> FlaskClient:
    return create_app(replace(settings, passthrough_url=url, passthrough_timeout_s=timeout)).test_client()


# Each provider's real signature/authentication headers, as sent (values kept odd on purpose: spacing,
# `=`, commas, a JWT). Sent to every path; each path forwards only its own (FORWARDED_HEADERS).
SIGNATURES = {
    "Stripe-Signature": "t=1732363200,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8,v0=6ffbb59b",
    "Authorization": "Bearer eyJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJodHRwczovL2Zsb2tpdCJ9.c2ln",
    "X-RevenueCat-Signature": "sha256=9f2c1e",
    "webhook-id": "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W",
    "webhook-timestamp": "1674087231",
    "webhook-signature": "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4= v1,bm9ybWFs",
}
# What a caller may add that no provider needs, and that must never reach the downstream.
HOSTILE = {
    "Cookie": "session=stolen; flk=1",
    "X-App-Key": "app_key_of_someone",
    "X-App-Token": "ast_token.of_someone",
    "X-User-Id": "user-7",
    "Connection": "keep-alive, X-Hop-Secret",
    "X-Hop-Secret": "named in Connection",
    "X-Forwarded-Host": "evil.example",
    "X-Forwarded-Proto": "gopher",
    "Forwarded": "for=198.51.100.66;host=evil.example;proto=https",
    "X-Real-Ip": "198.51.100.66",
    "X-Debug": "1",
}
ALLOWED = {
    "Content-Type": "application/json; charset=utf-8",
    "User-Agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
}


def test_every_path_is_forwarded_byte_for_byte_with_its_signature_headers(settings: Settings) -> None:
    with running_receiver() as downstream:
        client = client_for(settings, downstream.url)
        for path in PATHS:
            response = client.post(
                path + "?attempt=2",
                data=BODY,
                headers={**ALLOWED, **SIGNATURES, **HOSTILE, "X-Forwarded-For": "203.0.113.9"},
            )
            assert response.status_code == 200 and response.data == b"ok", path
        assert [r.path for r in downstream.requests] == [p + "?attempt=2" for p in PATHS]
        for received in downstream.requests:
            path = received.path.split("?")[0]
            assert received.body == BODY
            for name, value in ALLOWED.items():
                assert received.header(name) == value, (path, name)
            own = {n.lower() for n in FORWARDED_HEADERS[path]}
            for name, value in SIGNATURES.items():
                assert received.all(name) == ([value] if name.lower() in own else []), (path, name)
            for name in HOSTILE.keys() - {"X-Forwarded-Host", "X-Forwarded-Proto", "Connection"}:
                assert received.all(name) == [], (path, name)
            assert received.all("Connection") == ["keep-alive"], path  # the HTTP client's own, not the caller's
            # FloKit's own forwarding headers, from the address it saw (no trusted proxy here).
            assert received.header("X-Forwarded-For") == "127.0.0.1", path
            assert received.header("X-Forwarded-Host") == "localhost", path
            assert received.header("X-Forwarded-Proto") == "http", path
            names = {k.lower() for k, _ in received.headers}
            assert names <= {n.lower() for n in ALLOWED} | own | FLOKIT_SET, (path, names - own)


# Added by FloKit or its HTTP client, never copied from the caller.
FLOKIT_SET = {"host", "content-length", "accept", "accept-encoding", "connection"} | {
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
}


def test_the_allowlist_names_each_providers_real_headers() -> None:
    assert set(FORWARDED_HEADERS) == set(PATHS)
    assert FORWARDED_HEADERS["/webhooks/payment_processor"] == ("Stripe-Signature",)
    assert FORWARDED_HEADERS["/webhooks/ios_store"] == ()  # the signed JWS is the body
    assert FORWARDED_HEADERS["/webhooks/android_store"] == ("Authorization",)  # Pub/Sub push OIDC token


def test_behind_trusted_proxies_the_client_is_the_one_they_saw(settings: Settings) -> None:
    with running_receiver() as downstream:
        client = create_app(replace(settings, passthrough_url=downstream.url, trusted_proxies=1)).test_client()
        response = client.post(
            "/webhooks/payment_processor",
            data=BODY,
            headers={
                "X-Forwarded-For": "198.51.100.66, 203.0.113.9",  # left: written by the caller; right: our proxy
                "X-Forwarded-Host": "hooks.example.com",
                "X-Forwarded-Proto": "https",
                "Forwarded": "for=198.51.100.66",
                "X-Real-Ip": "198.51.100.66",
            },
        )
        assert response.status_code == 200
        (received,) = downstream.requests
        assert received.header("X-Forwarded-For") == "203.0.113.9"
        assert received.header("X-Forwarded-Host") == "hooks.example.com"
        assert received.header("X-Forwarded-Proto") == "https"
        assert received.all("Forwarded") == [] and received.all("X-Real-Ip") == []


def test_nothing_is_invented_for_the_provider(settings: Settings) -> None:
    """A provider that sends no user agent is not given the HTTP client's (python-requests/...)."""
    with running_receiver() as downstream:
        client = client_for(settings, downstream.url)
        client.environ_base.pop("HTTP_USER_AGENT")  # the test client's own "Werkzeug/..."
        assert client.post("/webhooks/ios_store", data=BODY).status_code == 200
        (received,) = downstream.requests
        assert received.all("User-Agent") == [] and received.all("Content-Type") == []
        assert not any("python-requests" in v for _, v in received.headers)


def test_the_downstream_answer_is_returned_as_is(settings: Settings) -> None:
    with running_receiver() as downstream:
        downstream.status["/webhooks/ios_store"] = 500
        response = client_for(settings, downstream.url).post("/webhooks/ios_store", data=b"{}")
        assert response.status_code == 500 and response.data == b"ok"  # the provider retries, as it would


def test_unreachable_unconfigured_and_slow_downstreams(settings: Settings) -> None:
    closed = client_for(settings, f"http://127.0.0.1:{free_port()}").post("/webhooks/android_store", data=b"{}")
    assert closed.status_code == 502 and closed.json == {"error": "Downstream unreachable"}
    # No downstream configured: FloKit's own processor answers (an unauthenticated push: 401).
    unset = client_for(settings, None).post("/webhooks/android_store", data=b"{}")
    assert unset.status_code == 401 and set(unset.json) == {"error"}
    with running_receiver() as downstream:
        downstream.on_receive = lambda _r: time.sleep(1.5)
        started = time.monotonic()
        slow = client_for(settings, downstream.url, timeout=0.5).post("/webhooks/payment_processor", data=b"{}")
        assert slow.status_code == 504 and "timed out" in json.loads(slow.data)["error"]
        assert time.monotonic() - started < 1.4
