"""Rate limits on every surface, counted with `limits` (the library behind Flask-Limiter).

What is counted, each a setting with a default a busy production app does not reach
(docs/spec-decisions.md "Rate limits"):

- `api_key`: v1 requests per API key, after the key authenticated;
- `app_client`: gateway requests per app and client address (a device, or a carrier's NAT);
- `ingest_token`: ingest callbacks per app token, counted before the secret is checked, so
  guesses at one app's secret count against that app token too;
- `address`: requests per client address on the routes that take no FloKit credentials (the
  receipt check and the provider webhook passthrough);
- `auth_failures`: failed authentications (any 401) per client address on every surface, the
  provider webhook passthrough included (a provider's `Authorization` or signature refused).
  Past it, the address is answered 429 on every route that takes credentials, before they are
  checked: a 429 only for wrong ones would still tell a guesser which guess was right.

Each is a sliding window counter (`SlidingWindowCounterRateLimiter`): a steady rate with a
bounded burst, in constant space per key, which is what a token bucket gives; `limits` has no
bucket proper, and its exact moving window keeps every hit. The client address is the one
`FLOKIT_TRUSTED_PROXIES` says the outermost trusted proxy saw; an IPv6 client counts as its /64.

The counters live in `FLOKIT_RATE_LIMIT_STORAGE`: `memory://` (the default) counts in each
gunicorn worker process, so a limit is reached at up to workers x the figure; `redis://host:port`
shares them across workers and hosts, exactly. When that store cannot be reached the request is
let through and the outage logged (once per interval per kind, as database outages are): a limit must never take the
service down with it.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache, partial, wraps
from typing import Any, TypeVar, cast

from flask import Flask, current_app, g, request
from limits import RateLimitItem, parse_many
from limits.storage import MemoryStorage, storage_from_string
from limits.strategies import SlidingWindowCounterRateLimiter

from api.errors import FAILED_AUTHENTICATION, ApiError
from api.logs import RateLimitedLog
from transforms.ingest.network import client_address
from warehouse.settings import Settings

log = logging.getLogger("flokit.api.ratelimits")

EXTENSION = "flokit.rate_limits"
_ADDRESS = "flokit_rate_limit_address"  # on flask.g: every limit of a request counts the same address
PUBLIC_ATTR = "__flokit_public__"  # set by `per_address`: the route takes no credentials
EXEMPT_ENDPOINTS = frozenset({"healthz", "readyz"})  # load balancers poll them
MAX_FAILING_ADDRESSES = 10_000  # past it, addresses whose failures every window forgot are dropped
STORE_TIMEOUT_S = 0.25  # a shared store slower than this is treated as down for that request

F = TypeVar("F", bound=Callable[..., Any])

_WHAT = {
    "api_key": "for this API key",
    "app_client": "for this app from this address",
    "ingest_token": "for this app token",
    "address": "from this address",
    "auth_failures": "failed authentications from this address",
}


class RateLimited(ApiError):
    """429 in the surface's shape, with Retry-After (whole seconds, at least 1)."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(429, message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class Rule:
    kind: str
    items: tuple[RateLimitItem, ...]

    def describe(self) -> str:
        return " and ".join(f"{item.amount} per {_window(item)}" for item in self.items)


def _window(item: RateLimitItem) -> str:
    seconds = item.get_expiry()
    return "second" if seconds == 1 else f"{seconds} seconds"


def _identifier(value: str) -> str:
    """Keys stay short whatever a caller sends (an ingest app token is the caller's to choose)."""
    return value if len(value) <= 64 else hashlib.sha256(value.encode()).hexdigest()


class SweptMemoryStorage(MemoryStorage):
    """`limits`' in-memory storage, expiring old counters inline at most once a second.

    The library starts a `threading.Timer` to expire counters whenever the previous one has
    finished, which is every 10 ms under load: a thread started and a sweep of every key, about
    100 times a second per worker. On the gateway's hot path that was the largest cost after
    the database (docs/benchmarks.md, "Gateway hot path"). Counters are read through their own
    expiry check (`get`), so sweeping later only delays freeing memory, never changes a count.
    """

    SWEEP_INTERVAL_S = 1.0

    def __init__(self, uri: str | None = None, wrap_exceptions: bool = False, **options: str) -> None:
        super().__init__(uri, wrap_exceptions, **options)
        self._next_sweep = 0.0
        self._sweep_lock = threading.Lock()

    def _MemoryStorage__schedule_expiry(self) -> None:  # the library's private hook, name-mangled
        now = time.monotonic()
        if now < self._next_sweep or not self._sweep_lock.acquire(blocking=False):
            return
        try:
            self._next_sweep = now + self.SWEEP_INTERVAL_S
            self._MemoryStorage__expire_events()  # type: ignore[attr-defined]
        finally:
            self._sweep_lock.release()


@lru_cache(maxsize=4096)
def counted_address(peer: str | None, forwarded_for: str | None, trusted_proxies: int) -> str:
    """The client address the limits count by. An IPv6 client is its /64: one subscriber line
    or host gets a whole /64, so counting single addresses would let it rotate through them.
    Cached: a gateway sees the same few addresses (devices behind NAT, its own proxies) again
    and again, and parsing one is a measurable part of a cached entitlement read. A long
    X-Forwarded-For (the caller writes its left part) is parsed uncached, so the cache's memory
    stays bounded by a few hundred bytes an entry."""
    found = client_address(peer, forwarded_for, trusted_proxies)
    if not found:
        return "unknown"
    try:
        parsed = ipaddress.ip_address(found)
    except ValueError:
        return found
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:  # an IPv4 client on a dual-stack socket
            return str(parsed.ipv4_mapped)
        return str(ipaddress.IPv6Network((parsed, 64), strict=False))
    return found


class RateLimits:
    def __init__(self, settings: Settings) -> None:
        options: dict[str, float | str | bool] = {}
        if settings.rate_limit_storage.startswith(("redis://", "rediss://")):
            options = {"socket_timeout": STORE_TIMEOUT_S, "socket_connect_timeout": STORE_TIMEOUT_S}
        self.storage = (
            SweptMemoryStorage()
            if settings.rate_limit_storage == "memory://"
            else storage_from_string(settings.rate_limit_storage, **options)
        )
        self.strategy = SlidingWindowCounterRateLimiter(self.storage)
        self.rules: dict[str, Rule] = {}
        for kind, text in settings.rate_limits().items():
            if text != "off":
                self.rules[kind] = Rule(kind, tuple(parse_many(text)))
        self.trusted_proxies = settings.trusted_proxies
        self._outage = RateLimitedLog(log)
        # With per-process counters, an address this process never saw fail has no failures to
        # test: the common case answers from a dict instead of the strategy's window arithmetic.
        # Value: when its last failure was counted; dropped once every window has forgotten it.
        self._failed_here: dict[str, float] | None = {} if isinstance(self.storage, SweptMemoryStorage) else None
        rule = self.rules.get("auth_failures")
        self._failures_memory_s = 2.0 * max((i.get_expiry() for i in rule.items), default=0) if rule else 0.0

    def address(self) -> str:
        """The client address the limits count by (`counted_address`), once per request."""
        cached: str | None = g.get(_ADDRESS)
        if cached is None:
            forwarded = request.headers.get("X-Forwarded-For")
            parse = counted_address if forwarded is None or len(forwarded) <= 256 else counted_address.__wrapped__
            cached = g.setdefault(_ADDRESS, parse(request.remote_addr, forwarded, self.trusted_proxies))
        return cached

    def hit(self, kind: str, *identifiers: str) -> None:
        """Count one request against `kind` for `identifiers`: 429 when over the limit."""
        self._apply(kind, self.strategy.hit, identifiers)

    def check_failures(self) -> None:
        """429 before any credential is checked when this address failed too often lately."""
        address = self.address()
        if self._failed_here is not None and address not in self._failed_here:
            return
        self._apply("auth_failures", self.strategy.test, (address,))

    def record_failure(self) -> None:
        address = self.address()
        failed = self._failed_here
        if failed is not None:
            now = time.monotonic()
            if len(failed) >= MAX_FAILING_ADDRESSES:  # a sliding window counter forgets after two windows
                for stale in [a for a, at in list(failed.items()) if now - at > self._failures_memory_s]:
                    failed.pop(stale, None)
            failed[address] = now
        self._apply("auth_failures", self.strategy.hit, (address,), refuse=False)

    def _apply(self, kind: str, ask: Callable[..., bool], identifiers: tuple[str, ...], *, refuse: bool = True) -> None:
        """Ask the strategy (count a hit, or only test) for each of `kind`'s rates; 429 on a no."""
        rule = self.rules.get(kind)
        if rule is None:
            return
        ids = ("flokit", kind, *(_identifier(i) for i in identifiers))
        for item in rule.items:
            if not self._ask(kind, partial(ask, item, *ids)) and refuse:
                self._refuse(rule, item, ids)

    def _ask(self, kind: str, question: Callable[[], bool]) -> bool:
        try:
            return question()
        except Exception as exc:  # the store is down or slow: let the request through, say so
            self._outage.warning(
                kind, "rate limit store unavailable: not limiting", {"kind": kind, "error": type(exc).__name__}
            )
            return True

    def _refuse(self, rule: Rule, item: RateLimitItem, ids: tuple[str, ...]) -> None:
        try:
            reset = self.strategy.get_window_stats(item, *ids).reset_time
            retry_after = max(1, math.ceil(reset - time.time()))
        except Exception:  # the store went away between the two calls: one window
            retry_after = item.get_expiry()
        retry_after = min(retry_after, item.get_expiry())
        if rule.kind == "auth_failures":
            message = f"Too many failed authentications from this address (at most {rule.describe()})"
        else:
            message = f"Too many requests {_WHAT[rule.kind]} (at most {rule.describe()})"
        raise RateLimited(f"{message}; retry after {retry_after} s", retry_after)


def rate_limits() -> RateLimits:
    return cast(RateLimits, current_app.extensions[EXTENSION])


def takes_no_credentials(view: F) -> F:
    """Marks a route with no credential to guess: an address over its failure budget still gets it."""
    setattr(view, PUBLIC_ATTR, True)
    return view


def count_app_client(app_ref: str) -> None:
    """A gateway request for the app `app_ref` (its key or id) from this client address."""
    limits = rate_limits()
    limits.hit("app_client", app_ref, limits.address())


def per_address(view: F, *, credentials: bool = False) -> F:
    """For routes no API key or app key reaches: counted per client address (`address`). With
    `credentials`, the route still checks one of its own (a provider's `Authorization` or
    signature, on the webhook passthrough): it stays behind the failed-authentication limit, and
    says its 401s with `count_failure`."""

    @wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        limits = rate_limits()
        limits.hit("address", limits.address())
        return view(*args, **kwargs)

    return cast(F, wrapper) if credentials else takes_no_credentials(cast(F, wrapper))


def count_failure() -> None:
    """A failed authentication answered without an `ApiError` (a provider's credential refused by
    the notification processor): counted against this client address like any other 401."""
    rate_limits().record_failure()


def register_rate_limits(app: Flask, settings: Settings) -> None:
    limits = app.extensions[EXTENSION] = RateLimits(settings)
    app.extensions[FAILED_AUTHENTICATION] = limits.record_failure

    @app.before_request
    def _failed_too_often() -> None:
        if request.endpoint in EXEMPT_ENDPOINTS:
            return
        view = app.view_functions.get(request.endpoint or "")
        if view is not None and getattr(view, PUBLIC_ATTR, False):
            return
        rate_limits().check_failures()
