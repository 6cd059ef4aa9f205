import sqlalchemy as sa

from transforms.ids import hash_api_key
from warehouse import audit, workspaces
from warehouse.db import Database
from warehouse.errors import NotFound
from warehouse.tables import api_keys


def test_bootstrap_creates_workspace_keys_and_app(db: Database, workspace: dict) -> None:
    assert set(workspace) >= {"workspace_id", "api_key_read_write", "api_key_read_only", "app_id", "app_key"}
    assert workspace["workspace_id"].startswith("ws_")
    assert workspace["app_id"].startswith("app_") and workspace["app_key"].startswith("pk_")
    with db.read() as conn:
        rw = workspaces.authenticate(conn, workspace["api_key_read_write"])
        ro = workspaces.authenticate(conn, workspace["api_key_read_only"])
        app = workspaces.app_for_key(conn, workspace["app_key"])
    assert rw is not None and rw.scope == "read_write" and rw.workspace_id == workspace["workspace_id"]
    assert ro is not None and ro.scope == "read_only"
    assert app is not None and app.id == workspace["app_id"]


def test_only_hashes_of_keys_are_stored(db: Database, workspace: dict) -> None:
    with db.read() as conn:
        stored = conn.execute(sa.select(api_keys.c.key_hash)).scalars().all()
        dump = " ".join(str(v) for row in conn.execute(api_keys.select()) for v in row)
    assert hash_api_key(workspace["api_key_read_write"]) in stored
    assert workspace["api_key_read_write"] not in dump


def test_rotation_keeps_the_id_and_kills_the_old_secret(db: Database, workspace: dict) -> None:
    with db.read() as conn:
        key_id = workspaces.authenticate(conn, workspace["api_key_read_write"]).key_id
    with db.write() as conn:
        issued = workspaces.rotate_key(conn, key_id=key_id)
    with db.read() as conn:
        assert workspaces.authenticate(conn, workspace["api_key_read_write"]) is None
        assert workspaces.authenticate(conn, issued.api_key).key_id == key_id
        actions = [e["action"] for e in audit.entries(conn, workspace_id=workspace["workspace_id"], subject_id=key_id)]
    assert actions == ["api_key.created", "api_key.rotated"]


def test_revoked_key_cannot_be_rotated_back_to_life(db: Database, workspace: dict) -> None:
    with db.write() as conn:
        issued = workspaces.create_key(conn, workspace_id=workspace["workspace_id"], scope="read_only")
        workspaces.revoke_key(conn, key_id=issued.key_id)
    with db.read() as conn:
        assert workspaces.authenticate(conn, issued.api_key) is None
    with db.write() as conn:
        try:
            workspaces.rotate_key(conn, key_id=issued.key_id)
        except NotFound:
            pass
        else:
            raise AssertionError("rotating a revoked key must fail")
