"""ad platforms (meta, apple_search_ads, sandbox): the one small protocol the registry sync and the executor use.

A client lists the account's objects, reads one object's live state, and writes a daily budget
(an ABSOLUTE value in ISO minor units: a retried absolute write is harmless, and none of the
platforms offers an idempotency key; design note §3) or a status (`active` / `paused`). Objects
are addressed by type and id, with the parent's id for the platforms whose paths need it
(Apple's ad groups live under their campaign). Failures are `transforms.adaccounts.errors`.

`Retrier` is the retry loop every client shares: a `RateLimited` waits what the platform asked
(or a doubling backoff when it did not say), a transient `ProviderError` a doubling backoff; a
wait longer than `max_wait_s` is not sat out in a run: the error is raised, and the next sync
(or execution attempt) tries again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeVar

from clients.retry import RetryPolicy
from transforms.adaccounts.entities import AccountInfo, PlatformEntity
from transforms.adaccounts.errors import PlatformError, RateLimited

LiveStatus = Literal["active", "paused"]
T = TypeVar("T")


class AdPlatformClient(Protocol):
    platform: str

    def account(self) -> AccountInfo:
        """The platform's own id, name and currency of the account (a cheap authenticated call)."""
        ...

    def list_entities(self) -> list[PlatformEntity]:
        """Every campaign, ad set / ad group and ad of the account, every page."""
        ...

    def read(self, entity_type: str, external_id: str, parent_external_id: str | None = None) -> PlatformEntity:
        """One object's live state, read from the platform now."""
        ...

    def set_daily_budget(
        self, entity_type: str, external_id: str, amount: int, currency: str, parent_external_id: str | None = None
    ) -> None:
        """Set the object's daily budget to `amount` ISO minor units of `currency` (absolute)."""
        ...

    def set_status(
        self, entity_type: str, external_id: str, status: LiveStatus, parent_external_id: str | None = None
    ) -> None: ...


@dataclass
class Retrier(RetryPolicy):
    """The retry policy applied to an ad platform's calls: a `RateLimited` waits what the
    platform asked, a transient `ProviderError` the policy's backoff; every wait is logged and
    kept (`waits`)."""

    log: Callable[[str], None] = lambda _line: None
    waits: list[float] = field(default_factory=list)

    def __call__(self, what: str, call: Callable[[], T]) -> T:
        for attempt in range(1, self.attempts + 1):
            try:
                return call()
            except PlatformError as error:
                if not error.transient:
                    raise
                wait = self.next_wait(attempt, error.retry_after if isinstance(error, RateLimited) else None)
                if wait is None:
                    raise
                self.log(f"{what}: {error.code} ({error.message}); waiting {wait:.1f} s (attempt {attempt})")
                self.waits.append(wait)
                self.sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")
