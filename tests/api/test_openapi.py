"""The OpenAPI document matches the code: every served route is documented, and nothing else is."""

import dataclasses

import pytest
from flask import Flask
from flask.testing import FlaskClient

from api.app import create_app
from api.openapi import documented_rules, openapi_path, surface_of
from tests.support import bearer
from warehouse.settings import Settings


def served(app: Flask) -> set[tuple[str, str]]:
    return {(method, openapi_path(rule)) for rule, method in documented_rules(app)}


def documented(doc: dict) -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, item in doc["paths"].items() for method in item}


@pytest.mark.parametrize("surfaces", [("v1", "gateway", "ingest"), ("v1",), ("gateway",), ("ingest",)])
def test_every_route_is_in_the_document_and_vice_versa(settings: Settings, surfaces: tuple[str, ...]) -> None:
    app = create_app(dataclasses.replace(settings, surfaces=surfaces))
    doc = app.test_client().get("/openapi.json").json
    assert doc["openapi"] == "3.1.0"
    assert served(app) == documented(doc)
    assert {("GET", "/healthz"), ("GET", "/openapi.json"), ("GET", "/docs")} <= documented(doc)
    assert any(path.startswith("/v1/") for _, path in documented(doc)) == ("v1" in surfaces)


def test_one_surface_document_from_a_process_serving_all(settings: Settings) -> None:
    app = create_app(settings)
    c = app.test_client()
    for surface in ("v1", "gateway", "ingest"):
        doc = c.get(f"/openapi.json?surface={surface}").json
        expected = {(m, openapi_path(r)) for r, m in documented_rules(app) if surface_of(r) in (None, surface)}
        assert documented(doc) == expected and doc["info"]["title"] == f"FloKit API ({surface})"
    assert c.get("/docs?surface=v1").status_code == 200
    assert c.get("/openapi.json?surface=admin").status_code == 400
    only_v1 = create_app(dataclasses.replace(settings, surfaces=("v1",))).test_client()
    r = only_v1.get("/openapi.json?surface=ingest")
    assert r.status_code == 404 and r.json == {"error": "This process does not serve the ingest surface"}


def test_v1_operations_carry_auth_models_and_errors(client: FlaskClient) -> None:
    doc = client.get("/openapi.json").json
    approve = doc["paths"]["/v1/actions/{action_id}/approve"]["post"]
    assert approve["security"] == [{"bearerAuth": []}]
    assert set(approve["responses"]) == {"200", "400", "401", "403", "404", "409", "413", "429", "503"}
    assert approve["responses"]["503"]["headers"]["Retry-After"]["schema"]["type"] == "integer"
    assert approve["responses"]["429"]["headers"]["Retry-After"]["schema"]["type"] == "integer"
    body_ref = approve["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    body = doc["components"]["schemas"][body_ref.rsplit("/", 1)[-1]]
    assert body["required"] == ["approved_by"]
    listing = doc["paths"]["/v1/actions"]["get"]
    params = {p["name"]: p for p in listing["parameters"]}
    assert params["limit"]["schema"] == {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}
    assert set(params["status"]["schema"]["enum"]) >= {"draft", "ready", "approved", "running", "rolled_back"}
    assert set(listing["responses"]) == {"200", "400", "401", "429", "503"}
    error = listing["responses"]["401"]["content"]["application/json"]["schema"]["$ref"]
    assert error.endswith("/V1Error")
    assert doc["paths"]["/healthz"]["get"].get("security") is None
    # What never touches the database never answers 503; everything else may, with Retry-After.
    assert [
        path for path, item in doc["paths"].items() if any("503" not in op["responses"] for op in item.values())
    ] == ["/docs", "/healthz", "/openapi.json"]


def test_docs_page_is_self_contained_html(client: FlaskClient) -> None:
    r = client.get("/docs")
    assert r.status_code == 200 and r.mimetype == "text/html"
    page = r.get_data(as_text=True)
    assert "/v1/actions/{action_id}/approve" in page and "ApproveBody" in page
    assert "<script" not in page and "http://" not in page and "https://" not in page


def test_validation_errors_use_the_surface_error_shape(client: FlaskClient, workspace: dict) -> None:
    r = client.get("/v1/actions?limit=500", headers=bearer(workspace["api_key_read_only"]))
    assert r.status_code == 400 and set(r.json) == {"error", "message"}


def test_action_detail_documents_typed_parameters_and_both_history_entries(client: FlaskClient) -> None:
    """The detail's `parameters` is one of the three typed shapes or null; `history` entries are a
    transition, an evaluation or an executor's write, told apart by `entry` (docs/actions-engine.md)."""
    schemas = client.get("/openapi.json").json["components"]["schemas"]
    detail = schemas["ActionDetail"]["properties"]
    shapes = [b.get("$ref", "").rsplit("/", 1)[-1] or b.get("type") for b in detail["parameters"]["oneOf"]]
    assert shapes == ["BudgetShiftParameters", "CreativePauseParameters", "OfferTestParameters", "null"]
    assert schemas["BudgetShiftParameters"]["required"] == [
        "from_campaign",
        "to_campaign",
        "amount_per_day",
        "currency",
    ]
    assert schemas["CreativePauseParameters"]["required"] == ["creative", "campaign"]
    assert schemas["OfferTestParameters"]["required"] == ["paywall_id", "country", "control_offer", "treatment_offer"]
    assert all(schemas[s]["additionalProperties"] is False for s in shapes[:3])
    items = detail["history"]["items"]
    assert items["discriminator"]["propertyName"] == "entry"
    assert set(items["discriminator"]["mapping"]) == {"transition", "evaluation", "execution"}
    assert {"kind", "leg", "platform", "before", "after", "state", "at"} <= set(schemas["ExecutionEntry"]["required"])
    evaluation = schemas["EvaluationEntry"]
    assert {"kind", "outcome", "summary", "at"} <= set(evaluation["required"])
    assert set(schemas["TransitionEntry"]["required"]) >= {"from_status", "to_status", "trigger", "actor", "note", "at"}


def test_signed_entitlement_reads_document_the_nonce_and_the_signature_headers(client: FlaskClient) -> None:
    """Issue 36: x-nonce is a documented header; the 200 answer lists the four signature headers."""
    paths = client.get("/openapi.json").json["paths"]
    for path in ("/api/paywall/entitlement", "/api/entitlements/current"):
        op = paths[path]["get"]
        assert {"name": "x-nonce", "in": "header"}.items() <= next(
            p for p in op["parameters"] if p["name"] == "x-nonce"
        ).items()
        assert set(op["responses"]["200"]["headers"]) == {
            "X-Signature-Time",
            "X-Signature",
            "X-Signature-Key-Id",
            "X-Signature-Intermediate",
        }
        assert {"400", "503"} <= set(op["responses"])
    jwks = paths["/api/paywall/keys"]["get"]
    assert set(jwks["responses"]) >= {"200", "503"} and "pins the root" in jwks["description"]


def test_the_webhook_recovery_operations_are_described(client: FlaskClient) -> None:
    """Issue 36 part 4: every new webhook operation, its success status, errors and key scope."""
    paths = client.get("/openapi.json").json["paths"]
    expected = {
        ("post", "/v1/webhooks/endpoints"): "201",
        ("get", "/v1/webhooks/endpoints"): "200",
        ("get", "/v1/webhooks/endpoints/{endpoint_id}"): "200",
        ("patch", "/v1/webhooks/endpoints/{endpoint_id}"): "200",
        ("delete", "/v1/webhooks/endpoints/{endpoint_id}"): "200",
        ("post", "/v1/webhooks/endpoints/{endpoint_id}/rotate-secret"): "200",
        ("get", "/v1/webhooks/endpoints/{endpoint_id}/deliveries"): "200",
        ("post", "/v1/webhooks/deliveries/{delivery_id}/resend"): "202",
        ("post", "/v1/webhooks/endpoints/{endpoint_id}/recover"): "202",
    }
    for (method, path), success in expected.items():
        op = paths[path][method]
        assert success in op["responses"] and op["security"] == [{"bearerAuth": []}], (method, path)
        assert ("403" in op["responses"]) == (method != "get"), (method, path)
    assert "409" in paths["/v1/webhooks/deliveries/{delivery_id}/resend"]["post"]["responses"]
    params = {p["name"]: p for p in paths["/v1/webhooks/endpoints/{endpoint_id}/deliveries"]["get"]["parameters"]}
    assert set(params["status"]["schema"]["enum"]) == {"pending", "delivered", "failed"}
