"""Planted truth, recovered: every reported metric checked against the world the data was drawn from.

The real path, on each database: `flokit demo seed --truth-out` (landing) into four workspaces
(three seeds of the default world, one A/A world), one `flokit refresh` (the real Dagster
runs), then the reports API under real gunicorn. The truth file holds the world's parameters,
the true figures computed from them (expectations, not the sample) and the realized totals
counted from the generated frames (transforms.demo_truth). Each tolerance is stated where it is
used, with the reason it is the right one (docs/metrics.md, "Planted truth").

Size: 3000 users over 60 days per workspace. 60 days make 8 complete weeks for the oldest
cohorts (the LTV is fitted on 8 weeks and projected to 52), and 30 days of cohorts with a
complete 30-day window; 3000 users give each campaign 300-750 installs and 35-90 trials in
those cohorts, enough for a trial rate's 95 % interval to be about +-0.1 wide and the planted
differences (rates twice as high, payback days 2-7x apart) to stand well clear of it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
import requests

from tests.e2e.truth_world import NO_SIGNAL_SEED, SEEDS, Seeded, truth_world
from tests.support import bearer, gunicorn_server

pytestmark = pytest.mark.e2e
WINDOW = 30
# Two-sided 95 % family-wise over all the intervals one workspace checks (Bonferroni): each of
# them alone at 95 % would fail somewhere in a run by chance most of the time.
INTERVALS_PER_WORKSPACE = 5 + 5 * 8  # trial rates per campaign; retention per campaign x week
Z = 3.35  # the normal quantile of 1 - 0.05 / (2 x 45)
# Payback: a campaign's API payback day lies between the days on which its *expected*
# cumulative net revenue per install reaches (1 - d) and (1 + d) times its true CAC. d = 0.45:
# per-install revenue has a coefficient of variation of about 3 (one user in ten pays), so over
# the 150-250 installs of a campaign's complete-window cohorts the sample's revenue is within
# about +-0.4 of its expectation (95 %), and spend per install adds a few percent.
PAYBACK_MONEY_TOLERANCE = 0.45
# LTV: the 52-week projection fitted on 8 weeks lies within a factor 1.75 of the true 52-week
# LTV per install. 44 weeks of the 52 are extrapolated from the sBG fit of 8; over 25 campaign
# fits (5 seeds of this size) the projection came within 0.64x-1.65x of the truth.
LTV_FACTOR = 1.75


def wilson(successes: int, n: int, z: float = Z) -> tuple[float, float]:
    """The Wilson score interval: right near 0 and 1 and for small n, where the normal one is not."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


@dataclass
class Deployment:
    base: str
    reports: Path
    catalog: Path
    workspaces: dict[int, Seeded]


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def deployment(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """The planted-truth world (tests/e2e/truth_world.py) and the API under gunicorn on it."""
    tmp = tmp_path_factory.mktemp(f"truth-{request.param}")
    with truth_world(request, tmp) as world:
        settings = world.settings
        with gunicorn_server({**os.environ, **settings.child_env()}, workers=2, log_dir=tmp) as server:
            yield Deployment(server.base, settings.paths.reports, settings.paths.catalog, world.workspaces)


def get(deployment: Deployment, ws: Seeded, path: str, **query: Any) -> Any:
    response = requests.get(f"{deployment.base}{path}", params=query, headers=bearer(ws.key), timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def payback(deployment: Deployment, ws: Seeded, group_by: str, end: date, window: int) -> dict[str, dict]:
    body = get(
        deployment,
        ws,
        "/v1/reports/payback",
        start_date=ws.first_day.isoformat(),
        end_date=end.isoformat(),
        group_by=group_by,
        cohort_window_days=window,
    )
    return {r["cohort"]: r for r in body["data"]}


def complete_window_end(ws: Seeded) -> date:
    """The last cohort whose 30-day window is over by the last day with data."""
    return ws.last_day - timedelta(days=WINDOW - 1)


@pytest.mark.parametrize("seed", SEEDS)
def test_totals_are_exact(deployment: Deployment, seed: int) -> None:
    """Spend, installs, trials, subscriptions and revenue: the sample's own totals, to the cent."""
    ws = deployment.workspaces[seed]
    realized = ws.truth["realized"]["campaigns"]
    rows = payback(deployment, ws, "campaign", ws.last_day, 365)  # every cohort, every event
    assert set(rows) == set(realized)
    for name, row in rows.items():
        r = realized[name]
        assert row["spend"] == pytest.approx(r["spend"], abs=0.005), name
        assert row["trials"] == r["trials"] and row["subscriptions"] == r["subscriptions"], name
        if row["roas_30d"] is not None:  # 4 decimals: revenue to 0.00005 x spend
            assert row["roas_30d"] * row["spend"] == pytest.approx(r["net_revenue_30d"], abs=5e-5 * row["spend"] + 0.01)
    # Installs: week 0 of the cohort curves counts every user whose install week is over.
    curves = get(
        deployment,
        ws,
        "/v1/reports/cohorts",
        cohort_start=ws.first_day.isoformat(),
        cohort_end=ws.last_day.isoformat(),
        group_by="campaign",
    )
    week0_over = ws.last_day - timedelta(days=6)
    for curve in curves["cohorts"]:
        by_day = realized[curve["label"]]["installs_by_cohort_date"]
        expected = sum(n for d, n in by_day.items() if date.fromisoformat(d) <= week0_over)
        assert curve["weeks"][0]["users"] == expected, curve["label"]
    # Revenue to the cent, in the published store the API answers from (the API rounds it into
    # ROAS and per-user curves).
    with duckdb.connect(str(deployment.reports), read_only=True) as con:
        stored = dict(
            con.execute(
                "SELECT value, sum(revenue - refunds) FROM payback WHERE workspace_id = ? AND dimension = 'campaign'"
                " GROUP BY value",
                [ws.workspace_id],
            ).fetchall()
        )
    for name, r in realized.items():
        assert stored[name] == pytest.approx(r["net_revenue"], abs=0.005), name


@pytest.mark.parametrize("seed", SEEDS)
def test_rates_payback_ltv_and_retention_match_the_truth(deployment: Deployment, seed: int) -> None:
    ws = deployment.workspaces[seed]
    true = ws.truth["true"]["campaigns"]
    rows = payback(deployment, ws, "campaign", complete_window_end(ws), WINDOW)
    misses = []
    for name, t in true.items():
        row = rows[name]
        # Trial conversion: the true rate inside the Wilson interval of the observed one.
        converted = round(row["trial_conversion_rate"] * row["trials"])
        low, high = wilson(converted, row["trials"])
        if not low <= t["trial_conversion"] <= high:
            misses.append(f"{name} trial conversion {row['trial_conversion_rate']} vs true {t['trial_conversion']:.3f}")
        # Payback: the API's day among the days the tolerance allows.
        cumulative, cac = t["cumulative_net_revenue_by_day"][:WINDOW], t["cac"]
        earliest = next((d for d, v in enumerate(cumulative) if v >= cac * (1 - PAYBACK_MONEY_TOLERANCE)), None)
        latest = next((d for d, v in enumerate(cumulative) if v >= cac * (1 + PAYBACK_MONEY_TOLERANCE)), None)
        day = row["payback_days"]
        ok = (day is None and latest is None) or (
            day is not None and earliest is not None and earliest <= day and (latest is None or day <= latest)
        )
        if not ok:
            misses.append(f"{name} payback {day} vs true {t['payback_day'][str(WINDOW)]} ({earliest}..{latest})")
    # LTV: fitted on the 8 complete weeks of the oldest cohorts, every cohort of the group.
    ltv = payback(deployment, ws, "campaign", ws.last_day, WINDOW)
    for name, t in true.items():
        ratio = ltv[name]["ltv_projected"] / t["ltv_52w"]
        if not 1 / LTV_FACTOR <= ratio <= LTV_FACTOR:
            misses.append(f"{name} LTV {ltv[name]['ltv_projected']} vs true {t['ltv_52w']:.2f}")
    # Retention: each week's true S(w) inside the Wilson interval of its retained share.
    curves = get(
        deployment,
        ws,
        "/v1/reports/cohorts",
        cohort_start=ws.first_day.isoformat(),
        cohort_end=ws.last_day.isoformat(),
        group_by="campaign",
    )
    weeks_seen = 0
    for curve in curves["cohorts"]:
        if curve["label"] not in true:
            continue
        for week in curve["weeks"][1:]:
            weeks_seen += 1
            truth = true[curve["label"]]["weekly_retention"][week["week"]]
            low, high = wilson(round(week["retained_pct"] * week["users"]), week["users"])
            if not low <= truth <= high:
                misses.append(f"{curve['label']} week {week['week']} {week['retained_pct']} vs true {truth:.3f}")
    assert weeks_seen >= 5 * 7  # weeks 1..7 of every campaign were checked
    assert not misses, misses


def _fastest_and_slowest(rows: dict[str, dict]) -> tuple[str, str]:
    """Fastest: the earliest payback day. Slowest: the latest, or, among those not paid back in
    the window, the one least paid back at its end (lowest ROAS 30d: the window is 30 days).
    Ties on the day go to the ROAS the same way."""
    paid = {name: r for name, r in rows.items() if r["spend"] > 0}
    never = math.inf

    def lateness(name: str) -> tuple[float, float]:
        day = paid[name]["payback_days"]
        return (never if day is None else day, -(paid[name]["roas_30d"] or 0.0))

    ranked = sorted(paid, key=lateness)
    return ranked[0], ranked[-1]


@pytest.mark.parametrize("seed", SEEDS)
def test_the_planted_story_is_recoverable_from_the_api(deployment: Deployment, seed: int) -> None:
    ws = deployment.workspaces[seed]
    story = ws.truth["story"]
    assert set(story) == {"fastest_payback_campaign", "slowest_payback_campaign", "weak_creative", "best_offer"}
    end = complete_window_end(ws)
    campaigns = payback(deployment, ws, "campaign", end, WINDOW)
    fastest, slowest = _fastest_and_slowest(campaigns)
    assert (fastest, slowest) == (story["fastest_payback_campaign"], story["slowest_payback_campaign"]), campaigns
    # Clearly: revenue lands in lumps (trial ends on days 3 and 7, weekly renewals), so another
    # campaign may reach its spend on the same day; the fastest is also the furthest paid back.
    roas = {name: r["roas_30d"] for name, r in campaigns.items() if r["spend"] > 0}
    assert max(roas, key=lambda name: roas[name]) == fastest
    # Weak creative: the lowest trial conversion of its campaign's creatives, at most 3/4 of the
    # campaign's (its truth: half), with at least 40 % of the campaign's spend.
    weak, campaign = story["weak_creative"]["creative"], story["weak_creative"]["campaign"]
    creatives = {
        k: r for k, r in payback(deployment, ws, "creative", end, WINDOW).items() if k.startswith(f"{campaign}_cr")
    }
    assert min(creatives, key=lambda k: creatives[k]["trial_conversion_rate"]) == weak
    assert creatives[weak]["trial_conversion_rate"] <= 0.75 * campaigns[campaign]["trial_conversion_rate"]
    assert creatives[weak]["spend"] >= 0.4 * sum(r["spend"] for r in creatives.values())
    # Best offer in its country: the API groups by one dimension at a time, so it shows as the
    # best-converting offer (of those with a trial) and the best-converting country.
    offer, country = story["best_offer"]["offer"], story["best_offer"]["country"]
    offers = {k: r for k, r in payback(deployment, ws, "offer", end, WINDOW).items() if r["trials"] > 0}
    assert max(offers, key=lambda k: offers[k]["trial_conversion_rate"]) == offer
    countries = payback(deployment, ws, "country", end, WINDOW)
    assert max(countries, key=lambda k: countries[k]["trial_conversion_rate"]) == country
    # The pair itself, as an analyst crosses offer and country in the catalog: in its country
    # the offer leads the others by more than it does in the median other country.
    lead = _offer_leads(deployment, ws)
    assert lead[offer, country] > 1.0
    others = sorted(v for (o, c), v in lead.items() if o == offer and c != country)
    assert lead[offer, country] > others[len(others) // 2]


_TRIALS_SQL = """
SELECT s.product_id, s.country, avg(CASE WHEN c.user_id IS NULL THEN 0 ELSE 1 END)
FROM (
    SELECT user_id, country, json_extract_string(properties, '$.product_id') AS product_id
    FROM canonical_events
    WHERE workspace_id = $ws AND event_type = 'trial_start' AND CAST(occurred_at AS DATE) <= $last_start
) s
LEFT JOIN (
    SELECT DISTINCT user_id FROM canonical_events WHERE workspace_id = $ws AND event_type = 'trial_converted'
) c USING (user_id)
GROUP BY ALL
"""


def _offer_leads(deployment: Deployment, ws: Seeded) -> dict[tuple[str, str], float]:
    """Per offer and country: its trial conversion over the best other offer's in that country
    (trials started at least 8 days before the end, so every trial has had its chance)."""
    with duckdb.connect(str(deployment.catalog), read_only=True) as con:
        rows = con.execute(
            _TRIALS_SQL, {"ws": ws.workspace_id, "last_start": ws.last_day - timedelta(days=8)}
        ).fetchall()
    rates: dict[str, dict[str, float]] = {}
    for offer, country, rate in rows:
        rates.setdefault(country, {})[offer] = rate
    return {
        (offer, country): rate / max(r for o, r in by_offer.items() if o != offer)
        for country, by_offer in rates.items()
        for offer, rate in by_offer.items()
        if len(by_offer) > 1 and max(r for o, r in by_offer.items() if o != offer) > 0
    }


def test_the_no_signal_world_shows_no_story(deployment: Deployment) -> None:
    """A/A: campaigns, creatives and offers drawn alike differ only by noise in the reports: each
    group's trial conversion lies in the interval of the workspace's, and each campaign's
    30-day ROAS within the payback money tolerance of the others' average."""
    ws = deployment.workspaces[NO_SIGNAL_SEED]
    assert ws.truth["config"]["no_signal"] is True
    assert set(ws.truth["story"].values()) == {None}
    end = complete_window_end(ws)
    world = ws.truth["world"]
    names = {
        "campaign": {c["name"] for c in world["campaigns"]},
        "creative": {f"{c['name']}_cr{k + 1}" for c in world["campaigns"] for k in range(len(c["creatives"]))},
        "offer": {o["product_id"] for o in world["offers"]},
    }
    noise = []
    for group_by, labels in names.items():
        rows = {k: r for k, r in payback(deployment, ws, group_by, end, WINDOW).items() if k in labels}
        assert set(rows) == labels
        trials = sum(r["trials"] for r in rows.values())
        pooled = sum(r["trial_conversion_rate"] * r["trials"] for r in rows.values()) / trials
        for name, r in rows.items():
            low, high = wilson(round(r["trial_conversion_rate"] * r["trials"]), r["trials"])
            if not low <= pooled <= high:
                noise.append(f"{group_by} {name}: {r['trial_conversion_rate']} vs {pooled:.3f}")
    campaigns = {k: r for k, r in payback(deployment, ws, "campaign", end, WINDOW).items() if r["spend"] > 0}
    average = sum(r["roas_30d"] for r in campaigns.values()) / len(campaigns)
    for name, r in campaigns.items():
        if abs(r["roas_30d"] / average - 1) > PAYBACK_MONEY_TOLERANCE:
            noise.append(f"campaign {name}: ROAS {r['roas_30d']} vs {average:.3f}")
    assert not noise, noise


COUNTS = (
    "active_subscriptions",
    "active_trials",
    "new_subscriptions",
    "new_trials",
    "trial_conversions",
    "reactivations",
    "churned_subscriptions",
    "refunds",
)
AMOUNTS = ("mrr", "gross_revenue", "net_revenue")


@pytest.mark.parametrize("seed", [*SEEDS, NO_SIGNAL_SEED])
def test_subscription_metrics_recover_the_simulated_subscriptions_exactly(deployment: Deployment, seed: int) -> None:
    """Every complete day's actives, trials, MRR, flows, refunds and revenue equal what the
    generator simulated (counted from its own draws, not its events: transforms.demo_truth.
    subscription_truth). Counts exactly; amounts to a millionth (sums of the same cents in
    another order). A month's stock is its last day's and its flows the sum of its days'."""
    ws = deployment.workspaces[seed]
    truth = ws.truth["realized"]["subscriptions"]["days"]
    assert len(truth) >= 59 and sum(d["churned_subscriptions"] for d in truth) > 0
    query = {"start_date": ws.first_day.isoformat(), "end_date": ws.last_day.isoformat()}
    body = get(deployment, ws, "/v1/reports/subscriptions", **query)
    assert body["meta"]["interval"] == "day" and body["meta"]["group_by"] == "none"
    assert body["meta"]["currency"] == "USD" and body["meta"]["generated_at"]
    rows = {r["period_start"]: r for r in body["data"]}
    for day in truth:
        row = rows[day["date"]]
        assert {k: row[k] for k in COUNTS} == {k: day[k] for k in COUNTS}, day["date"]
        for k in AMOUNTS:
            assert row[k] == pytest.approx(day[k], abs=1e-6), (day["date"], k)
        assert row["arr"] == pytest.approx(12 * day["mrr"], abs=1e-5)
    months = get(deployment, ws, "/v1/reports/subscriptions", interval="month", **query)["data"]
    for month in months[:-1]:  # the last month may hold today's unfinished day
        days = [d for d in truth if d["date"][:7] == month["period_start"][:7] and d["date"] >= query["start_date"]]
        assert month["active_subscriptions"] == days[-1]["active_subscriptions"]
        assert month["new_subscriptions"] == sum(d["new_subscriptions"] for d in days)
        assert month["churned_subscriptions"] == sum(d["churned_subscriptions"] for d in days)  # nobody returns
        assert month["gross_revenue"] == pytest.approx(sum(d["gross_revenue"] for d in days), abs=1e-6)
