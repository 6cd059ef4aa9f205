"""Adapty export rows to canonical events: types, money, users, ids, and files refused."""

import json
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from tests.providers.subscription_provider_b_export import (
    EVENT_COLUMNS,
    PAYWALL_VISIT_COLUMNS,
    event_row,
    export_csv,
)
from tests.support.money import RATES, reporting
from transforms.events import CANONICAL_EVENT_SCHEMA, CanonicalEvent
from transforms.integrations.subscription_provider_b import ExportProblem, map_rows, read_export
from transforms.reports import lifecycle

T0 = datetime(2026, 3, 7, 9, 30, tzinfo=UTC)
RECEIVED = datetime(2026, 3, 8, 4, 5, tzinfo=UTC)


def mapped(*rows: dict[str, str]):  # type: ignore[no-untyped-def]
    export = read_export(export_csv(rows))
    return map_rows(export.rows, workspace_id="ws_a", source="subscription_provider_b", received_at=RECEIVED)


def test_each_billing_event_becomes_its_canonical_type_with_gross_usd_revenue() -> None:
    result = mapped(
        event_row("trial_started", T0, transaction_id="1000000000000001"),
        event_row("trial_converted", T0 + timedelta(hours=1), transaction_id="1000000000000002", revenue_usd=9.99),
        event_row("subscription_started", T0, transaction_id="1000000000000003", revenue_usd=4.99),
        event_row("subscription_renewed", T0, transaction_id="1000000000000004", revenue_usd=9.99),
        event_row("subscription_refunded", T0, transaction_id="1000000000000004", revenue_usd=9.99),
        event_row("non_subscription_purchase", T0, transaction_id="1000000000000005", revenue_usd=1.99),
        event_row("subscription_renewal_cancelled", T0, transaction_id="1000000000000004"),
        event_row("trial_renewal_cancelled", T0, transaction_id="1000000000000001"),
    )
    assert [e.event_type for e in result.events] == [
        "trial_start",
        "trial_converted",
        "subscription_start",
        "renewal",
        "refund",
        "purchase",
        "cancellation",
        "cancellation",
    ]
    renewal = result.events[3]
    assert renewal.properties["revenue"] == 9.99
    assert renewal.properties["currency"] == "USD"
    assert renewal.properties["product_id"] == "com.example.premium.monthly"
    assert renewal.properties["proceeds_usd"] == pytest.approx(6.99)
    assert "revenue" not in result.events[0].properties  # a trial start charges nothing
    assert renewal.occurred_at == T0
    assert renewal.platform == "ios"
    assert renewal.country == "US"
    assert not result.skipped


def test_the_reports_book_the_revenue_and_subtract_the_refund() -> None:
    """What a user sees: the charges as gross revenue, the refund subtracted, in their currency."""
    result = mapped(
        event_row("subscription_started", T0, transaction_id="t1", revenue_usd=4.99),
        event_row("subscription_renewed", T0, transaction_id="t2", revenue_usd=9.99),
        event_row("subscription_refunded", T0, transaction_id="t2", revenue_usd=9.99),
    )
    frame = pl.LazyFrame([_lake_row(e) for e in result.events], schema=CANONICAL_EVENT_SCHEMA)
    booked = lifecycle.subscription_events(frame, RATES, reporting("ws_a", currency="USD")).collect()
    assert booked.get_column("revenue").sum() == pytest.approx(4.99 + 9.99)
    assert booked.get_column("refund").sum() == pytest.approx(9.99)
    assert booked.get_column("money_issue").null_count() == booked.height


def _lake_row(event: CanonicalEvent) -> dict[str, object]:
    return {name: getattr(event, name) for name in CANONICAL_EVENT_SCHEMA} | {
        "properties": json.dumps(event.properties, sort_keys=True, separators=(",", ":"))
    }


def test_user_is_the_apps_own_id_else_adaptys_profile() -> None:
    result = mapped(
        event_row("subscription_renewed", T0, transaction_id="t1", customer_user_id="app-user-42", revenue_usd=1.0),
        event_row("subscription_renewed", T0, transaction_id="t2", customer_user_id=None, revenue_usd=1.0),
    )
    assert [e.user_id for e in result.events] == ["app-user-42", "6f1c2a4e-0000-4000-8000-000000000001"]


def test_the_same_fact_in_two_files_has_one_id_and_a_refund_its_own() -> None:
    daily = mapped(event_row("subscription_renewed", T0, transaction_id="1000000000000004", revenue_usd=9.99))
    manual = mapped(event_row("subscription_renewed", T0, transaction_id="1000000000000004", revenue_usd=9.99))
    refund = mapped(event_row("subscription_refunded", T0, transaction_id="1000000000000004", revenue_usd=9.99))
    assert daily.events[0].event_id == manual.events[0].event_id == "adapty:1000000000000004:renewal"
    assert refund.events[0].event_id == "adapty:1000000000000004:refund"


def test_cancelling_twice_in_one_period_is_two_facts() -> None:
    result = mapped(
        event_row("subscription_renewal_cancelled", T0, transaction_id="t9"),
        event_row("subscription_renewal_cancelled", T0 + timedelta(hours=2), transaction_id="t9"),
    )
    assert len({e.event_id for e in result.events}) == 2


def test_long_transaction_ids_keep_ids_within_80_characters() -> None:
    result = mapped(event_row("subscription_renewed", T0, transaction_id="GPA.3345-1234-5678-90123..0" * 3))
    assert len(result.events[0].event_id) <= 80
    again = mapped(event_row("subscription_renewed", T0, transaction_id="GPA.3345-1234-5678-90123..0" * 3))
    assert again.events[0].event_id == result.events[0].event_id


def test_rows_left_out_are_counted_by_reason() -> None:
    result = mapped(
        event_row("subscription_renewed", T0, transaction_id="s1", revenue_usd=9.99, environment="Sandbox"),
        event_row("subscription_expired", T0, transaction_id="x1"),
        event_row("billing_issue_detected", T0, transaction_id="x2"),
        event_row("paywall_showed", T0, transaction_id="x3"),
        event_row("subscription_renewed", T0, transaction_id="n1", revenue_usd=-9.99),
        event_row("subscription_renewed", T0, transaction_id="d1", event_datetime="yesterday"),
        event_row("subscription_renewed", datetime(2023, 5, 1, tzinfo=UTC), transaction_id="o1"),
        event_row("subscription_renewed", T0, transaction_id="r1") | {"revenue_usd": "n/a"},
    )
    assert result.events == []
    assert dict(result.skipped) == {
        "sandbox": 1,
        "not_mapped": 3,
        "negative_charge": 1,
        "invalid_event_datetime": 1,
        "out_of_range": 1,
        "invalid_revenue": 1,
    }


def test_country_from_adapty_else_the_store_in_either_code_length() -> None:
    result = mapped(
        event_row("subscription_renewed", T0, transaction_id="c1", profile_country="", store_country="DEU"),
        event_row("subscription_renewed", T0, transaction_id="c2", profile_country="Narnia", store_country=""),
    )
    assert [e.country for e in result.events] == ["DE", None]


def test_new_columns_are_ignored_and_a_byte_order_mark_is_read() -> None:
    row = event_row("trial_started", T0, transaction_id="t1") | {"some_new_column": "x"}
    data = export_csv([row], columns=[*EVENT_COLUMNS, "some_new_column"])
    export = read_export(b"\xef\xbb\xbf" + data)
    assert export.kind == "events"
    assert export.rows[0]["profile_id"].startswith("6f1c2a4e")


def test_paywall_visit_files_are_told_apart() -> None:
    data = export_csv(
        [{"profile_id": "p", "paywall_showed_at": "2026-03-07T10:00:00.000000+0000"}], PAYWALL_VISIT_COLUMNS
    )
    assert read_export(data).kind == "paywall_visits"


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"profile_id,event_type,event_datetime\np1,trial_started\n", "line 2 has 2 fields, the header has 3"),
        (b"profile_id,event_type,event_datetime\np1,trial_started,2026-03-07,extra\n", "line 2 has 4 fields"),
        (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xff", "not UTF-8"),
        (b"user,amount\nu1,3\n", "not an Adapty events export: no profile_id, event_type, event_datetime column"),
        (b'profile_id,event_type,event_datetime\n"p1,trial_started,2026\n', "not valid CSV"),
    ],
)
def test_unreadable_files_are_refused_with_the_reason(data: bytes, problem: str) -> None:
    with pytest.raises(ExportProblem, match=problem):
        read_export(data)


def test_an_empty_file_or_a_header_alone_holds_no_events() -> None:
    assert read_export(b"").rows == ()
    assert read_export(export_csv([])).rows == ()
