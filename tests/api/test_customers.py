"""Customers (issue 34, preview) through the real app: promotional grants answered by the
entitlement endpoints at once, the customer page fed by a real notification, the search by each
id kind, and the refusals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from flask.testing import FlaskClient

from tests.support.entitlements import fact, statement
from tests.support.notifications import SUBSCRIPTION, iso, post, purchase
from tests.support.provider_notifications import KEY, entitlement, settings
from warehouse import audit
from warehouse.db import Database
from warehouse.entitlements.stores import StoresUpdate, set_stores
from warehouse.entitlements.tables import entitlement_grants
from warehouse.workspaces import create_app

__all__ = ["settings"]

BOTH = pytest.mark.both_backends(reason="the ledger's promotional rows, the search's indexes and the timeline's reads")


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def rw(workspace: dict[str, Any]) -> dict[str, str]:
    return bearer(workspace["api_key_read_write"])


def ro(workspace: dict[str, Any]) -> dict[str, str]:
    return bearer(workspace["api_key_read_only"])


def grant(client: FlaskClient, workspace: dict[str, Any], user: str = "user-7", **body: Any) -> Any:
    values = {"app_id": workspace["app_id"], "product_id": "pro_monthly", "duration": "P1M", "reason": "ticket 42"}
    return client.post(f"/v1/customers/{user}/entitlements", json=values | body, headers=rw(workspace))


@pytest.fixture
def secret(db: Database, workspace: dict[str, Any]) -> str:
    with db.write() as conn:
        made = set_stores(
            conn, app_id=workspace["app_id"], update=StoresUpdate(new_generic_secret=True), instance_key=KEY
        ).generic_secret
    assert made is not None
    return made


@BOTH
def test_a_promotional_grant_is_active_at_once_and_ends_when_deleted(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    # Never seen before: support pre-grants.
    assert client.get("/v1/customers/newbie", headers=ro(workspace)).status_code == 404
    assert entitlement(client, workspace, "newbie") == {"active": False, "source": "none"}
    r = grant(client, workspace, "newbie")
    assert r.status_code == 201, r.json
    made = r.json["grant"]
    assert made["source"] == made["store"] == "promotional" and made["active"] is True
    assert made["user_id"] == "newbie" and made["ended_at"] is None
    assert r.headers["Location"] == f"/v1/customers/newbie/entitlements/{made['grant_id']}"
    expires = datetime.fromisoformat(made["expires_at"])
    assert timedelta(days=27) < expires - datetime.now(UTC) <= timedelta(days=31)
    assert entitlement(client, workspace, "newbie") == {"active": True, "source": "promotional"}

    customer = client.get("/v1/customers/newbie", headers=ro(workspace)).json["customer"]
    assert [e["grant_id"] for e in customer["entitlements"]] == [made["grant_id"]]
    assert customer["purchases"] == []  # a grant is no purchase
    actions = [e for e in customer["timeline"] if e["kind"] == "action"]
    assert len(actions) == 1 and "ticket 42" in actions[0]["summary"]

    ended = client.delete(
        f"/v1/customers/newbie/entitlements/{made['grant_id']}?reason=refund+issued", headers=rw(workspace)
    )
    assert ended.status_code == 200, ended.json
    assert ended.json["grant"]["active"] is False and ended.json["grant"]["ended_at"] is not None
    assert entitlement(client, workspace, "newbie") == {"active": False, "source": "promotional"}
    # Again: answered as it is, not audited twice.
    again = client.delete(f"/v1/customers/newbie/entitlements/{made['grant_id']}", headers=rw(workspace))
    assert again.status_code == 200 and again.json["grant"]["ended_at"] == ended.json["grant"]["ended_at"]
    with db.read() as conn:
        logged = audit.entries(conn, workspace_id=workspace["workspace_id"], subject_id=made["grant_id"])
    assert [(e["action"], e["detail"]["reason"]) for e in logged] == [
        ("customer.entitlement_granted", "ticket 42"),
        ("customer.entitlement_ended", "refund issued"),
    ]
    assert {e["actor"] for e in logged} == {made_by(db, workspace)}
    timeline = client.get("/v1/customers/newbie", headers=ro(workspace)).json["customer"]["timeline"]
    newest_action = next(e for e in timeline if e["kind"] == "action")
    assert newest_action["summary"].startswith("promotional access to pro_monthly ended")


def made_by(db: Database, workspace: dict[str, Any]) -> str:
    from warehouse.tables import api_keys

    with db.read() as conn:
        return str(
            conn.execute(
                sa.select(api_keys.c.id).where(
                    api_keys.c.workspace_id == workspace["workspace_id"], api_keys.c.scope == "read_write"
                )
            ).scalar_one()
        )


def test_grant_refusals(client: FlaskClient, db: Database, workspace: dict) -> None:
    past = iso(datetime.now(UTC) - timedelta(hours=1))
    future = iso(datetime.now(UTC) + timedelta(days=3))
    for body, word in (
        ({"expires_at": past, "duration": None}, "future"),
        ({"expires_at": future}, "exactly one"),
        ({"duration": None}, "exactly one"),
        ({"duration": "1 month"}, "ISO 8601"),
        ({"duration": "P0D"}, "longer than nothing"),
        ({"duration": "P20Y"}, "days"),
        ({"expires_at": "tomorrow", "duration": None}, "expires_at"),
        ({"reason": ""}, "reason"),
    ):
        r = grant(client, workspace, **body)
        assert r.status_code == 400 and r.json["error"] == "invalid_request", (body, r.json)
        assert word in r.json["message"], (body, r.json)
    other = grant(client, workspace, app_id="app_elsewhere")
    assert other.status_code == 404 and other.json["error"] == "not_found"
    read_only = client.post(
        "/v1/customers/u/entitlements",
        json={"app_id": workspace["app_id"], "product_id": "p", "duration": "P7D", "reason": "r"},
        headers=ro(workspace),
    )
    assert read_only.status_code == 403 and read_only.json["error"] == "forbidden"
    assert client.delete("/v1/customers/u/entitlements/grt_x", headers=ro(workspace)).status_code == 403
    assert client.delete("/v1/customers/u/entitlements/grt_unknown", headers=rw(workspace)).status_code == 404
    assert client.get("/v1/customers/u").status_code == 401
    with db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(entitlement_grants)).scalar_one() == 0


@BOTH
def test_a_purchase_through_a_notification_is_on_the_customer_page_at_once(
    client: FlaskClient, db: Database, workspace: dict, secret: str
) -> None:
    start = datetime.now(UTC) - timedelta(minutes=5)
    body = purchase(occurred_at=iso(start), purchase_id="sub_9")
    assert post(client, SUBSCRIPTION, workspace["app_id"], body, secret).json["status"] == "applied"
    r = client.get("/v1/customers/user-7", headers=ro(workspace))
    assert r.status_code == 200, r.json
    c = r.json["customer"]
    assert c["user_id"] == "user-7" and c["app_id"] == workspace["app_id"]
    [ent] = c["entitlements"]
    assert ent["active"] is True and ent["source"] == "web" and ent["store"] == "generic" and ent["will_renew"] is True
    [bought] = c["purchases"]
    assert bought["purchase_id"] == "sub_9" and bought["status"] == "active" and bought["kind"] == "subscription"
    [txn] = bought["transactions"]
    assert txn["type"] == "purchase" and txn["revenue"] == 9.99 and txn["currency"] == "EUR"
    assert txn["revenue_in_reporting_currency"] is not None and txn["revenue_in_reporting_currency"] > 0  # USD
    kinds = {e["kind"] for e in c["timeline"]}
    assert kinds == {"event", "notification", "statement"}
    [note] = [e for e in c["timeline"] if e["kind"] == "notification"]
    assert "applied" in note["summary"] and note["source"] == "generic-subscription"
    # A refund a second later: on the page at the next read.
    refund = purchase("refund", id="evt_2", purchase_id="sub_9", occurred_at=iso(datetime.now(UTC)))
    assert post(client, SUBSCRIPTION, workspace["app_id"], refund, secret).status_code == 200
    c = client.get("/v1/customers/user-7", headers=ro(workspace)).json["customer"]
    assert c["purchases"][0]["status"] == "refunded"
    assert [t["type"] for t in c["purchases"][0]["transactions"]] == ["purchase", "refund"]
    assert len([e for e in c["timeline"] if e["kind"] == "notification"]) == 2
    # Newest first, and paged strictly before a timestamp.
    times = [e["occurred_at"] for e in c["timeline"]]
    assert times == sorted(times, reverse=True)
    page = client.get("/v1/customers/user-7", query_string={"timeline_limit": 2}, headers=ro(workspace)).json[
        "customer"
    ]["timeline"]
    assert len(page) == 2
    rest = client.get(
        "/v1/customers/user-7", query_string={"timeline_before": page[-1]["occurred_at"]}, headers=ro(workspace)
    ).json["customer"]["timeline"]
    assert rest and all(e["occurred_at"] < page[-1]["occurred_at"] for e in rest)


def test_lookup_refusals_and_app_choice(client: FlaskClient, db: Database, workspace: dict) -> None:
    statement(db, workspace, fact("1000001", user_hint="user-7"))
    assert client.get("/v1/customers/user-7", headers=ro(workspace)).status_code == 200
    for params, word in (
        ({"timeline_before": "yesterday"}, "timeline_before"),
        ({"timeline_limit": 0}, "timeline_limit"),
        ({"timeline_limit": 201}, "timeline_limit"),
    ):
        r = client.get("/v1/customers/user-7", query_string=params, headers=ro(workspace))
        assert r.status_code == 400 and word in r.json["message"], r.json
    missing = client.get("/v1/customers/nobody", headers=ro(workspace))
    assert missing.status_code == 404 and missing.json["error"] == "not_found"
    with db.write() as conn:
        second = create_app(conn, workspace_id=workspace["workspace_id"], name="Second")
    several = client.get("/v1/customers/user-7", headers=ro(workspace))
    assert several.status_code == 400 and "app_id" in several.json["message"]
    chosen = client.get("/v1/customers/user-7", query_string={"app_id": workspace["app_id"]}, headers=ro(workspace))
    assert chosen.status_code == 200
    elsewhere = client.get("/v1/customers/user-7", query_string={"app_id": second.id}, headers=ro(workspace))
    assert elsewhere.status_code == 404


@BOTH
def test_a_store_purchase_cannot_be_ended_here(client: FlaskClient, db: Database, workspace: dict) -> None:
    applied = statement(db, workspace, fact("1000001", user_hint="user-7"))
    r = client.delete(f"/v1/customers/user-7/entitlements/{applied.grant_id}", headers=rw(workspace))
    assert r.status_code == 409 and r.json["error"] == "conflict"
    assert entitlement(client, workspace, "user-7") == {"active": True, "source": "iap"}
    # Another user's grant id is not this customer's.
    made = grant(client, workspace, "user-8").json["grant"]
    theirs = client.delete(f"/v1/customers/user-7/entitlements/{made['grant_id']}", headers=rw(workspace))
    assert theirs.status_code == 404


def search(client: FlaskClient, workspace: dict[str, Any], query: str) -> Any:
    r = client.get("/v1/customers", query_string={"query": query}, headers=ro(workspace))
    assert r.status_code == 200, r.json
    return [(c["user_id"], c["matched_on"]) for c in r.json["customers"]]


@BOTH
def test_search_finds_a_customer_by_each_id_kind(
    client: FlaskClient, db: Database, workspace: dict, secret: str
) -> None:
    # A generic purchase through its webhook (purchase_id), an App Store purchase (original
    # transaction id), a Google Play one with a newer token, a Stripe subscription of a customer.
    assert post(client, SUBSCRIPTION, workspace["app_id"], purchase(purchase_id="sub_9"), secret).status_code == 200
    statement(db, workspace, fact("2000000000000001", user_hint="apple-user", transaction_id="2000000000000009"))
    statement(db, workspace, fact("tok-first", source="android_store", user_hint="play-user", current_token="tok-new"))
    stripe = fact("sub_1Stripe", source="payment_processor", channel="web", user_hint="web-user", customer_id="cus_42")
    statement(db, workspace, stripe)
    assert search(client, workspace, "user-7") == [("user-7", "user_id")]
    assert search(client, workspace, "sub_9") == [("user-7", "purchase_id")]
    assert search(client, workspace, "2000000000000001") == [("apple-user", "purchase_id")]
    assert search(client, workspace, "2000000000000009") == [("apple-user", "purchase_id")]
    assert search(client, workspace, "tok-first") == [("play-user", "purchase_id")]
    assert search(client, workspace, "tok-new") == [("play-user", "purchase_id")]
    assert search(client, workspace, "cus_42") == [("web-user", "stripe_customer_id")]
    assert search(client, workspace, "sub_1Stripe") == [("web-user", "stripe_subscription_id")]
    assert search(client, workspace, " user-7 ") == [("user-7", "user_id")]  # pasted with spaces
    assert search(client, workspace, "sub") == []  # exact ids only
    # A promotional grant makes a user findable by id too.
    grant(client, workspace, "promo-only")
    assert search(client, workspace, "promo-only") == [("promo-only", "user_id")]
    # Another workspace's customers are not found.
    with db.write() as conn:
        from warehouse.bootstrap import bootstrap

        other = bootstrap(conn, name="Other")
    r = client.get("/v1/customers", query_string={"query": "user-7"}, headers=ro(other))
    assert r.status_code == 200 and r.json["customers"] == []


def test_search_by_a_provider_customer_id_through_the_revenuecat_webhook(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    import json

    from tests.support.notifications import AUTH, PATH, integration, rc_event

    integration_id = integration(db, workspace)
    event = rc_event("INITIAL_PURCHASE", user="rc-user", original_app_user_id="$RCAnonymousID:abc123")
    body = json.dumps({"api_version": "1.0", "event": event}).encode()
    r = client.post(
        f"{PATH}?integration={integration_id}",
        data=body,
        headers={"Authorization": AUTH, "Content-Type": "application/json"},
    )
    assert r.status_code == 200, r.json
    assert search(client, workspace, "$RCAnonymousID:abc123") == [("rc-user", "provider_customer_id")]
    assert search(client, workspace, "1000000111") == [("rc-user", "purchase_id")]  # the original transaction id


def test_search_refusals(client: FlaskClient, workspace: dict) -> None:
    for query in ("", "   ", "x" * 513):
        r = client.get("/v1/customers", query_string={"query": query}, headers=ro(workspace))
        assert r.status_code == 400 and r.json["error"] == "invalid_request" and "query" in r.json["message"]
    missing = client.get("/v1/customers", headers=ro(workspace))
    assert missing.status_code == 400 and "query" in missing.json["message"]
    assert client.get("/v1/customers", query_string={"query": "u"}).status_code == 401


def test_events_come_from_the_lake_and_from_the_database_before_the_lake_has_them(
    client: FlaskClient, db: Database, workspace: dict, settings: Any
) -> None:
    import json

    import polars as pl

    from transforms.events import CANONICAL_EVENT_SCHEMA, canonical_event
    from warehouse.events.landing import land
    from warehouse.reports.report_lake import CANONICAL_EVENTS, write_day

    installed = datetime.now(UTC).replace(microsecond=0) - timedelta(days=3)
    ws = workspace["workspace_id"]

    def row(event_id: str, kind: str, at: datetime, **props: Any) -> dict[str, Any]:
        return {
            "event_id": event_id, "workspace_id": ws, "event_type": kind, "occurred_at": at, "platform": "ios",
            "country": "DE", "user_id": "lake-user", "adid": None, "idfa": None, "gps_adid": None,
            "properties": json.dumps(props), "source": "adjust", "received_at": at,
        }  # fmt: skip

    frame = pl.DataFrame(
        [
            row("evt_install", "install", installed, network="Meta", campaign="spring", adgroup="a1", creative="c1"),
            row("evt_seen", "paywall_impression", installed + timedelta(minutes=1), paywall_id="pw_1", variant_id="B"),
            row("evt_seen2", "paywall_impression", installed + timedelta(minutes=9), paywall_id="pw_1", variant_id="B"),
        ],
        schema=CANONICAL_EVENT_SCHEMA,
    )
    write_day(settings.paths.lake(), CANONICAL_EVENTS, installed.date(), frame)
    # An event landed a moment ago: in the database only.
    with db.write() as conn:
        land(conn, [canonical_event(event_id="evt_new", workspace_id=ws, event_type="paywall_impression",
                                    occurred_at=datetime.now(UTC), source="sdk", received_at=datetime.now(UTC),
                                    user_id="lake-user", country="FR", properties={"paywall_id": "pw_2"})])  # fmt: skip
    c = client.get("/v1/customers/lake-user", headers=ro(workspace)).json["customer"]
    assert c["attribution"] == {
        "network": "Meta", "campaign": "spring", "adgroup": "a1", "creative": "c1",
        "installed_at": iso(installed).replace("Z", ".000Z"),
    }  # fmt: skip
    assert [(p["paywall_id"], p["variant_id"]) for p in c["paywall_exposures"]] == [("pw_1", "B"), ("pw_2", None)]
    assert c["country"] == "FR" and c["platform"] == "ios"
    assert c["first_seen_at"] == iso(installed).replace("Z", ".000Z")
    assert [e["ref"] for e in c["timeline"]] == ["evt_new", "evt_seen2", "evt_seen", "evt_install"]
    assert c["entitlements"] == [] and c["purchases"] == []


def test_the_four_operations_are_documented_as_preview(client: FlaskClient) -> None:
    paths = client.get("/openapi.json").json["paths"]
    operations = [
        paths["/v1/customers"]["get"],
        paths["/v1/customers/{user_id}"]["get"],
        paths["/v1/customers/{user_id}/entitlements"]["post"],
        paths["/v1/customers/{user_id}/entitlements/{grant_id}"]["delete"],
    ]
    assert all(op["description"].startswith("Preview (issue 34)") for op in operations)
    assert operations[2]["security"] == [{"bearerAuth": []}] and "403" in operations[2]["responses"]
    assert "201" in operations[2]["responses"] and "409" in operations[3]["responses"]
