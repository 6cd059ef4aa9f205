"""A seeded, internally consistent demo history drawn from an explicit world of known parameters.

Pure and deterministic: the same config and world give byte-for-byte the same frames, so `flokit
demo seed` run twice lands nothing new (event ids repeat and dedup drops them). Vectorized with
numpy so that a million users (the benchmark) take seconds, not minutes.

Every behaviour is a parameter of `DemoWorld` (per campaign, creative, country and offer), so
`transforms.demo_truth` can compute what the reports *should* show from the parameters alone and
the planted-truth tests can hold the whole pipeline to it. The story it tells: paid campaigns
(each with creatives) and organic traffic bring installs in six countries at each campaign's
cost per install; users live for a number of weeks drawn from a shifted-beta-geometric process
(per-user weekly churn probability ~ Beta(a, b) of their campaign), see the onboarding paywall
on install day and one paywall each further week they are alive; some tap an offer, start a
trial or subscribe; a trial converts (with the campaign's rate, times its creative's and, for
some offers, its country's multiplier) if the user is still alive when it ends; subscriptions
renew every billing period until the user churns (then cancel); each charge is refunded with
its offer's refund rate, two days later or just before the user leaves. Revenue is in the
workspace's reporting currency.

`DEFAULT_WORLD` plants a story (`transforms.demo_truth.story` names it from the parameters): one
campaign pays back clearly fastest and one clearly slowest at the same volume, one creative
converts trials at half its campaign's average while taking most of its spend, and one offer
converts trials far better than the others in one country. `NO_SIGNAL_WORLD` is the A/A world:
every campaign, creative and offer behaves the same, so nothing there is a story.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime

import numpy as np
import polars as pl

from transforms.events import CANONICAL_EVENT_SCHEMA
from transforms.reports.schemas import SPEND_SCHEMA

DAY_S = 86_400.0
WEEK_S = 7 * DAY_S
CURRENCY = "USD"
REFUND_LAG_DAYS = 2  # a refund lands two days after its charge (sooner if the user leaves first)
SPEND_NOISE_SIGMA = 0.2  # daily spend per cell is multiplied by lognormal(0, sigma) noise


@dataclass(frozen=True)
class Churn:
    """Per-user weekly churn probability theta ~ Beta(a, b): larger b = longer lives."""

    a: float
    b: float


@dataclass(frozen=True)
class CreativeParams:
    weight: float  # share of its campaign's installs (and so of its spend)
    trial_to_paid: float = 1.0  # multiplier on the campaign's trial -> paid rate


@dataclass(frozen=True)
class CampaignParams:
    name: str
    share: float  # of paid installs
    cpi: float  # true cost per paid install before the country's multiplier
    tap_rate: float  # P(tap an offer | saw the onboarding paywall), before the country's multiplier
    trial_to_paid: float  # P(trial converts | started, user alive when it ends), before multipliers
    churn: Churn
    creatives: tuple[CreativeParams, ...] = (CreativeParams(0.5), CreativeParams(0.3), CreativeParams(0.2))


@dataclass(frozen=True)
class CountryParams:
    name: str
    share: float  # of all installs
    cpi: float  # multiplier on the campaign's cost per install
    tap_rate: float  # multiplier on the campaign's tap rate


@dataclass(frozen=True)
class OfferParams:
    product_id: str
    share: float  # of taps
    price: float  # per billing period, in the reporting currency
    period_days: int
    trial_days: int  # 0: no trial, the tap subscribes directly (or not)
    refund_rate: float  # share of charges refunded
    trial_to_paid_by_country: tuple[tuple[str, float], ...] = ()  # (country, multiplier)

    def trial_multiplier(self, country: str) -> float:
        return dict(self.trial_to_paid_by_country).get(country, 1.0)


@dataclass(frozen=True)
class DemoWorld:
    campaigns: tuple[CampaignParams, ...]
    organic: CampaignParams  # share: of all installs; cpi 0; its creatives are not used
    countries: tuple[CountryParams, ...]
    offers: tuple[OfferParams, ...]
    onboarding_paywalls: tuple[tuple[str, float], ...] = (("onboarding", 0.7), ("promo", 0.3))
    variants: tuple[str, ...] = ("control", "b")
    onboarding_seen: float = 0.9  # P(the onboarding paywall shows on install day)
    trial_start_rate: float = 0.6  # P(start the trial | tapped an offer with a trial)
    direct_subscribe_rate: float = 0.3  # P(subscribe | tapped an offer without a trial)
    stray_spend_rate: float = 0.05  # Poisson mean of extra "wasted" installs' worth of spend per cell-day
    ios_share: float = 0.55

    def creative_name(self, campaign: int, creative: int) -> str:
        return f"{self.campaigns[campaign].name}_cr{creative + 1}"


COUNTRIES = (
    CountryParams("US", 0.35, 1.60, 1.15),
    CountryParams("GB", 0.12, 1.30, 1.05),
    CountryParams("DE", 0.13, 1.20, 1.00),
    CountryParams("FR", 0.10, 1.00, 0.90),
    CountryParams("BR", 0.20, 0.35, 0.60),
    CountryParams("JP", 0.10, 1.40, 0.95),
)

# The planted story (transforms.demo_truth.story derives it from these numbers): meta_broad and
# google_uac bring the same volume, but meta_broad is cheap, converts well and keeps its users
# (pays back fastest) while google_uac is dear, converts poorly and loses them (slowest);
# meta_lookalike_cr1 takes 60 % of its campaign's spend and converts trials at half the
# campaign's average; pro_weekly_699 converts trials 1.8x as often in the US as elsewhere.
DEFAULT_WORLD = DemoWorld(
    campaigns=(
        CampaignParams("meta_broad", 0.25, 0.90, 0.50, 0.60, Churn(1.4, 12.0)),
        CampaignParams(
            "meta_lookalike",
            0.20,
            1.10,
            0.45,
            0.60,
            Churn(1.6, 10.0),
            (CreativeParams(0.6, 0.2857), CreativeParams(0.25), CreativeParams(0.15)),
        ),
        CampaignParams("google_uac", 0.25, 2.00, 0.40, 0.40, Churn(2.0, 6.0)),
        CampaignParams("tiktok_spark", 0.15, 1.20, 0.45, 0.45, Churn(2.0, 7.0)),
        CampaignParams("apple_search", 0.15, 1.60, 0.45, 0.55, Churn(1.4, 11.0)),
    ),
    organic=CampaignParams("organic", 0.2, 0.0, 0.45, 0.50, Churn(1.4, 11.0)),
    countries=COUNTRIES,
    offers=(
        OfferParams("pro_weekly_699", 0.5, 6.99, 7, 3, 0.03, (("US", 1.8),)),
        OfferParams("pro_monthly_1999", 0.3, 19.99, 30, 7, 0.03),
        OfferParams("pro_weekly_499", 0.2, 4.99, 7, 0, 0.03),
    ),
)


def no_signal(world: DemoWorld) -> DemoWorld:
    """The A/A world: the same campaigns, creatives and offers by name, every campaign, creative
    and offer drawn from the same parameters (the first campaign's and the first offer's: equal
    volume, cost, funnel rates and churn; equal creatives; offers alike in price, period, trial,
    refunds and conversion everywhere). Countries and organic traffic keep theirs: they are not
    compared as a story. Whatever the reports rank among campaigns, creatives or offers here is
    noise, which is what an engine looking for stories must stay silent on."""
    base = world.campaigns[0]
    creatives = tuple(CreativeParams(1.0) for _ in base.creatives)
    campaigns = tuple(replace(base, name=c.name, share=1.0, creatives=creatives) for c in world.campaigns)
    offer = replace(world.offers[0], share=1.0, trial_to_paid_by_country=())
    offers = tuple(replace(offer, product_id=o.product_id) for o in world.offers)
    return replace(world, campaigns=campaigns, offers=offers)


NO_SIGNAL_WORLD = no_signal(DEFAULT_WORLD)


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
    world: DemoWorld = field(default=DEFAULT_WORLD)
    # What the generator simulated, for the subscription truth (`demo_truth.subscription_truth`):
    # each paid subscription (user, offer, paid_from, paid_until), each trial (user, offer,
    # trial_from, trial_until) and each charge (user, offer, t, refunded), times in seconds from
    # the start, as drawn: not read back from the events.
    lifecycles: dict[str, pl.DataFrame] = field(default_factory=dict)


def _repeat(index: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each index repeated counts times, with its 1-based occurrence number."""
    owners = np.repeat(index, counts)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    return owners, np.arange(owners.size) - starts + 1


def _creative_weights(world: DemoWorld) -> np.ndarray:
    """(campaign, creative) weights, zero-padded to the most creatives any campaign has."""
    width = max(len(c.creatives) for c in world.campaigns)
    out = np.zeros((len(world.campaigns), width))
    for i, c in enumerate(world.campaigns):
        out[i, : len(c.creatives)] = [k.weight / sum(x.weight for x in c.creatives) for k in c.creatives]
    return out


def generate(config: DemoConfig, world: DemoWorld = DEFAULT_WORLD) -> DemoData:
    rng = np.random.default_rng(config.seed)
    n, horizon = config.users, config.days * DAY_S
    campaigns, countries, offers = world.campaigns, world.countries, world.offers
    # --- acquisition ---------------------------------------------------------------------
    install_day = rng.integers(0, config.days, n)
    t_install = install_day * DAY_S + rng.uniform(0, DAY_S - 3600, n)
    organic = rng.random(n) < world.organic.share
    shares = np.array([c.share for c in campaigns])
    campaign = rng.choice(len(campaigns), n, p=shares / shares.sum())
    weights = _creative_weights(world)
    creative = (rng.random(n)[:, None] > np.cumsum(weights, axis=1)[campaign]).sum(axis=1)
    creative = np.minimum(creative, weights.shape[1] - 1)
    country_share = np.array([c.share for c in countries])
    country = rng.choice(len(countries), n, p=country_share / country_share.sum())
    ios = rng.random(n) < world.ios_share

    def per_user(values: list[float], organic_value: float) -> np.ndarray:
        return np.where(organic, organic_value, np.array(values)[campaign])

    churn_a = per_user([c.churn.a for c in campaigns], world.organic.churn.a)
    churn_b = per_user([c.churn.b for c in campaigns], world.organic.churn.b)
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
    saw = everyone[rng.random(n) < world.onboarding_seen]
    t_seen = t_install[saw] + rng.uniform(30, 600, saw.size)
    paywall_share = np.array([p[1] for p in world.onboarding_paywalls])
    paywall = rng.choice(paywall_share.size, saw.size, p=paywall_share / paywall_share.sum())
    variant = rng.integers(0, len(world.variants), saw.size)
    emit("paywall_impression", saw, t_seen, paywall=paywall, variant=variant)
    weekly_user, week = _repeat(everyone, lifetime_weeks - 1)
    t_weekly = (install_day[weekly_user] + 7 * week) * DAY_S + rng.uniform(0, WEEK_S - 3600, weekly_user.size)
    emit(
        "paywall_impression",
        weekly_user,
        t_weekly,
        paywall=np.full(weekly_user.size, paywall_share.size),
        variant=np.zeros(weekly_user.size, int),
    )
    # --- offer taps, trials and subscriptions (all from the onboarding paywall) ------------
    tap_rate = per_user([c.tap_rate for c in campaigns], world.organic.tap_rate)
    tap_rate = tap_rate * np.array([c.tap_rate for c in countries])[country]
    tapped = rng.random(saw.size) < tap_rate[saw]
    tap_user, t_tap = saw[tapped], t_seen[tapped] + rng.uniform(5, 120, int(tapped.sum()))
    offer_share = np.array([o.share for o in offers])
    offer = rng.choice(len(offers), tap_user.size, p=offer_share / offer_share.sum())
    emit("paywall_offer_tap", tap_user, t_tap, paywall=paywall[tapped], variant=variant[tapped], offer=offer)
    price = np.array([o.price for o in offers])
    period = np.array([o.period_days for o in offers]) * DAY_S
    trial_days = np.array([o.trial_days for o in offers])
    has_trial = trial_days[offer] > 0
    t_start = t_tap + rng.uniform(10, 60, tap_user.size)
    trial = has_trial & (rng.random(tap_user.size) < world.trial_start_rate)
    emit(
        "trial_start",
        tap_user[trial],
        t_start[trial],
        offer=offer[trial],
        until=t_start[trial] + trial_days[offer[trial]] * DAY_S,
    )
    creative_mult = np.array(
        [[k.trial_to_paid for k in c.creatives] + [1.0] * (weights.shape[1] - len(c.creatives)) for c in campaigns]
    )
    offer_country = np.array([[o.trial_multiplier(g.name) for g in countries] for o in offers])
    to_paid = (
        np.where(
            organic[tap_user],
            world.organic.trial_to_paid,
            np.array([c.trial_to_paid for c in campaigns])[campaign[tap_user]]
            * creative_mult[campaign[tap_user], creative[tap_user]],
        )
        * offer_country[offer, country[tap_user]]
    )
    t_convert = t_start + trial_days[offer] * DAY_S
    converts = trial & (rng.random(tap_user.size) < to_paid) & (t_convert < end[tap_user])
    lapses = trial & ~converts
    t_lapse = t_start + np.maximum(1, trial_days[offer] - 2) * DAY_S
    emit("cancellation", tap_user[lapses], t_lapse[lapses], offer=offer[lapses])
    direct = ~has_trial & (rng.random(tap_user.size) < world.direct_subscribe_rate)
    emit(
        "trial_converted",
        tap_user[converts],
        t_convert[converts],
        offer=offer[converts],
        revenue=price[offer[converts]],
        until=t_convert[converts] + period[offer[converts]],
        charge=t_convert[converts],
    )
    emit(
        "subscription_start",
        tap_user[direct],
        t_start[direct],
        offer=offer[direct],
        revenue=price[offer[direct]],
        until=t_start[direct] + period[offer[direct]],
        charge=t_start[direct],
    )
    # --- renewals every period while alive, cancellation when the user churns --------------
    paid = converts | direct
    sub_user, sub_offer = tap_user[paid], offer[paid]
    s0 = np.where(converts, t_convert, t_start)[paid]
    renewals = np.maximum(0, np.ceil((end[sub_user] - s0) / period[sub_offer]).astype(np.int64) - 1)
    renew_idx, k = _repeat(np.arange(sub_user.size), renewals)
    t_renew = s0[renew_idx] + k * period[sub_offer[renew_idx]]
    emit(
        "renewal",
        sub_user[renew_idx],
        t_renew,
        offer=sub_offer[renew_idx],
        revenue=price[sub_offer[renew_idx]],
        until=t_renew + period[sub_offer[renew_idx]],
        charge=t_renew,
    )
    churned = alive_end[sub_user] <= horizon
    emit("cancellation", sub_user[churned], alive_end[sub_user[churned]] - 3600.0, offer=sub_offer[churned])
    # --- refunds: two days after the charge, or just before the user leaves (a refund is
    # activity, and must not make a gone user look retained) --------------------------------
    charges = [
        r for r in rows if r["kind"].size and r["kind"][0] in ("trial_converted", "subscription_start", "renewal")
    ]
    ch_user = np.concatenate([r["user"] for r in charges] + [np.zeros(0, np.int64)])
    ch_t = np.concatenate([r["t"] for r in charges] + [np.zeros(0)])
    ch_offer = np.concatenate([r["offer"] for r in charges] + [np.zeros(0, np.int64)])
    refunded = rng.random(ch_user.size) < np.array([o.refund_rate for o in offers])[ch_offer]
    t_refund = np.minimum(ch_t + REFUND_LAG_DAYS * DAY_S, alive_end[ch_user] - 1800.0)
    emit(
        "refund",
        ch_user[refunded],
        t_refund[refunded],
        offer=ch_offer[refunded],
        revenue=price[ch_offer[refunded]],
        charge=ch_t[refunded],
    )
    # --- what was simulated: paid subscriptions (while their start was emitted), trials, charges
    started = s0 < end[sub_user]
    paid_until = s0 + (renewals + 1) * period[sub_offer]
    trial_kept = trial & (t_start < end[tap_user])
    lifecycles = {
        "subscriptions": pl.DataFrame(
            {
                "user": sub_user[started],
                "offer": sub_offer[started],
                "paid_from": s0[started],
                "paid_until": paid_until[started],
                "converted": converts[paid][started],
            }
        ),
        "trials": pl.DataFrame(
            {
                "user": tap_user[trial_kept],
                "offer": offer[trial_kept],
                "trial_from": t_start[trial_kept],
                "trial_until": (t_start + trial_days[offer] * DAY_S)[trial_kept],
            }
        ),
        "charges": pl.DataFrame(
            {
                "user": ch_user,
                "offer": ch_offer,
                "t": ch_t,
                "refunded": refunded & (t_refund < horizon),
                "refunded_at": t_refund,
            }
        ),
    }
    events = _events_frame(config, world, rows, organic, campaign, creative, country, ios)
    spend = _spend_frame(config, world, rng, install_day, organic, campaign, creative, country)
    return DemoData(events=events, spend=spend, world=world, lifecycles=lifecycles)


def billing_period(days: int) -> str:
    """An offer's billing period as an ISO 8601 duration: a week, a month or a year when its
    period is one (so MRR normalizes it by RevenueCat's table), else its days."""
    return {7: "P1W", 14: "P2W", 30: "P1M", 365: "P1Y"}.get(days, f"P{days}D")


def _events_frame(
    config: DemoConfig,
    world: DemoWorld,
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
                    "until_us": np.round(r.get("until", np.zeros(size)) * 1e6).astype(np.int64),
                    "charge_us": np.round(r.get("charge", np.zeros(size)) * 1e6).astype(np.int64),
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
    paywalls = [*(p[0] for p in world.onboarding_paywalls), "settings"]
    lookup = {
        "campaign_name": (pl.col("campaign"), [c.name for c in world.campaigns]),
        "country_name": (pl.col("country"), [c.name for c in world.countries]),
        "paywall_id": (pl.col("paywall"), paywalls),
        "variant_id": (pl.col("variant"), list(world.variants)),
        "product_id": (pl.col("offer"), [o.product_id for o in world.offers]),
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
        # Billing facts as a store's events carry them (docs/notifications.md): the purchase, the
        # charge's transaction, the period's end and billing period.
        "period": pl.format(
            '{{"billing_period":"{}","period_ends_at":"{}","product_id":"{}","purchase_key":"{}"}}',
            "billing_period",
            "period_ends_at",
            "product_id",
            "purchase_key",
        ),
        "charge": pl.format(
            '{{"billing_period":"{}","currency":"{}","period_ends_at":"{}","product_id":"{}","purchase_key":"{}",'
            '"revenue":{},"transaction_id":"{}"}}',
            "billing_period",
            pl.lit(config.currency),
            "period_ends_at",
            "product_id",
            "purchase_key",
            pl.col("revenue").cast(pl.String),
            "transaction_id",
        ),
        "refund": pl.format(
            '{{"currency":"{}","product_id":"{}","purchase_key":"{}","revenue":{},"transaction_id":"{}"}}',
            pl.lit(config.currency),
            "product_id",
            "purchase_key",
            pl.col("revenue").cast(pl.String),
            "transaction_id",
        ),
        "cancellation": pl.format('{{"product_id":"{}","purchase_key":"{}"}}', "product_id", "purchase_key"),
    }
    kind = pl.col("event_type")
    properties = (
        pl.when(kind == "install")
        .then(prop["install"])
        .when(kind == "paywall_impression")
        .then(prop["paywall_impression"])
        .when(kind == "paywall_offer_tap")
        .then(prop["paywall_offer_tap"])
        .when(kind.is_in(("trial_converted", "subscription_start", "renewal")))
        .then(prop["charge"])
        .when(kind == "refund")
        .then(prop["refund"])
        .when(kind == "trial_start")
        .then(prop["period"])
        .when(kind == "cancellation")
        .then(prop["cancellation"])
        .otherwise(prop["offer_only"])
    )
    occurred = pl.from_epoch(pl.col("t_us") + start_us, time_unit="us").dt.replace_time_zone("UTC")
    user_key = pl.format("demo{}_{}", pl.lit(config.seed), pl.col("user").cast(pl.String).str.zfill(8))
    billing = {
        "purchase_key": pl.format("sub_{}", user_key),
        "transaction_id": pl.format("txn_{}_{}", user_key, pl.col("charge_us").cast(pl.String)),
        "period_ends_at": pl.from_epoch(pl.col("until_us") + start_us, time_unit="us").dt.strftime(
            "%Y-%m-%dT%H:%M:%S%.3fZ"
        ),
        "billing_period": pl.col("offer").replace_strict(
            list(range(len(world.offers))), [billing_period(o.period_days) for o in world.offers], default=None
        ),
    }
    return (
        pl.concat(frames)
        .join(users, on="user", how="left")
        .with_columns(**named)
        .with_columns(**billing)
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
    world: DemoWorld,
    rng: np.random.Generator,
    install_day: np.ndarray,
    organic: np.ndarray,
    campaign: np.ndarray,
    creative: np.ndarray,
    country: np.ndarray,
) -> pl.DataFrame:
    """Daily spend per cell = (paid installs + a little waste) x CPI x noise: believable CACs,
    and some spend on days a cell brought nobody (the allocation's "(none)" path)."""
    weights = _creative_weights(world)
    shape = (config.days, len(world.campaigns), weights.shape[1], len(world.countries))
    installs = np.zeros(shape, dtype=np.int64)
    paid = ~organic
    np.add.at(installs, (install_day[paid], campaign[paid], creative[paid], country[paid]), 1)
    cpi = (
        np.array([c.cpi for c in world.campaigns])[None, :, None, None]
        * np.array([c.cpi for c in world.countries])[None, None, None, :]
    )
    # A campaign's missing creatives (zero weight) get no stray spend either.
    waste = rng.poisson(world.stray_spend_rate, shape) * (weights > 0)[None, :, :, None]
    spend = np.round((installs + waste) * cpi * rng.lognormal(0.0, SPEND_NOISE_SIGMA, shape), 2)
    d, c, k, g = np.nonzero(spend > 0)
    campaign_names = np.array([c.name for c in world.campaigns])
    return pl.DataFrame(
        {
            "workspace_id": [config.workspace_id] * d.size,
            "spend_date": np.datetime64(config.start.isoformat(), "D") + d.astype("timedelta64[D]"),
            "campaign": campaign_names[c],
            "creative": np.char.add(np.char.add(campaign_names[c], "_cr"), (k + 1).astype(str)),
            "country": np.array([c.name for c in world.countries])[g],
            "spend": spend[d, c, k, g],
            "currency": [config.currency] * d.size,
        }
    ).cast(SPEND_SCHEMA)
