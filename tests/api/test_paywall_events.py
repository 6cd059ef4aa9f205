"""POST /api/paywall/events: funnel events land for the warehouse once, with the gateway's errors."""

from typing import Any

from flask.testing import FlaskClient

from tests.support.paywalls import event, landed
from warehouse.db import Database
from warehouse.workspaces import create_app

URL = "/api/paywall/events"


def post(client: FlaskClient, workspace: dict, events: list[dict[str, Any]] | Any, **headers: str) -> Any:
    sent = {"x-app-key": workspace["app_key"], "x-user-id": "user-7"} | headers
    body = events if not isinstance(events, list) else {"events": events}
    return client.post(URL, json=body, headers={k: v for k, v in sent.items() if v is not None})


def test_a_batch_lands_with_canonical_types_and_a_retry_lands_nothing_more(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    app_id = workspace["app_id"]
    kinds = ["impression", "offer_tap", "purchase_start", "trial_start", "convert", "cancel"]
    batch = [event(app_id, k, country="de", platform="iOS") for k in kinds]
    response = post(client, workspace, batch)
    assert response.status_code == 200 and response.json == {"accepted": 6}
    rows = landed(db)
    assert [r["event_type"] for r in rows] == [
        "paywall_impression",
        "paywall_offer_tap",
        "paywall_purchase_start",
        "paywall_trial_start",
        "paywall_convert",
        "paywall_cancel",
    ]
    first = rows[0]
    assert first["workspace_id"] == workspace["workspace_id"] and first["user_id"] == "user-7"
    assert first["country"] == "DE" and first["platform"] == "ios" and first["source"] == "paywall"
    assert first["properties"] == {
        "paywall_id": "onboarding",
        "variant_id": "b",
        "product_id": "pro_weekly",
        "app_id": app_id,
    }
    assert post(client, workspace, batch).json == {"accepted": 6}  # the app retried: accepted, not landed twice
    assert len(landed(db)) == 6


def test_bad_batches_are_400_and_land_nothing(client: FlaskClient, db: Database, workspace: dict) -> None:
    app_id = workspace["app_id"]
    cases = [
        [],
        [event(app_id)] * 51,
        [event(app_id, "swipe")],
        [event(app_id) | {"properties": {"paywall_id": "onboarding"}}],
        [{k: v for k, v in event(app_id).items() if k != "app_id"}],
        [event(app_id, occurred_at="2020-01-01T00:00:00Z")],
        [event(app_id, country="Germany")],
        {"events": "all of them"},
    ]
    for batch in cases:
        response = post(client, workspace, batch)
        assert response.status_code == 400, batch
        assert set(response.json) == {"error"} and response.json["error"]
    assert landed(db) == []


def test_key_user_and_app_errors(client: FlaskClient, db: Database, workspace: dict) -> None:
    app_id = workspace["app_id"]
    assert post(client, workspace, [event(app_id)], **{"x-app-key": None}).status_code == 401
    assert post(client, workspace, [event(app_id)], **{"x-app-key": "pk_nope"}).status_code == 401
    assert post(client, workspace, [event(app_id)], **{"x-user-id": None}).status_code == 401
    # Authentication comes first: an unauthenticated bad body is 401, not 400.
    assert post(client, workspace, [], **{"x-app-key": None}).status_code == 401
    with db.write() as conn:
        other = create_app(conn, workspace_id=workspace["workspace_id"], name="Other app")
    mismatch = post(client, workspace, [event(app_id), event(other.id)])
    assert mismatch.status_code == 403 and other.id in mismatch.json["error"]
    assert landed(db) == []
