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

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeVar

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
class Retrier:
    attempts: int = 5
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    max_wait_s: float = 120.0
    sleep: Callable[[float], None] = time.sleep
    log: Callable[[str], None] = lambda _line: None
    waits: list[float] = field(default_factory=list)

    def __call__(self, what: str, call: Callable[[], T]) -> T:
        for attempt in range(1, self.attempts + 1):
            try:
                return call()
            except PlatformError as error:
                if not error.transient or attempt == self.attempts:
                    raise
                asked = error.retry_after if isinstance(error, RateLimited) else None
                if asked is not None and asked > self.max_wait_s:
                    raise
                wait = asked if asked is not None else min(self.backoff_s * 2 ** (attempt - 1), self.max_backoff_s)
                self.log(f"{what}: {error.code} ({error.message}); waiting {wait:.1f} s (attempt {attempt})")
                self.waits.append(wait)
                self.sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")
