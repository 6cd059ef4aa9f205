"""What applying one verified notification does, decided before anything is written.

A provider handler turns a verified notification into `Effects` (pure data, plus whatever it
had to read from the store first, such as Google's `subscriptionsv2.get`); the ledger then applies
all of them, lands their canonical events and marks the notification applied in ONE transaction,
so a crash leaves either all of it or none of it (and the provider's retry, or a replay, does it
again: every step is idempotent).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from transforms.entitlements.facts import StoreFact
from transforms.events import CanonicalEvent

# Builds the canonical events of a fact once the ledger knows the purchase's user (None: not
# linked to a user yet; the events still count as revenue).
EventsFor = Callable[[str | None], Sequence[CanonicalEvent]]


def _no_events(_user: str | None) -> Sequence[CanonicalEvent]:
    return ()


@dataclass(frozen=True)
class Effect:
    """One purchase's new state in one app, and the canonical events it implies."""

    app_id: str
    fact: StoreFact
    events: EventsFor = _no_events


@dataclass(frozen=True)
class Effects:
    """Everything one notification changes. `events` are facts with no purchase behind them (the
    generic attribution path). `note` says, for the log, what was applied or why nothing was."""

    effects: Sequence[Effect] = ()
    events: Sequence[CanonicalEvent] = ()
    note: str = ""
