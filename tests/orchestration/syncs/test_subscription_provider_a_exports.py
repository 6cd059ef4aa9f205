"""The RevenueCat sync with Scheduled Data Exports: the Transactions feed in a real S3 endpoint
(moto on 127.0.0.1) read before the API walk against the fake RevenueCat API, a real database."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from orchestration.syncs.connectors.subscription_provider_a import CONNECTOR
from tests.providers import s3_fake
from tests.providers.revenuecat_export import csv_bytes, key, parquet_bytes, row
from tests.providers.revenuecat_fake import ANCHOR, FakeCustomer, FakeRevenueCat, subscription, transaction
from tests.providers.s3_fake import S3Fake
from transforms.client_errors import ClientError
from transforms.integrations.kinds import ValidConfig, validate_config
from warehouse.db import Database, utcnow
from warehouse.events.landing import prune_claims
from warehouse.events.tables import landed_events
from warehouse.integrations.target import SyncTarget
from warehouse.lake import Lake, LocalLake

moto_server = s3_fake.moto_server
s3 = s3_fake.s3

TYPE = "subscription_provider_a"
DAY = timedelta(days=1)
NOW = ANCHOR + timedelta(hours=2)
T0 = ANCHOR - 50 * DAY
PREFIX = "revenuecat/exports"
FAST = 10_000


def _api_customers() -> list[FakeCustomer]:
    """What the API lists: alice's App Store subscription (trial, conversion, renewal; 19.98 in
    all, which the API path splits 9.99 + 9.99), bob's Play Store year, carol's Stripe trial."""
    alice = FakeCustomer(
        "alice",
        subscriptions=[
            subscription(
                "alice", "sub_a", starts=T0, period_starts=T0 + 37 * DAY, period_ends=T0 + 67 * DAY, gross=19.98
            )
        ],
        transactions={
            "sub_a": [
                transaction("1001", T0, T0 + 7 * DAY),
                transaction("1002", T0 + 7 * DAY, T0 + 37 * DAY),
                transaction("1003", T0 + 37 * DAY, T0 + 67 * DAY),
            ]
        },
    )
    bob = FakeCustomer(
        "bob",
        subscriptions=[
            subscription(
                "bob", "sub_b", starts=T0, period_starts=T0, period_ends=T0 + 365 * DAY, gross=59.99, store="play_store"
            )
        ],
        transactions={"sub_b": [transaction("GPA.2001", T0, T0 + 365 * DAY)]},
    )
    carol = FakeCustomer(
        "carol",
        subscriptions=[
            subscription(
                "carol",
                "sub_c",
                starts=ANCHOR - DAY,
                period_starts=ANCHOR - DAY,
                period_ends=ANCHOR + 6 * DAY,
                gross=0,
                status="trialing",
                store="stripe",
            )
        ],
    )
    return [alice, bob, carol]


OLD = ANCHOR - 400 * DAY
REFUNDED_AT = ANCHOR - 10 * DAY


def _export_rows() -> list[dict[str, str]]:
    """The export's view: alice's periods at their own prices (6.99, then 12.99), bob's year
    refunded 40 days in, carol's Stripe trial, and olga, whom the API no longer lists (her
    customer was deleted in RevenueCat), with a year of monthly renewals 400 days ago."""
    rows = [
        row("alice", "1001", T0, T0 + 7 * DAY, trial=True),
        row(
            "alice", "1002", T0 + 7 * DAY, T0 + 37 * DAY, original="1001", renewal_number=2, conversion=True, price=6.99
        ),
        row("alice", "1003", T0 + 37 * DAY, T0 + 67 * DAY, original="1001", renewal_number=3, price=12.99),
        row("bob", "GPA.2001", T0, T0 + 365 * DAY, store="play_store", price=59.99, refunded_at=REFUNDED_AT),
        row("carol", "sub_1CarolStripe", ANCHOR - DAY, ANCHOR + 6 * DAY, store="stripe", trial=True),
        row("sandra", "7000001", T0, T0 + 30 * DAY, sandbox=True),
    ]
    rows += [
        row(
            "olga",
            f"50000{i:02d}",
            OLD + 30 * i * DAY,
            OLD + 30 * (i + 1) * DAY,
            original="5000000",
            renewal_number=i + 1,
        )
        for i in range(12)
    ]
    return rows


OLGA = {f"rc:50000{i:02d}:{'subscription_start' if i == 0 else 'renewal'}" for i in range(12)}
EXPECTED = OLGA | {
    "rc:1001:trial_start",
    "rc:1002:trial_converted",
    "rc:1003:renewal",
    "rc:GPA.2001:subscription_start",
    "rc:GPA.2001:refund",
    "rc:sub_1CarolStripe:1:trial_start",
}


class Setup:
    def __init__(self, db: Database, lake: Lake, workspace_id: str, s3: S3Fake, api: FakeRevenueCat) -> None:
        self.db, self.lake, self.workspace_id, self.s3, self.api = db, lake, workspace_id, s3, api
        self.state: dict[str, Any] = {}
        self.lines: list[str] = []

    def config(self, **overrides: Any) -> ValidConfig:
        raw = {
            "api_key": self.api.api_key,
            "project_id": self.api.project_id,
            "base_url": self.api.url,
            "requests_per_minute": FAST,
            "export_bucket": self.s3.bucket,
            "export_prefix": PREFIX,
            "export_region": self.s3.region,
            "export_endpoint_url": self.s3.url,
            "export_access_key_id": self.s3.access_key_id,
            "export_secret_access_key": self.s3.secret_access_key,
        }
        return validate_config(TYPE, {k: v for k, v in (raw | overrides).items() if v is not None})

    def sync(self, now: datetime = NOW, config: ValidConfig | None = None, keep: bool = True) -> SyncTarget:
        """One sync as the framework runs it: the last successful sync's state in, kept on success."""
        config = config or self.config()
        state = {k: dict(v) if isinstance(v, dict) else v for k, v in self.state.items()} if keep else {}
        target = SyncTarget(self.db, self.lake, self.workspace_id, "int_test", TYPE, state=state, now=now)
        CONNECTOR.sync(CONNECTOR.client(config), target, config, self.lines.append)
        if keep:
            self.state = target.state
        return target

    def landed(self) -> dict[str, dict[str, Any]]:
        with self.db.read() as conn:
            rows = conn.execute(
                sa.select(landed_events).where(landed_events.c.workspace_id == self.workspace_id)
            ).mappings()
            return {r["event_id"]: dict(r) for r in rows}


@pytest.fixture
def setup(db: Database, workspace: dict[str, Any], tmp_path: Path, s3: S3Fake) -> Any:
    with FakeRevenueCat(customers=_api_customers(), per_minute=FAST) as api:
        yield Setup(db, LocalLake(tmp_path / "lake"), workspace["workspace_id"], s3, api)


def _deliver(setup: Setup, rows: list[dict[str, str]], at: datetime = ANCHOR, ext: str = "csv.gz") -> str:
    k = key(PREFIX, at, ext)
    setup.s3.put(k, parquet_bytes(rows) if ext == "parquet" else csv_bytes(rows))
    return k


def test_history_only_in_the_export_lands_and_both_paths_land_each_transaction_once(setup: Setup) -> None:
    first = _deliver(setup, _export_rows())
    setup.s3.put(f"{PREFIX}/2026-11-20/virtual_currency_transactions_1.csv.gz", b"not read")
    target = setup.sync()
    landed = setup.landed()
    # Olga's year, 400 days back, exists only in the export; alice, bob and carol in both.
    assert set(landed) == EXPECTED
    assert target.records == len(EXPECTED) and target.duplicates > 0  # the API restated the rest
    assert {landed[i]["user_id"] for i in OLGA} == {"olga"}
    assert setup.state["export_files"] == {
        first: setup.s3.client().head_object(Bucket=setup.s3.bucket, Key=first)["ETag"]
    }
    assert any("1 Transactions file(s), 1 new or changed" in line for line in setup.lines)
    assert any("1 sandbox" in line for line in setup.lines)


def test_a_transaction_in_both_keeps_the_exports_figures(setup: Setup) -> None:
    _deliver(setup, _export_rows())
    setup.sync()
    landed = setup.landed()
    # The API alone would have booked 9.99 twice (the 19.98 total split evenly).
    assert landed["rc:1002:trial_converted"]["properties"]["revenue"] == 6.99
    assert landed["rc:1003:renewal"]["properties"]["revenue"] == 12.99
    assert sum(1 for i in landed if i.startswith("rc:1002:")) == 1


def test_a_refund_is_dated_by_refunded_at(setup: Setup) -> None:
    _deliver(setup, _export_rows(), ext="parquet")
    setup.sync()
    refund = setup.landed()["rc:GPA.2001:refund"]
    assert refund["occurred_at"].replace(tzinfo=REFUNDED_AT.tzinfo) == REFUNDED_AT
    assert refund["properties"]["revenue"] == 59.99 and refund["user_id"] == "bob"


def test_the_same_files_twice_change_nothing(setup: Setup) -> None:
    _deliver(setup, _export_rows())
    setup.sync()
    before = setup.landed()
    state = dict(setup.state["export_files"])
    setup.s3.traffic.reset()
    again = setup.sync()
    assert again.records == 0 and setup.landed() == before
    assert setup.state["export_files"] == state
    assert setup.s3.traffic.count("GET") == 1  # the listing; no file read again


def test_bad_export_credentials_are_an_auth_failure_naming_the_export_bucket(setup: Setup) -> None:
    _deliver(setup, _export_rows())
    config = setup.config(export_secret_access_key="not-the-secret-key")
    with pytest.raises(ClientError) as failure:
        setup.sync(config=config)
    with pytest.raises(ClientError) as checked:
        CONNECTOR.check(CONNECTOR.client(config))
    for f in (failure.value, checked.value):
        assert f.code == "auth" and f.refused
        assert "RevenueCat Scheduled Data Exports bucket s3://flokit-test-exports/revenuecat/exports/" in f.message
        assert "SignatureDoesNotMatch" in f.message
    assert setup.landed() == {} and setup.api.stats.requests == 1  # only check()'s own API call
    assert "export bucket" in CONNECTOR.check(CONNECTOR.client(setup.config()))


def test_a_sync_40_days_later_lands_no_duplicate(setup: Setup) -> None:
    _deliver(setup, _export_rows())
    setup.sync()
    with setup.db.write() as conn:  # the daily prune, 40 days on: every claim is gone
        prune_claims(conn, utcnow() + timedelta(days=1))
    # A new delivery restates rows already landed (RevenueCat re-sends updated transactions).
    _deliver(setup, _export_rows()[:4], at=ANCHOR + 39 * DAY)
    later = setup.sync(now=NOW + 40 * DAY)
    assert later.records == 0 and later.skipped_settled > 0
    assert set(setup.landed()) == EXPECTED
    # Without the integration's state the same sync would have landed everything again.
    forgetful = setup.sync(now=NOW + 40 * DAY, keep=False)
    assert forgetful.records == len(EXPECTED)


def test_without_export_config_nothing_is_read_from_the_bucket(setup: Setup) -> None:
    _deliver(setup, _export_rows())
    config = setup.config(
        export_bucket=None, export_prefix=None, export_access_key_id=None, export_secret_access_key=None
    )
    setup.s3.traffic.reset()
    setup.sync(config=config)
    assert setup.s3.traffic.calls == []
    assert not any(i in setup.landed() for i in OLGA)


def test_an_updated_transaction_redelivered_adds_its_refund_only(setup: Setup) -> None:
    rows = _export_rows()
    unrefunded = [dict(r, refunded_at="", price_in_usd=r["purchase_price_in_usd"]) for r in rows]
    _deliver(setup, unrefunded)
    setup.sync()
    assert "rc:GPA.2001:refund" not in setup.landed()
    # "New and updated transactions only": the next delivery holds bob's row again, refunded.
    _deliver(setup, [rows[3]], at=ANCHOR + DAY)
    later = setup.sync(now=NOW + DAY)
    assert later.records == 1
    assert setup.landed()["rc:GPA.2001:refund"]["properties"]["revenue"] == 59.99


def test_an_unreadable_file_fails_the_sync_after_landing_the_rest(setup: Setup) -> None:
    _deliver(setup, _export_rows())
    bad = key(PREFIX, ANCHOR + timedelta(hours=1))
    setup.s3.put(bad, b"\x1f\x8b\x08 cut short")
    with pytest.raises(ClientError) as failure:
        setup.sync()
    assert failure.value.code == "bad_response"
    assert "RevenueCat Scheduled Data Exports bucket" in failure.value.message and bad in failure.value.message
    assert set(setup.landed()) == EXPECTED  # the good file and the API walk landed


def test_a_missing_export_bucket_is_a_config_failure_before_any_api_call(setup: Setup) -> None:
    with pytest.raises(ClientError) as failure:
        setup.sync(config=setup.config(export_bucket="no-such-revenuecat-bucket"))
    assert failure.value.code == "config" and failure.value.refused
    assert "Scheduled Data Exports bucket s3://no-such-revenuecat-bucket/" in failure.value.message
    assert "NoSuchBucket" in failure.value.message
    assert setup.api.stats.requests == 0
