"""The registry sync on both databases, against the fake platforms and a real lake: what the
registry holds, the mapping to the report labels, vanished objects, an operator's edit, auth
failures (`error` and one `integration.error`), transient failures, and the sandbox."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest
import sqlalchemy as sa

from clients.ad_platform import Retrier
from orchestration.adaccounts.sandbox import SandboxClient
from orchestration.adaccounts.sync import sync_account, sync_accounts
from tests.providers.apple_search_ads_fake import (
    CLIENT_ID,
    KEY_ID,
    ORG_ID,
    TEAM_ID,
    AppleSearchAdsFake,
    new_private_key,
)
from tests.providers.meta_graph_fake import ACCOUNT, TOKEN, MetaGraphFake
from tests.support.adaccounts import spend
from transforms.adaccounts.kinds import validate_config
from transforms.webhooks.payloads import PAYLOAD_TYPES, conformance
from warehouse.adaccounts import repository as repo
from warehouse.db import Database
from warehouse.lake import Lake
from warehouse.settings import Settings
from warehouse.webhooks import endpoints
from warehouse.webhooks.tables import webhook_deliveries, webhook_events

KEY = "k" * 43
NO_WAIT = Retrier(sleep=lambda _s: None, attempts=2)


@pytest.fixture
def lake(settings: Settings) -> Lake:
    return settings.paths.lake()


@pytest.fixture
def meta() -> Iterator[MetaGraphFake]:
    fake = MetaGraphFake()
    broad = fake.add("campaign", "meta_broad", daily_budget=50000)
    unknown = fake.add("campaign", "Summer test (not in the reports)", daily_budget=9000)
    broad_set = fake.add("ad_set", "broad_set", parent=broad)
    fake.add("ad", "meta_broad_cr1", parent=broad_set)
    fake.add("ad", "meta_broad_cr9", parent=broad_set)  # a name the reports never show
    fake.add("ad_set", "summer_set", parent=unknown, daily_budget=9000)
    with fake:
        yield fake


def connect(db: Database, workspace_id: str, platform: str, raw: dict[str, Any]) -> str:
    with db.write() as conn:
        return repo.connect(
            conn, workspace_id=workspace_id, platform=platform, config=validate_config(platform, raw),
            instance_key=KEY, actor="ops@example.com",
        ).id  # fmt: skip


def registry(db: Database, account_id: str, *, include_removed: bool = False) -> dict[str, repo.Entity]:
    with db.read() as conn:
        return {e.name: e for e in repo.entities(conn, ad_account_id=account_id, include_removed=include_removed)}


def account(db: Database, account_id: str) -> repo.AdAccount:
    with db.read() as conn:
        return repo.get_account_for_operator(conn, ad_account_id=account_id)


def events(db: Database) -> list[dict[str, Any]]:
    with db.read() as conn:
        return [json.loads(b) for b in conn.execute(sa.select(webhook_events.c.body)).scalars()]


def test_a_meta_sync_fills_the_registry_mapped_to_the_report_labels(
    db: Database, lake: Lake, workspace: dict, meta: MetaGraphFake
) -> None:
    ws = workspace["workspace_id"]
    today = datetime.now(UTC).date()
    spend(lake, ws, [(today - timedelta(days=1), "meta_broad", "meta_broad_cr1", 480.0)])
    account_id = connect(db, ws, "meta", {"access_token": TOKEN, "ad_account_id": ACCOUNT, "base_url": meta.url})

    result = sync_account(db, lake, KEY, account_id, retrier=NO_WAIT)

    assert result.status == "succeeded" and result.counts is not None
    assert (result.counts.created, result.counts.removed, result.mapped_campaigns, result.mapped_creatives) == (
        6,
        0,
        1,
        1,
    )
    found = registry(db, account_id)
    assert set(found) == {"meta_broad", "Summer test (not in the reports)", "broad_set", "meta_broad_cr1",
                          "meta_broad_cr9", "summer_set"}  # fmt: skip
    cr1, broad = found["meta_broad_cr1"], found["meta_broad"]
    assert (broad.entity_type, broad.daily_budget, broad.currency, broad.status) == ("campaign", 50000, "USD", "active")
    assert (broad.report_campaign, broad.report_creative) == ("meta_broad", None)
    assert (cr1.entity_type, cr1.report_campaign, cr1.report_creative) == ("ad", "meta_broad", "meta_broad_cr1")
    assert found["broad_set"].report_campaign == "meta_broad" and found["broad_set"].report_creative is None
    assert found["meta_broad_cr9"].report_creative is None  # no such creative label: unmapped, not guessed
    assert found["Summer test (not in the reports)"].report_campaign is None
    synced = account(db, account_id)
    assert (synced.status, synced.external_account_id, synced.currency) == ("connected", ACCOUNT, "USD")
    assert synced.last_synced_at is not None and synced.last_error is None


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: adaccounts/repository.py")
def test_a_second_sync_sees_edits_and_marks_vanished_objects(
    db: Database, lake: Lake, workspace: dict, meta: MetaGraphFake
) -> None:
    account_id = connect(db, workspace["workspace_id"], "meta", {"access_token": TOKEN, "ad_account_id": ACCOUNT,
                                                                "base_url": meta.url})  # fmt: skip
    sync_account(db, lake, KEY, account_id, retrier=NO_WAIT)
    broad = registry(db, account_id)["meta_broad"]
    meta.edit(broad.external_id, daily_budget=61000)
    [gone] = [i for i, n in meta.objects.items() if n["name"] == "meta_broad_cr9"]
    del meta.objects[gone]

    result = sync_account(db, lake, KEY, account_id, retrier=NO_WAIT)

    assert result.counts is not None and (result.counts.updated, result.counts.removed) == (1, 1)
    assert registry(db, account_id)["meta_broad"].daily_budget == 61000
    assert "meta_broad_cr9" not in registry(db, account_id)
    assert registry(db, account_id, include_removed=True)["meta_broad_cr9"].removed_at is not None


def test_an_auth_failure_is_error_and_one_integration_error(
    db: Database, lake: Lake, workspace: dict, meta: MetaGraphFake
) -> None:
    ws = workspace["workspace_id"]
    with db.write() as conn:
        endpoints.create_endpoint(conn, workspace_id=ws, url="http://127.0.0.1:9/ops", events=["integration.error"],
                                  allow_private=True, instance_key=KEY)  # fmt: skip
    account_id = connect(
        db, ws, "meta", {"access_token": "EAAG-revoked", "ad_account_id": ACCOUNT, "base_url": meta.url}
    )

    first = sync_account(db, lake, KEY, account_id, retrier=NO_WAIT)
    again = sync_account(db, lake, KEY, account_id, retrier=NO_WAIT)

    assert first.status == again.status == "failed" and first.error_code == "auth"
    failed = account(db, account_id)
    assert failed.status == "error" and "Error validating access token" in (failed.last_error or "")
    [event] = events(db)  # the workspace is told once, not at every refused sync
    assert event["type"] == "integration.error"
    assert event["data"] == {
        "reason": "ad_account_sync_failed", "integration_id": None, "integration_type": None, "sync_id": None,
        "ad_account_id": account_id, "platform": "meta", "error_code": "auth", "message": failed.last_error,
        "endpoint_id": None, "url": None, "consecutive_failures": None, "last_status_code": None, "last_error": None,
    }  # fmt: skip
    assert conformance(event["data"], PAYLOAD_TYPES["integration.error"]) == []  # the declared contract
    with db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(webhook_deliveries)).scalar_one() == 1
    assert registry(db, account_id) == {}


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: adaccounts/repository.py")
def test_a_transient_failure_fails_only_that_sync(
    db: Database, lake: Lake, workspace: dict, meta: MetaGraphFake
) -> None:
    account_id = connect(db, workspace["workspace_id"], "meta", {"access_token": TOKEN, "ad_account_id": ACCOUNT,
                                                                "base_url": meta.url})  # fmt: skip
    sync_account(db, lake, KEY, account_id, retrier=NO_WAIT)
    meta.rate_limited, meta.regain_minutes = 5, 60

    result = sync_account(db, lake, KEY, account_id, retrier=NO_WAIT)

    assert (result.status, result.error_code) == ("failed", "rate_limited")
    assert account(db, account_id).status == "connected" and events(db) == []
    assert len(registry(db, account_id)) == 6  # the registry keeps what it had


def test_an_apple_sync_maps_campaigns_and_ad_groups_by_name(db: Database, lake: Lake, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    key, pem = new_private_key()
    today = datetime.now(UTC).date()
    spend(lake, ws, [(today, "asa_brand", "asa_brand_exact", 90.0)])
    with AppleSearchAdsFake(public_key=key.public_key()) as fake:
        brand = fake.add_campaign("asa_brand", "250.00")
        fake.add_ad_group(brand, "asa_brand_exact")
        fake.add_ad_group(brand, "asa_brand_broad")
        account_id = connect(db, ws, "apple_search_ads", {
            "client_id": CLIENT_ID, "team_id": TEAM_ID, "key_id": KEY_ID, "private_key": pem, "org_id": ORG_ID,
            "base_url": fake.url, "token_url": fake.token_url,
        })  # fmt: skip
        result = sync_account(db, lake, KEY, account_id, retrier=NO_WAIT)
    assert result.status == "succeeded"
    found = registry(db, account_id)
    assert found["asa_brand"].daily_budget == 25000 and found["asa_brand"].report_campaign == "asa_brand"
    assert found["asa_brand_exact"].report_creative == "asa_brand_exact"
    assert found["asa_brand_broad"].report_creative is None


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: adaccounts/repository.py, adaccounts/lake.py")
def test_the_sandbox_from_its_config_applies_changes_only_to_flokits_records(
    db: Database, lake: Lake, workspace: dict
) -> None:
    ws = workspace["workspace_id"]
    campaigns = [{"name": "meta_broad", "daily_budget": 500, "currency": "USD", "creatives": ["meta_broad_cr1"]},
                 {"name": "google_uac", "daily_budget": "320.50", "currency": "USD"}]  # fmt: skip
    account_id = connect(db, ws, "sandbox", {"campaigns": campaigns})
    [result] = sync_accounts(db, lake, KEY, workspace_id=ws)
    assert result.status == "succeeded" and result.platform == "sandbox"
    found = registry(db, account_id)
    assert {n: (e.entity_type, e.daily_budget) for n, e in found.items()} == {
        "meta_broad": ("campaign", 50000), "google_uac": ("campaign", 32050), "meta_broad_cr1": ("ad", None),
    }  # fmt: skip

    sandbox = account(db, account_id)
    with db.read() as conn:
        config = repo.config_of(conn, ad_account_id=account_id, instance_key=KEY)
    client = SandboxClient(db, lake, sandbox, config, datetime.now(UTC))
    client.set_daily_budget("campaign", found["meta_broad"].external_id, 40000, "USD")
    client.set_status("ad", found["meta_broad_cr1"].external_id, "paused")
    assert client.read("campaign", found["meta_broad"].external_id).daily_budget == 40000

    sync_accounts(db, lake, KEY, workspace_id=ws)  # a later sync keeps what was set
    after = registry(db, account_id)
    assert after["meta_broad"].daily_budget == 40000 and after["meta_broad_cr1"].status == "paused"
    assert after["meta_broad"].edited_at is not None


def test_the_sandbox_without_campaigns_reads_the_workspaces_spend(db: Database, lake: Lake, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    today = datetime.now(UTC).date()
    # meta_broad spent on 9 of the last 12 days; the budget is the mean of its last 7 days with spend
    days = [today - timedelta(days=d) for d in (0, 1, 3, 4, 5, 7, 8, 10, 11)]
    amounts = [101.0, 99.5, 120.0, 80.25, 95.0, 110.0, 100.0, 300.0, 400.0]
    rows = [(d, "meta_broad", "meta_broad_cr1" if i % 2 else "meta_broad_cr2", a)
            for i, (d, a) in enumerate(zip(days, amounts, strict=True))]  # fmt: skip
    rows.append((today - timedelta(days=40), "old_campaign", "old_cr", 999.0))  # outside the 28 days
    rows.append((today - timedelta(days=2), "other_workspace_only", "x", 5.0))
    spend(lake, ws, rows[:-1])
    spend(lake, "ws_someone_else", rows[-1:])
    account_id = connect(db, ws, "sandbox", {})

    [result] = sync_accounts(db, lake, KEY, workspace_id=ws)

    assert result.status == "succeeded"
    expected = Decimal(str(sum(amounts[:7]) / 7)).quantize(Decimal(1), rounding=ROUND_HALF_UP) * 100
    found = registry(db, account_id)
    assert set(found) == {"meta_broad", "meta_broad_cr1", "meta_broad_cr2"}
    assert found["meta_broad"].daily_budget == int(expected) == 10100
    assert found["meta_broad_cr2"].report_creative == "meta_broad_cr2"  # its own spend labels: mapped by name
    assert account(db, account_id).currency == "USD"


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: adaccounts/lake.py")
def test_a_sandbox_with_no_spend_and_no_campaigns_has_no_objects(db: Database, lake: Lake, workspace: dict) -> None:
    account_id = connect(db, workspace["workspace_id"], "sandbox", {})
    [result] = sync_accounts(db, lake, KEY, workspace_id=workspace["workspace_id"])
    assert result.status == "succeeded" and registry(db, account_id) == {}


def test_the_daemon_syncs_the_registry_before_each_reports_refresh(
    db: Database, workspace: dict, settings: Settings
) -> None:
    """Without `flokit refresh`, only the schedule keeps the registry fresh (the executor refuses
    one older than 48 h): it runs 15 minutes before each six-hourly reports refresh, and only
    when there is a live account to read."""
    import dagster as dg

    from orchestration.adaccounts.jobs import ad_accounts_sync_schedule
    from orchestration.definitions import build_definitions
    from orchestration.reports.jobs import REFRESH_CRON
    from orchestration.resources import DatabaseResource

    defs = build_definitions(settings)
    schedule = defs.resolve_schedule_def("ad_accounts_sync_schedule")
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    assert (schedule.cron_schedule, REFRESH_CRON) == ("45 5-23/6 * * *", "0 */6 * * *")
    resources = {"database": DatabaseResource(url=settings.database_url)}
    with dg.build_schedule_context(resources=resources) as context:
        assert isinstance(ad_accounts_sync_schedule(context), dg.SkipReason)  # nothing connected yet
    connect(
        db, workspace["workspace_id"], "sandbox", {"campaigns": [{"name": "c1", "daily_budget": 10, "currency": "USD"}]}
    )
    with dg.build_schedule_context(resources=resources) as context:
        assert isinstance(ad_accounts_sync_schedule(context), dg.RunRequest)
