"""Rate limits (api/ratelimits.py): per API key, per app and client address, per ingest app token
(401s included), per address on routes without credentials, and failed authentications per
address on every surface; 429 with Retry-After in each surface's shape. Counted in memory per
process by default, exactly across processes in Redis, and never in the way when the store is down.

Windows are a minute long here, and each test that counts up to a limit starts it where it has
the time it needs left in the current window (`with_time_left`)."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import requests
from flask.testing import FlaskClient

from api.app import create_app
from tests.support import bearer, free_port, gunicorn_server
from tests.support.ingest import PATH as INGEST
from tests.support.notifications import AUTH as RC_AUTH
from tests.support.notifications import PATH as RC_PATH
from tests.support.notifications import rc_event
from tests.support.provider_notifications import KEY, connect, stored_count
from tests.support.webhook_receiver import running_receiver
from warehouse.db import Database
from warehouse.settings import RATE_LIMIT_DEFAULTS, Settings, SettingsError

ENTITLEMENT = "/api/paywall/entitlement"
RECEIPT = "/api/paywall/receipt"


def with_time_left(window_s: float, needed_s: float) -> None:
    """Sleep into the next window of `window_s` unless `needed_s` are left in this one.

    `limits`' sliding window counter keeps fixed windows aligned on the epoch and counts the
    previous one weighted by the share of it the sliding window still covers: hits that straddle
    a boundary count for less than their number, so a test counting up to a limit across one
    (e.g. 100 failures over 1.3 s on a loaded machine) falls just short of it. That is the
    product's documented approximation (api/ratelimits.py), so the tests start where no boundary
    falls inside them.
    """
    left = window_s - time.time() % window_s
    if left < needed_s:
        time.sleep(left + 0.01)


def client_for(settings: Settings, **limits: str) -> FlaskClient:
    return create_app(replace(settings, **{f"rate_limit_{k}": v for k, v in limits.items()})).test_client()


def assert_429(response: Any, *, v1: bool, window_s: int = 60) -> str:
    assert response.status_code == 429, (response.status_code, response.get_data(as_text=True))
    assert 1 <= int(response.headers["Retry-After"]) <= window_s
    body = response.get_json()
    if v1:
        assert set(body) == {"error", "message"} and body["error"] == "rate_limited"
        return str(body["message"])
    assert set(body) == {"error"}  # the gateway's and ingest's shape
    return str(body["error"])


def app_headers(workspace: dict, user: str = "u1") -> dict[str, str]:
    return {"x-app-key": workspace["app_key"], "x-user-id": user}


def callback(workspace: dict, secret: str | None = None, n: int = 0) -> str:
    params = {
        "secret": secret or workspace["ingest_secret"],
        "app_token": workspace["ingest_app_token"],
        "activity_kind": "install",
        "created_at": "1763251200",
        "adid": f"device-{n}",
        "os_name": "ios",
    }
    return f"{INGEST}?{urlencode(params)}"


def test_an_api_key_gets_its_rate_then_429_and_other_keys_are_unaffected(
    settings: Settings, workspace: dict[str, Any]
) -> None:
    client = client_for(settings, api_key="3/minute")
    with_time_left(60, 15)
    key, other = workspace["api_key_read_only"], workspace["api_key_read_write"]
    assert [client.get("/v1/workspace", headers=bearer(key)).status_code for _ in range(3)] == [200] * 3
    message = assert_429(client.get("/v1/workspace", headers=bearer(key)), v1=True)
    assert message.startswith("Too many requests for this API key (at most 3 per 60 seconds); retry after ")
    assert client.get("/v1/workspace", headers=bearer(other)).status_code == 200


def test_an_app_is_limited_per_client_address(settings: Settings, workspace: dict[str, Any]) -> None:
    """Behind one trusted proxy, the address is the one it saw (X-Forwarded-For)."""
    client = client_for(replace(settings, trusted_proxies=1), app_client="2/minute")
    with_time_left(60, 15)

    def entitlement(address: str) -> Any:
        return client.get(ENTITLEMENT, headers={**app_headers(workspace), "X-Forwarded-For": address})

    assert [entitlement("198.51.100.7").status_code for _ in range(2)] == [200, 200]
    message = assert_429(entitlement("198.51.100.7"), v1=False)
    assert message.startswith("Too many requests for this app from this address (at most 2 per 60 seconds)")
    assert entitlement("198.51.100.8").status_code == 200  # another device
    # An IPv6 client counts as its /64: rotating through its own addresses does not reset it.
    assert [entitlement(f"2001:db8:1:2::{i}").status_code for i in (1, 2)] == [200, 200]
    assert_429(entitlement("2001:db8:1:2:ffff::3"), v1=False)
    assert entitlement("2001:db8:1:3::1").status_code == 200  # another /64
    # The paywall configuration takes no key: it is counted per app id and address.
    config = f"/api/paywall/config?app_id={workspace['app_id']}&paywall_id=main"
    headers = {"x-user-id": "u1", "X-Forwarded-For": "203.0.113.9"}
    assert [client.get(config, headers=headers).status_code for _ in range(2)] == [200, 200]
    assert_429(client.get(config, headers=headers), v1=False)


def test_an_ingest_app_token_counts_its_401s(settings: Settings, workspace: dict[str, Any]) -> None:
    client = client_for(settings, ingest_token="3/minute")
    with_time_left(60, 15)
    assert client.get(callback(workspace, secret="guess-1")).status_code == 401
    assert client.get(callback(workspace, secret="guess-2")).status_code == 401
    assert client.get(callback(workspace, n=1)).status_code == 200
    message = assert_429(client.get(callback(workspace, n=2)), v1=False)
    assert message.startswith("Too many requests for this app token (at most 3 per 60 seconds)")


def test_routes_without_credentials_are_limited_per_address(settings: Settings) -> None:
    client = client_for(settings, address="2/minute")
    with_time_left(60, 15)
    body = {"provider": "ios_store", "signedTransactionInfo": "eyJhbGciOi.e30.c2ln"}
    # No app has store identities here: 422 (Apple vouches for nothing here), yet each counts.
    assert [client.post(RECEIPT, json=body, headers={"x-user-id": "u1"}).status_code for _ in range(2)] == [422] * 2
    message = assert_429(client.post(RECEIPT, json=body, headers={"x-user-id": "u1"}), v1=False)
    assert message.startswith("Too many requests from this address (at most 2 per 60 seconds)")
    # The passthrough shares the address's count.
    assert_429(client.post("/webhooks/ios_store", data=b"{}"), v1=False)
    assert client.get("/healthz").status_code == 200  # never limited: load balancers poll it


def test_failed_authentications_lock_an_address_out_of_every_credentialed_route(
    settings: Settings, workspace: dict[str, Any]
) -> None:
    """By default, 100 failed authentications per 10 s: the 101st attempt from that address is
    429 whatever it carries, on any surface, valid key or not (an answer that differed for a
    right guess would still be an oracle); routes without credentials still answer."""
    assert RATE_LIMIT_DEFAULTS["auth_failures"] == "100/10 seconds"
    assert settings.rate_limit_auth_failures == "100/10 seconds"
    client = create_app(replace(settings, trusted_proxies=1)).test_client()
    with_time_left(10, 6)  # the default window is 10 s: 100 failures take about 1 s, more under load
    attacker = {"X-Forwarded-For": "192.0.2.66"}
    for i in range(100):
        if i % 3 == 0:
            wrong = client.get("/v1/workspace", headers={**attacker, **bearer(f"flk_wrong_{i}")})
        elif i % 3 == 1:
            wrong = client.get(ENTITLEMENT, headers={**attacker, "x-app-key": f"pk_wrong_{i}", "x-user-id": "u"})
        else:
            wrong = client.get(callback(workspace, secret=f"guess-{i}"), headers=attacker)
        assert wrong.status_code == 401, (i, wrong.get_json())
    v1 = client.get("/v1/workspace", headers={**attacker, **bearer(workspace["api_key_read_only"])})
    message = assert_429(v1, v1=True, window_s=10)
    assert message.startswith("Too many failed authentications from this address (at most 100 per 10 seconds)")
    assert_429(client.get(ENTITLEMENT, headers={**attacker, **app_headers(workspace)}), v1=False, window_s=10)
    assert_429(client.get(callback(workspace), headers=attacker), v1=False, window_s=10)
    config = f"/api/paywall/config?app_id={workspace['app_id']}&paywall_id=main"
    assert client.get(config, headers={**attacker, "x-user-id": "u"}).status_code == 200  # nothing to guess there
    honest = {"X-Forwarded-For": "192.0.2.67"}
    assert client.get("/v1/workspace", headers={**honest, **bearer(workspace["api_key_read_only"])}).status_code == 200


def test_wrong_provider_credentials_count_as_failed_authentications(
    settings: Settings, workspace: dict[str, Any], db: Database
) -> None:
    """The provider webhook paths take a credential (RevenueCat's `Authorization`): its guesses are
    failed authentications of the guesser's address; past the limit even the right value is 429,
    with nothing applied, while the provider's own address is unaffected."""
    client = client_for(replace(settings, instance_key=KEY, trusted_proxies=1), auth_failures="5/minute")
    raw = {"api_key": "sk_rc_0123456789abcdef", "project_id": "proj1a2b3c4d", "app_id": workspace["app_id"]}
    integration_id = connect(
        db, workspace["workspace_id"], "subscription_provider_a", raw | {"webhook_authorization": RC_AUTH}
    )

    def webhook(address: str, authorization: str, n: int) -> Any:
        body = {"api_version": "1.0", "event": rc_event("INITIAL_PURCHASE", user=f"user-{n}")}
        return client.post(f"{RC_PATH}?integration={integration_id}", json=body,
                            headers={"Authorization": authorization, "X-Forwarded-For": address})  # fmt: skip

    attacker, provider = "192.0.2.66", "198.51.100.20"
    with_time_left(60, 15)
    assert [webhook(attacker, f"Bearer guess-{i}", i).status_code for i in range(5)] == [401] * 5
    message = assert_429(webhook(attacker, RC_AUTH, 5), v1=False)
    assert message.startswith("Too many failed authentications from this address (at most 5 per 60 seconds)")
    assert stored_count(db) == 0
    assert webhook(provider, RC_AUTH, 6).json["status"] == "applied"


def test_a_gateway_forwarding_elsewhere_counts_the_downstreams_401s(settings: Settings) -> None:
    with running_receiver() as downstream:
        downstream.status[RC_PATH] = 401
        client = client_for(replace(settings, passthrough_url=downstream.url), auth_failures="3/minute")
        with_time_left(60, 15)
        assert [client.post(RC_PATH, data=b"{}").status_code for _ in range(3)] == [401] * 3
        assert_429(client.post(RC_PATH, data=b"{}"), v1=False)
        assert len(downstream.requests) == 3  # refused before anything is forwarded


def test_the_failure_fast_path_forgets_only_addresses_every_window_forgot(
    settings: Settings, workspace: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In memory, an address with no failures in this process skips the window arithmetic; the
    addresses remembered for that are pruned only once their failures expired, so a locked-out
    address stays locked out however many other addresses fail meanwhile."""
    monkeypatch.setattr("api.ratelimits.MAX_FAILING_ADDRESSES", 3)
    client = create_app(replace(settings, trusted_proxies=1, rate_limit_auth_failures="2/second")).test_client()
    limits = client.application.extensions["flokit.rate_limits"]

    def fail(address: str) -> int:
        wrong = {"X-Forwarded-For": address, "x-app-key": "pk_wrong", "x-user-id": "u"}
        return int(client.get(ENTITLEMENT, headers=wrong).status_code)

    def honest(address: str) -> int:
        return int(client.get(ENTITLEMENT, headers={"X-Forwarded-For": address, **app_headers(workspace)}).status_code)

    for address in ("192.0.2.1", "192.0.2.2"):
        assert fail(address) == 401
    time.sleep(2.1)  # both windows (current and previous) of those failures are over
    with_time_left(1, 0.8)
    assert [fail("192.0.2.3"), fail("192.0.2.3")] == [401, 401]
    assert honest("192.0.2.3") == 429  # locked out
    assert fail("192.0.2.4") == 401  # the fourth address prunes the two expired ones, not .3
    assert set(limits._failed_here) == {"192.0.2.3", "192.0.2.4"}
    assert honest("192.0.2.3") == 429
    assert honest("192.0.2.1") == 200


def test_a_limit_can_be_turned_off_and_bad_settings_are_refused(tmp_path: Path) -> None:
    env = {"FLOKIT_DATA_DIR": str(tmp_path / "d"), "FLOKIT_RATE_LIMIT_API_KEY": "off"}
    assert Settings.from_env(env).rate_limits()["api_key"] == "off"
    assert Settings.from_env(env | {"FLOKIT_RATE_LIMIT_ADDRESS": "50 / second"}).rate_limit_address == "50 / second"
    for name, bad in [
        ("FLOKIT_RATE_LIMIT_API_KEY", "lots"),
        ("FLOKIT_RATE_LIMIT_AUTH_FAILURES", "0/second"),
        ("FLOKIT_RATE_LIMIT_STORAGE", "memcached://localhost"),
    ]:
        with pytest.raises(SettingsError, match=name):
            Settings.from_env(env | {name: bad})


def test_memory_counts_per_process_and_redis_exactly_across_processes(
    settings: Settings, workspace: dict[str, Any], redis_url: str
) -> None:
    """Two apps stand for two gunicorn workers: in memory each has its own count (a limit of 3
    lets up to 6 through); in Redis they share one (exactly 3)."""
    key = bearer(workspace["api_key_read_only"])

    def statuses(storage: str) -> list[int]:
        workers = [client_for(replace(settings, rate_limit_storage=storage), api_key="3/minute") for _ in range(2)]
        with_time_left(60, 15)
        return [workers[i % 2].get("/v1/workspace", headers=key).status_code for i in range(8)]

    assert statuses("memory://") == [200] * 6 + [429] * 2
    assert statuses(redis_url) == [200] * 3 + [429] * 5


def test_a_real_server_with_redis_limits_exactly_across_its_workers(
    settings: Settings, workspace: dict[str, Any], redis_url: str, tmp_path: Path
) -> None:
    configured = replace(settings, rate_limit_storage=redis_url, rate_limit_api_key="10/minute")
    env = {**os.environ, **configured.child_env()}
    with gunicorn_server(env, workers=3, log_dir=tmp_path) as server, requests.Session() as session:
        with_time_left(60, 20)
        answers = [
            session.get(f"{server.base}/v1/workspace", headers=bearer(workspace["api_key_read_only"]), timeout=5)
            for _ in range(30)
        ]
    assert [a.status_code for a in answers] == [200] * 10 + [429] * 20
    assert all(1 <= int(a.headers["Retry-After"]) <= 60 for a in answers[10:])


def test_an_unreachable_store_lets_requests_through_and_says_so(
    settings: Settings, workspace: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    client = client_for(replace(settings, rate_limit_storage=f"redis://127.0.0.1:{free_port()}/0"), api_key="1/minute")
    key = bearer(workspace["api_key_read_only"])
    assert [client.get("/v1/workspace", headers=key).status_code for _ in range(3)] == [200] * 3
    warnings = [r for r in caplog.records if r.name == "flokit.api.ratelimits"]
    assert warnings and warnings[0].getMessage() == "rate limit store unavailable: not limiting"


def test_in_memory_counters_are_swept_inline_without_a_timer_thread() -> None:
    """The library's own storage starts a timer thread every 10 ms under load; ours sweeps
    expired counters inline at most once a second, and counts exactly the same."""
    from limits import parse
    from limits.strategies import SlidingWindowCounterRateLimiter

    from api.ratelimits import SweptMemoryStorage

    storage = SweptMemoryStorage()
    strategy = SlidingWindowCounterRateLimiter(storage)
    limit = parse("5/second")
    first = storage.timer  # the library's constructor starts one (a single sweep after 10 ms)
    first.join()
    with_time_left(1, 0.8)
    assert [strategy.hit(limit, "k") for _ in range(6)] == [True] * 5 + [False]
    time.sleep(0.05)
    assert [strategy.hit(limit, "k") for _ in range(3)] == [False] * 3
    assert storage.timer is first  # no timer thread was started again
    time.sleep(2.1)  # both windows over: the counters expired
    storage.SWEEP_INTERVAL_S = 0.0
    assert strategy.hit(limit, "other")  # a write sweeps: the expired counters of "k" are freed
    assert not [key for key in storage.storage if "/k/" in key or key.endswith("/k")]
    assert strategy.hit(limit, "k")
