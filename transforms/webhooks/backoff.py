"""When a failed delivery is tried again.

Attempt 1 is sent at once; after a failed attempt n (1..5) the next one waits RETRY_DELAYS_S[n-1]
seconds times the scale (FLOKIT_WEBHOOK_BACKOFF_SCALE, default 1; tests use a tiny scale).
Roughly x4-x6 growth from 30 s to 6 h: fast enough to ride out a deploy, slow enough that a
receiver down for a day is not hammered. Attempt 6 is the last (spec: "retried up to 5 times").
"""

from __future__ import annotations

from datetime import datetime, timedelta

RETRY_DELAYS_S: tuple[int, ...] = (30, 120, 600, 3600, 21600)
MAX_ATTEMPTS = 1 + len(RETRY_DELAYS_S)
# Consecutive failed sends (any delivery) after which an endpoint is disabled (spec).
DISABLE_AFTER_FAILURES = 5


def retry_delay(failed_attempt: int, scale: float = 1.0) -> timedelta | None:
    """Delay before the attempt after `failed_attempt`, or None when retries are exhausted."""
    if failed_attempt < 1:
        raise ValueError("attempts are numbered from 1")
    if failed_attempt >= MAX_ATTEMPTS:
        return None
    return timedelta(seconds=RETRY_DELAYS_S[failed_attempt - 1] * scale)


def next_attempt_at(failed_attempt: int, now: datetime, scale: float = 1.0) -> datetime | None:
    delay = retry_delay(failed_attempt, scale)
    return None if delay is None else now + delay
