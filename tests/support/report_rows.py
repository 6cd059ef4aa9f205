"""Canonical-event and spend frames for the report transforms' tests: a day, an instant, rows."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from typing import Any

import polars as pl

from transforms.events import CANONICAL_EVENT_SCHEMA
from transforms.reports.schemas import SPEND_SCHEMA

D0 = date(2026, 3, 2)


T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


def events(*rows: tuple[str, str, datetime, dict[str, Any]], country: str = "US") -> pl.LazyFrame:
    """(event_type, user_id, occurred_at, properties) rows as a canonical-event frame."""
    records = [
        {name: None for name in CANONICAL_EVENT_SCHEMA}
        | {
            "event_id": f"e{i}",
            "workspace_id": "ws_a",
            "event_type": kind,
            "occurred_at": at,
            "received_at": at,
            "user_id": user,
            "country": country,
            "platform": "ios",
            "source": "test",
            "properties": json.dumps(props, sort_keys=True, separators=(",", ":")),
        }
        for i, (kind, user, at, props) in enumerate(rows)
    ]
    return pl.LazyFrame(records, schema=CANONICAL_EVENT_SCHEMA)


def spend_rows(*rows: tuple[date, str, str, str, float]) -> pl.LazyFrame:
    return pl.LazyFrame(
        [
            {
                "workspace_id": "ws_a",
                "spend_date": d,
                "campaign": c,
                "creative": k,
                "country": g,
                "spend": s,
                "currency": "USD",
            }
            for d, c, k, g, s in rows
        ],
        schema=SPEND_SCHEMA,
    )
