"""Literal inputs for the actions engine's tests: signal rows, a lake holding them, a registry.

Every number is written out here, so a test states the world it checks against: per campaign and
day, installs, spend and a share of payers paying one amount at install (so the per-user sums are
exact: Σx = k·p·A, Σx² = k·p·A²), and per creative the trials and their conversions.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import polars as pl

from transforms.actions import proposals as gen
from transforms.actions.policy import DEFAULT, Policy
from transforms.adaccounts.entities import PlatformEntity
from transforms.adaccounts.kinds import validate_config
from transforms.events import CANONICAL_EVENT_SCHEMA
from transforms.reports.schemas import ACTION_SIGNAL_SCHEMA, SIGNAL_HORIZONS
from warehouse.adaccounts import repository as adaccounts
from warehouse.db import Database
from warehouse.lake import Lake
from warehouse.reports.report_lake import ACTION_SIGNALS, CANONICAL_EVENTS, write_day, write_days

DAYS = 60


@dataclass(frozen=True)
class Campaign:
    name: str
    installs: int  # per cohort day, over the countries below
    cpi: float
    payer_share: float  # of installs, paying `price` once at install
    price: float
    budget: float | None = None  # registry daily budget (major units); None: no budget known
    # creative -> (share of installs, trials per day, conversions per day)
    creatives: Mapping[str, tuple[float, int, int]] = field(default_factory=dict)
    countries: Mapping[str, float] = field(default_factory=lambda: {"US": 0.6, "DE": 0.4})


def signal_rows(workspace_id: str, through: date, campaigns: Sequence[Campaign], days: int = DAYS) -> pl.DataFrame:
    """One row per cohort day x campaign x creative x country (offer and paywall "(none)")."""
    rows = []
    for back in range(1, days + 1):
        cohort = through - timedelta(days=back)
        complete = min(back, 30)
        for c in campaigns:
            creatives = c.creatives or {f"{c.name}_cr1": (1.0, 0, 0)}
            for creative, (share, trials, wins) in creatives.items():
                for country, weight in c.countries.items():
                    n = round(c.installs * share * weight)
                    payers = round(n * c.payer_share)
                    net = payers * c.price
                    row = {
                        "workspace_id": workspace_id,
                        "cohort_date": cohort,
                        "campaign": c.name,
                        "creative": creative,
                        "country": country,
                        "offer": "(none)",
                        "paywall": "(none)",
                        "installs": n,
                        "spend": n * c.cpi,
                        "paywall_users": 0,
                        "trials": round(trials * weight),
                        "trial_conversions": round(wins * weight),
                        "subscriptions": 0,
                        "refunds_n": 0,
                        "complete_days": complete,
                    }
                    for h in SIGNAL_HORIZONS:
                        row[f"net_rev_d{h}"] = net
                        row[f"net_rev_sq_d{h}"] = payers * c.price**2
                    rows.append(row)
    return pl.DataFrame(rows, schema=ACTION_SIGNAL_SCHEMA)


def write_lake(lake: Lake, frame: pl.DataFrame, through: date) -> None:
    """The signals' partitions, and an (empty) canonical-events partition of `through`, the day the
    reports say they are as of (`store.last_day`)."""
    days = sorted(set(frame.get_column("cohort_date").to_list()))
    write_days(lake, ACTION_SIGNALS, days, frame, pl.col("cohort_date"))
    write_day(lake, CANONICAL_EVENTS, through, pl.DataFrame(schema=CANONICAL_EVENT_SCHEMA))


def registry(campaigns: Sequence[Campaign], currency: str = "USD") -> dict[str, gen.RegistryCampaign]:
    """The pure functions' registry snapshot of the campaigns (budgets in minor units)."""
    return {
        c.name: gen.RegistryCampaign(
            name=c.name,
            ad_account_id="adacct_test",
            platform="sandbox",
            daily_budget_minor=None if c.budget is None else round(c.budget * 100),
            currency=currency,
            status="active",
            edited_at=None,
            creatives={k: "active" for k in (c.creatives or {f"{c.name}_cr1": ()})},
        )
        for c in campaigns
    }


def context(campaigns: Sequence[Campaign], through: date, *, policy: Policy = DEFAULT, **kw: object) -> gen.Context:
    as_of = datetime.combine(through, datetime.min.time(), tzinfo=UTC) + timedelta(hours=6)
    return gen.Context(
        workspace_id="ws_test",
        as_of=as_of,
        data_through=through,
        policy=policy,
        registry=registry(campaigns),
        **kw,  # type: ignore[arg-type]
    )


def connect_registry(db: Database, workspace_id: str, campaigns: Sequence[Campaign], currency: str = "USD") -> str:
    """A sandbox ad account whose registry holds the campaigns (budgets) and one ad per creative,
    labelled as the reports name them; returns the account id."""
    with db.write() as conn:
        account = adaccounts.connect(
            conn,
            workspace_id=workspace_id,
            platform="sandbox",
            config=validate_config("sandbox", {}),
            instance_key=secrets.token_urlsafe(32),
            actor="test",
        )
        listed = []
        for c in campaigns:
            cid = f"sandbox:campaign:{c.name}"
            budget = None if c.budget is None else round(c.budget * 100)
            listed.append(PlatformEntity("campaign", cid, None, c.name, "active", budget, currency, None, c.name))
            for creative in c.creatives or {f"{c.name}_cr1": ()}:
                listed.append(
                    PlatformEntity(
                        "ad", f"sandbox:ad:{creative}", cid, creative, "active", None, currency, None, c.name, creative
                    )
                )
        adaccounts.upsert_entities(conn, account=account, listed=listed)
    return account.id


# The planted world of the tests: `fast` returns 4x `slow`'s revenue per install at a lower CPI,
# `weak_cr` converts trials at a fifth of its campaign's other creative while taking half its
# installs; `steady` is a third campaign like the average.
FAST = Campaign("fast", 40, 1.0, 0.10, 20.0, budget=100.0, creatives={"fast_cr1": (1.0, 6, 3)})
SLOW = Campaign("slow", 40, 2.0, 0.05, 20.0, budget=100.0, creatives={"slow_cr1": (1.0, 6, 3)})
MIXED = Campaign(
    "mixed",
    40,
    1.5,
    0.07,
    20.0,
    budget=80.0,
    creatives={"weak_cr": (0.5, 6, 1), "good_cr": (0.5, 6, 4)},
)
WORLD = (FAST, SLOW, MIXED)
