"""Which cohort days of a workspace's payback report changed since it was last notified.

Digests, not values: the published store carries one digest per (workspace, cohort day) of the
payback rows, and the database keeps the digests each workspace was last told about. Comparing
the two sets (rather than this publish with the previous one) is what makes a lost event
recoverable: whatever was published but never announced is still a difference next time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date


@dataclass(frozen=True)
class CohortChange:
    """The cohort days whose rows differ (appeared, changed or disappeared), in order."""

    days: tuple[date, ...]

    @property
    def start(self) -> date:
        return self.days[0]

    @property
    def end(self) -> date:
        return self.days[-1]


def changed_cohorts(live: Mapping[date, str], notified: Mapping[date, str]) -> CohortChange | None:
    """None when the live digests are exactly the notified ones: a refresh that changed nothing
    announces nothing. A cohort day gone from the live store (its rows removed) is a change too."""
    days = sorted(day for day in live.keys() | notified.keys() if live.get(day) != notified.get(day))
    return CohortChange(tuple(days)) if days else None
