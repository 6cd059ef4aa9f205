"""The sandbox platform's objects: declared in its config, or read from the workspace's own spend.

The sandbox applies changes only to FloKit's own records (the entity registry, marked with the
platform `sandbox`), so that the flow can be tried without an ad platform. Its objects are never
invented: the config's `campaigns` (name, daily budget, currency, creatives) when it lists any;
otherwise the campaigns and creatives of the workspace's delivered spend (`spend_raw`) over the
last `LOOKBACK_DAYS` days, each campaign's daily budget being its mean daily spend over its last
`BUDGET_DAYS` days with spend, rounded to a whole currency unit (the budget an operator would
have set to spend what it spent). A campaign spending in several currencies takes the currency
it spent most in (an ad account has one currency). No spend in the window: no objects.

External ids are derived from the names (`sandbox:campaign:<sha256[:16]>`), so a later sync finds
the same objects again and keeps the budgets and statuses the executor set on them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import polars as pl

from transforms.adaccounts.entities import PlatformEntity
from transforms.adaccounts.money import to_minor

LOOKBACK_DAYS = 28
BUDGET_DAYS = 7


@dataclass(frozen=True)
class SandboxCampaign:
    name: str
    daily_budget: Decimal  # major units
    currency: str
    creatives: tuple[str, ...]


def external_id(entity_type: str, *names: str) -> str:
    digest = hashlib.sha256("\x1f".join((entity_type, *names)).encode()).hexdigest()[:16]
    return f"sandbox:{entity_type}:{digest}"


def from_config(campaigns: list[dict[str, Any]]) -> list[SandboxCampaign]:
    return [
        SandboxCampaign(c["name"], Decimal(c["daily_budget"]), c["currency"], tuple(c.get("creatives", ())))
        for c in campaigns
    ]


def from_spend(spend: pl.DataFrame, *, workspace_id: str, today: date) -> list[SandboxCampaign]:
    """Campaigns from delivered spend rows (`SPEND_SCHEMA`) of the `LOOKBACK_DAYS` days ending today."""
    first = today - timedelta(days=LOOKBACK_DAYS - 1)
    window = spend.filter(
        (pl.col("workspace_id") == workspace_id)
        & pl.col("spend_date").is_between(first, today)
        & pl.col("campaign").is_not_null()
        & (pl.col("spend") > 0)
    )
    if window.is_empty():
        return []
    currency = (
        window.group_by("campaign", "currency")
        .agg(pl.col("spend").sum().alias("total"))
        .sort(["campaign", "total", "currency"], descending=[False, True, False])
        .group_by("campaign", maintain_order=True)
        .first()
        .select("campaign", "currency")
    )
    window = window.join(currency, on=["campaign", "currency"], how="inner")
    daily = window.group_by("campaign", "currency", "spend_date").agg(pl.col("spend").sum())
    budgets = (
        daily.sort("spend_date", descending=True)
        .group_by("campaign", "currency", maintain_order=True)
        .head(BUDGET_DAYS)
        .group_by("campaign", "currency")
        .agg(pl.col("spend").mean().alias("mean_daily"))
    )
    creatives = (
        window.filter(pl.col("creative").is_not_null())
        .group_by("campaign")
        .agg(pl.col("creative").unique().sort().alias("creatives"))
    )
    rows = budgets.join(creatives, on="campaign", how="left").sort("campaign")
    out = []
    for row in rows.iter_rows(named=True):
        whole = Decimal(repr(row["mean_daily"])).quantize(Decimal(1), rounding=ROUND_HALF_UP)
        out.append(SandboxCampaign(row["campaign"], whole, row["currency"], tuple(row["creatives"] or ())))
    return out


def entities(campaigns: list[SandboxCampaign]) -> list[PlatformEntity]:
    """The registry objects of the campaigns: one `campaign` with the budget, one `ad` per creative."""
    out: list[PlatformEntity] = []
    for c in campaigns:
        cid = external_id("campaign", c.name)
        out.append(
            PlatformEntity(
                "campaign", cid, None, c.name, "active", to_minor(c.daily_budget, c.currency), c.currency, None
            )
        )
        for creative in c.creatives:
            out.append(
                PlatformEntity(
                    "ad", external_id("ad", c.name, creative), cid, creative, "active", None, c.currency, None
                )
            )
    return out
