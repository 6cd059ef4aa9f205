"""Helpers for ingest tests: callbacks as a vendor sends them, and fault injection in the database."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from warehouse.db import Database
from warehouse.events.tables import event_claims, landed_events

VENDOR = "attribution_provider_a"
PATH = f"/ingest/{VENDOR}"


def callback(workspace: dict[str, Any], **params: str) -> dict[str, str]:
    """An install callback of the bootstrapped workspace (mapped by default), overridable."""
    base = {
        "secret": workspace["ingest_secret"],
        "app_token": workspace["ingest_app_token"],
        "activity_kind": "install",
        "event_token": "",
        "created_at": "1763700000",
        "os_name": "ios",
        "country": "us",
        "adid": "adid-1",
    }
    return {**base, **params}


def counts(db: Database) -> tuple[int, int]:
    """(dedup claims, landed events)."""
    with db.read() as conn:
        return tuple(  # type: ignore[return-value]
            conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one() for t in (event_claims, landed_events)
        )


def inject_landing_fault(db: Database) -> None:
    """A real database fault: a trigger that makes every landed-row insert fail."""
    with db.write() as conn:
        if db.is_sqlite:
            conn.exec_driver_sql(
                "CREATE TRIGGER flokit_fault BEFORE INSERT ON landed_events "
                "BEGIN SELECT RAISE(ABORT, 'injected fault'); END"
            )
        else:
            conn.exec_driver_sql(
                "CREATE FUNCTION flokit_fault() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'injected fault'; END $$"
            )
            conn.exec_driver_sql(
                "CREATE TRIGGER flokit_fault BEFORE INSERT ON landed_events "
                "FOR EACH ROW EXECUTE FUNCTION flokit_fault()"
            )


def clear_landing_fault(db: Database) -> None:
    with db.write() as conn:
        conn.exec_driver_sql(
            "DROP TRIGGER flokit_fault" if db.is_sqlite else "DROP TRIGGER flokit_fault ON landed_events"
        )
