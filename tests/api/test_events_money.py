"""POST /v1/events applies the ingest rules for codes and amounts, answered 400 in the v1 error shape."""

import pytest
from flask.testing import FlaskClient

from tests.support import bearer

EVENT = {"event": "renewal", "user_id": "user_42", "timestamp": "2026-11-20T18:04:05Z"}


@pytest.mark.parametrize(
    ("properties", "reason"),
    [
        ({"revenue": 1000, "currency": "XXX"}, "unknown_currency"),
        ({"revenue": 5, "currency": "ARS"}, "currency_without_rate"),
        ({"revenue": 5, "currency": 840}, "unknown_currency"),
        ({"country": "ZZ"}, "unknown_country"),
        ({"country": "Germany"}, "unknown_country"),
        ({"revenue": -50, "currency": "USD"}, "negative_charge"),
        ({"revenue": 1e308, "currency": "USD"}, "amount_out_of_bounds"),
        ({"revenue": "lots", "currency": "USD"}, "invalid_revenue"),
        ({"revenue": True, "currency": "USD"}, "invalid_revenue"),
    ],
)
def test_bad_codes_and_amounts_answer_400(client: FlaskClient, workspace: dict, properties: dict, reason: str) -> None:
    r = client.post(
        "/v1/events", json={**EVENT, "properties": properties}, headers=bearer(workspace["api_key_read_write"])
    )
    assert r.status_code == 400
    assert r.json["error"] == "invalid_request" and f"({reason})" in r.json["message"]


def test_non_finite_json_numbers_answer_400(client: FlaskClient, workspace: dict) -> None:
    body = '{"event": "renewal", "user_id": "u", "timestamp": "2026-11-20T18:04:05Z", "properties": {"revenue": 1e309}}'
    r = client.post(
        "/v1/events",
        data=body,
        content_type="application/json",
        headers=bearer(workspace["api_key_read_write"]),
    )
    assert r.status_code == 400 and r.json["error"] == "invalid_request"


def test_valid_money_is_accepted(client: FlaskClient, workspace: dict) -> None:
    rw = bearer(workspace["api_key_read_write"])
    for properties in (
        {"revenue": 1000, "currency": "JPY", "country": "jp"},
        {"revenue": "9.99", "currency": "eur"},
        {"revenue": 5},  # no currency: the workspace's reporting currency
    ):
        r = client.post("/v1/events", json={**EVENT, "properties": properties}, headers=rw)
        assert r.status_code == 202, r.json
    refund = {**EVENT, "event": "refund", "properties": {"revenue": -5, "currency": "USD"}}
    assert client.post("/v1/events", json=refund, headers=rw).status_code == 202
