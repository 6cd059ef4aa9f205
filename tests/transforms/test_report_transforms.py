"""Report transforms on tiny literal frames, plus invariants over generated histories."""

from datetime import date, timedelta

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from tests.support.money import RATES, reporting
from tests.support.report_rows import D0, T0, events, spend_rows
from transforms.demo import DemoConfig, generate
from transforms.reports import lifecycle, payback
from transforms.reports.schemas import PAYBACK_SCHEMA
from transforms.reports.summary import DAILY_SUMS_SCHEMA, payback_summary

# Every workspace these tests generate reports in USD (the demo's currency).
REPORTING = reporting("ws_a", "ws_h", "ws_p", "ws_b", "ws_c")


def test_acquisitions_keep_the_first_install_of_each_day_and_default_organic() -> None:
    frame = events(
        ("install", "u1", T0 + timedelta(days=1), {"campaign": "late", "creative": "x"}),
        ("install", "u1", T0 + timedelta(minutes=5), {"campaign": "same_day_again"}),
        ("install", "u1", T0, {"campaign": "meta", "creative": "meta_cr1"}),
        ("install", "u2", T0, {}),
        ("renewal", "u1", T0, {"revenue": 5}),
    )
    acquired = lifecycle.acquisitions(frame).sort("user_id", "cohort_date")
    got = acquired.select("user_id", "cohort_date", "campaign", "creative", "country")
    expected = pl.DataFrame(
        {
            "user_id": ["u1", "u1", "u2"],
            "cohort_date": [D0, D0 + timedelta(days=1), D0],
            "campaign": ["meta", "late", "organic"],
            "creative": ["meta_cr1", "x", "(none)"],
            "country": ["US", "US", "US"],
        }
    )
    assert_frame_equal(got, expected)
    # Across days a reinstall is not a new user: the cohort is the earliest install.
    cohorts = lifecycle.user_cohorts(acquired.lazy()).sort("user_id")
    assert cohorts.select("user_id", "cohort_date", "campaign").rows() == [("u1", D0, "meta"), ("u2", D0, "organic")]


def test_subscription_events_parse_revenue_refunds_and_escaped_values() -> None:
    frame = events(
        ("trial_converted", "u1", T0, {"revenue": 6.99, "currency": "USD", "product_id": "weekly"}),
        ("refund", "u1", T0, {"revenue": -6.99, "currency": "USD", "product_id": "weekly"}),
        ("renewal", "u1", T0, {"revenue": "7.5", "offer": 'say "hi"'}),
        ("cancellation", "u1", T0, {"revenue": 3}),
        ("paywall_impression", "u1", T0, {"paywall_id": "p", "product_id": "weekly"}),
        ("install", "u1", T0, {"campaign": "meta"}),
    )
    got = (
        lifecycle.subscription_events(frame, RATES, REPORTING)
        .sort("event_id")
        .select("event_type", "product_id", "revenue", "refund")
    )
    expected = pl.DataFrame(
        {
            "event_type": ["trial_converted", "refund", "renewal", "cancellation"],
            "product_id": ["weekly", "weekly", 'say "hi"', None],
            "revenue": [6.99, 0.0, 7.5, 0.0],
            "refund": [0.0, 6.99, 0.0, 0.0],
        }
    )
    assert_frame_equal(got.collect(), expected)


def test_active_days_are_one_row_per_identified_user_and_day_without_installs() -> None:
    frame = events(
        ("install", "u1", T0, {"campaign": "meta"}),
        ("install", "u3", T0, {}),
        ("paywall_impression", "u1", T0 + timedelta(minutes=1), {"paywall_id": "p"}),
        ("paywall_offer_tap", "u1", T0 + timedelta(minutes=2), {"product_id": "weekly"}),
        ("renewal", "u1", T0 + timedelta(days=2), {"revenue": 5}),
        ("paywall_impression", "u2", T0 + timedelta(days=2), {"paywall_id": "p"}),
        ("paywall_impression", None, T0, {"paywall_id": "p"}),
    )
    got = lifecycle.active_days(frame).sort("user_id", "event_date").select("user_id", "event_date").collect()
    expected = pl.DataFrame(
        {"user_id": ["u1", "u1", "u2"], "event_date": [D0, D0 + timedelta(days=2), D0 + timedelta(days=2)]}
    )
    assert_frame_equal(got, expected)


def test_clean_spend_keeps_the_last_restatement_and_clips_negatives() -> None:
    raw = spend_rows((D0, "meta", "cr1", "US", 10.0), (D0, "meta", "cr1", "US", 12.5), (D0, "meta", "cr2", "US", -3.0))
    got = lifecycle.clean_spend(raw, RATES, REPORTING).select("creative", "spend").sort("creative").collect()
    assert_frame_equal(got, pl.DataFrame({"creative": ["cr1", "cr2"], "spend": [12.5, 0.0]}))


def test_user_cohorts_take_the_first_paywall_and_offer_of_the_install_day() -> None:
    frame = events(
        ("install", "u1", T0, {"campaign": "meta", "creative": "cr1"}),
        ("install", "u2", T0, {"campaign": "meta", "creative": "cr1"}),
        ("paywall_impression", "u1", T0 + timedelta(minutes=1), {"paywall_id": "onboarding", "variant_id": "a"}),
        ("paywall_impression", "u1", T0 + timedelta(days=3), {"paywall_id": "settings", "variant_id": "a"}),
        ("paywall_offer_tap", "u1", T0 + timedelta(minutes=2), {"paywall_id": "onboarding", "product_id": "weekly"}),
        ("paywall_offer_tap", "u2", T0 + timedelta(days=1), {"paywall_id": "settings", "product_id": "weekly"}),
    )
    cohorts = lifecycle.user_cohorts(lifecycle.acquisitions(frame).lazy())
    got = cohorts.sort("user_id").select("user_id", "paywall", "offer")
    assert_frame_equal(
        got, pl.DataFrame({"user_id": ["u1", "u2"], "paywall": ["onboarding", "(none)"], "offer": ["weekly", "(none)"]})
    )


def _pipeline(frame: pl.LazyFrame, spend: pl.LazyFrame) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    subscription = lifecycle.subscription_events(frame, RATES, REPORTING)
    return lifecycle.user_cohorts(lifecycle.acquisitions(frame).lazy()).lazy(), subscription


def _curves(frame: pl.LazyFrame, as_of: date) -> pl.LazyFrame:
    cohorts = lifecycle.user_cohorts(lifecycle.acquisitions(frame).lazy()).lazy()
    return payback.curves_from_events(
        cohorts, lifecycle.active_days(frame), lifecycle.subscription_events(frame, RATES, REPORTING), as_of
    )


def test_payback_cube_by_campaign() -> None:
    frame = events(
        ("install", "u1", T0, {"campaign": "meta", "creative": "cr1"}),
        ("install", "u2", T0, {"campaign": "meta", "creative": "cr1"}),
        ("trial_start", "u1", T0 + timedelta(hours=1), {"product_id": "weekly"}),
        ("trial_converted", "u1", T0 + timedelta(days=3), {"revenue": 7.0, "product_id": "weekly"}),
        ("renewal", "u1", T0 + timedelta(days=10), {"revenue": 7.0, "product_id": "weekly"}),
        ("refund", "u1", T0 + timedelta(days=12), {"revenue": 7.0, "product_id": "weekly"}),
    )
    cohorts, subscription = _pipeline(frame, spend_rows())
    spend = spend_rows((D0, "meta", "cr1", "US", 10.0))
    cube = payback.payback_cube(cohorts, subscription, spend).filter(pl.col("dimension") == "campaign").collect()
    expected = pl.DataFrame(
        {
            "workspace_id": ["ws_a"] * 4,
            "cohort_date": [D0] * 4,
            "dimension": ["campaign"] * 4,
            "value": ["meta"] * 4,
            "day": [0, 3, 10, 12],
            "installs": [2, 0, 0, 0],
            "spend": [10.0, 0.0, 0.0, 0.0],
            "trials": [1, 0, 0, 0],
            "trial_conversions": [0, 1, 0, 0],
            "subscriptions": [0, 1, 0, 0],
            "revenue": [0.0, 7.0, 7.0, 0.0],
            "refunds": [0.0, 0.0, 0.0, 7.0],
            "cumulative_revenue": [0.0, 7.0, 14.0, 14.0],
            "cumulative_net_revenue": [0.0, 7.0, 14.0, 7.0],
        },
        schema=PAYBACK_SCHEMA,
    )
    assert_frame_equal(cube, expected)


def test_spend_is_shared_by_installs_and_unattributed_spend_is_kept() -> None:
    frame = events(
        ("install", "u1", T0, {"campaign": "meta", "creative": "cr1"}),
        ("install", "u2", T0, {"campaign": "meta", "creative": "cr1"}),
        ("install", "u3", T0, {"campaign": "meta", "creative": "cr1"}),
        ("paywall_offer_tap", "u1", T0, {"product_id": "weekly"}),
    )
    cohorts, subscription = _pipeline(frame, spend_rows())
    spend = spend_rows((D0, "meta", "cr1", "US", 30.0), (D0, "meta", "cr9", "US", 5.0))
    cube = payback.payback_cube(cohorts, subscription, spend).filter(pl.col("dimension") == "offer")
    got = cube.select("value", "installs", "spend").sort("value").collect()
    assert_frame_equal(got, pl.DataFrame({"value": ["(none)", "weekly"], "installs": [2, 1], "spend": [25.0, 10.0]}))


def test_cohort_curves_list_complete_weeks_only() -> None:
    frame = events(
        ("install", "u1", T0, {"campaign": "meta"}),
        ("install", "u2", T0, {"campaign": "meta"}),
        ("paywall_impression", "u1", T0 + timedelta(days=8), {"paywall_id": "p"}),
        ("renewal", "u1", T0 + timedelta(days=9), {"revenue": 5.0}),
        ("paywall_impression", "u2", T0 + timedelta(days=15), {"paywall_id": "p"}),
    )
    # As of day 20 weeks 0 and 1 are over (days 0-13); week 2 (days 14-20) is complete too.
    curves = _curves(frame, D0 + timedelta(days=19)).filter(pl.col("dimension") == "campaign")
    got = curves.select("week", "installs", "active_users", "cumulative_net_revenue").collect()
    expected = pl.DataFrame(
        {"week": [0, 1], "installs": [2, 2], "active_users": [2, 1], "cumulative_net_revenue": [0.0, 5.0]}
    )
    assert_frame_equal(got, expected, check_dtypes=False)
    later = _curves(frame, D0 + timedelta(days=20)).filter(pl.col("dimension") == "campaign")
    assert later.collect()["active_users"].to_list() == [2, 1, 1]


@settings(max_examples=15, deadline=None)
@given(users=st.integers(20, 300), days=st.integers(7, 60), seed=st.integers(0, 10_000))
def test_cumulative_revenue_never_decreases_and_totals_agree(users: int, days: int, seed: int) -> None:
    data = generate(DemoConfig("ws_h", users, days, seed, D0))
    cohorts, subscription = _pipeline(data.events.lazy(), spend_rows())
    cube = payback.payback_cube(cohorts, subscription, data.spend.lazy()).collect()
    steps = cube.group_by("workspace_id", "cohort_date", "dimension", "value").agg(
        pl.col("cumulative_revenue").sort_by("day").diff().min().alias("min_step")
    )
    assert (steps["min_step"].fill_null(0) >= 0).all()
    per_dimension = cube.group_by("dimension").agg(pl.col("installs", "spend", "revenue").sum())
    assert per_dimension["installs"].unique().to_list() == [users]
    assert per_dimension["spend"].round(6).unique().len() == 1
    assert abs(per_dimension["spend"][0] - data.spend["spend"].sum()) < 1e-6
    assert cube["day"].min() >= 0 and cube["day"].max() < days


@settings(max_examples=8, deadline=None)
@given(users=st.integers(20, 200), days=st.integers(3, 40), seed=st.integers(0, 10_000))
def test_daily_partitions_add_up_to_the_whole(users: int, days: int, seed: int) -> None:
    """What the daily assets compute day by day equals the cube and curves computed at once."""
    data = generate(DemoConfig("ws_p", users, days, seed, D0))
    events = data.events.with_columns(pl.col("occurred_at").dt.date().alias("d"))
    acquired = pl.concat([lifecycle.acquisitions(part.drop("d").lazy()) for _, part in events.group_by("d")])
    cohorts = lifecycle.user_cohorts(acquired.lazy()).lazy()
    subscription = lifecycle.subscription_events(data.events.lazy(), RATES, REPORTING).collect()
    active = lifecycle.active_days(data.events.lazy()).collect()
    spend = lifecycle.clean_spend(data.spend.lazy(), RATES, REPORTING).collect()
    assert_frame_equal(
        cohorts.collect().sort("user_id"),
        lifecycle.user_cohorts(lifecycle.acquisitions(data.events.lazy()).lazy()).sort("user_id"),
    )
    rows, activity = [], []
    for offset in range(days):
        day = D0 + timedelta(days=offset)
        new = cohorts.filter(pl.col("cohort_date") == day)
        today = subscription.filter(pl.col("event_date") == day).lazy()
        in_week = pl.col("event_date").is_between(day - timedelta(days=6), day)
        rows.append(payback.daily_rows(cohorts, new, today, spend.filter(pl.col("spend_date") == day).lazy()).collect())
        week_active, week_subscription = active.filter(in_week).lazy(), subscription.filter(in_week).lazy()
        activity.append(payback.cohort_activity(cohorts, new, week_active, week_subscription, (day, day)).collect())
    whole = payback.payback_cube(cohorts, subscription.lazy(), spend.lazy()).collect()
    assert_frame_equal(payback.cumulate(pl.concat(rows).lazy()).collect(), whole, check_exact=False)
    as_of = D0 + timedelta(days=days - 1)
    curves = payback.curves_from_events(cohorts, active.lazy(), subscription.lazy(), as_of).collect()
    assert_frame_equal(payback.cohort_curves(pl.concat(activity).lazy(), as_of).collect(), curves, check_exact=False)


def _same_rows(got: pl.DataFrame, expected: pl.DataFrame) -> None:
    keys = [c for c, t in expected.schema.items() if not t.is_float()]
    assert_frame_equal(got.sort(keys), expected.sort(keys), check_exact=False)


@settings(max_examples=8, deadline=None)
@given(users=st.integers(20, 200), days=st.integers(3, 30), batch=st.integers(2, 12), seed=st.integers(0, 10_000))
def test_a_batch_of_days_splits_into_what_each_day_gives_alone(users: int, days: int, batch: int, seed: int) -> None:
    """The daily assets compute a batch of days at once and split the rows by day: each day's
    rows must be exactly those of that day computed alone."""
    data = generate(DemoConfig("ws_b", users, days, seed, D0))
    raw = data.events.with_columns(pl.col("occurred_at").dt.date().alias("d"))
    cohorts = lifecycle.user_cohorts(lifecycle.acquisitions(data.events.lazy()).lazy()).lazy()
    subscription = lifecycle.subscription_events(data.events.lazy(), RATES, REPORTING).collect()
    active = lifecycle.active_days(data.events.lazy()).collect()
    spend = lifecycle.clean_spend(data.spend.lazy(), RATES, REPORTING).collect()
    date_of = {"event_date": pl.col("event_date"), "spend_date": pl.col("spend_date")}

    def inputs(first: date, last: date) -> tuple[pl.LazyFrame, ...]:
        window = pl.col("event_date").is_between(first - timedelta(days=6), last)
        return (
            raw.filter(pl.col("d").is_between(first, last)).drop("d").lazy(),
            cohorts.filter(pl.col("cohort_date").is_between(first, last)),
            subscription.filter(date_of["event_date"].is_between(first, last)).lazy(),
            spend.filter(date_of["spend_date"].is_between(first, last)).lazy(),
            active.filter(window).lazy(),
            subscription.filter(window).lazy(),
        )

    def compute(first: date, last: date) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
        events, new, today, spent, week_active, week_subscription = inputs(first, last)
        return (
            lifecycle.acquisitions(events),
            payback.daily_rows(cohorts, new, today, spent).collect(),
            payback.cohort_activity(cohorts, new, week_active, week_subscription, (first, last)).collect(),
        )

    all_days = [D0 + timedelta(days=i) for i in range(days)]
    for start in range(0, days, batch):
        chunk = all_days[start : start + batch]
        acquired, rows, activity = compute(chunk[0], chunk[-1])
        day_of = (
            pl.col("cohort_date"),
            pl.col("cohort_date") + pl.duration(days=pl.col("day")),
            pl.col("activity_date"),
        )
        for frame, of in zip((acquired, rows, activity), day_of, strict=True):
            assert frame.filter(~of.is_in(chunk)).is_empty()  # write_days refuses rows of other days
        for day in chunk:
            for frame, of, expected in zip((acquired, rows, activity), day_of, compute(day, day), strict=True):
                _same_rows(frame.filter(of == day), expected)


@settings(max_examples=60, deadline=None)
@given(
    window=st.integers(1, 365),
    spend=st.floats(0, 500, allow_nan=False),
    revenue=st.dictionaries(st.integers(0, 364), st.floats(-20, 80, allow_nan=False), max_size=40),
)
def test_payback_day_is_within_the_window_and_first_to_cover_spend(
    window: int, spend: float, revenue: dict[int, float]
) -> None:
    rows = [{"value": "a", "day": 0, "installs": 10, "spend": spend, "net_revenue": revenue.pop(0, 0.0)}]
    rows += [{"value": "a", "day": d, "installs": 0, "spend": 0.0, "net_revenue": r} for d, r in revenue.items()]
    daily = pl.LazyFrame(rows).with_columns(trials=0, trial_conversions=0, subscriptions=0).cast(DAILY_SUMS_SCHEMA)
    day = payback_summary(daily, window).collect()["payback_day"][0]
    running = pl.DataFrame(rows).sort("day").with_columns(pl.col("net_revenue").cum_sum().alias("cum"))
    covered = running.filter((pl.col("cum") >= spend) & (pl.col("day") < window))
    if spend == 0 or covered.is_empty():
        assert day is None
    else:
        assert 0 <= day < window and day == covered["day"][0]


def test_report_events_keep_every_column_the_transforms_read() -> None:
    """The benchmark reads the lake once through `report_events`: every transform must give the
    same answer from it as from the full events (a missing column would raise)."""
    raw = generate(DemoConfig("ws_c", 200, 10, 5, D0)).events.lazy()
    narrow = lifecycle.report_events(raw).collect().lazy()
    assert_frame_equal(lifecycle.acquisitions(narrow), lifecycle.acquisitions(raw))
    subscription = lifecycle.subscription_events
    assert_frame_equal(subscription(narrow, RATES, REPORTING).collect(), subscription(raw, RATES, REPORTING).collect())
    assert_frame_equal(lifecycle.active_days(narrow).collect(), lifecycle.active_days(raw).collect())
