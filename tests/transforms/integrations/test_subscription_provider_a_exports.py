"""RevenueCat Scheduled Data Export rows to canonical events: the API path's ids, the export's
figures and the refunds and cancellations only the export dates."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime, timedelta

import pytest

from tests.providers.revenuecat_export import csv_bytes, parquet_bytes, row
from tests.providers.revenuecat_fake import ANCHOR, purchase, subscription, transaction
from transforms.events import CanonicalEvent
from transforms.integrations.kinds import ConfigProblem, validate_config
from transforms.integrations.subscription_provider_a import Mapper
from transforms.integrations.subscription_provider_a_exports import (
    ExportMapper,
    ExportProblem,
    is_transactions_file,
    parse_time,
    read_transactions,
)

DAY = timedelta(days=1)
NOW = ANCHOR + timedelta(hours=1)
API = Mapper("ws_1", "subscription_provider_a", NOW)
EXPORT = ExportMapper("ws_1", "subscription_provider_a", NOW)
T0 = ANCHOR - 60 * DAY


def _export(rows: list[dict[str, str]]) -> list[CanonicalEvent]:
    mapped = EXPORT.transactions(read_transactions("x/transactions_1.csv", csv_bytes(rows, compress=False)))
    return mapped.events


def _alice_rows(**last: object) -> list[dict[str, str]]:
    """A 7-day trial, its conversion and a renewal: the history `_alice_api` states."""
    return [
        row("alice", "2000001", T0, T0 + 7 * DAY, trial=True),
        row("alice", "2000002", T0 + 7 * DAY, T0 + 37 * DAY, original="2000001", renewal_number=2, conversion=True),
        row("alice", "2000003", T0 + 37 * DAY, T0 + 67 * DAY, original="2000001", renewal_number=3, **last),  # type: ignore[arg-type]
    ]


def _alice_api(**kw: object) -> list[CanonicalEvent]:
    txns = [
        transaction("2000001", T0, T0 + 7 * DAY),
        transaction("2000002", T0 + 7 * DAY, T0 + 37 * DAY),
        transaction("2000003", T0 + 37 * DAY, T0 + 67 * DAY),
    ]
    sub = subscription(
        "alice", "sub_a", starts=T0, period_starts=T0 + 37 * DAY, period_ends=T0 + 67 * DAY, gross=19.98, **kw
    )  # type: ignore[arg-type]
    return API.subscription(sub, txns)


def test_a_subscription_gets_the_api_paths_ids_types_times_and_figures() -> None:
    exported = _export(_alice_rows())
    api = _alice_api()
    key = [(e.event_id, e.event_type, e.occurred_at, e.user_id, e.properties.get("revenue")) for e in exported]
    assert key == [(e.event_id, e.event_type, e.occurred_at, e.user_id, e.properties.get("revenue")) for e in api]
    assert [e.event_id for e in exported] == [
        "rc:2000001:trial_start",
        "rc:2000002:trial_converted",
        "rc:2000003:renewal",
    ]
    assert {e.properties.get("currency") for e in exported if e.properties.get("revenue")} == {"USD"}
    assert {(e.platform, e.country, e.source) for e in exported} == {("ios", "US", "subscription_provider_a")}


def test_the_export_books_each_transactions_own_price_where_the_api_averages() -> None:
    rows = [
        row("bob", "3000001", T0, T0 + 30 * DAY, price=4.99),
        row("bob", "3000002", T0 + 30 * DAY, T0 + 60 * DAY, original="3000001", renewal_number=2, price=9.99),
    ]
    events = _export(rows)
    assert [(e.event_type, e.properties["revenue"]) for e in events] == [
        ("subscription_start", 4.99),
        ("renewal", 9.99),
    ]


def test_a_refund_is_dated_by_refunded_at_and_takes_back_the_refunded_part() -> None:
    refunded = T0 + 45 * DAY
    events = _export(_alice_rows(refunded_at=refunded, price_after_refunds=0.0))
    refund = next(e for e in events if e.event_type == "refund")
    assert (refund.event_id, refund.occurred_at, refund.properties["revenue"]) == ("rc:2000003:refund", refunded, 9.99)
    renewal = next(e for e in events if e.event_type == "renewal")
    assert renewal.properties["revenue"] == 9.99  # the charge keeps its gross; the refund subtracts
    partial = _export(_alice_rows(refunded_at=refunded, price_after_refunds=4.0))
    assert next(e for e in partial if e.event_type == "refund").properties["revenue"] == 5.99


def test_a_one_time_purchase_and_its_refund_match_the_api_purchase_ids() -> None:
    at = ANCHOR - 3 * DAY
    api = API.purchase(purchase("bob", "pur_b", at=at, gross=4.99, status="refunded"))
    exported = _export(
        [row("bob", "pur_b-store", at, None, renewable=False, price=4.99, refunded_at=at + DAY, product="coins")]
    )
    assert (
        [e.event_id for e in exported]
        == [e.event_id for e in api]
        == ["rc:pur_b-store:purchase", "rc:pur_b-store:refund"]
    )
    assert exported[1].occurred_at == at + DAY  # the API can only say `at`


def test_unsubscribe_detected_at_is_one_cancellation_per_subscription_under_the_api_id() -> None:
    unsubscribed = T0 + 50 * DAY
    rows = _alice_rows(unsubscribed_at=unsubscribed)
    rows[1]["unsubscribe_detected_at"] = rows[2]["unsubscribe_detected_at"]  # on two rows: still one id
    cancellations = [e for e in _export(rows) if e.event_type == "cancellation"]
    api = [e for e in _alice_api(auto_renewal_status="will_not_renew") if e.event_type == "cancellation"]
    assert {e.event_id for e in cancellations} == {api[0].event_id} == {"rc:2000001:cancellation"}
    assert cancellations[0].occurred_at == unsubscribed


def test_sandbox_rows_are_left_out_and_counted() -> None:
    rows = [row("sam", "9000001", T0, T0 + 30 * DAY, sandbox=True), row("sam", "9000002", T0, T0 + 30 * DAY)]
    mapped = EXPORT.transactions(read_transactions("t/transactions_1.csv", csv_bytes(rows, compress=False)))
    assert [e.event_id for e in mapped.events] == ["rc:9000002:subscription_start"]
    assert mapped.skipped == {"sandbox": 1}


def test_stripe_rows_are_keyed_by_transaction_and_renewal_number() -> None:
    # RevenueCat: Stripe repeats `store_transaction_id`; the pair with `renewal_number` is unique.
    rows = [
        row("sue", "sub_1Stripe", T0, T0 + 30 * DAY, store="stripe"),
        row("sue", "sub_1Stripe", T0 + 30 * DAY, T0 + 60 * DAY, store="stripe", renewal_number=2),
    ]
    assert [e.event_id for e in _export(rows)] == ["rc:sub_1Stripe:1:subscription_start", "rc:sub_1Stripe:2:renewal"]


def test_gzip_csv_parquet_and_pre_v4_flags_read_alike() -> None:
    rows = _alice_rows()
    plain = read_transactions("a/transactions_1.csv", csv_bytes(rows, compress=False))
    assert read_transactions("a/transactions_1.csv.gz", csv_bytes(rows)) == plain
    old = [dict(r, is_trial_period="t" if r["is_trial_period"] == "true" else "f") for r in rows]
    from_parquet = read_transactions("a/transactions_1.parquet", parquet_bytes(rows))
    for read in (from_parquet, read_transactions("a/transactions_1.csv", csv_bytes(old, compress=False))):
        assert [e.event_id for e in EXPORT.transactions(read).events] == [
            e.event_id for e in EXPORT.transactions(plain).events
        ]


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"user,when\nx,y\n", "no column"),
        (
            gzip.compress(b"rc_original_app_user_id,store_transaction_id,start_time,store\n1,2\n", mtime=0),
            "line 2 has 2",
        ),
        (b"\x1f\x8bnot gzip at all", "broken gzip"),
    ],
)
def test_a_file_that_is_not_a_transactions_export_is_refused(data: bytes, problem: str) -> None:
    with pytest.raises(ExportProblem, match=problem):
        read_transactions("a/transactions_1.csv.gz", data)


def test_only_the_transactions_feed_is_read() -> None:
    assert is_transactions_file("rc/2026-11-20/transactions_20261120T040000.csv.gz")
    assert is_transactions_file("2026-11-20/transactions_1.parquet")
    assert not is_transactions_file("rc/2026-11-20/virtual_currency_transactions_1.csv.gz")
    assert not is_transactions_file("rc/2026-11-20/transactions_1.json")


def test_times_are_utc_in_every_shape() -> None:
    expected = datetime(2023, 1, 1, 8, 27, 6, tzinfo=UTC)
    assert parse_time("2023-01-01 08:27:06") == expected
    assert parse_time("2023-01-01T08:27:06Z") == expected
    assert parse_time(datetime(2023, 1, 1, 8, 27, 6)) == expected  # noqa: DTZ001 - Parquet's naive UTC
    assert parse_time("soon") is None


def test_the_export_is_configured_whole_or_not_at_all() -> None:
    base = {"api_key": "sk_x", "project_id": "proj1"}
    assert validate_config("subscription_provider_a", base).get("export_bucket") is None
    with pytest.raises(ConfigProblem) as problem:
        validate_config("subscription_provider_a", base | {"export_bucket": "rc-exports"})
    assert problem.value.field == "export_access_key_id"
    full = validate_config(
        "subscription_provider_a",
        base | {"export_bucket": "rc-exports", "export_access_key_id": "AKIA1", "export_secret_access_key": "s3cr3t"},
    )
    assert set(full.secrets) == {"api_key", "export_access_key_id", "export_secret_access_key"}
