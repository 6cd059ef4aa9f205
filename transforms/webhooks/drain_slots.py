"""The long-lived webhook drain runs: two slots whose lifetimes are staggered by half.

A drain run lives `lifetime` and exits; the sensor then relaunches its slot, which takes a sensor
tick and a run launch (5-10 s). With both slots' ends at least half a lifetime apart, one slot is
always draining while the other relaunches, so a relaunch gap never leaves zero drains.
"""

from __future__ import annotations

from datetime import datetime, timedelta

SLOTS = ("a", "b")


def other_slot(slot: str) -> str:
    return SLOTS[1] if slot == SLOTS[0] else SLOTS[0]


def planned_end(now: datetime, lifetime: timedelta, other_ends_at: datetime | None) -> datetime:
    """When a drain starting `now` should end: after a whole lifetime, unless the other slot's
    run would then end within half a lifetime of it; then half a lifetime before or after the
    other's end, whichever comes within this run's lifetime (a shorter first run, once)."""
    full = now + lifetime
    if other_ends_at is None or other_ends_at <= now:
        return full
    if abs(full - other_ends_at) >= lifetime / 2:
        return full
    before = other_ends_at - lifetime / 2
    return before if before > now else full
