"""The provider HTTP loop against a real server on 127.0.0.1: retries by the provider's rules,
waits as long as asked, and failures classified for the sync history."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest
import requests
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from clients.http import Pacer, ProviderHttp, RetryRules
from transforms.client_errors import ClientError


@pytest.fixture
def server() -> Iterator[HTTPServer]:
    with HTTPServer(host="127.0.0.1", port=0) as running:
        yield running


def client(rules: RetryRules | None = None, **kwargs: object) -> ProviderHttp:
    return ProviderHttp("fake", requests.Session(), rules or RetryRules(backoff_s=0.01), timeout=(2, 2), **kwargs)  # type: ignore[arg-type]


def test_a_429_waits_the_retry_after_seconds_then_succeeds(server: HTTPServer) -> None:
    server.expect_ordered_request("/r").respond_with_data("slow down", status=429, headers={"Retry-After": "1"})
    server.expect_ordered_request("/r").respond_with_json({"ok": True})
    http = client()
    started = time.monotonic()
    response = http.request("GET", server.url_for("/r"), what="report")
    assert response.json() == {"ok": True} and 1.0 <= time.monotonic() - started < 30
    assert (http.calls, http.rate_limited) == (2, 1)


def test_a_provider_unit_of_retry_after_is_used() -> None:
    """A provider whose Retry-After is in milliseconds (RevenueCat) states it in its rules."""
    server = HTTPServer(host="127.0.0.1", port=0)
    server.expect_ordered_request("/r").respond_with_data("", status=429, headers={"Retry-After": "300"})
    server.expect_ordered_request("/r").respond_with_json({})
    with server:
        rules = RetryRules(retry_after=lambda r: float(r.headers["Retry-After"]) / 1000)
        started = time.monotonic()
        client(rules).request("GET", server.url_for("/r"), what="list")
        assert 0.3 <= time.monotonic() - started < 30  # not 300 s


def test_5xx_is_retried_and_then_reported_as_the_providers_error(server: HTTPServer) -> None:
    server.expect_request("/r").respond_with_json({"message": "upstream timeout"}, status=503)
    with pytest.raises(ClientError) as failure:
        client(RetryRules(attempts=3, backoff_s=0.01)).request("GET", server.url_for("/r"), what="report")
    assert failure.value.code == "provider_error" and not failure.value.refused
    assert "HTTP 503 after 3 attempt(s): upstream timeout" in failure.value.message
    assert len(server.log) == 3


@pytest.mark.parametrize(("status", "code"), [(401, "auth"), (403, "auth"), (404, "config"), (400, "config")])
def test_a_refusal_is_not_retried_and_keeps_the_providers_words(server: HTTPServer, status: int, code: str) -> None:
    server.expect_request("/r").respond_with_json({"error": "Invalid API token"}, status=status)
    with pytest.raises(ClientError) as failure:
        client().request("GET", server.url_for("/r"), what="report")
    assert failure.value.code == code and failure.value.refused
    assert failure.value.message == f"report: HTTP {status}: Invalid API token"
    assert len(server.log) == 1


def test_a_retry_after_beyond_the_budget_fails_as_rate_limited_at_once(server: HTTPServer) -> None:
    server.expect_request("/r").respond_with_data("quota", status=429, headers={"Retry-After": "3600"})
    started = time.monotonic()
    with pytest.raises(ClientError) as failure:
        client().request("GET", server.url_for("/r"), what="report")
    assert failure.value.code == "rate_limited" and time.monotonic() - started < 30  # not 3600 s


def test_an_unreadable_answer_is_a_bad_response(server: HTTPServer) -> None:
    server.expect_request("/r").respond_with_data("<html>proxy error</html>", content_type="text/html")
    http = client()
    response = http.request("GET", server.url_for("/r"), what="report")
    with pytest.raises(ClientError) as failure:
        http.json(response, what="report")
    # The status, never the body: the address may not be a provider's (clients/egress.py).
    assert failure.value.code == "bad_response" and "HTTP 200" in failure.value.message
    assert "proxy error" not in failure.value.message


def test_a_refused_connection_is_the_providers_error() -> None:
    with pytest.raises(ClientError) as failure:
        client(RetryRules(attempts=2, backoff_s=0.01)).request("GET", "http://127.0.0.1:9/r", what="report")
    assert failure.value.code == "provider_error" and "ConnectionError" in failure.value.message


class VirtualClock:
    """The pacer's clock and sleep: time passes only when the pacer sleeps or a request takes it,
    so the spacing it imposes is measured exactly, whatever else loads the machine."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_the_pacer_spaces_calls_under_the_rate(server: HTTPServer) -> None:
    clock = VirtualClock()
    sent: list[float] = []

    def handler(_request: Request) -> Response:
        sent.append(clock.now)
        clock.now += 0.03  # the provider takes 30 ms to answer: the pacer counts it towards the gap
        return Response("{}", content_type="application/json")

    server.expect_request("/r").respond_with_handler(handler)
    http = client(pacer=Pacer(per_minute=600, clock=clock, sleep=clock.sleep))  # one call per 100 ms
    for _ in range(6):
        http.request("GET", server.url_for("/r"), what="list")
    assert [round(b - a, 6) for a, b in itertools.pairwise(sent)] == [0.1] * 5
