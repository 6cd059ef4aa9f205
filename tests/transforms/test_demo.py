"""The demo generator: deterministic, internally consistent, believable."""

from datetime import date

import polars as pl
from polars.testing import assert_frame_equal

from transforms.demo import DemoConfig, generate
from transforms.events import CANONICAL_EVENT_SCHEMA
from transforms.reports.schemas import EVENT_TYPES, SPEND_SCHEMA

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
