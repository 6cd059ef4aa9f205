"""all vendors: one retry policy, how long to wait before the next attempt, or to give up.

Every client retries the same way: a wait the vendor asked for (its documented `Retry-After`,
RevenueCat's `backoff_ms`, Meta's usage headers, read by that client) is honoured when it fits
`max_wait_s`, else a doubling backoff from `backoff_s` up to `max_backoff_s`; after `attempts`
tries, or when the vendor asks for longer than a run should sit out, the call fails and the next
sync (or execution attempt) tries again. The loops that apply it differ only in what failed (an
HTTP answer in `clients.http`, an S3 error in `clients.s3`, an ad platform's exception in
`clients.ad_platform`, a Stripe error in `clients.payment_processor` (which adds a budget for all the waits
of one sync), an App Store or Google Play error in `clients.ios_store` / `clients.android_store`);
`sleep` is injectable so tests wait for nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class RetryPolicy:
    """How one vendor wants to be retried. `attempts` counts every try of one request."""

    attempts: int = 5
    backoff_s: float = 1.0  # first wait after a 5xx or a timeout; doubles each time
    max_backoff_s: float = 30.0
    # A wait asked for that is longer than this is not sat out inside a run: the call fails (as
    # `rate_limited` when a 429 asked for it) and the next scheduled sync tries again.
    max_wait_s: float = 120.0
    sleep: Callable[[float], None] = time.sleep

    def backoff(self, attempt: int) -> float:
        """The doubling wait after failed attempt number `attempt` (1-based)."""
        return float(min(self.backoff_s * 2 ** (attempt - 1), self.max_backoff_s))

    def next_wait(self, attempt: int, asked: float | None = None) -> float | None:
        """The wait before trying again after attempt `attempt` failed in a retryable way, or None
        to give up: it was the last attempt, or the vendor asked for more than `max_wait_s`."""
        if attempt >= self.attempts or (asked is not None and asked > self.max_wait_s):
            return None
        return asked if asked is not None else self.backoff(attempt)
