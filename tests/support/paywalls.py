"""Paywall documents and paywall events as the tests build them."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from transforms import paywall
from warehouse.db import Database
from warehouse.events.tables import landed_events


def offer(product_id: str = "pro_weekly") -> dict[str, Any]:
    return {
        "product_id": product_id,
        "name": "Pro weekly",
        "price_usd_cents": 699,
        "currency": "USD",
        "billing_period": "weekly",
        "trial_days": 3,
    }


def document(weights: list[float], active: bool = True) -> paywall.PaywallDocument:
    variants = [
        {"variant_id": f"v{i}", "layout": "standard", "offers": [offer()], "traffic_weight": w}
        for i, w in enumerate(weights)
    ]
    return paywall.parse_document({"experiment_active": active, "variants": variants})


def event(app_id: str, kind: str = "impression", **extra: Any) -> dict[str, Any]:
    return {
        "event_type": kind,
        "app_id": app_id,
        "properties": {"paywall_id": "onboarding", "variant_id": "b", "product_id": "pro_weekly"},
        "occurred_at": "2026-11-20T10:00:00Z",
        **extra,
    }


def landed(db: Database) -> list[dict[str, Any]]:
    with db.read() as conn:
        rows = conn.execute(sa.select(landed_events).order_by(landed_events.c.seq)).mappings().all()
    return [dict(r) for r in rows]
