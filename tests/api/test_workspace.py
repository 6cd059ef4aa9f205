from flask.testing import FlaskClient

from tests.support import bearer
from warehouse.bootstrap import bootstrap
from warehouse.db import Database


def test_workspace_read(client: FlaskClient, workspace: dict) -> None:
    r = client.get("/v1/workspace", headers=bearer(workspace["api_key_read_only"]))
    assert r.status_code == 200
    assert r.json["id"] == workspace["workspace_id"]
    assert r.json["name"] == "Acme Fitness"
    assert r.json["reporting_currency"] == "USD" and r.json["timezone"] == "UTC"
    assert r.json["created_at"].endswith("Z")
    assert list(r.json) == ["id", "name", "created_at", "reporting_currency", "timezone"]


def test_a_key_sees_only_its_own_workspace(client: FlaskClient, db: Database, workspace: dict) -> None:
    with db.write() as conn:
        other = bootstrap(conn, name="Other Co")
    a = client.get("/v1/workspace", headers=bearer(workspace["api_key_read_write"])).json
    b = client.get("/v1/workspace", headers=bearer(other["api_key_read_write"])).json
    assert a["id"] == workspace["workspace_id"] and a["name"] == "Acme Fitness"
    assert b["id"] == other["workspace_id"] and b["name"] == "Other Co"
