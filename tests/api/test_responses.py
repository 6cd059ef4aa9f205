"""Answers are instances of their declared models (api/responses.py), and the document says so."""

import pytest
from flask import Response, g
from flask.testing import FlaskClient

from api.app import create_app
from api.openapi import Health, NotReady, operation
from api.responses import DECLARED, respond
from tests.support import bearer
from transforms.ids import ID_MAX_LENGTH
from warehouse.settings import Settings


def test_an_answer_that_is_not_the_declared_model_is_a_bug(settings: Settings) -> None:
    app = create_app(settings)

    @operation(summary="declares Health", responses={200: Health}, database=False)
    def declared() -> Response:
        return respond(Health(status="ok"))

    @operation(summary="declares Health, answers NotReady", responses={200: Health}, database=False)
    def undeclared_model() -> Response:
        return respond(NotReady(status="unavailable", reason="error"))

    @operation(summary="declares 200, answers 201", responses={200: Health}, database=False)
    def undeclared_status() -> Response:
        return respond(Health(status="ok"), 201)

    for view in (declared, undeclared_model, undeclared_status):
        app.add_url_rule(f"/t/{view.__name__}", view_func=view)
    c = app.test_client()
    assert c.get("/t/declared").json == {"status": "ok"}
    for name in ("undeclared_model", "undeclared_status"):
        r = c.get(f"/t/{name}")
        assert r.status_code == 500 and r.json == {"error": "Internal Server Error"}
    with app.test_request_context():
        setattr(g, DECLARED, {200: Health})
        with pytest.raises(TypeError, match="answers 200 with NotReady; its operation declares"):
            respond(NotReady(status="unavailable", reason="error"))


def schema_of(doc: dict, model: str) -> dict:
    return doc["components"]["schemas"][model]["properties"]


def test_payback_rows_are_documented_as_served(client: FlaskClient) -> None:
    """Organic traffic has no ROAS and spend without installs no CAC: null, and the document says so;
    counts are integers."""
    row = schema_of(client.get("/openapi.json").json, "PaybackRow")
    for nullable in ("cac", "roas_30d"):
        assert row[nullable]["anyOf"] == [{"type": "number"}, {"type": "null"}], nullable
        assert row[nullable]["description"]
    assert row["payback_days"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    assert row["trials"]["type"] == row["subscriptions"]["type"] == "integer"


def test_the_document_names_the_id_length_the_columns_hold(client: FlaskClient) -> None:
    doc = client.get("/openapi.json").json
    [param] = doc["paths"]["/v1/actions/{action_id}"]["get"]["parameters"]
    assert param["schema"]["maxLength"] == ID_MAX_LENGTH
    create = doc["components"]["schemas"]["CreateBody"]["properties"]["workspace_id"]
    assert create["maxLength"] == ID_MAX_LENGTH


@pytest.mark.parametrize("action_id", ["act_doesnotexist", "a" * (ID_MAX_LENGTH + 1), "a" * 200, "act-with-dash"])
def test_a_path_id_no_row_can_have_answers_the_same_404_as_an_unknown_one(
    client: FlaskClient, workspace: dict, action_id: str
) -> None:
    rw = bearer(workspace["api_key_read_write"])
    for method, path, body in (
        ("get", f"/v1/actions/{action_id}", None),
        ("post", f"/v1/actions/{action_id}/approve", {"approved_by": "a"}),
    ):
        r = getattr(client, method)(path, json=body, headers=rw)
        assert r.status_code == 404
        assert r.json == {"error": "not_found", "message": f"No action {action_id} in this workspace"}
