"""The demo generator: deterministic, internally consistent, believable."""

import json
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from transforms import demo_truth
from transforms.demo import DEFAULT_WORLD, NO_SIGNAL_WORLD, DemoConfig, generate
from transforms.events import CANONICAL_EVENT_SCHEMA
from transforms.reports.schemas import CHARGES, EVENT_TYPES, SPEND_SCHEMA

CONFIG = DemoConfig("ws_demo", users=3000, days=45, seed=9, start=date(2026, 2, 1))


def test_same_config_same_history_and_another_seed_differs() -> None:
    a, b = generate(CONFIG), generate(CONFIG)
    assert_frame_equal(a.events, b.events)
    assert_frame_equal(a.spend, b.spend)
    other = generate(DemoConfig("ws_demo", 3000, 45, 10, date(2026, 2, 1)))
    assert other.events["event_id"][0] != a.events["event_id"][0]


def test_history_is_consistent() -> None:
    data = generate(CONFIG)
    events = data.events
    assert events.schema == pl.Schema(CANONICAL_EVENT_SCHEMA)
    assert data.spend.schema == pl.Schema(SPEND_SCHEMA)
    assert events["event_id"].is_unique().all()
    assert set(events["event_type"]) == set(EVENT_TYPES)
    installs = events.filter(pl.col("event_type") == "install")
    assert installs.height == CONFIG.users and installs["user_id"].is_unique().all()
    first = events.group_by("user_id").agg(pl.col("event_type").sort_by("occurred_at").first())
    assert set(first["event_type"]) == {"install"}  # nobody acts before installing
    days = events["occurred_at"].dt.date()
    assert days.min() >= CONFIG.start and days.max() < date(2026, 3, 18)
    money = events.filter(pl.col("event_type").is_in(["trial_converted", "renewal", "subscription_start"]))
    assert (money["properties"].str.json_path_match("$.revenue").cast(pl.Float64) > 0).all()
    assert (data.spend["spend"] > 0).all()


def test_rates_are_believable() -> None:
    counts = dict(generate(CONFIG).events.group_by("event_type").len().iter_rows())
    assert 0.25 < counts["trial_converted"] / counts["trial_start"] < 0.6
    assert 0.1 < counts["paywall_offer_tap"] / CONFIG.users < 0.5


def test_the_default_world_plants_its_story_and_the_a_a_world_none() -> None:
    assert demo_truth.story(DEFAULT_WORLD, CONFIG) == {
        "fastest_payback_campaign": "meta_broad",
        "slowest_payback_campaign": "google_uac",
        "weak_creative": {"creative": "meta_lookalike_cr1", "campaign": "meta_lookalike"},
        "best_offer": {"offer": "pro_weekly_699", "country": "US"},
    }
    assert set(demo_truth.story(NO_SIGNAL_WORLD, CONFIG).values()) == {None}
    aa = generate(CONFIG, NO_SIGNAL_WORLD)
    assert aa.world is NO_SIGNAL_WORLD and not aa.events.equals(generate(CONFIG).events)


def test_the_story_is_derived_from_the_parameters() -> None:
    """Swap two campaigns' economics and the story follows; drop the offer's country edge and
    there is no best offer."""
    a, b = DEFAULT_WORLD.campaigns[0], DEFAULT_WORLD.campaigns[2]
    swapped = replace(
        DEFAULT_WORLD,
        campaigns=(
            replace(b, name=a.name),
            DEFAULT_WORLD.campaigns[1],
            replace(a, name=b.name),
            *DEFAULT_WORLD.campaigns[3:],
        ),
        offers=tuple(replace(o, trial_to_paid_by_country=()) for o in DEFAULT_WORLD.offers),
    )
    story = demo_truth.story(swapped, CONFIG)
    assert story["fastest_payback_campaign"] == "google_uac" and story["slowest_payback_campaign"] == "meta_broad"
    assert story["best_offer"] is None


def test_true_figures_are_the_expectation_of_the_sample() -> None:
    """The analytic figures against a large sample's own averages (no report pipeline): per
    campaign, trials per install, trial conversion, cumulative net revenue per install by day
    29 (cohorts whose 30 days are all in the history) and week-4 survival."""
    config = DemoConfig("ws_big", users=200_000, days=120, seed=21, start=date(2026, 1, 1))
    data = generate(config)
    events = data.events.with_columns(pl.col("occurred_at").dt.date().alias("day"))
    users = events.filter(pl.col("event_type") == "install").select(
        "user_id",
        pl.col("properties").str.json_path_match("$.campaign").fill_null("organic").alias("campaign"),
        pl.col("day").alias("cohort"),
    )
    users = users.filter(pl.col("cohort") < date(2026, 1, 1) + timedelta(days=120 - 35))
    amount = pl.col("properties").str.json_path_match("$.revenue").cast(pl.Float64)
    kind = pl.col("event_type")
    joined = events.join(users, on="user_id").with_columns(
        (pl.col("day") - pl.col("cohort")).dt.total_days().alias("since")
    )
    joined = joined.with_columns(
        pl.when(kind == "refund").then(-amount).when(kind.is_in(CHARGES)).then(amount).otherwise(0.0).alias("net")
    )
    sums = (
        joined.group_by("campaign")
        .agg(
            (kind == "trial_start").sum().alias("trials"),
            (kind == "trial_converted").sum().alias("conversions"),
            pl.col("net").filter(pl.col("since") < 30).sum().alias("net_30d"),
            pl.col("user_id").filter((pl.col("since") >= 28) & (pl.col("since") < 35)).n_unique().alias("week4"),
        )
        .join(users.group_by("campaign").len(), on="campaign")
    )
    measured = {r["campaign"]: r for r in sums.iter_rows(named=True)}
    for i, campaign in enumerate(DEFAULT_WORLD.campaigns):
        truth = demo_truth.campaign_truth(DEFAULT_WORLD, config, i)
        m = measured[campaign.name]
        n = m["len"]
        assert m["trials"] / n == pytest.approx(truth["install_to_trial"], rel=0.06), campaign.name
        assert m["conversions"] / m["trials"] == pytest.approx(truth["trial_conversion"], rel=0.06), campaign.name
        assert m["net_30d"] / n == pytest.approx(truth["cumulative_net_revenue_by_day"][29], rel=0.06), campaign.name
        assert m["week4"] / n == pytest.approx(truth["weekly_retention"][4], rel=0.04), campaign.name


def test_truth_document_counts_the_sample() -> None:
    data = generate(CONFIG)
    end = CONFIG.start + timedelta(days=CONFIG.days)
    doc = demo_truth.truth(CONFIG, data, no_signal=False, as_of=datetime(end.year, end.month, end.day, tzinfo=UTC))
    assert set(doc) == {"config", "world", "true", "realized", "story"}
    json.dumps(doc)  # plain JSON
    realized = doc["realized"]["campaigns"]
    events = data.events
    assert sum(r["installs"] for r in realized.values()) == CONFIG.users
    assert sum(r["trials"] for r in realized.values()) == (events["event_type"] == "trial_start").sum()
    assert sum(r["spend"] for r in realized.values()) == pytest.approx(data.spend["spend"].sum(), abs=0.01)
    assert set(doc["true"]["campaigns"]) == {c.name for c in DEFAULT_WORLD.campaigns}
    assert doc["true"]["campaigns"]["google_uac"]["payback_day"]["30"] is None
    days = doc["realized"]["subscriptions"]["days"]
    assert len(days) == CONFIG.days  # every day is complete at the history's end
    assert sum(d["new_trials"] for d in days) == (events["event_type"] == "trial_start").sum()
    starts = events["event_type"].is_in(["subscription_start", "trial_converted"]).sum()
    assert sum(d["new_subscriptions"] for d in days) == starts
