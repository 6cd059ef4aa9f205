"""POST /ingest/attribution_provider_b: AppsFlyer Push API messages on both databases."""

from __future__ import annotations

import json
from typing import Any

import pytest
import sqlalchemy as sa
from flask.testing import FlaskClient

from tests.support.ingest import counts
from warehouse.db import Database
from warehouse.events.tables import landed_events
from warehouse.ingest import repository

VENDOR = "attribution_provider_b"
PATH = f"/ingest/{VENDOR}"
APP_ID = "id123456789"
OUTCOME = {"received": 1, "written": 0, "duplicate": 0, "dropped": 0}


def outcome(reason: str | None = None, **kw: int) -> dict[str, Any]:
    return {**OUTCOME, **kw} | ({"reason": reason} if reason else {})


@pytest.fixture
def secret(db: Database, workspace: dict) -> str:
    """An AppsFlyer credential registered under the app's AppsFlyer id."""
    with db.write() as conn:
        issued = repository.create_credential(
            conn, workspace_id=workspace["workspace_id"], vendor=VENDOR, app_token=APP_ID
        )
    return issued.secret


def install(**fields: Any) -> dict[str, Any]:
    """An install message as AppsFlyer's Push API sends it (a subset of its fields)."""
    base = {
        "app_id": APP_ID,
        "event_name": "install",
        "event_type": "install",
        "event_time": "2026-11-20 08:30:00.123",
        "install_time": "2026-11-20 08:30:00.123",
        "platform": "ios",
        "country_code": "US",
        "appsflyer_id": "1763630000000-1234567",
        "idfa": "A1B2C3D4-0000-0000-0000-000000000001",
        "customer_user_id": "u-1",
        "media_source": "Facebook Ads",
        "campaign": "spring_us",
        "af_adset": "broad",
        "af_ad": "video_1",
        "event_value": "",
        "is_retargeting": False,
    }
    return {**base, **fields}


def push(client: FlaskClient, body: Any, secret: str, **query: str) -> Any:
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(PATH, query_string={"secret": secret, **query}, data=data, content_type="application/json")


def landed(db: Database) -> list[dict[str, Any]]:
    with db.read() as conn:
        return [dict(r._mapping) for r in conn.execute(sa.select(landed_events).order_by(landed_events.c.seq))]


def test_an_install_is_written_with_its_attribution_then_a_redelivery_is_duplicate(
    client: FlaskClient, db: Database, workspace: dict, secret: str
) -> None:
    r = push(client, install(), secret)
    assert r.status_code == 200 and r.json == outcome(written=1)
    assert push(client, install(), secret).json == outcome(duplicate=1)
    assert counts(db) == (1, 1)
    (row,) = landed(db)
    assert (row["workspace_id"], row["event_type"], row["source"]) == (workspace["workspace_id"], "install", VENDOR)
    assert row["occurred_at"].isoformat() == "2026-11-20T08:30:00.123000+00:00"
    assert (row["platform"], row["country"]) == ("ios", "US")
    assert (row["user_id"], row["adid"], row["idfa"], row["gps_adid"]) == (
        "u-1",
        "1763630000000-1234567",
        "A1B2C3D4-0000-0000-0000-000000000001",
        None,
    )
    assert row["properties"] == {
        "revenue": None,
        "currency": None,
        "event_token": "install",
        "activity_kind": "install",
        "network": "Facebook Ads",
        "campaign": "spring_us",
        "adgroup": "broad",
        "creative": "video_1",
    }


def test_the_app_token_is_the_query_parameter_else_the_messages_app_id(
    client: FlaskClient, db: Database, workspace: dict, secret: str
) -> None:
    with db.write() as conn:
        other = repository.create_credential(
            conn, workspace_id=workspace["workspace_id"], vendor=VENDOR, app_token="tok-android"
        )
    assert push(client, install(appsflyer_id="d-1"), secret).json == outcome(written=1)
    message = install(app_id="com.example.app", appsflyer_id="d-2")
    assert push(client, message, other.secret, app_token="tok-android").json == outcome(written=1)
    # The query's token decides: this app's secret does not open the other token.
    assert push(client, message, secret, app_token="tok-android").status_code == 401


@pytest.mark.parametrize(
    ("secret_of", "fields"),
    [("wrong", {}), ("", {}), ("right", {"app_id": "id999"}), ("right", {"app_id": None})],
    ids=["wrong-secret", "no-secret", "unknown-app", "no-app"],
)
def test_bad_credentials_are_401(client: FlaskClient, db: Database, secret: str, secret_of: str, fields: dict) -> None:
    presented = secret if secret_of == "right" else secret_of
    r = push(client, install(**fields), presented)
    assert r.status_code == 401 and r.json == {"error": "Unverified callback."}
    assert counts(db) == (0, 0)


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: ingest/repository.py")
def test_vendor_as_credentials_do_not_open_the_push_route(client: FlaskClient, workspace: dict) -> None:
    r = push(client, install(), workspace["ingest_secret"], app_token=workspace["ingest_app_token"])
    assert r.status_code == 401


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("{not json", "Request body is not valid JSON"),
        ("[1, 2]", "Invalid request body"),
        ('"install"', "Invalid request body"),
        ("", "Request body is required"),
        (json.dumps({"event_name": "install", "campaign": {"nested": 1}}), "Invalid body field 'campaign"),
    ],
    ids=["not-json", "array", "string", "empty", "object-field"],
)
def test_a_body_that_is_not_one_message_is_400(
    client: FlaskClient, db: Database, secret: str, body: str, message: str
) -> None:
    r = push(client, body, secret)
    assert r.status_code == 400 and set(r.json) == {"error"} and message in r.json["error"]
    assert counts(db) == (0, 0)


def test_in_app_events_follow_the_workspace_mapping_with_vendor_as_money_checks(
    client: FlaskClient, db: Database, workspace: dict, secret: str
) -> None:
    purchase = install(event_name="af_purchase", event_type="in-app-event", event_revenue="4.99",
                       event_revenue_currency="usd", event_time="2026-11-20 09:00:00.000")  # fmt: skip
    assert push(client, purchase, secret).json == outcome("unmapped_event", dropped=1)
    with db.write() as conn:
        for token, event_type in (("af_purchase", "purchase"), ("af_subscribe", "subscription_start")):
            repository.set_mapping(
                conn, workspace_id=workspace["workspace_id"], vendor=VENDOR, token=token, event_type=event_type
            )
    assert push(client, purchase, secret).json == outcome(written=1)
    row = landed(db)[-1]
    assert row["event_type"] == "purchase"
    assert (row["properties"]["revenue"], row["properties"]["currency"]) == (4.99, "USD")

    cases = [
        ({"event_revenue_currency": "XAU"}, "unknown_currency"),
        ({"event_revenue": "lots"}, "invalid_revenue"),
        ({"event_revenue": 1e12}, "amount_out_of_bounds"),
        ({"event_name": "af_subscribe", "event_revenue": -9.99}, "negative_charge"),
        ({"country_code": "ZZ"}, "unknown_country"),
        ({"event_time": "20.11.2026"}, "invalid_created_at"),
        ({"event_time": None}, "missing_created_at"),
    ]
    for change, reason in cases:
        assert push(client, {**purchase, **change}, secret).json == outcome(reason, dropped=1), reason
    with db.read() as conn:
        dropped = {d.reason: d.count for d in repository.drops(conn, workspace_id=workspace["workspace_id"])}
    assert dropped["unmapped_event"] == 1 and dropped["negative_charge"] == 1
    assert counts(db) == (1, 1)


def test_a_mapping_entry_for_install_wins_over_the_default(
    client: FlaskClient, db: Database, workspace: dict, secret: str
) -> None:
    with db.write() as conn:
        repository.set_mapping(
            conn, workspace_id=workspace["workspace_id"], vendor=VENDOR, token="install", event_type="reattribution"
        )
    assert push(client, install(), secret).json == outcome(written=1)
    assert landed(db)[0]["event_type"] == "reattribution"


def test_an_organic_install_has_no_campaign(client: FlaskClient, db: Database, secret: str) -> None:
    organic = install(media_source="organic", campaign=None, af_adset=None, af_ad=None)
    assert push(client, organic, secret).json == outcome(written=1)
    properties = landed(db)[0]["properties"]
    assert properties["network"] == "organic" and "campaign" not in properties and "creative" not in properties


def test_get_is_not_the_push_route(client: FlaskClient, secret: str) -> None:
    r = client.get(PATH, query_string={"secret": secret, "app_token": APP_ID, "event_name": "install"})
    assert r.status_code == 404 and r.json == {"error": f"Unknown vendor: {VENDOR}"}


def test_the_push_route_is_documented(client: FlaskClient) -> None:
    doc = client.get("/openapi.json?surface=ingest").json
    post = doc["paths"][PATH]["post"]
    assert post["security"] == [{"ingestSecret": []}]
    assert {"200", "400", "401", "500"} <= set(post["responses"])
    assert post["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/PushMessage"}
    fields = set(doc["components"]["schemas"]["PushMessage"]["properties"])
    assert {"event_name", "event_time", "event_revenue", "campaign", "af_ad", "customer_user_id"} <= fields
    assert VENDOR not in doc["paths"]["/ingest/{vendor}"]["get"]["parameters"][0]["schema"].get("enum", [])
