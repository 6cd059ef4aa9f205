"""integrations and ad accounts: the HTTP side shared by the provider clients (Adjust, AppsFlyer, RevenueCat, Meta).

One `requests.Session`, timeouts, retries by the provider's own rules, pacing under its
documented rate limit, and failures classified into the sync error vocabulary
(`transforms.integrations.errors`).

Generic retry helpers get the providers wrong (design/integrations.md §1.10): RevenueCat states
its wait in milliseconds in the body (`backoff_ms`), beside a `Retry-After` whose documented unit
changed from milliseconds to seconds in 2024 (RevenueCat/docs 5b41611c), Stripe's library does
not retry a 429, AppsFlyer and Adjust answer a bare 429. So each client states its rules
(`RetryRules`) and this module applies them; the loop is explicit and logged, not hidden in an
adapter.

Every session is `guarded_session`: it connects only to addresses the egress policy allows
(`clients.egress`), checked per connection, and follows no redirect (a 3xx is the answer, and
fails the call): a redirect could lead anywhere, the instance's own network included. What a
failure keeps of the answer is its status and a short, provider-shaped message
(`transforms.integrations.errors.provider_text`), never an arbitrary target's body.
"""

from __future__ import annotations

import email.utils
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

import requests
from pydantic import BaseModel, ConfigDict, PrivateAttr

from clients.egress import Egress
from clients.retry import RetryPolicy
from clients.transport import PinnedAdapter
from transforms.integrations.errors import SyncFailure, code_for_status, provider_text
from transforms.webhooks.urls import InvalidUrl

USER_AGENT = "FloKit-sync/1"


def guard(session: requests.Session, egress: Egress | None = None) -> requests.Session:
    """`session` made to connect only where the egress policy allows and to follow no redirect.

    For sessions an SDK builds itself (Meta's, Stripe's): the same rules as `guarded_session`.
    The environment's proxies and .netrc are not used: a proxy would resolve the host itself, out
    of the policy's sight."""
    adapter = PinnedAdapter(egress or Egress.from_env())
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    session.trust_env = False
    # No redirect is followed: the 3xx response is the answer (requests asks this for the target).
    session.get_redirect_target = lambda _resp: None  # type: ignore[method-assign,assignment]
    return session


def guarded_session(egress: Egress | None = None) -> requests.Session:
    """A new session under the egress policy (default: this process's, `Egress.from_env`)."""
    return guard(requests.Session(), egress)


def retry_after_seconds(response: requests.Response) -> float | None:
    """`Retry-After` as RFC 9110 says: delay-seconds or an HTTP-date."""
    return parse_retry_after(response.headers.get("Retry-After"))


def parse_retry_after(value: str | None) -> float | None:
    """A `Retry-After` value (delay-seconds or an HTTP-date, RFC 9110) as seconds from now."""
    value = (value or "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def json_or_none(response: requests.Response) -> Any:
    """The body as JSON, or None when it is not JSON."""
    try:
        return response.json()
    except ValueError:
        return None


def body_text(response: requests.Response) -> str:
    """The provider's own words, short: a JSON body's message field, else the status's reason."""
    return provider_text(json_or_none(response), response.reason)


@dataclass
class RetryRules(RetryPolicy):
    """The retry policy of one HTTP provider, with how to read its answers: the wait it asks for
    (`retry_after`), its error text, and which statuses are worth another try."""

    retry_after: Callable[[requests.Response], float | None] = retry_after_seconds
    error_text: Callable[[requests.Response], str] = body_text
    retry_statuses: frozenset[int] = frozenset({429, 500, 502, 503, 504})


@dataclass
class Pacer:
    """Spaces calls evenly under a documented rate (`per_minute`), across threads.

    Even spacing instead of bursts: a provider that counts per rolling minute never sees more
    than the limit in any window, so a paced client gets no 429 at all (the RevenueCat benchmark
    checks it against a fake that enforces the limit)."""

    per_minute: float
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    _next: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def wait(self) -> None:
        interval = 60.0 / self.per_minute
        with self._lock:
            now = self.clock()
            start = max(now, self._next)
            self._next = start + interval
        if start > now:
            self.sleep(start - now)

    def push_back(self, seconds: float) -> None:
        """The provider asked for a pause (a 429): no call of anyone before it is over."""
        with self._lock:
            self._next = max(self._next, self.clock() + seconds)


@dataclass
class ProviderHttp:
    """One provider's session and rules. `request` returns a response with an accepted status
    or raises `SyncFailure`; every retry and wait is logged to `log`."""

    provider: str
    session: requests.Session
    rules: RetryRules
    timeout: tuple[float, float] = (5.0, 60.0)
    pacer: Pacer | None = None
    sleep: Callable[[float], None] | None = None  # None: the rules' (RetryPolicy.sleep)
    log: Callable[[str], None] = lambda _line: None
    calls: int = 0
    rate_limited: int = 0

    def request(
        self, method: str, url: str, *, what: str, accept: Iterable[int] = (200,), **kwargs: Any
    ) -> requests.Response:
        accepted = set(accept)
        wait = 0.0
        for attempt in range(1, self.rules.attempts + 1):
            if wait:
                self.log(f"{self.provider}: waiting {wait:.2f} s before retrying {what} (attempt {attempt})")
                (self.sleep or self.rules.sleep)(wait)
            if self.pacer is not None:
                self.pacer.wait()
            self.calls += 1
            last = attempt == self.rules.attempts
            try:
                response = self.session.request(method, url, timeout=self.timeout, **kwargs)
            except (requests.ConnectionError, requests.Timeout) as exc:
                if last:
                    raise SyncFailure("provider_error", f"{what}: {type(exc).__name__}: {exc}") from exc
                wait = self.rules.backoff(attempt)
                continue
            except InvalidUrl as exc:  # the connection's address check: a policy refusal, not an outage
                raise SyncFailure("config", f"{what}: {exc}") from None
            except requests.RequestException as exc:  # a refused proxy, a malformed answer
                if last:
                    raise SyncFailure("provider_error", f"{what}: {type(exc).__name__}") from exc
                wait = self.rules.backoff(attempt)
                continue
            if response.status_code in accepted:
                return response
            status = response.status_code
            if status not in self.rules.retry_statuses:
                raise SyncFailure(
                    code_for_status(status), f"{what}: HTTP {status}: {self.rules.error_text(response)}", status=status
                )
            asked = self.rules.retry_after(response)
            if status == 429:
                self.rate_limited += 1
                if asked is not None and self.pacer is not None:
                    self.pacer.push_back(asked)
            next_wait = self.rules.next_wait(attempt, asked)
            if next_wait is None:
                raise SyncFailure(
                    code_for_status(status),
                    f"{what}: HTTP {status} after {attempt} attempt(s): {self.rules.error_text(response)}",
                    status=status,
                )
            wait = next_wait
        raise AssertionError("unreachable: the last attempt returns or raises")

    def json(self, response: requests.Response, *, what: str) -> Any:
        """The body as JSON, or `bad_response` (a proxy's HTML page, a truncated body)."""
        try:
            return response.json()
        except ValueError as exc:
            raise SyncFailure("bad_response", f"{what}: the answer (HTTP {response.status_code}) is not JSON") from exc


class ProviderClient(BaseModel):
    """Base of every provider client: `base_url`, the timeouts, and a lazily built `ProviderHttp`.

    A subclass names its provider, states its `rules()` (and `per_minute` pacing where the
    provider documents a rate), and lists its secret fields in `SECRET_FIELDS` so that they
    never appear in a repr (Dagster logs the reprs of what fails in a run). A pydantic model,
    frozen, as the Dagster resource it was: the connector builds it from the stored config."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    PROVIDER: ClassVar[str] = "provider"
    SECRET_FIELDS: ClassVar[frozenset[str]] = frozenset()

    base_url: str
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 60.0
    _http: ProviderHttp | None = PrivateAttr(default=None)

    def rules(self) -> RetryRules:
        return RetryRules()

    def per_minute(self) -> float | None:
        return None

    def http(self, log: Callable[[str], None] | None = None) -> ProviderHttp:
        if self._http is None:
            session = guarded_session()
            session.headers["User-Agent"] = USER_AGENT
            self._authorize(session)
            rate = self.per_minute()
            self._http = ProviderHttp(
                provider=self.PROVIDER,
                session=session,
                rules=self.rules(),
                timeout=(self.connect_timeout_s, self.read_timeout_s),
                pacer=Pacer(rate) if rate else None,
            )
        if log is not None:
            self._http.log = log
        return self._http

    def url(self, path: str) -> str:
        return self.base_url.rstrip("/") + "/" + path.lstrip("/")

    def _authorize(self, session: requests.Session) -> None:
        """Set the session's credentials (headers); every subclass with credentials overrides it."""

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            yield name, ("***" if name in self.SECRET_FIELDS and value else value)
