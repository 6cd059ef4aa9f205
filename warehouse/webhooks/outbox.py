"""Placeholder for the webhooks issue's outbox; the lead replaces this file at merge.

Only the signature the actions code calls is fixed here, so that every action transition already
records its webhook event in the same write transaction as the change.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection


def emit_event(conn: Connection, *, workspace_id: str, event_type: str, data: dict[str, Any]) -> str:
    """Record an outbound webhook event in the caller's transaction and return its id.

    The real implementation writes an outbox row that a Dagster sensor delivers; this stub
    records nothing and returns "".
    """
    return ""
