"""A seeded, internally consistent demo history: canonical events and daily ad spend.

Pure and deterministic: the same config gives byte-for-byte the same frames, so `flokit demo
seed` run twice lands nothing new (event ids repeat and dedup drops them). Vectorized with numpy
so that a million users (the benchmark) take seconds, not minutes.

The story it tells: paid campaigns (each with creatives) and organic traffic bring installs in
six countries at each campaign's cost per install; users live for a number of weeks drawn from
a shifted-beta-geometric process (per-user weekly churn probability ~ Beta(a, b), better for
some campaigns), see the onboarding paywall on install day and one paywall each further week
they are alive; some tap an offer, start a trial or subscribe; trials convert or cancel;
subscriptions renew every billing period until the user churns (then cancel); a few charges
are refunded. Revenue is in USD, the demo workspace's reporting currency.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime

import numpy as np
import polars as pl

from transforms.events import CANONICAL_EVENT_SCHEMA
from transforms.reports.schemas import SPEND_SCHEMA

DAY_S = 86_400.0
WEEK_S = 7 * DAY_S
CURRENCY = "USD"

# (name, share of paid installs, CPI multiplier, churn Beta(a, b): larger b = longer lives)
CAMPAIGNS = (
    ("meta_broad", 0.30, 1.00, (1.6, 8.0)),
    ("meta_lookalike", 0.20, 1.25, (1.6, 10.0)),
    ("google_uac", 0.25, 0.85, (1.8, 7.0)),
    ("tiktok_spark", 0.15, 0.70, (2.0, 5.0)),
    ("apple_search", 0.10, 1.60, (1.4, 11.0)),
)
ORGANIC_SHARE = 0.2
ORGANIC_CHURN = (1.4, 11.0)
CREATIVE_WEIGHTS = (0.5, 0.3, 0.2)  # three creatives per campaign, the first one the winner
# (country, share of installs, base CPI in USD, conversion multiplier)
COUNTRIES = (
    ("US", 0.35, 1.60, 1.15),
    ("GB", 0.12, 1.30, 1.05),
    ("DE", 0.13, 1.20, 1.00),
    ("FR", 0.10, 1.00, 0.90),
    ("BR", 0.20, 0.35, 0.60),
    ("JP", 0.10, 1.40, 0.95),
)
# (product_id, share of taps, price USD, billing period days, trial days)
OFFERS = (
    ("pro_weekly_699", 0.5, 6.99, 7, 3),
    ("pro_monthly_1999", 0.3, 19.99, 30, 7),
    ("pro_weekly_499", 0.2, 4.99, 7, 0),
)
ONBOARDING_PAYWALLS = (("onboarding", 0.7), ("promo", 0.3))
VARIANTS = ("control", "b")
ONBOARDING_SEEN = 0.9
TAP_RATE = 0.45
TRIAL_START_RATE = 0.6
DIRECT_SUBSCRIBE_RATE = 0.3
TRIAL_CONVERSION = 0.5
REFUND_RATE = 0.03
STRAY_SPEND_RATE = 0.2  # Poisson mean of extra "wasted" installs' worth of spend per cell-day


@dataclass(frozen=True)
class DemoConfig:
    workspace_id: str
    users: int
    days: int
    seed: int
    start: date  # first UTC day of the history; it ends at start + days (exclusive)
    currency: str = CURRENCY  # the workspace reporting currency the amounts are in


@dataclass(frozen=True)
class DemoData:
    events: pl.DataFrame  # CANONICAL_EVENT_SCHEMA, sorted by occurred_at then event_id
    spend: pl.DataFrame  # SPEND_SCHEMA, one row per day x campaign x creative x country


def _repeat(index: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each index repeated counts times, with its 1-based occurrence number."""
    owners = np.repeat(index, counts)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    return owners, np.arange(owners.size) - starts + 1


def generate(config: DemoConfig) -> DemoData:
    rng = np.random.default_rng(config.seed)
    n, horizon = config.users, config.days * DAY_S
    # --- acquisition ---------------------------------------------------------------------
    install_day = rng.integers(0, config.days, n)
    t_install = install_day * DAY_S + rng.uniform(0, DAY_S - 3600, n)
    organic = rng.random(n) < ORGANIC_SHARE
    campaign = rng.choice(len(CAMPAIGNS), n, p=[c[1] for c in CAMPAIGNS])
    creative = rng.choice(len(CREATIVE_WEIGHTS), n, p=CREATIVE_WEIGHTS)
    country = rng.choice(len(COUNTRIES), n, p=[c[1] for c in COUNTRIES])
    ios = rng.random(n) < 0.55
    churn_a = np.where(organic, ORGANIC_CHURN[0], np.array([c[3][0] for c in CAMPAIGNS])[campaign])
    churn_b = np.where(organic, ORGANIC_CHURN[1], np.array([c[3][1] for c in CAMPAIGNS])[campaign])
    theta = rng.beta(churn_a, churn_b)
    lifetime_weeks = rng.geometric(np.clip(theta, 1e-6, 1.0))  # >= 1: alive in weeks 0..L-1
    alive_end = (install_day + 7 * lifetime_weeks) * DAY_S  # midnight-aligned, so week = date arithmetic
    end = np.minimum(alive_end, horizon)

    rows: list[dict[str, np.ndarray]] = []

    def emit(kind: str, user: np.ndarray, t: np.ndarray, **extra: np.ndarray) -> None:
        keep = t < horizon if kind == "refund" else t < end[user]
        rows.append(
            {"kind": np.full(int(keep.sum()), kind), "user": user[keep], "t": t[keep]}
            | {k: v[keep] for k, v in extra.items()}
        )

    everyone = np.arange(n)
    emit("install", everyone, t_install)
    # --- paywalls: onboarding on install day, then one per further alive week -------------
    saw = everyone[rng.random(n) < ONBOARDING_SEEN]
    t_seen = t_install[saw] + rng.uniform(30, 600, saw.size)
    paywall = rng.choice(len(ONBOARDING_PAYWALLS), saw.size, p=[p[1] for p in ONBOARDING_PAYWALLS])
    variant = rng.integers(0, len(VARIANTS), saw.size)
    emit("paywall_impression", saw, t_seen, paywall=paywall, variant=variant)
    weekly_user, week = _repeat(everyone, lifetime_weeks - 1)
    t_weekly = (install_day[weekly_user] + 7 * week) * DAY_S + rng.uniform(0, WEEK_S - 3600, weekly_user.size)
    emit(
        "paywall_impression",
        weekly_user,
        t_weekly,
        paywall=np.full(weekly_user.size, 2),
        variant=np.zeros(weekly_user.size, int),
    )
    # --- offer taps, trials and subscriptions (all from the onboarding paywall) ------------
    conv = np.array([c[3] for c in COUNTRIES])[country]
    tapped = rng.random(saw.size) < TAP_RATE * conv[saw]
    tap_user, t_tap = saw[tapped], t_seen[tapped] + rng.uniform(5, 120, int(tapped.sum()))
    offer = rng.choice(len(OFFERS), tap_user.size, p=[o[1] for o in OFFERS])
    emit("paywall_offer_tap", tap_user, t_tap, paywall=paywall[tapped], variant=variant[tapped], offer=offer)
    price = np.array([o[2] for o in OFFERS])
    period = np.array([o[3] for o in OFFERS]) * DAY_S
    trial_days = np.array([o[4] for o in OFFERS])
    has_trial = trial_days[offer] > 0
    t_start = t_tap + rng.uniform(10, 60, tap_user.size)
    trial = has_trial & (rng.random(tap_user.size) < TRIAL_START_RATE)
    emit("trial_start", tap_user[trial], t_start[trial], offer=offer[trial])
    t_convert = t_start + trial_days[offer] * DAY_S
    converts = trial & (rng.random(tap_user.size) < TRIAL_CONVERSION * conv[tap_user]) & (t_convert < end[tap_user])
    lapses = trial & ~converts
    t_lapse = t_start + np.maximum(1, trial_days[offer] - 2) * DAY_S
    emit("cancellation", tap_user[lapses], t_lapse[lapses], offer=offer[lapses])
    direct = ~has_trial & (rng.random(tap_user.size) < DIRECT_SUBSCRIBE_RATE * conv[tap_user])
    emit(
        "trial_converted",
        tap_user[converts],
        t_convert[converts],
        offer=offer[converts],
        revenue=price[offer[converts]],
    )
    emit("subscription_start", tap_user[direct], t_start[direct], offer=offer[direct], revenue=price[offer[direct]])
    # --- renewals every period while alive, cancellation when the user churns --------------
    paid = converts | direct
    sub_user, sub_offer = tap_user[paid], offer[paid]
    s0 = np.where(converts, t_convert, t_start)[paid]
    renewals = np.maximum(0, np.ceil((end[sub_user] - s0) / period[sub_offer]).astype(np.int64) - 1)
    renew_idx, k = _repeat(np.arange(sub_user.size), renewals)
    t_renew = s0[renew_idx] + k * period[sub_offer[renew_idx]]
    emit("renewal", sub_user[renew_idx], t_renew, offer=sub_offer[renew_idx], revenue=price[sub_offer[renew_idx]])
    churned = alive_end[sub_user] <= horizon
    emit("cancellation", sub_user[churned], alive_end[sub_user[churned]] - 3600.0, offer=sub_offer[churned])
    # --- refunds of a few charges ----------------------------------------------------------
    charges = [
        r for r in rows if r["kind"].size and r["kind"][0] in ("trial_converted", "subscription_start", "renewal")
    ]
    ch_user = np.concatenate([r["user"] for r in charges] + [np.zeros(0, np.int64)])
    ch_t = np.concatenate([r["t"] for r in charges] + [np.zeros(0)])
    ch_offer = np.concatenate([r["offer"] for r in charges] + [np.zeros(0, np.int64)])
    refunded = rng.random(ch_user.size) < REFUND_RATE
    emit(
        "refund",
        ch_user[refunded],
        ch_t[refunded] + 2 * DAY_S,
        offer=ch_offer[refunded],
        revenue=price[ch_offer[refunded]],
    )

    events = _events_frame(config, rows, organic, campaign, creative, country, ios)
    spend = _spend_frame(config, rng, install_day, organic, campaign, creative, country)
    return DemoData(events=events, spend=spend)


def _names(values: tuple[tuple, ...] | tuple[str, ...]) -> list[str]:
    return [v[0] if isinstance(v, tuple) else v for v in values]


def _events_frame(
    config: DemoConfig,
    rows: list[dict[str, np.ndarray]],
    organic: np.ndarray,
    campaign: np.ndarray,
    creative: np.ndarray,
    country: np.ndarray,
    ios: np.ndarray,
) -> pl.DataFrame:
    frames = []
    for r in rows:
        size = r["user"].size
        frames.append(
            pl.DataFrame(
                {
                    "event_type": r["kind"].astype(str),
                    "user": r["user"].astype(np.int64),
                    "t_us": np.round(r["t"] * 1e6).astype(np.int64),
                    "paywall": r.get("paywall", np.full(size, -1)).astype(np.int64),
                    "variant": r.get("variant", np.full(size, -1)).astype(np.int64),
                    "offer": r.get("offer", np.full(size, -1)).astype(np.int64),
                    "revenue": r.get("revenue", np.full(size, np.nan)).astype(np.float64),
                }
            )
        )
    users = pl.DataFrame(
        {
            "user": np.arange(organic.size, dtype=np.int64),
            "campaign": np.where(organic, -1, campaign).astype(np.int64),
            "creative": creative.astype(np.int64),
            "country": country.astype(np.int64),
            "ios": ios,
        }
    )
    start_us = int(datetime(config.start.year, config.start.month, config.start.day, tzinfo=UTC).timestamp() * 1e6)
    paywalls = [*_names(ONBOARDING_PAYWALLS), "settings"]
    lookup = {
        "campaign_name": (pl.col("campaign"), _names(CAMPAIGNS)),
        "country_name": (pl.col("country"), _names(COUNTRIES)),
        "paywall_id": (pl.col("paywall"), paywalls),
        "variant_id": (pl.col("variant"), list(VARIANTS)),
        "product_id": (pl.col("offer"), _names(OFFERS)),
    }
    named = {
        name: pl.when(idx >= 0).then(idx.replace_strict(list(range(len(labels))), labels, default=None))
        for name, (idx, labels) in lookup.items()
    }
    prop = {
        "install": pl.when(pl.col("campaign") >= 0)
        .then(
            pl.format(
                '{{"campaign":"{}","creative":"{}_cr{}"}}', "campaign_name", "campaign_name", pl.col("creative") + 1
            )
        )
        .otherwise(pl.lit("{}")),
        "paywall_impression": pl.format('{{"paywall_id":"{}","variant_id":"{}"}}', "paywall_id", "variant_id"),
        "paywall_offer_tap": pl.format(
            '{{"paywall_id":"{}","product_id":"{}","variant_id":"{}"}}', "paywall_id", "product_id", "variant_id"
        ),
        "money": pl.format(
            '{{"currency":"{}","product_id":"{}","revenue":{}}}',
            pl.lit(config.currency),
            "product_id",
            pl.col("revenue").cast(pl.String),
        ),
        "offer_only": pl.format('{{"product_id":"{}"}}', "product_id"),
    }
    kind = pl.col("event_type")
    properties = (
        pl.when(kind == "install")
        .then(prop["install"])
        .when(kind == "paywall_impression")
        .then(prop["paywall_impression"])
        .when(kind == "paywall_offer_tap")
        .then(prop["paywall_offer_tap"])
        .when(kind.is_in(("trial_converted", "subscription_start", "renewal", "refund")))
        .then(prop["money"])
        .otherwise(prop["offer_only"])
    )
    occurred = pl.from_epoch(pl.col("t_us") + start_us, time_unit="us").dt.replace_time_zone("UTC")
    return (
        pl.concat(frames)
        .join(users, on="user", how="left")
        .with_columns(**named)
        .sort("t_us", "user", "event_type")
        .with_row_index("seq")
        .select(
            pl.format("evt_demo{}_{}", pl.lit(config.seed), pl.col("seq").cast(pl.String).str.zfill(9)).alias(
                "event_id"
            ),
            pl.lit(config.workspace_id).alias("workspace_id"),
            "event_type",
            occurred.alias("occurred_at"),
            pl.when("ios").then(pl.lit("ios")).otherwise(pl.lit("android")).alias("platform"),
            pl.col("country_name").alias("country"),
            pl.format("usr_demo{}_{}", pl.lit(config.seed), pl.col("user").cast(pl.String).str.zfill(8)).alias(
                "user_id"
            ),
            pl.lit(None, pl.String).alias("adid"),
            pl.lit(None, pl.String).alias("idfa"),
            pl.lit(None, pl.String).alias("gps_adid"),
            properties.alias("properties"),
            pl.lit("demo").alias("source"),
            occurred.alias("received_at"),
        )
        .cast(CANONICAL_EVENT_SCHEMA)
    )


def _spend_frame(
    config: DemoConfig,
    rng: np.random.Generator,
    install_day: np.ndarray,
    organic: np.ndarray,
    campaign: np.ndarray,
    creative: np.ndarray,
    country: np.ndarray,
) -> pl.DataFrame:
    """Daily spend per cell = (paid installs + a little waste) x CPI x noise: believable CACs,
    and some spend on days a cell brought nobody (the allocation's "(none)" path)."""
    shape = (config.days, len(CAMPAIGNS), len(CREATIVE_WEIGHTS), len(COUNTRIES))
    installs = np.zeros(shape, dtype=np.int64)
    paid = ~organic
    np.add.at(installs, (install_day[paid], campaign[paid], creative[paid], country[paid]), 1)
    cpi = (
        np.array([c[2] for c in CAMPAIGNS])[None, :, None, None]
        * np.array([c[2] for c in COUNTRIES])[None, None, None, :]
    )
    waste = rng.poisson(STRAY_SPEND_RATE, shape)
    spend = np.round((installs + waste) * cpi * rng.lognormal(0.0, 0.2, shape), 2)
    d, c, k, g = np.nonzero(spend > 0)
    return pl.DataFrame(
        {
            "workspace_id": [config.workspace_id] * d.size,
            "spend_date": np.datetime64(config.start.isoformat(), "D") + d.astype("timedelta64[D]"),
            "campaign": np.array(_names(CAMPAIGNS))[c],
            "creative": np.char.add(np.char.add(np.array(_names(CAMPAIGNS))[c], "_cr"), (k + 1).astype(str)),
            "country": np.array(_names(COUNTRIES))[g],
            "spend": spend[d, c, k, g],
            "currency": [config.currency] * d.size,
        }
    ).cast(SPEND_SCHEMA)
