"""A fake RevenueCat REST API v2 on 127.0.0.1: real HTTP, the documented shapes, an enforced limit.

Shapes from RevenueCat's OpenAPI (`openapi-spec/api-v2.yaml`, RevenueCat/docs bf39a9c): lists
are `{object: "list", items, next_page, url}` with `next_page` a path carrying `starting_after`
(and not the page size); errors are `{object: "error", type, message, retryable, doc_url,
backoff_ms}`; every answer carries `RevenueCat-Rate-Limit-Current-Usage` / `-Current-Limit`;
a 429 carries `Retry-After` (seconds, as the docs say since August 2024; `retry_after_unit="ms"`
for the older wording) and `backoff_ms` in the body.

The limit is enforced over a rolling 60-second window of accepted requests (`per_minute`), so
a client that bursts gets 429s and one that paces does not. Customers are either given
(`FakeCustomer`s) or generated deterministically from their index (`customers=N`, generated on
demand, so 20 000 customers cost no memory).
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from werkzeug.wrappers import Request, Response

from tests.providers.serving import ThreadedFake

ANCHOR = datetime(2026, 11, 20, tzinfo=UTC)
DAY = timedelta(days=1)


def ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


@dataclass
class FakeCustomer:
    id: str
    subscriptions: list[dict[str, Any]] = field(default_factory=list)
    # Transactions per subscription id (App Store / Play Store subscriptions).
    transactions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    purchases: list[dict[str, Any]] = field(default_factory=list)

    def record(self, project_id: str) -> dict[str, Any]:
        return {
            "object": "customer",
            "id": self.id,
            "project_id": project_id,
            "first_seen_at": ms(ANCHOR - 400 * DAY),
            "last_seen_at": ms(ANCHOR - DAY),
            "last_seen_app_version": "1.0.0",
            "last_seen_country": "US",
            "last_seen_platform": "ios",
            "last_seen_platform_version": "18.1",
            "experiment": None,
        }


def money(gross: float, currency: str = "USD") -> dict[str, Any]:
    return {
        "currency": currency,
        "gross": round(gross, 2),
        "commission": round(gross * 0.15, 2),
        "tax": 0.0,
        "proceeds": round(gross * 0.85, 2),
    }


def subscription(
    customer_id: str,
    sub_id: str,
    *,
    starts: datetime,
    period_starts: datetime,
    period_ends: datetime | None,
    gross: float,
    status: str = "active",
    auto_renewal_status: str = "will_renew",
    store: str = "app_store",
    product_id: str = "prod_monthly",
    country: str | None = "US",
    environment: str = "production",
) -> dict[str, Any]:
    """A `subscription` object with every required field of the schema."""
    return {
        "object": "subscription",
        "id": sub_id,
        "customer_id": customer_id,
        "original_customer_id": customer_id,
        "product_id": product_id,
        "starts_at": ms(starts),
        "current_period_starts_at": ms(period_starts),
        "current_period_ends_at": ms(period_ends) if period_ends else None,
        "ends_at": ms(period_ends) if period_ends else None,
        "gives_access": status in ("trialing", "active", "in_grace_period"),
        "pending_payment": False,
        "auto_renewal_status": auto_renewal_status,
        "status": status,
        "total_revenue_in_usd": money(gross),
        "presented_offering_id": None,
        "entitlements": {"object": "list", "items": [], "next_page": None, "url": f"/v2/x/{sub_id}/entitlements"},
        "environment": environment,
        "store": store,
        "store_subscription_identifier": f"{sub_id}-store",
        "ownership": "purchased",
        "country": country,
        "management_url": None,
    }


def transaction(txn_id: str, starts: datetime, ends: datetime, product: str = "com.example.monthly") -> dict[str, Any]:
    return {
        "object": "subscription_transaction",
        "id": txn_id,
        "purchased_at": ms(starts),
        "product_store_identifier": product,
        "expiration_date": ms(ends),
        "effective_expiration_date": ms(ends),
    }


def purchase(
    customer_id: str, purchase_id: str, *, at: datetime, gross: float, status: str = "owned", store: str = "app_store"
) -> dict[str, Any]:
    return {
        "object": "purchase",
        "id": purchase_id,
        "customer_id": customer_id,
        "original_customer_id": customer_id,
        "product_id": "prod_coins",
        "purchased_at": ms(at),
        "revenue_in_usd": money(gross),
        "quantity": 1,
        "status": status,
        "presented_offering_id": None,
        "entitlements": {"object": "list", "items": [], "next_page": None, "url": f"/v2/x/{purchase_id}/entitlements"},
        "environment": "production",
        "store": store,
        "store_purchase_identifier": f"{purchase_id}-store",
        "ownership": "purchased",
        "country": "US",
    }


def generated(index: int, seed: int = 16) -> FakeCustomer:
    """Customer `index`'s history, the same every time: a quarter with a subscription (App
    Store, Play Store or Stripe; trials, conversions, renewals, cancellations), some one-time
    purchases, a few refunded."""
    rng = random.Random(f"{seed}:{index}")
    cid = f"user{index:07d}"
    customer = FakeCustomer(cid)
    for j in range(rng.choices((0, 1, 2), (0.75, 0.22, 0.03))[0]):
        sub_id = f"sub{index:07d}x{j}"
        store = rng.choice(("app_store",) * 5 + ("play_store",) * 4 + ("stripe",))
        period = timedelta(days=rng.choice((7, 30, 30, 365)))
        trial = rng.random() < 0.6
        start = ANCHOR - timedelta(days=rng.randint(1, 300), seconds=rng.randint(0, 86_399))
        price = rng.choice((4.99, 9.99, 59.99))
        periods: list[tuple[datetime, datetime]] = []
        at = start
        if trial:
            periods.append((at, at + 7 * DAY))
            at += 7 * DAY
        converts = not trial or rng.random() < 0.5
        cancelled = rng.random() < 0.25
        while converts and at <= ANCHOR:
            periods.append((at, at + period))
            at += period
            if cancelled and rng.random() < 0.3:
                break
        paid = len(periods) - (1 if trial else 0)
        last_start, last_end = periods[-1]
        live = last_end > ANCHOR
        status = ("trialing" if trial and paid == 0 else "active") if live else "expired"
        renewal = "will_not_renew" if cancelled or not live else "will_renew"
        customer.subscriptions.append(
            subscription(
                cid,
                sub_id,
                starts=start,
                period_starts=last_start,
                period_ends=last_end,
                gross=price * paid,
                status=status,
                auto_renewal_status=renewal,
                store=store,
                country=rng.choice(("US", "DE", "GB", "FR", "BR")),
            )
        )
        if store in ("app_store", "play_store"):
            customer.transactions[sub_id] = [transaction(f"{sub_id}t{k}", a, b) for k, (a, b) in enumerate(periods)]
    for k in range(rng.choices((0, 1), (0.9, 0.1))[0]):
        at = ANCHOR - timedelta(days=rng.randint(1, 200))
        status = "refunded" if rng.random() < 0.2 else "owned"
        customer.purchases.append(purchase(cid, f"pur{index:07d}x{k}", at=at, gross=1.99, status=status))
    return customer


@dataclass
class Stats:
    requests: int = 0
    accepted: int = 0
    rate_limited: int = 0
    longest_429_run: int = 0
    current_429_run: int = 0
    paths: list[str] = field(default_factory=list)


class FakeRevenueCat(ThreadedFake):
    """`with FakeRevenueCat(customers=...) as fake:` serves on `fake.url` until the block ends."""

    def __init__(
        self,
        *,
        customers: int | list[FakeCustomer] = 0,
        project_id: str = "proj1ab2c3d4",
        api_key: str = "sk_test_fake_revenuecat_key",
        per_minute: int = 480,
        retry_after_unit: str = "s",
        force_429_ms: list[int] | None = None,
        fail_status: int | None = None,
        fail_times: int = 0,
        refuse_every_call: int | None = None,
        keep_paths: bool = False,
        vanished: frozenset[str] = frozenset(),
        window_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.project_id = project_id
        self.api_key = api_key
        self.per_minute = per_minute
        self.retry_after_unit = retry_after_unit
        # 429s answered before anything else, with these backoff_ms (a limit hit for a test).
        self.force_429_ms = list(force_429_ms or [])
        # The first `fail_times` requests answer `fail_status` (e.g. 503 once).
        self.fail_status = fail_status
        self.fail_times = fail_times
        # Every call answers this status (401/403), whatever the key.
        self.refuse_every_call = refuse_every_call
        self.keep_paths = keep_paths
        # Customers listed but deleted before their subscriptions are asked for (404 then).
        self.vanished = vanished
        # The rolling window `per_minute` counts over: RevenueCat's minute, shortened in tests so
        # that a limit is reached within seconds.
        self.window_s = window_s
        self.clock = clock
        if isinstance(customers, int):
            self.count = customers
            self.given: dict[str, FakeCustomer] | None = None
            self.order: list[str] = []
        else:
            self.count = len(customers)
            self.given = {c.id: c for c in customers}
            self.order = [c.id for c in customers]
        self.stats = Stats()
        self._window: deque[float] = deque()
        self._lock = threading.Lock()

    # -- data --------------------------------------------------------------------------------
    def customer_ids(self) -> list[str]:
        return self.order if self.given is not None else [f"user{i:07d}" for i in range(self.count)]

    def customer(self, cid: str) -> FakeCustomer | None:
        if self.given is not None:
            return self.given.get(cid)
        if cid.startswith("user") and cid[4:].isdigit() and int(cid[4:]) < self.count:
            return generated(int(cid[4:]))
        return None

    def _subscription_owner(self, sub_id: str) -> FakeCustomer | None:
        if self.given is not None:
            return next((c for c in self.given.values() if any(s["id"] == sub_id for s in c.subscriptions)), None)
        if sub_id.startswith("sub") and "x" in sub_id:
            return self.customer(f"user{sub_id[3:].split('x')[0]}")
        return None

    # -- serving -----------------------------------------------------------------------------

    def _json(self, status: int, body: dict[str, Any], usage: int, headers: dict[str, str] | None = None) -> Response:
        response = Response(status=status, content_type="application/json")
        response.set_data(json.dumps(body))
        response.headers["RevenueCat-Rate-Limit-Current-Usage"] = str(usage)
        response.headers["RevenueCat-Rate-Limit-Current-Limit"] = str(self.per_minute)
        for k, v in (headers or {}).items():
            response.headers[k] = v
        return response

    def _error(self, status: int, kind: str, message: str, usage: int, backoff_ms: int | None = None) -> Response:
        body: dict[str, Any] = {
            "object": "error",
            "type": kind,
            "message": message,
            "retryable": backoff_ms is not None,
            "doc_url": f"https://errors.rev.cat/{kind.replace('_', '-')}",
        }
        headers = {}
        if backoff_ms is not None:
            body["backoff_ms"] = backoff_ms
            after = backoff_ms if self.retry_after_unit == "ms" else math.ceil(backoff_ms / 1000)
            headers["Retry-After"] = str(after)
        return self._json(status, body, usage, headers)

    def _admit(self) -> tuple[bool, int, int]:
        """Count the request against the rolling minute: (admitted, usage, backoff_ms)."""
        with self._lock:
            self.stats.requests += 1
            now = self.clock()
            while self._window and self._window[0] <= now - self.window_s:
                self._window.popleft()
            if self.force_429_ms:
                wait = self.force_429_ms.pop(0)
                self._limited()
                return False, len(self._window), wait
            if len(self._window) >= self.per_minute:
                wait = math.ceil((self._window[0] + self.window_s - now) * 1000) + 1
                self._limited()
                return False, len(self._window), wait
            self._window.append(now)
            self.stats.accepted += 1
            self.stats.current_429_run = 0
            return True, len(self._window), 0

    def _limited(self) -> None:
        self.stats.rate_limited += 1
        self.stats.current_429_run += 1
        self.stats.longest_429_run = max(self.stats.longest_429_run, self.stats.current_429_run)

    def _respond(self, request: Request) -> Response:
        if self.keep_paths:
            self.stats.paths.append(request.full_path)
        admitted, usage, backoff = self._admit()
        if not admitted:
            return self._error(429, "rate_limit_error", "Rate limit exceeded", usage, backoff)
        if self.refuse_every_call in (401, 403):
            kind = "authentication_error" if self.refuse_every_call == 401 else "authorization_error"
            return self._error(self.refuse_every_call, kind, "API key lacks the required permissions", usage)
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return self._error(401, "authentication_error", "Invalid API key", usage)
        with self._lock:
            failing = self.fail_status is not None and self.fail_times > 0
            if failing:
                self.fail_times -= 1
        if failing:
            return self._error(int(self.fail_status or 500), "server_error", "Internal server error", usage, 500)
        parts = request.path.strip("/").split("/")
        if len(parts) < 4 or parts[:2] != ["v2", "projects"]:
            return self._error(404, "resource_missing", "Resource not found", usage)
        if parts[2] != self.project_id:
            return self._error(404, "resource_missing", "Project not found", usage)
        rest = parts[3:]
        limit = max(1, min(100, int(request.args.get("limit", "20"))))
        after = request.args.get("starting_after")
        base = "/" + "/".join(parts)
        if rest == ["customers"]:
            ids = self.customer_ids()
            start = _after(ids, after)
            chosen = ids[start : start + limit]
            items = [c.record(self.project_id) for c in (self.customer(i) for i in chosen) if c is not None]
            more = start + limit < len(ids)
            return self._json(200, _list(items, base, chosen[-1] if more and chosen else None), usage)
        if len(rest) == 3 and rest[0] == "customers" and rest[2] in ("subscriptions", "purchases"):
            owner = self.customer(rest[1])
            if owner is None or owner.id in self.vanished:
                return self._error(404, "resource_missing", "Customer not found", usage)
            records = owner.subscriptions if rest[2] == "subscriptions" else owner.purchases
            env = request.args.get("environment")
            records = [r for r in records if env is None or r["environment"] == env]
            return self._page(records, base, after, limit, usage)
        if len(rest) == 3 and rest[0] == "subscriptions" and rest[2] == "transactions":
            owner = self._subscription_owner(rest[1])
            if owner is None or rest[1] not in owner.transactions:
                return self._error(404, "resource_missing", "Subscription not found", usage)
            return self._page(owner.transactions[rest[1]], base, after, limit, usage)
        return self._error(404, "resource_missing", "Resource not found", usage)

    def _page(self, records: list[dict[str, Any]], base: str, after: str | None, limit: int, usage: int) -> Response:
        ids = [r["id"] for r in records]
        start = _after(ids, after)
        chosen = records[start : start + limit]
        more = start + limit < len(records)
        return self._json(200, _list(chosen, base, chosen[-1]["id"] if more and chosen else None), usage)


def _after(ids: list[str], after: str | None) -> int:
    if after is None:
        return 0
    return ids.index(after) + 1 if after in ids else len(ids)


def _list(items: list[dict[str, Any]], base: str, last: str | None) -> dict[str, Any]:
    return {
        "object": "list",
        "items": items,
        "next_page": f"{base}?starting_after={last}" if last is not None else None,
        "url": base,
    }
