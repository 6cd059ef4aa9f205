"""The rules of webhook recovery over v1 (issue 36 part 4), apart from where they are stored.

- What a v1 client sees of a delivery: three statuses, not the queue's four. A delivery leased
  by a drain (`delivering`) is still on its way, so it reads `pending`; `succeeded` reads
  `delivered`.
- Why an endpoint is disabled: after the sender's failure streak, or because someone disabled it.
- What a resend falls back to when its one send fails: the status the delivery had when the
  resend was asked for. A delivered one stays delivered (the receiver acknowledged it once; the
  failed send is in its attempts), one that failed for good is failed again (no automatic
  retries: resending is the client's call each time), and a pending one goes on with its retries
  as after any failed attempt (the resend took the place of the retry that was waiting, so no
  retry is lost and none is added).
"""

from __future__ import annotations

from typing import Literal

from transforms.webhooks.backoff import DISABLE_AFTER_FAILURES

ApiDeliveryStatus = Literal["pending", "delivered", "failed"]
API_DELIVERY_STATUSES: tuple[ApiDeliveryStatus, ...] = ("pending", "delivered", "failed")

# The queue's status (warehouse/webhooks/tables.py DELIVERY_STATUSES) as v1 names it.
API_STATUS: dict[str, ApiDeliveryStatus] = {
    "pending": "pending",
    "delivering": "pending",
    "succeeded": "delivered",
    "failed": "failed",
}

DisabledReason = Literal["consecutive_failures", "manual"]


def queue_statuses(api_status: ApiDeliveryStatus) -> tuple[str, ...]:
    """The queue's statuses that one v1 status stands for (a filter on the history)."""
    return tuple(queued for queued, shown in API_STATUS.items() if shown == api_status)


def disabled_reason(status: str, consecutive_failures: int) -> DisabledReason | None:
    """None while enabled; `consecutive_failures` when the sender's streak disabled it (its count
    stays at the limit until it is enabled again), else `manual` (an operator or a client)."""
    if status == "enabled":
        return None
    return "consecutive_failures" if consecutive_failures >= DISABLE_AFTER_FAILURES else "manual"


def resend_fallback(status: str) -> str:
    """The status a delivery asked to be resent while in `status` goes back to if the resend fails.
    A delivery on its way (`delivering`) whose lease expired is a pending one."""
    return "pending" if status == "delivering" else status
