"""v1 authentication: 401 for missing/invalid/rotated/revoked keys, 403 for read-only writes."""

from flask import Flask, jsonify
from flask.testing import FlaskClient

from api.auth import principal, require_key
from tests.support import bearer
from warehouse import workspaces
from warehouse.db import Database


def _add_write_route(app: Flask) -> None:
    """A write endpoint guarded by the real decorator, until the v1 POST routes exist."""

    @app.post("/v1/_probe/write")
    @require_key(write=True)
    def _write():
        return jsonify({"workspace_id": principal().workspace_id})


def test_missing_key_is_401(client: FlaskClient) -> None:
    r = client.get("/v1/workspace")
    assert r.status_code == 401
    assert r.json["error"] == "unauthorized" and "Bearer" in r.json["message"]


def test_malformed_header_and_unknown_key_are_401(client: FlaskClient, workspace: dict) -> None:
    for header in (
        {"Authorization": workspace["api_key_read_only"]},
        {"Authorization": "Basic abc"},
        {"Authorization": "Bearer "},
        bearer("flk_not_a_real_key"),
    ):
        r = client.get("/v1/workspace", headers=header)
        assert r.status_code == 401, header
        assert r.json["error"] == "unauthorized"


def test_read_only_key_reads_but_cannot_write(app: Flask, workspace: dict) -> None:
    _add_write_route(app)
    client = app.test_client()
    assert client.get("/v1/workspace", headers=bearer(workspace["api_key_read_only"])).status_code == 200
    r = client.post("/v1/_probe/write", headers=bearer(workspace["api_key_read_only"]))
    assert r.status_code == 403
    assert r.json == {"error": "forbidden", "message": r.json["message"]} and "read-only" in r.json["message"]
    r = client.post("/v1/_probe/write", headers=bearer(workspace["api_key_read_write"]))
    assert r.status_code == 200 and r.json["workspace_id"] == workspace["workspace_id"]


def test_rotated_key_is_rejected_at_once(client: FlaskClient, db: Database, workspace: dict) -> None:
    old = workspace["api_key_read_write"]
    assert client.get("/v1/workspace", headers=bearer(old)).status_code == 200
    with db.read() as conn:
        key_id = workspaces.authenticate(conn, old).key_id
    with db.write() as conn:
        new = workspaces.rotate_key(conn, key_id=key_id).api_key
    assert client.get("/v1/workspace", headers=bearer(old)).status_code == 401
    assert client.get("/v1/workspace", headers=bearer(new)).status_code == 200


def test_revoked_key_is_rejected(client: FlaskClient, db: Database, workspace: dict) -> None:
    with db.read() as conn:
        key_id = workspaces.authenticate(conn, workspace["api_key_read_only"]).key_id
    with db.write() as conn:
        workspaces.revoke_key(conn, key_id=key_id)
    assert client.get("/v1/workspace", headers=bearer(workspace["api_key_read_only"])).status_code == 401
