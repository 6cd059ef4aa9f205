from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa

from warehouse import migrate
from warehouse.actions.tables import action_transitions, actions
from warehouse.db import Database
from warehouse.entitlements.tables import entitlement_grants
from warehouse.paywalls.tables import paywall_configs
from warehouse.tables import api_keys, apps, workspaces
from warehouse.webhooks.tables import (
    webhook_attempts,
    webhook_deliveries,
    webhook_endpoints,
    webhook_events,
    webhook_secrets,
)

# Where every database migrated before 0060 merged the branches stands.
OLD_HEADS = ["0003", "0010", "0020", "0030", "0050"]
T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def test_fresh_database_is_at_the_one_head(db: Database) -> None:
    assert migrate.current(db) == [migrate.head()]


def test_migrations_round_trip_to_empty_and_back(db: Database) -> None:
    assert migrate.downgrade(db, "base") == []
    assert "workspaces" not in sa.inspect(db.engine).get_table_names()
    assert migrate.upgrade(db) == [migrate.head()]
    tables = set(sa.inspect(db.engine).get_table_names())
    assert {"workspaces", "api_keys", "apps", "audit_log"} <= tables


def test_upgrade_is_idempotent(db: Database) -> None:
    first = migrate.upgrade(db)
    assert migrate.upgrade(db) == first


def _fill(conn: sa.Connection) -> dict[str, int]:
    """One row or two in each table the later migrations recreate (SQLite) or alter, linked by
    their foreign keys: what a database in use holds."""
    conn.execute(workspaces.insert().values(id="ws_1", name="Acme", created_at=T0))
    conn.execute(
        api_keys.insert().values(
            id="key_1", workspace_id="ws_1", scope="read_write", key_hash="h" * 64, key_prefix="flk_x", created_at=T0
        )
    )
    conn.execute(apps.insert().values(id="app_1", workspace_id="ws_1", name="A", publishable_key="pk_1", created_at=T0))
    conn.execute(actions.insert().values(**_action_row(conn, "act_1", created_by="t")))
    for trigger, before, after in (("create", None, "ready"), ("approve", "ready", "approved")):
        conn.execute(
            action_transitions.insert().values(
                action_id="act_1",
                workspace_id="ws_1",
                trigger=trigger,
                from_status=before,
                to_status=after,
                actor="t",
                created_at=T0,
            )
        )
    conn.execute(
        webhook_endpoints.insert().values(
            id="whe_1", workspace_id="ws_1", url="https://example.com/h", events=["*"], status="enabled", created_at=T0
        )
    )
    conn.execute(webhook_secrets.insert().values(endpoint_id="whe_1", secret="s", status="active", created_at=T0))
    conn.execute(webhook_events.insert().values(id="evt_1", workspace_id="ws_1", type="t", body=b"{}", created_at=T0))
    conn.execute(
        webhook_deliveries.insert().values(
            id="dlv_1", event_id="evt_1", endpoint_id="whe_1", workspace_id="ws_1", status="failed", created_at=T0
        )
    )
    conn.execute(
        webhook_attempts.insert().values(delivery_id="dlv_1", attempt=1, started_at=T0, finished_at=T0, error="x")
    )
    conn.execute(
        paywall_configs.insert().values(
            app_id="app_1",
            paywall_id="main",
            version=1,
            workspace_id="ws_1",
            document={},
            published_by="t",
            published_at=T0,
        )
    )
    return _counts(conn)


def _action_row(conn: sa.Connection, action_id: str, *, created_by: str) -> dict[str, Any]:
    """An approved action as the database's revision holds it: from 0130 on, with the columns
    that revision made required."""
    row = {
        "id": action_id, "workspace_id": "ws_1", "type": "budget_shift", "status": "approved",
        "previous_status": "ready", "title": "t", "rationale": "r", "expected_impact": {"x": 1}, "data_signals": [],
        "guardrail_checks": [], "rollback_conditions": ["CPI rises"], "created_by": created_by, "created_at": T0,
        "updated_at": T0,
    }  # fmt: skip
    if "origin" in {c["name"] for c in sa.inspect(conn).get_columns("actions")}:
        row |= {"rollback_rules": [], "origin": "api"}
    return row


def _counts(conn: sa.Connection) -> dict[str, int]:
    tables = (api_keys, actions, action_transitions, webhook_endpoints, webhook_secrets, webhook_deliveries)
    tables += (webhook_attempts, paywall_configs)
    return {t.name: conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one() for t in tables}


def test_a_database_at_the_five_old_heads_upgrades_to_the_one_head_keeping_its_rows(db: Database) -> None:
    migrate.downgrade(db, "base")
    for head in OLD_HEADS:
        migrate.upgrade(db, head)
    assert migrate.current(db) == OLD_HEADS
    with db.engine.begin() as conn:
        before = _fill(conn)

    assert migrate.upgrade(db) == [migrate.head()]

    with db.engine.connect() as conn:
        assert _counts(conn) == before
        transitions = conn.execute(sa.select(action_transitions.c.trigger).order_by(action_transitions.c.id))
        assert transitions.scalars().all() == ["create", "approve"]
    assert migrate.drift(db) == []


def test_new_checks_refuse_a_status_outside_the_vocabulary(db: Database) -> None:
    """0080: the transition history only holds statuses and triggers `transforms.actions` names."""
    with db.engine.begin() as conn:
        _fill(conn)
    valid = {"action_id": "act_1", "workspace_id": "ws_1", "trigger": "start", "from_status": "approved"}
    valid |= {"to_status": "running", "actor": "t", "created_at": T0}
    with db.engine.begin() as conn:
        conn.execute(action_transitions.insert().values(**valid))
    for wrong in ({"trigger": "teleport"}, {"to_status": "lost"}, {"from_status": "lost"}):
        with pytest.raises(sa.exc.IntegrityError), db.engine.begin() as conn:
            conn.execute(action_transitions.insert().values(**(valid | wrong)))
    with pytest.raises(sa.exc.IntegrityError), db.engine.begin() as conn:
        conn.execute(actions.update().values(previous_status="lost"))


def _grant(grant_id: str, source: str, store_key: str) -> dict[str, Any]:
    """A grant as 0110 holds it (no `current_token`)."""
    return {
        "id": grant_id, "workspace_id": "ws_1", "app_id": "app_1", "source": source, "store_key": store_key,
        "user_id": "u1", "product_id": "pro", "kind": "subscription", "channel": "iap", "environment": "production",
        "expires_at": T0, "access_ends_at": T0, "in_trial": False, "stated_at": T0, "created_at": T0, "updated_at": T0,
    }  # fmt: skip


def test_0120_gives_each_google_grant_its_first_token_as_current_and_downgrades_keeping_the_rows(
    db: Database,
) -> None:
    """0120 adds `current_token`: what a Google Play grant is re-read by (its key until a newer
    token is read); NULL for the other sources, which read a purchase by its key."""
    migrate.downgrade(db, "0110")
    assert "current_token" not in {c["name"] for c in sa.inspect(db.engine).get_columns("entitlement_grants")}
    checks = sorted(c["name"] for c in sa.inspect(db.engine).get_check_constraints("entitlement_grants"))
    with db.engine.begin() as conn:
        _fill(conn)
        conn.execute(entitlement_grants.insert(), [_grant("grt_1", "android_store", "tok-first"),
                                                   _grant("grt_2", "ios_store", "2000000000000001")])  # fmt: skip

    assert migrate.upgrade(db) == [migrate.head()]

    with db.engine.connect() as conn:
        rows = conn.execute(sa.select(entitlement_grants.c.id, entitlement_grants.c.current_token).order_by("id"))
        assert rows.all() == [("grt_1", "tok-first"), ("grt_2", None)]
    assert migrate.drift(db) == []

    migrate.downgrade(db, "0110")

    assert "current_token" not in {c["name"] for c in sa.inspect(db.engine).get_columns("entitlement_grants")}
    assert sorted(c["name"] for c in sa.inspect(db.engine).get_check_constraints("entitlement_grants")) == checks
    with db.engine.connect() as conn:
        kept = conn.execute(sa.select(entitlement_grants.c.id, entitlement_grants.c.store_key).order_by("id"))
        assert kept.all() == [("grt_1", "tok-first"), ("grt_2", "2000000000000001")]
    assert migrate.upgrade(db) == [migrate.head()]
    assert migrate.drift(db) == []


def test_0130_backfills_origin_and_rules_enforces_one_open_fingerprint_and_downgrades_keeping_history(
    db: Database,
) -> None:
    """0130: existing actions become `demo` (the seed's actor) or `api` with no rules; at most one
    open action per fingerprint, enforced by the database; the second wave's triggers are stored,
    and a downgrade keeps their transitions (relabelled `reject`)."""
    migrate.downgrade(db, "0120")
    assert "origin" not in {c["name"] for c in sa.inspect(db.engine).get_columns("actions")}
    with db.engine.begin() as conn:
        _fill(conn)
        conn.execute(actions.insert().values(**_action_row(conn, "act_2", created_by="flokit demo")))

    assert migrate.upgrade(db) == [migrate.head()]
    assert migrate.drift(db) == []

    with db.engine.connect() as conn:
        rows = conn.execute(
            sa.select(actions.c.id, actions.c.origin, actions.c.rollback_rules, actions.c.rollback_conditions)
            .order_by(actions.c.id)
        )  # fmt: skip
        assert rows.all() == [("act_1", "api", [], ["CPI rises"]), ("act_2", "demo", [], ["CPI rises"])]
    fingerprint = "f" * 64
    with db.engine.begin() as conn:
        conn.execute(actions.update().where(actions.c.id == "act_1").values(fingerprint=fingerprint))
    with pytest.raises(sa.exc.IntegrityError), db.engine.begin() as conn:  # both open (approved)
        conn.execute(actions.update().where(actions.c.id == "act_2").values(fingerprint=fingerprint))
    with db.engine.begin() as conn:  # a closed action does not hold the fingerprint
        conn.execute(actions.update().where(actions.c.id == "act_1").values(status="rejected"))
        conn.execute(actions.update().where(actions.c.id == "act_2").values(fingerprint=fingerprint))
        conn.execute(
            action_transitions.insert().values(
                action_id="act_1", workspace_id="ws_1", trigger="abandon", from_status="approved",
                to_status="rejected", actor="flokit executor", note="preflight refused", created_at=T0,
            )
        )  # fmt: skip
    with pytest.raises(sa.exc.IntegrityError), db.engine.begin() as conn:
        conn.execute(actions.update().where(actions.c.id == "act_2").values(origin="someone"))

    migrate.downgrade(db, "0120")

    assert not {"origin", "fingerprint", "parameters"} & {
        c["name"] for c in sa.inspect(db.engine).get_columns("actions")
    }
    assert "action_evaluations" not in sa.inspect(db.engine).get_table_names()
    with db.engine.connect() as conn:
        steps = conn.execute(
            sa.select(action_transitions.c.trigger, action_transitions.c.note)
            .where(action_transitions.c.action_id == "act_1")
            .order_by(action_transitions.c.id)
        )  # fmt: skip
        assert steps.all() == [("create", None), ("approve", None), ("reject", "preflight refused")]
        assert conn.execute(sa.select(sa.func.count()).select_from(actions)).scalar_one() == 2
    assert migrate.upgrade(db) == [migrate.head()]
    assert migrate.drift(db) == []


def test_0180_brings_grants_stated_in_the_future_back_to_now_and_adds_the_push_service_account(
    db: Database,
) -> None:
    """0180: a grant stated in 2100 (a forged void's time) would outrank every genuine statement
    until then; it is stated now, and the one stated in the past keeps its time."""
    migrate.downgrade(db, "0170")
    assert "android_push_service_account" not in {c["name"] for c in sa.inspect(db.engine).get_columns("app_stores")}
    with db.engine.begin() as conn:
        _fill(conn)
        future = _grant("grt_2", "android_store", "tok-forged") | {"stated_at": datetime(2100, 1, 1, tzinfo=UTC)}
        conn.execute(entitlement_grants.insert(), [_grant("grt_1", "ios_store", "2000000000000001"), future])

    assert migrate.upgrade(db) == [migrate.head()]

    with db.engine.connect() as conn:
        stated = dict(conn.execute(sa.select(entitlement_grants.c.id, entitlement_grants.c.stated_at)).all())
    assert stated["grt_1"] == T0
    assert abs(stated["grt_2"] - datetime.now(UTC)).total_seconds() < 60
    assert "android_push_service_account" in {c["name"] for c in sa.inspect(db.engine).get_columns("app_stores")}
    assert migrate.drift(db) == []
    migrate.downgrade(db, "0170")
    assert migrate.upgrade(db) == [migrate.head()]


def test_0200_admits_promotional_grants_keeps_the_rows_and_downgrades_only_without_them(db: Database) -> None:
    """0200: the `promotional` source, grants' `customer_id` and the search's indexes, and the
    user a notification was applied to. The downgrade refuses while a promotional grant exists
    (0190's CHECK cannot hold it)."""
    migrate.downgrade(db, "0190")
    with db.engine.begin() as conn:
        _fill(conn)
        conn.execute(entitlement_grants.insert(), [_grant("grt_1", "ios_store", "2000000000000001")])
    assert migrate.upgrade(db) == [migrate.head()]
    assert migrate.drift(db) == []
    indexes = {i["name"] for i in sa.inspect(db.engine).get_indexes("entitlement_grants")}
    assert {f"ix_entitlement_grants_{c}" for c in ("store_key", "current_token", "transaction_id", "customer_id")} <= (
        indexes
    )
    with db.engine.begin() as conn:
        kept = conn.execute(sa.select(entitlement_grants.c.store_key, entitlement_grants.c.customer_id)).all()
        assert [tuple(r) for r in kept] == [("2000000000000001", None)]
        conn.execute(
            entitlement_grants.insert(), [_grant("grt_2", "promotional", "grt_2") | {"channel": "promotional"}]
        )
    with pytest.raises(RuntimeError, match="promotional grants exist"):
        migrate.downgrade(db, "0190")
    with db.engine.begin() as conn:
        conn.execute(entitlement_grants.delete().where(entitlement_grants.c.id == "grt_2"))
    migrate.downgrade(db, "0190")
    assert "customer_id" not in {c["name"] for c in sa.inspect(db.engine).get_columns("entitlement_grants")}
    with pytest.raises(sa.exc.IntegrityError), db.engine.begin() as conn:
        conn.execute(
            entitlement_grants.insert(), [_grant("grt_3", "promotional", "grt_3") | {"channel": "promotional"}]
        )
    assert migrate.upgrade(db) == [migrate.head()]
    assert migrate.drift(db) == []


def test_0205_adds_the_grants_price_columns_empty_and_downgrades_keeping_the_rows(db: Database) -> None:
    """0205 adds the latest paid transaction's price and billing period (issue 34): NULL on the
    rows before it (learnt from the next statement naming a price); the downgrade drops them
    and keeps the rows and their CHECK constraints."""
    price_columns = {"price_amount", "price_currency", "priced_at", "billing_period"}
    migrate.downgrade(db, "0200")
    assert not price_columns & {c["name"] for c in sa.inspect(db.engine).get_columns("entitlement_grants")}
    checks = sorted(c["name"] for c in sa.inspect(db.engine).get_check_constraints("entitlement_grants"))
    with db.engine.begin() as conn:
        _fill(conn)
        conn.execute(entitlement_grants.insert(), [_grant("grt_1", "ios_store", "2000000000000001")])

    assert migrate.upgrade(db) == [migrate.head()]
    with db.engine.connect() as conn:
        row = conn.execute(sa.select(entitlement_grants).where(entitlement_grants.c.id == "grt_1")).one()
    assert (row.price_amount, row.price_currency, row.priced_at, row.billing_period) == (None, None, None, None)
    assert migrate.drift(db) == []

    migrate.downgrade(db, "0200")
    assert not price_columns & {c["name"] for c in sa.inspect(db.engine).get_columns("entitlement_grants")}
    assert sorted(c["name"] for c in sa.inspect(db.engine).get_check_constraints("entitlement_grants")) == checks
    with db.engine.connect() as conn:
        kept = conn.execute(sa.select(entitlement_grants.c.id, entitlement_grants.c.store_key))
        assert kept.all() == [("grt_1", "2000000000000001")]
    assert migrate.upgrade(db) == [migrate.head()]


def test_0210_counts_the_grants_active_when_it_runs_and_downgrades_keeping_the_rows(db: Database) -> None:
    """0210 adds the live stock: the grants giving paid access or a trial at the upgrade are counted
    (an expired one and a sandbox one are not), as a recount from nothing counts them."""
    from datetime import UTC, datetime, timedelta

    from warehouse.entitlements.tables import subscription_stock
    from warehouse.subscriptions import stock

    later = datetime.now(UTC) + timedelta(days=10)
    migrate.downgrade(db, "0205")
    with db.engine.begin() as conn:
        _fill(conn)
        priced = {"price_amount": 4.99, "price_currency": "USD", "priced_at": T0, "billing_period": "P1W"}
        conn.execute(entitlement_grants.insert(), [
            _grant("grt_1", "ios_store", "1") | priced | {"expires_at": later, "access_ends_at": later},
            _grant("grt_2", "ios_store", "2") | priced,  # expired at T0
            _grant("grt_3", "ios_store", "3") | priced | {"environment": "sandbox", "access_ends_at": later},
        ])  # fmt: skip
    assert migrate.upgrade(db) == [migrate.head()]
    assert migrate.drift(db) == []
    with db.engine.connect() as conn:
        migrated = [(r.subscriptions, r.period, r.price_amount) for r in conn.execute(sa.select(subscription_stock))]
    assert migrated == [(1, "P1W", 4.99)]
    with db.engine.begin() as conn:
        stock.rebuild(conn, datetime.now(UTC))
    with db.engine.connect() as conn:
        assert [r.subscriptions for r in conn.execute(sa.select(subscription_stock))] == [1]
    migrate.downgrade(db, "0205")
    assert "stock_key" not in {c["name"] for c in sa.inspect(db.engine).get_columns("entitlement_grants")}
    with db.engine.connect() as conn:
        assert len(conn.execute(sa.select(entitlement_grants.c.id)).all()) == 3
    assert migrate.upgrade(db) == [migrate.head()]


def test_0215_turns_live_experiment_active_documents_into_running_experiments_whose_users_keep_their_variant(
    db: Database,
) -> None:
    """Each paywall whose live document has `experiment_active` (two variants or more) becomes a
    running experiment with its weights and no salt (the document's buckets); an older version's
    switch, a single variant and a switch that is off do not; the downgrade drops the tables."""
    from tests.support.paywalls import document
    from transforms import paywall
    from transforms.experiments.serving import first_variant
    from warehouse.experiments import repository

    migrate.downgrade(db, "0210")
    with db.engine.begin() as conn:
        _fill(conn)  # paywall "main": an empty document (no switch)
        docs = [
            ("onboarding", 1, document([1, 1], active=False)),
            ("onboarding", 2, document([30, 70, 0], active=True)),  # live: migrated
            ("settings", 1, document([1, 1], active=True)),
            ("settings", 2, document([1, 1], active=False)),  # live, off: not migrated
            ("solo", 1, document([1], active=True)),  # one variant: nothing to test
        ]
        for paywall_id, version, doc in docs:
            conn.execute(paywall_configs.insert().values(
                app_id="app_1", paywall_id=paywall_id, version=version, workspace_id="ws_1",
                document=doc.model_dump(mode="json"), published_by="t", published_at=T0,
            ))  # fmt: skip
    assert migrate.upgrade(db) == [migrate.head()]
    assert migrate.drift(db) == []
    with db.engine.connect() as conn:
        found = repository.listed(conn, "ws_1")
        split = repository.versions(conn, found[0].id)
    assert [(x.paywall_id, x.status, x.salt, x.holdout_pct, x.audience) for x in found] == [
        ("onboarding", "running", None, 0.0, None)
    ]
    migrated = found[0]
    assert [(v.variant_id, v.weight) for v in migrated.variants] == [("v0", 30.0), ("v1", 70.0), ("v2", 0.0)]
    assert migrated.started_at == T0 and split == {1: (migrated.variants, 0.0)}
    live = document([30, 70, 0], active=True)
    for user in (f"user-{i}" for i in range(500)):
        before = paywall.assign_variant(live, app_id="app_1", paywall_id="onboarding", identity=user).variant_id
        after = first_variant(None, migrated.variants, 0, app_id="app_1", paywall_id="onboarding", identity=user)
        assert after == before
    migrate.downgrade(db, "0210")
    assert "experiments" not in sa.inspect(db.engine).get_table_names()
    assert migrate.upgrade(db) == [migrate.head()]
