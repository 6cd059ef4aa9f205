"""Applying a notification's effects: ledger, canonical events and its own status, at once."""

from __future__ import annotations

from dataclasses import dataclass

from transforms.entitlements.effects import Effects
from warehouse.db import Database
from warehouse.entitlements import ledger, notifications
from warehouse.events.landing import land


@dataclass(frozen=True)
class Outcome:
    grants: int  # purchases whose state changed
    events_written: int


def apply_effects(database: Database, *, workspace_id: str, effects: Effects, notification_id: str | None) -> Outcome:
    """Apply every effect, land the events, and mark the notification applied, in one
    transaction (a sync passes no notification)."""
    changed = 0
    events = list(effects.events)
    with database.write() as conn:
        for effect in effects.effects:
            applied = ledger.apply_statement(conn, workspace_id=workspace_id, app_id=effect.app_id, fact=effect.fact)
            changed += applied.state_changed
            events.extend(effect.events(applied.user_id))
        written = len(land(conn, events).written) if events else 0
        if notification_id is not None:
            notifications.mark_applied(conn, notification_id)
    return Outcome(changed, written)
