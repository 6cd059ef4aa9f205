"""The Adapty connector against a real S3 endpoint (moto on 127.0.0.1) holding export files as
Adapty's S3 integration writes them: paging, credentials, retries, re-syncs, backfills, and
files that cannot be read."""

import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from pytest_httpserver import HTTPServer

from clients.subscription_provider_b import AdaptyExportClient
from orchestration.syncs.connectors import connector_for
from orchestration.syncs.connectors.subscription_provider_b import CONNECTOR
from tests.providers import s3_fake
from tests.providers.s3_fake import S3Fake
from tests.providers.subscription_provider_b_export import (
    PAYWALL_VISIT_COLUMNS,
    event_row,
    export_csv,
)
from tests.support.money import RATES, reporting
from transforms.client_errors import ClientError
from transforms.integrations.kinds import ValidConfig, validate_config
from transforms.reports import lifecycle
from warehouse.db import Database
from warehouse.events.landing import day_frame, prune_claims
from warehouse.events.tables import landed_events
from warehouse.integrations.target import SyncTarget
from warehouse.lake import Lake, LocalLake

# The fake's fixtures, for this module.
moto_server = s3_fake.moto_server
s3 = s3_fake.s3

TYPE = "subscription_provider_b"
FOLDER = "adapty-events/com.sample-app"
NOW = datetime(2026, 3, 20, 6, 0, tzinfo=UTC)


def day(n: int) -> date:
    return date(2026, 3, 1) + timedelta(days=n)


def daily_file(s3: S3Fake, d: date, events: int = 3, folder: str = FOLDER) -> str:
    """The file Adapty delivers at 04:00 UTC for day `d`: a trial start and renewals."""
    at = datetime(d.year, d.month, d.day, 10, 0, tzinfo=UTC)
    rows = [event_row("trial_started", at, transaction_id=f"{d:%Y%m%d}000", customer_user_id=f"u-{d}")]
    rows += [
        event_row(
            "subscription_renewed",
            at + timedelta(minutes=i),
            transaction_id=f"{d:%Y%m%d}{i:03d}",
            customer_user_id=f"u-{d}-{i}",
            revenue_usd=9.99,
        )
        for i in range(1, events)
    ]
    key = f"{folder}/{d.isoformat()}.csv"
    s3.put(key, export_csv(rows))
    return key


class Setup:
    def __init__(self, db: Database, lake: Lake, workspace_id: str, s3: S3Fake) -> None:
        self.db, self.lake, self.workspace_id, self.s3 = db, lake, workspace_id, s3
        self.state: dict[str, Any] = {}
        self.lines: list[str] = []

    def config(self, **overrides: Any) -> ValidConfig:
        return validate_config(TYPE, self.s3.config(prefix=FOLDER) | overrides)

    def client(self, config: ValidConfig | None = None, **tuning: Any) -> AdaptyExportClient:
        built: AdaptyExportClient = CONNECTOR.client(config or self.config())
        return built.model_copy(update={"retry_backoff_s": 0.01, **tuning})

    def sync(self, now: datetime = NOW, config: ValidConfig | None = None, **tuning: Any) -> SyncTarget:
        """One sync as the framework runs it: the state of the last successful sync goes in, and
        is kept only if this one succeeds."""
        config = config or self.config()
        target = SyncTarget(self.db, self.lake, self.workspace_id, "int_test", TYPE, state=_copy(self.state), now=now)
        CONNECTOR.sync(self.client(config, **tuning), target, config, self.lines.append)
        self.state = target.state
        return target

    def landed(self) -> list[str]:
        with self.db.read() as conn:
            return list(
                conn.execute(
                    sa.select(landed_events.c.event_id).where(landed_events.c.workspace_id == self.workspace_id)
                ).scalars()
            )


def _copy(state: dict[str, Any]) -> dict[str, Any]:
    return {k: dict(v) if isinstance(v, dict) else v for k, v in state.items()}


@pytest.fixture
def setup(db: Database, workspace: dict[str, Any], tmp_path: Path, s3: S3Fake) -> Setup:
    return Setup(db, LocalLake(tmp_path / "lake"), workspace["workspace_id"], s3)


def test_the_connector_is_registered() -> None:
    assert connector_for(TYPE) is CONNECTOR


def test_every_file_over_several_pages_lands_once(setup: Setup) -> None:
    keys = [daily_file(setup.s3, day(n)) for n in range(7)]
    target = setup.sync(page_size=2)
    assert target.records == 21
    assert len(setup.landed()) == 21
    assert setup.s3.traffic.count("GET", "list-type=2") == 4  # 7 files, 2 a page
    assert sorted(setup.state["files"]) == sorted(keys)


def test_landed_revenue_is_what_the_reports_book(setup: Setup) -> None:
    at = datetime(2026, 3, 5, 12, 0, tzinfo=UTC)
    rows = [
        event_row("subscription_started", at, transaction_id="t1", customer_user_id="a", revenue_usd=4.99),
        event_row("subscription_renewed", at, transaction_id="t2", customer_user_id="b", revenue_usd=9.99),
        event_row("subscription_refunded", at, transaction_id="t2", customer_user_id="b", revenue_usd=9.99),
    ]
    setup.s3.put(f"{FOLDER}/2026-03-05.csv", export_csv(rows))
    setup.sync()
    with setup.db.read() as conn:
        frame, _pending = day_frame(conn, at.date())
    booked = lifecycle.subscription_events(frame.lazy(), RATES, reporting(setup.workspace_id)).collect()
    assert booked.get_column("revenue").sum() == pytest.approx(4.99 + 9.99)
    assert booked.get_column("refund").sum() == pytest.approx(9.99)
    assert set(booked.get_column("user_id")) == {"a", "b"}


def test_an_empty_folder_is_a_successful_sync_of_nothing(setup: Setup) -> None:
    daily_file(setup.s3, day(1), folder="somewhere-else")
    target = setup.sync()
    assert target.records == 0
    assert setup.landed() == []
    assert setup.state["files"] == {}
    assert "no files yet" in CONNECTOR.check(setup.client())


def test_the_same_files_synced_twice_change_nothing(setup: Setup) -> None:
    for n in range(3):
        daily_file(setup.s3, day(n))
    setup.sync()
    before, state = sorted(setup.landed()), _copy(setup.state)
    setup.s3.traffic.reset()
    again = setup.sync(now=NOW + timedelta(hours=1))
    assert again.records == 0
    assert sorted(setup.landed()) == before
    assert setup.s3.traffic.count("GET") == setup.s3.traffic.count("GET", "list-type=2")  # listed, nothing read
    assert setup.state["files"] == state["files"]


def test_a_file_delivered_again_with_new_content_is_read_again(setup: Setup) -> None:
    key = daily_file(setup.s3, day(2), events=2)
    setup.sync()
    daily_file(setup.s3, day(2), events=4)  # same key, two more renewals
    target = setup.sync(now=NOW + timedelta(days=1))
    assert target.records == 2
    assert target.duplicates == 2
    assert len(setup.landed()) == 4
    assert list(setup.state["files"]) == [key]


def test_new_days_are_read_as_they_arrive(setup: Setup) -> None:
    daily_file(setup.s3, day(1))
    setup.sync()
    daily_file(setup.s3, day(2))
    setup.s3.traffic.reset()
    target = setup.sync(now=NOW + timedelta(days=1))
    assert target.records == 3
    assert setup.s3.traffic.count("GET") - setup.s3.traffic.count("GET", "list-type=2") == 1  # one file read


def test_a_manual_export_older_than_the_dedup_window_lands_no_duplicate(setup: Setup) -> None:
    """The daily files landed; 40 days later the claims are pruned and the customer exports the
    same days again by hand (a new file overlapping them): nothing lands twice."""
    for n in range(3):
        daily_file(setup.s3, day(n))
    setup.sync()
    assert len(setup.landed()) == 9
    with setup.db.write() as conn:
        prune_claims(conn, datetime.now(UTC) + timedelta(days=1))  # the 30-day prune, done early
    at = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    manual = [event_row("trial_started", at, transaction_id="20260301000", customer_user_id="u-2026-03-01")]
    manual += [
        event_row(
            "subscription_renewed",
            at + timedelta(minutes=i),
            transaction_id=f"20260301{i:03d}",
            customer_user_id=f"u-2026-03-01-{i}",
            revenue_usd=9.99,
        )
        for i in range(1, 3)
    ]
    setup.s3.put(f"{FOLDER}/manual_2026-03-01_2026-03-01.csv", export_csv(manual))
    later = setup.sync(now=NOW + timedelta(days=40))
    assert later.records == 0
    assert later.skipped_settled == 3
    assert len(setup.landed()) == 9


@pytest.mark.parametrize(
    ("credentials", "s3_code"),
    [
        ("wrong secret", "SignatureDoesNotMatch"),
        ("unknown key", "InvalidAccessKeyId"),
        ("no permission", "AccessDenied"),
    ],
)
def test_refused_credentials_fail_as_auth_with_s3s_message(setup: Setup, credentials: str, s3_code: str) -> None:
    daily_file(setup.s3, day(1))
    if credentials == "wrong secret":
        key, secret = setup.s3.access_key_id, "0" * 40
    elif credentials == "unknown key":
        key, secret = "AKIAUNKNOWNKEY000000", setup.s3.secret_access_key
    else:
        key, secret = setup.s3.key_without_permissions()
    config = setup.config(access_key_id=key, secret_access_key=secret)
    with pytest.raises(ClientError) as failed:
        setup.sync(config=config)
    assert failed.value.code == "auth"
    assert failed.value.refused
    assert s3_code in failed.value.message
    assert failed.value.status == 403
    assert setup.landed() == []
    assert setup.state == {}  # never a success: nothing kept
    assert setup.s3.traffic.count("GET") == 1  # a refusal is not retried
    with pytest.raises(ClientError) as checked:
        CONNECTOR.check(setup.client(config))
    assert checked.value.code == "auth"


def test_a_missing_bucket_is_a_config_error(setup: Setup) -> None:
    with pytest.raises(ClientError) as failed:
        setup.sync(config=setup.config(bucket="no-such-bucket"))
    assert failed.value.code == "config"
    assert "NoSuchBucket" in failed.value.message


def test_slow_down_is_waited_out_then_the_sync_succeeds(setup: Setup) -> None:
    daily_file(setup.s3, day(1))
    setup.s3.traffic.fail_next(2, status=503, code="SlowDown")
    started = time.monotonic()
    target = setup.sync(retry_backoff_s=0.2)
    elapsed = time.monotonic() - started
    assert target.records == 3
    assert elapsed >= 0.2 + 0.4  # the backoff doubled between the two refusals
    waits = [line for line in setup.lines if "waiting" in line]
    assert [w.split("waiting ")[1].split(" s")[0] for w in waits] == ["0.20", "0.40"]


def test_slow_down_on_every_attempt_fails_as_rate_limited(setup: Setup) -> None:
    daily_file(setup.s3, day(1))
    setup.s3.traffic.fail_next(100, status=503, code="SlowDown")
    with pytest.raises(ClientError) as failed:
        setup.sync()
    assert failed.value.code == "rate_limited"
    assert not failed.value.refused
    assert "after 5 attempts" in failed.value.message
    assert "Please reduce your request rate." in failed.value.message
    assert setup.s3.traffic.count("GET") == 5
    assert setup.landed() == []


def test_a_server_error_while_reading_a_file_is_retried(setup: Setup) -> None:
    daily_file(setup.s3, day(1))
    client = setup.client()
    listed = client.list_files(print)
    setup.s3.traffic.fail_next(1, status=500, code="InternalError", message="We encountered an internal error.")
    got = client.read(listed[0].key, setup.lines.append)
    assert got is not None and got[0].startswith(b"profile_id,")
    assert any("InternalError" in line for line in setup.lines)


def test_server_errors_on_every_attempt_fail_as_provider_error(setup: Setup) -> None:
    setup.s3.traffic.fail_next(
        100, status=503, code="ServiceUnavailable", message="Service is unable to handle request."
    )
    with pytest.raises(ClientError) as failed:
        setup.sync()
    assert failed.value.code == "provider_error"
    assert "ServiceUnavailable" in failed.value.message


def test_an_unreachable_endpoint_fails_as_provider_error(setup: Setup) -> None:
    config = setup.config(base_url="http://127.0.0.1:9")  # discard port: nothing listens
    with pytest.raises(ClientError) as failed:
        setup.sync(config=config, retry_attempts=2, connect_timeout_s=0.5)
    assert failed.value.code == "provider_error"


def test_an_unreadable_file_fails_the_sync_by_name_and_the_others_still_land(setup: Setup) -> None:
    daily_file(setup.s3, day(1))
    broken = f"{FOLDER}/2026-03-03.csv"
    setup.s3.put(broken, b"profile_id,event_type,event_datetime\np1,trial_started\n")
    daily_file(setup.s3, day(3))
    with pytest.raises(ClientError) as failed:
        setup.sync()
    assert failed.value.code == "bad_response"
    assert not failed.value.refused
    assert broken in failed.value.message
    assert "line 2 has 2 fields" in failed.value.message
    assert len(setup.landed()) == 6
    # Fixed by the provider: the next sync reads it (and the others again, landing nothing twice).
    daily_file(setup.s3, day(2))
    target = setup.sync()
    assert target.records == 3
    assert len(setup.landed()) == 9


def test_only_the_folders_csv_event_files_are_read(setup: Setup) -> None:
    daily_file(setup.s3, day(1))
    daily_file(setup.s3, day(1), folder=f"{FOLDER}-old")  # a sibling folder, not this one
    setup.s3.put(f"{FOLDER}/README.txt", b"not an export")
    visits = [{"profile_id": "p", "paywall_showed_at": "2026-03-02T10:00:00.000000+0000"}]
    setup.s3.put(f"{FOLDER}/visits/2026-03-02.csv", export_csv(visits, PAYWALL_VISIT_COLUMNS))
    target = setup.sync()
    assert target.records == 3
    assert sorted(setup.state["files"]) == [f"{FOLDER}/2026-03-02.csv", f"{FOLDER}/visits/2026-03-02.csv"]
    assert any("paywall visits" in line for line in setup.lines)


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: integrations/target.py")
def test_a_bucket_with_folders_as_typed_into_adapty_is_split(setup: Setup) -> None:
    daily_file(setup.s3, day(1))
    config = validate_config(TYPE, setup.s3.config(bucket=f"{setup.s3.bucket}/{FOLDER}"))
    target = setup.sync(config=config)
    assert target.records == 3


def test_check_lists_one_key(setup: Setup) -> None:
    daily_file(setup.s3, day(1))
    daily_file(setup.s3, day(2))
    setup.s3.traffic.reset()
    summary = CONNECTOR.check(setup.client())
    assert summary.startswith(f"s3://{setup.s3.bucket}/{FOLDER}/: listing allowed")
    assert f"{FOLDER}/2026-03-02.csv and more" in summary
    assert setup.s3.traffic.calls == [("GET", f"/{setup.s3.bucket}", setup.s3.traffic.calls[0][2])]
    assert "max-keys=1" in setup.s3.traffic.calls[0][2]


def test_an_endpoint_that_is_not_s3_fails_as_bad_response(setup: Setup) -> None:
    """A base_url pointing at some web page (a proxy, a typo): its 200 HTML is not a listing."""
    server = HTTPServer(host="127.0.0.1", port=0)
    server.expect_request("/" + setup.s3.bucket).respond_with_data(
        "<html><body>Welcome to nginx!</body></html>", content_type="text/html"
    )
    server.start()
    try:
        with pytest.raises(ClientError) as failed:
            setup.sync(config=setup.config(base_url=server.url_for("").rstrip("/")))
    finally:
        server.stop()
    assert failed.value.code == "bad_response"


def test_a_bucket_name_s3_cannot_accept_is_a_config_error(setup: Setup) -> None:
    with pytest.raises(ClientError) as failed:
        setup.sync(config=setup.config(bucket="Exports Bucket!"))
    assert failed.value.code == "config"
    assert "Exports Bucket!" in failed.value.message
