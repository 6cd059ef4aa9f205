"""Conversion to the reporting currency, the sign and bound rules, and the quality facts, as pure
functions on the bundled ECB rates."""

import json
from datetime import UTC, date, datetime, timedelta

import polars as pl
import pytest

from tests.support.money import RATES, reporting
from transforms.events import CANONICAL_EVENT_SCHEMA
from transforms.reports import lifecycle, money
from transforms.reports.schemas import SPEND_SCHEMA


def rate(currency: str, day: date) -> float:
    return RATES.filter((pl.col("currency") == currency) & (pl.col("rate_date") == day))["per_eur"].item()


def convert(rows: list[tuple[str, float | None, str | None, date]], currency: str = "USD") -> pl.DataFrame:
    frame = pl.LazyFrame(
        rows,
        schema={"workspace_id": pl.String, "amount": pl.Float64, "currency": pl.String, "day": pl.Date},
        orient="row",
    )
    return money.convert(
        frame,
        amount="amount",
        currency="currency",
        day="day",
        rates=RATES,
        reporting=reporting("w", currency=currency),
        out="converted",
        eur="eur",
        reason="why",
    ).collect()


def test_amounts_convert_through_the_euro_at_the_rate_of_their_day() -> None:
    wednesday, saturday, friday = date(2026, 10, 28), date(2026, 10, 24), date(2026, 10, 23)
    got = convert(
        [
            ("w", 1000.0, "JPY", wednesday),
            ("w", 1000.0, "JPY", saturday),
            ("w", 10.0, "EUR", wednesday),
            ("w", 10.0, "USD", wednesday),
            ("w", 10.0, None, wednesday),  # no currency: already the reporting currency
        ]
    )
    usd = rate("USD", wednesday)
    assert got["converted"].to_list() == pytest.approx(
        [
            1000 / rate("JPY", wednesday) * usd,
            1000 / rate("JPY", friday) * rate("USD", friday),  # a weekend takes Friday's rate
            10 * usd,
            10.0,
            10.0,
        ]
    )
    assert got["why"].null_count() == got.height
    assert got["eur"][0] == pytest.approx(1000 / rate("JPY", wednesday))


def test_days_after_the_file_use_its_last_rate_and_days_before_a_currency_had_one_do_not_convert() -> None:
    last = RATES["rate_date"].max()
    assert isinstance(last, date)
    got = convert(
        [
            ("w", 1000.0, "JPY", last + timedelta(days=40)),
            ("w", 1000.0, "JPY", date(1998, 12, 31)),  # before the ECB's first rate (1999-01-04)
            ("w", 1000.0, "RUB", date(2022, 2, 25)),  # quoted then
            ("w", 1000.0, "RUB", date(2025, 6, 2)),  # not quoted since 2022-03-01
            ("w", 1000.0, "ABC", date(2025, 6, 2)),
            ("x", 1000.0, "USD", date(2025, 6, 2)),  # a workspace without a reporting currency
            ("w", None, "XXX", date(2025, 6, 2)),  # no amount: nothing to convert
        ]
    )
    assert got["converted"][0] == pytest.approx(1000 / rate("JPY", last) * rate("USD", last))
    assert got["converted"][2] == pytest.approx(1000 / rate("RUB", date(2022, 2, 25)) * rate("USD", date(2022, 2, 25)))
    assert got["why"].to_list() == [
        None,
        "currency_without_rate",
        None,
        "currency_without_rate",
        "unknown_currency",
        "no_reporting_currency",
        None,
    ]
    assert got["converted"].is_null().to_list() == [False, True, False, True, True, True, True]


def test_a_reporting_currency_other_than_usd() -> None:
    day = date(2026, 10, 28)
    got = convert([("w", 1000.0, "JPY", day), ("w", 5.0, "GBP", day)], currency="GBP")
    assert got["converted"].to_list() == pytest.approx([1000 / rate("JPY", day) * rate("GBP", day), 5.0])


def events(*rows: tuple[str, dict]) -> pl.LazyFrame:
    at = datetime(2026, 10, 28, 12, tzinfo=UTC)
    return pl.LazyFrame(
        [
            {name: None for name in CANONICAL_EVENT_SCHEMA}
            | {
                "event_id": f"e{i}",
                "workspace_id": "w",
                "event_type": kind,
                "occurred_at": at,
                "received_at": at,
                "user_id": "u1",
                "source": "test",
                "properties": json.dumps(props),
            }
            for i, (kind, props) in enumerate(rows)
        ],
        schema=CANONICAL_EVENT_SCHEMA,
    )


def test_subscription_events_keep_the_original_and_apply_the_sign_and_bound_rules() -> None:
    frame = events(
        ("renewal", {"revenue": 1000, "currency": "JPY"}),
        ("renewal", {"revenue": -50, "currency": "USD"}),  # a negative charge is not revenue
        ("refund", {"revenue": -5, "currency": "USD"}),  # a refund's sign is the vendor's choice
        ("refund", {"revenue": 5, "currency": "USD"}),
        ("subscription_start", {"revenue": 1e308, "currency": "USD"}),
        ("trial_converted", {"revenue": 9.99, "currency": "XXX"}),
        ("cancellation", {"revenue": 3, "currency": "XXX"}),  # not a money event: nothing to convert
        ("trial_start", {}),
    )
    got = lifecycle.subscription_events(frame, RATES, reporting("w")).sort("event_id").collect()
    day = date(2026, 10, 28)
    assert got["amount"].to_list() == [1000.0, -50.0, -5.0, 5.0, 1e308, 9.99, None, None]
    assert got["currency"].to_list() == ["JPY", "USD", "USD", "USD", "USD", "XXX", "XXX", None]
    assert got["revenue"].to_list() == pytest.approx(
        [1000 / rate("JPY", day) * rate("USD", day), 0.0, 0.0, 0.0, 0.0, None, 0.0, 0.0], nan_ok=False
    )
    assert got["refund"].to_list() == [0.0, 0.0, 5.0, 5.0, 0.0, 0.0, 0.0, 0.0]
    assert got["money_issue"].to_list() == [
        None,
        "negative_charge",
        None,
        None,
        "amount_out_of_bounds",
        "unknown_currency",
        None,
        None,
    ]


def test_a_one_off_purchase_is_revenue_and_its_refund_is_subtracted() -> None:
    """A subscription provider lands one-off purchases and their refunds: both count, or the
    refund would take away money that was never added."""
    frame = events(("purchase", {"revenue": 4.99, "currency": "USD"}), ("refund", {"revenue": 4.99, "currency": "USD"}))
    got = lifecycle.subscription_events(frame, RATES, reporting("w")).sort("event_id").collect()
    assert got["revenue"].to_list() == pytest.approx([4.99, 0.0])
    assert got["refund"].to_list() == pytest.approx([0.0, 4.99])


def test_spend_is_converted_and_its_delivery_kept() -> None:
    day = date(2026, 10, 28)
    raw = pl.LazyFrame(
        [("w", day, "c", "k", "US", 100.0, "EUR"), ("w", day, "c", "k2", "US", 100.0, "ARS")],
        schema=SPEND_SCHEMA,
        orient="row",
    )
    got = lifecycle.clean_spend(raw, RATES, reporting("w")).sort("creative").collect()
    assert got["spend"].to_list() == pytest.approx([100 * rate("USD", day), None])
    assert got.select("amount", "currency", "money_issue").rows() == [
        (100.0, "EUR", None),
        (100.0, "ARS", "currency_without_rate"),
    ]
    assert money.unconverted(got.lazy(), "spend_date").rows() == [("w", "ARS", day, "currency_without_rate", 1)]


def test_unbounded_rows_and_revenue_spikes() -> None:
    frame = pl.LazyFrame({"a": [1.0, float("inf"), 2e13, float("nan"), -2e13]})
    assert money.unbounded_rows(frame, ("a",)) == 4
    start = date(2026, 1, 1)
    days = [start + timedelta(days=i) for i in range(30)]

    def daily(revenue: list[float]) -> pl.LazyFrame:
        return pl.LazyFrame({"workspace_id": "w", "event_date": days, "revenue": revenue})

    assert money.revenue_spikes(daily([10.0] * 29 + [100.0])).height == 0  # 10x: not above
    assert money.revenue_spikes(daily([10.0] * 29 + [101.0]))["event_date"].to_list() == [days[-1]]
    # Fewer than 14 days of history: no median to compare with.
    assert money.revenue_spikes(daily([10.0] * 10 + [1000.0] + [10.0] * 19)).height == 0
