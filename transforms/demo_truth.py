"""What the reports should show for a demo world: true figures from its parameters, and the story.

`transforms.demo.generate` draws users from a `DemoWorld`; this module computes, from the same
parameters and no sample, the expectation of each figure the reports estimate (docs/metrics.md
defines them): per campaign the true CAC, install -> trial and trial -> paid rates, weekly
retention S(w) of the campaign's shifted-beta-geometric churn, net revenue per install by day
since install, the payback day for a 30/60/90-day window and the 52-week LTV per install. It
also counts the realized totals of a generated sample straight from its frames (not through the
report pipeline), for the checks that must be exact. The planted-truth tests compare the API
with both; `flokit demo seed --truth-out` writes them as JSON.

The expectation follows the generator's rules exactly: a trial started on install day converts
on day `trial_days` if the decision says so and the user is alive then; a subscription charges
on its first day and every `period_days` after while the user is alive (a user of lifetime L
weeks is alive on days 0 .. 7L-1, so P(alive on day d) = S(floor(d / 7))); each charge is
refunded with the offer's rate on day d + 2, or on the user's last day if sooner. Only the
spend depends on the sample size: stray spend (cell-days that bring nobody) is a fixed amount
per cell-day, so the true CAC is computed for a config's users and days.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import numpy as np
import polars as pl

from transforms.demo import (
    DAY_S,
    REFUND_LAG_DAYS,
    SPEND_NOISE_SIGMA,
    CampaignParams,
    DemoConfig,
    DemoData,
    DemoWorld,
    billing_period,
)
from transforms.reports.schemas import CHARGES
from transforms.subscriptions.billing import parse_billing_period

HORIZON_DAYS = 364  # 52 weeks: the LTV horizon (days 0..363)
WINDOWS = (30, 60, 90)
# The story's "clearly": thresholds on the true figures (docs: "Planted truth").
CLEAR_PAYBACK_RATIO = 1.5  # fastest pays back in at most 1/1.5 of the next one's days, slowest 1.5x the previous
SIMILAR_VOLUME = 0.8  # fastest and slowest bring installs within 0.8..1.25x of each other
WEAK_CREATIVE_RATIO = 0.6  # a creative converting trials at <= 0.6x its campaign's average ...
WEAK_CREATIVE_SPEND = 0.4  # ... while taking >= 40 % of the campaign's spend
BEST_OFFER_RATIO = 1.3  # an offer's lead over the others in one country >= 1.3x its lead in the median country


def survival(a: float, b: float, weeks: int) -> np.ndarray:
    """S(0..weeks-1) of the sBG with churn ~ Beta(a, b): S(w) = prod_{t=1..w} (b+t-1)/(a+b+t-1)."""
    t = np.arange(1, weeks)
    return np.concatenate([[1.0], np.cumprod((b + t - 1) / (a + b + t - 1))])


@dataclass(frozen=True)
class Expected:
    """Per install of a group, expected counts and money by day since install (0..HORIZON_DAYS)."""

    mass: float  # the restriction's share of the group's installs
    trials: float
    conversions: float
    subscriptions: float
    net_revenue: np.ndarray  # per day: charges minus refunds

    def cumulative(self) -> np.ndarray:
        return np.cumsum(self.net_revenue)


def _campaign_params(world: DemoWorld, campaign: int) -> CampaignParams:
    return world.organic if campaign < 0 else world.campaigns[campaign]


def expected(
    world: DemoWorld,
    campaign: int,
    creatives: list[int] | None = None,
    countries: list[int] | None = None,
    offers: list[int] | None = None,
) -> Expected:
    """Expected figures per install of `campaign` (-1: organic), restricted to the installs
    of some creatives, countries or offers (None: all): per install *of that restriction*."""
    params = _campaign_params(world, campaign)
    s = survival(params.churn.a, params.churn.b, HORIZON_DAYS // 7 + 60)
    alive = s[np.arange(HORIZON_DAYS + 400) // 7]  # P(alive on day d)
    weights = [c.weight for c in params.creatives] if campaign >= 0 else [1.0]
    creative_share = np.array(weights) / sum(weights)
    country_share = np.array([g.share for g in world.countries]) / sum(g.share for g in world.countries)
    offer_share = np.array([o.share for o in world.offers]) / sum(o.share for o in world.offers)
    days = HORIZON_DAYS + 1
    net = np.zeros(days)
    mass = trials = conversions = subscriptions = 0.0
    for k, ck in enumerate(creative_share):
        if creatives is not None and k not in creatives:
            continue
        multiplier = params.creatives[k].trial_to_paid if campaign >= 0 else 1.0
        for g, cg in enumerate(country_share):
            if countries is not None and g not in countries:
                continue
            country = world.countries[g]
            tap = world.onboarding_seen * min(1.0, params.tap_rate * country.tap_rate)
            if offers is None:
                mass += ck * cg
            for o, co in enumerate(offer_share):
                if offers is not None and o not in offers:
                    continue
                offer = world.offers[o]
                tapped = ck * cg * tap * co
                if offers is not None:
                    mass += tapped  # the offer's group: the users who tapped it
                if offer.trial_days > 0:
                    started = tapped * world.trial_start_rate
                    rate = min(1.0, params.trial_to_paid * multiplier * offer.trial_multiplier(country.name))
                    decided, d0 = started * rate, offer.trial_days
                    trials += started
                    conversions += decided * alive[d0]
                else:
                    decided, d0 = tapped * world.direct_subscribe_rate, 0
                subscriptions += decided * alive[d0]
                for d in range(d0, days, offer.period_days):
                    net[d] += offer.price * decided * alive[d]
                    # Refunded on day d + lag, or on the user's last day 7L-1 if that comes
                    # first: P(L = (r+1)/7) = alive[r] - alive[r+1] when day r ends a week.
                    refund = offer.price * offer.refund_rate * decided
                    remaining = alive[d]
                    for r in range(d, d + REFUND_LAG_DAYS):
                        if (r + 1) % 7 == 0:
                            leaving = alive[r] - alive[r + 1]
                            if r < days:
                                net[r] -= refund * leaving
                            remaining -= leaving
                    if d + REFUND_LAG_DAYS < days:
                        net[d + REFUND_LAG_DAYS] -= refund * remaining
    return Expected(mass, trials / mass, conversions / mass, subscriptions / mass, net / mass)


def expected_spend_per_install(world: DemoWorld, config: DemoConfig, campaign: int) -> float:
    """True CAC: expected spend over expected paid installs, stray spend included (it is a
    fixed amount per cell-day, so it weighs more in a small sample)."""
    params = world.campaigns[campaign]
    shares = sum(c.share for c in world.campaigns)
    installs = config.users * (1 - world.organic.share) * params.share / shares
    weights = [c.weight for c in params.creatives]
    country_share = [g.share / sum(x.share for x in world.countries) for g in world.countries]
    noise = math.exp(SPEND_NOISE_SIGMA**2 / 2)  # E[lognormal(0, sigma)]
    spend = 0.0
    for w in weights:
        for g, share in zip(world.countries, country_share, strict=True):
            cell_installs = installs * w / sum(weights) * share
            spend += (cell_installs + world.stray_spend_rate * config.days) * params.cpi * g.cpi * noise
    return spend / installs


def payback_day(cumulative: np.ndarray, cac: float, window: int) -> int | None:
    """First day < window whose expected cumulative net revenue per install covers the CAC."""
    reached = np.nonzero(cumulative[:window] >= cac)[0]
    return int(reached[0]) if reached.size else None


def campaign_truth(world: DemoWorld, config: DemoConfig, campaign: int) -> dict[str, Any]:
    params = world.campaigns[campaign]
    e = expected(world, campaign)
    cac = expected_spend_per_install(world, config, campaign)
    cumulative = e.cumulative()
    return {
        "campaign": params.name,
        "install_share": params.share / sum(c.share for c in world.campaigns) * (1 - world.organic.share),
        "cac": cac,
        "install_to_trial": e.trials,
        "trial_conversion": e.conversions / e.trials if e.trials else None,
        "subscriptions_per_install": e.subscriptions,
        "payback_day": {str(w): payback_day(cumulative, cac, w) for w in WINDOWS},
        "payback_day_unbounded": payback_day(cumulative, cac, HORIZON_DAYS + 1),
        "ltv_52w": float(cumulative[HORIZON_DAYS - 1]),
        "cumulative_net_revenue_by_day": [round(float(v), 6) for v in cumulative[:91]],
        "weekly_retention": [float(v) for v in survival(params.churn.a, params.churn.b, 52)],
    }


def trial_conversion(world: DemoWorld, countries: list[int], offers: list[int]) -> float | None:
    """True trial -> paid rate of the trials of some countries and offers, over all campaigns
    and organic traffic (each weighted by the trials it brings)."""
    shares = sum(c.share for c in world.campaigns)
    parts = [(-1, world.organic.share)] + [
        (i, (1 - world.organic.share) * c.share / shares) for i, c in enumerate(world.campaigns)
    ]
    trials = conversions = 0.0
    for campaign, share in parts:
        e = expected(world, campaign, countries=countries, offers=offers)
        trials += share * e.mass * e.trials
        conversions += share * e.mass * e.conversions
    return conversions / trials if trials else None


def story(world: DemoWorld, config: DemoConfig) -> dict[str, Any]:
    """The planted story, derived from the parameters with the thresholds above; a part the
    world does not plant clearly is null (the A/A world's every part)."""
    figures = [campaign_truth(world, config, i) for i in range(len(world.campaigns))]
    never = HORIZON_DAYS + 1
    ranked = sorted(figures, key=lambda f: f["payback_day_unbounded"] or never)
    days = [f["payback_day_unbounded"] or never for f in ranked]
    fastest = slowest = None
    if (
        len(ranked) >= 3
        and days[1] >= CLEAR_PAYBACK_RATIO * max(days[0], 1)
        and days[-1] >= CLEAR_PAYBACK_RATIO * days[-2]
    ):
        a, b = ranked[0]["install_share"], ranked[-1]["install_share"]
        if min(a, b) / max(a, b) >= SIMILAR_VOLUME:
            fastest, slowest = ranked[0]["campaign"], ranked[-1]["campaign"]
    weak = None
    worst = 1.0
    for i, c in enumerate(world.campaigns):
        average = trial_conversion_of_campaign(world, i)
        spend_share = creative_spend_shares(world, config, i)
        for k in range(len(c.creatives)):
            rate = trial_conversion_of_campaign(world, i, creatives=[k])
            if average and rate is not None:
                ratio = rate / average
                if ratio <= WEAK_CREATIVE_RATIO and spend_share[k] >= WEAK_CREATIVE_SPEND and ratio < worst:
                    weak, worst = {"creative": world.creative_name(i, k), "campaign": c.name}, ratio
    best = None
    trial_offers = [o for o, offer in enumerate(world.offers) if offer.trial_days > 0]
    if len(trial_offers) >= 2:
        # An offer's advantage in a country: its rate over the best other offer's there. Trial
        # length alone makes one offer convert better everywhere (a longer trial loses more
        # users before it ends); the story is an advantage one country has and the others lack.
        advantage = {}
        for g in range(len(world.countries)):
            rates = {o: trial_conversion(world, countries=[g], offers=[o]) or 0.0 for o in trial_offers}
            for o, rate in rates.items():
                others = max(r for p, r in rates.items() if p != o)
                advantage[o, g] = rate / others if others else 0.0
        (o, g), top = max(advantage.items(), key=lambda item: item[1])
        elsewhere = sorted(advantage[o, h] for h in range(len(world.countries)) if h != g)
        if top >= BEST_OFFER_RATIO * elsewhere[len(elsewhere) // 2]:
            best = {"offer": world.offers[o].product_id, "country": world.countries[g].name}
    return {
        "fastest_payback_campaign": fastest,
        "slowest_payback_campaign": slowest,
        "weak_creative": weak,
        "best_offer": best,
    }


def trial_conversion_of_campaign(world: DemoWorld, campaign: int, creatives: list[int] | None = None) -> float | None:
    e = expected(world, campaign, creatives=creatives)
    return e.conversions / e.trials if e.trials else None


def creative_spend_shares(world: DemoWorld, config: DemoConfig, campaign: int) -> list[float]:
    """Each creative's expected share of its campaign's spend (its installs plus stray spend)."""
    params = world.campaigns[campaign]
    shares = sum(c.share for c in world.campaigns)
    installs = config.users * (1 - world.organic.share) * params.share / shares
    weights = [c.weight / sum(x.weight for x in params.creatives) for c in params.creatives]
    total = sum(g.share for g in world.countries)
    per_install = sum(g.share / total * g.cpi for g in world.countries)
    stray = world.stray_spend_rate * config.days * sum(g.cpi for g in world.countries)
    spend = [installs * w * per_install + stray for w in weights]
    return [s / sum(spend) for s in spend]


def realized(data: DemoData) -> dict[str, dict[str, Any]]:
    """Totals of the generated sample per campaign (and organic), counted from its frames, not
    through the report pipeline: what the reports must reproduce exactly. Net revenue is
    charges minus refunds; `net_revenue_30d` counts days 0..29 since install (ROAS's 30 days);
    `installs_by_cohort_date` lets a check select the cohorts a report covers."""
    events = data.events.with_columns(pl.col("occurred_at").dt.date().alias("day"))
    users = events.filter(pl.col("event_type") == "install").select(
        "user_id",
        pl.col("properties").str.json_path_match("$.campaign").fill_null("organic").alias("campaign"),
        pl.col("day").alias("cohort_date"),
    )
    amount = pl.col("properties").str.json_path_match("$.revenue").cast(pl.Float64)
    kind = pl.col("event_type")
    net = pl.when(kind == "refund").then(-amount).when(kind.is_in(CHARGES)).then(amount).otherwise(0.0)
    joined = events.join(users, on="user_id").with_columns(
        net.alias("net"), (pl.col("day") - pl.col("cohort_date")).dt.total_days().alias("since")
    )
    totals = joined.group_by("campaign").agg(
        (kind == "trial_start").sum().alias("trials"),
        (kind == "trial_converted").sum().alias("trial_conversions"),
        kind.is_in(("trial_converted", "subscription_start")).sum().alias("subscriptions"),
        pl.when(kind.is_in(CHARGES)).then(amount).otherwise(0.0).sum().alias("revenue"),
        pl.when(kind == "refund").then(amount).otherwise(0.0).sum().alias("refunds"),
        pl.col("net").sum().alias("net_revenue"),
        pl.col("net").filter(pl.col("since") < 30).sum().alias("net_revenue_30d"),
    )
    spend = data.spend.group_by("campaign").agg(pl.col("spend").sum())
    out: dict[str, dict[str, Any]] = {}
    for row in totals.join(spend, on="campaign", how="left").sort("campaign").iter_rows(named=True):
        name = row.pop("campaign")
        by_day = users.filter(pl.col("campaign") == name).group_by("cohort_date").len().sort("cohort_date")
        out[name] = {
            **{k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()},
            "spend": round(row["spend"] or 0.0, 2),
            "installs": int(by_day["len"].sum()),
            "installs_by_cohort_date": {d.isoformat(): n for d, n in by_day.iter_rows()},
        }
    return out


def truth(config: DemoConfig, data: DemoData, *, no_signal: bool, as_of: datetime) -> dict[str, Any]:
    """The `--truth-out` document: parameters, true figures, realized totals (subscription
    metrics: of the days complete at `as_of`) and the story."""
    world = data.world
    return {
        "config": {
            "workspace_id": config.workspace_id,
            "users": config.users,
            "days": config.days,
            "seed": config.seed,
            "start": config.start.isoformat(),
            "currency": config.currency,
            "no_signal": no_signal,
        },
        "world": dataclasses.asdict(world),
        "true": {
            "campaigns": {
                f["campaign"]: f for f in map(partial(campaign_truth, world, config), range(len(world.campaigns)))
            }
        },
        "realized": {
            "campaigns": realized(data),
            "subscriptions": {"as_of": as_of.isoformat(), "days": subscription_truth(config, data, as_of)},
        },
        "story": story(world, config),
    }


def _between(t: np.ndarray, *, start: float, end: float) -> np.ndarray:
    return (t >= start) & (t < end)


def subscription_truth(config: DemoConfig, data: DemoData, as_of: datetime) -> list[dict[str, Any]]:
    """The true subscription metrics of each complete day of the demo (docs/metrics.md), counted
    from what the generator simulated (`DemoData.lifecycles`), not from its events: per day,
    active subscriptions and trials and MRR at its end, new subscriptions, trials, conversions
    and churn in it, and its charges' gross revenue, refunds and net revenue. Demo users hold
    one subscription each and never come back, so there are no reactivations, and a demo
    refund does not revoke access. MRR sums each subscription's price per month rounded to
    millionths, as the report does."""
    subs, trials, charges = (data.lifecycles[k] for k in ("subscriptions", "trials", "charges"))
    offers = data.world.offers
    price = np.array([o.price for o in offers])
    factor = np.array([float(parse_billing_period(billing_period(o.period_days)).monthly_factor) for o in offers])
    monthly = np.round(price * factor * 1e6)
    origin = datetime(config.start.year, config.start.month, config.start.day, tzinfo=UTC)
    now_s = (as_of - origin).total_seconds()
    paid_from, paid_until = subs["paid_from"].to_numpy(), subs["paid_until"].to_numpy()
    sub_offer, converted = subs["offer"].to_numpy(), subs["converted"].to_numpy()
    trial_from, trial_until = trials["trial_from"].to_numpy(), trials["trial_until"].to_numpy()
    charge_t, charge_offer = charges["t"].to_numpy(), charges["offer"].to_numpy()
    # A refund counts once it has happened (the report's state is as of `as_of`).
    refunded = charges["refunded"].to_numpy() & (charges["refunded_at"].to_numpy() <= now_s)
    # A user's first billing fact: their trial's start, else their first paid period's.
    firsts = pl.concat(
        [trials.select("user", pl.col("trial_from").alias("t")), subs.select("user", pl.col("paid_from").alias("t"))]
    )
    first_seen = firsts.group_by("user").agg(pl.col("t").min())["t"].to_numpy()
    days: list[dict[str, Any]] = []
    for d in range(config.days):
        start, end = d * DAY_S, (d + 1) * DAY_S
        if end > now_s:
            break
        active = (paid_from < end) & (paid_until >= end)
        in_day = partial(_between, start=start, end=end)
        charged = in_day(charge_t)
        gross = float(price[charge_offer[charged]].sum())
        refunded_today = charged & refunded
        days.append(
            {
                "date": (config.start + timedelta(days=d)).isoformat(),
                "active_subscriptions": int(active.sum()),
                "active_trials": int(((trial_from < end) & (trial_until >= end)).sum()),
                "mrr": float(monthly[sub_offer[active]].sum()) / 1e6,
                "new_subscriptions": int(in_day(paid_from).sum()),
                "new_trials": int(in_day(trial_from).sum()),
                "trial_conversions": int((in_day(paid_from) & converted).sum()),
                "churned_subscriptions": int((in_day(paid_until) & (paid_until <= now_s)).sum()),
                "reactivations": 0,
                "new_customers": int(in_day(first_seen).sum()),
                "refunds": int(refunded_today.sum()),
                "gross_revenue": gross,
                "net_revenue": gross - float(price[charge_offer[refunded_today]].sum()),
            }
        )
    return days
