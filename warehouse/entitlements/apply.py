"""Applying a notification's effects: ledger, canonical events and its own status, at once."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import Connection

from transforms.entitlements.effects import Effects
from warehouse.db import Database
from warehouse.entitlements import ledger, notifications
from warehouse.entitlements.notifications import Received
from warehouse.events.landing import land


@dataclass(frozen=True)
class Outcome:
    grants: int  # purchases whose state changed
    events_written: int
    notification_id: str | None = None
    duplicate: bool = False  # applied before: nothing was changed now
    user_id: str | None = None  # the first user whose purchase the effects were applied to


def apply_effects(database: Database, *, workspace_id: str, effects: Effects, notification_id: str | None) -> Outcome:
    """Apply every effect, land the events, and mark the notification applied, in one
    transaction (a sync passes no notification)."""
    with database.write() as conn:
        outcome = _apply(conn, workspace_id, effects)
        if notification_id is not None:
            notifications.mark_applied(conn, notification_id, user_id=outcome.user_id)
    return outcome


def apply_received(database: Database, received: Received, effects: Effects) -> Outcome:
    """Store a verified notification and apply it, in ONE transaction: the raw bytes, the ledger,
    the events and the `applied` mark commit together (a failure stores nothing here: the caller
    records the failure with the raw bytes). A notification applied before changes nothing."""
    with database.write() as conn:
        stored = notifications.store(conn, received)
        if stored.status == "applied":
            return Outcome(0, 0, stored.id, duplicate=True)
        outcome = _apply(conn, received.workspace_id, effects)
        notifications.mark_applied(conn, stored.id, user_id=outcome.user_id)
    return Outcome(outcome.grants, outcome.events_written, stored.id, user_id=outcome.user_id)


def _apply(conn: Connection, workspace_id: str, effects: Effects) -> Outcome:
    changed = 0
    events = list(effects.events)
    user: str | None = None
    for effect in effects.effects:
        applied = ledger.apply_statement(conn, workspace_id=workspace_id, app_id=effect.app_id, fact=effect.fact)
        changed += applied.state_changed
        user = user or applied.user_id
        events.extend(effect.events(applied.user_id))
    user = user or next((e.user_id for e in events if e.user_id), None)
    written = len(land(conn, events).written) if events else 0
    return Outcome(changed, written, user_id=user)
