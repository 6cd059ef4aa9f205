"""Webhook signing secrets at rest are sealed with the instance key (issue 30, Low 3), as an
attacker with a copy of the database would look for them: the secret shown on creation and on
rotation is nowhere in the database's bytes, signing still uses it (the previous secret too during
the overlap), and rows stored in plaintext before are sealed by `flokit db upgrade`.

Deliveries verified with the shown secret: tests/orchestration/test_webhooks_delivery.py.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from click.testing import CliRunner

from cli.main import main
from tests.support import WEBHOOK_KEY
from transforms.sealing import SealError
from warehouse.db import Database, sqlite_files, sqlite_path, utcnow
from warehouse.settings import Settings
from warehouse.webhooks import endpoints
from warehouse.webhooks.tables import webhook_secrets


def flokit(settings: Settings, *args: str) -> Any:
    env = {**settings.child_env(), "FLOKIT_SECRET_KEY": WEBHOOK_KEY, "FLOKIT_WEBHOOKS_ALLOW_PRIVATE": "1"}
    done = CliRunner().invoke(main, [*args, "--json"], env=env, catch_exceptions=False)
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def stored(db: Database) -> list[str]:
    with db.read() as conn:
        return list(conn.execute(sa.select(webhook_secrets.c.secret).order_by(webhook_secrets.c.id)).scalars())


def database_bytes(settings: Settings, db: Database) -> bytes:
    """Every byte the database keeps, as a copy or a backup would hold them."""
    path = sqlite_path(settings.database_url)
    if path is not None:
        return b"".join(f.read_bytes() for f in sqlite_files(path) if f.is_file())  # the WAL too
    with db.read() as conn:  # PostgreSQL: the table's whole content, as a dump has it
        return "\n".join(str(row) for row in conn.execute(webhook_secrets.select())).encode()


def test_the_secret_shown_on_creation_and_rotation_is_not_in_the_database(
    settings: Settings, db: Database, workspace: dict[str, Any]
) -> None:
    added = flokit(
        settings, "admin", "webhooks", "add", "--workspace", workspace["workspace_id"],
        "--url", "http://127.0.0.1:9/hook", "--events", "action.created",
    )  # fmt: skip
    first = added["signing_secret"]
    assert first.startswith("whsec_")
    rotated = flokit(settings, "admin", "webhooks", "rotate-secret", "--endpoint", added["endpoint_id"])
    second = rotated["signing_secret"]

    raw = database_bytes(settings, db)
    for secret in (first, second):
        assert secret.encode() not in raw and secret.removeprefix("whsec_").encode() not in raw
    assert all(value.startswith("v1.") for value in stored(db))
    with db.read() as conn:  # both sign during the overlap, the new one first
        assert endpoints.signing_secrets(conn, [added["endpoint_id"]], utcnow(), instance_key=WEBHOOK_KEY) == {
            added["endpoint_id"]: [second, first]
        }


def test_a_sealed_secret_does_not_open_for_another_endpoint_or_key(db: Database, workspace: dict[str, Any]) -> None:
    with db.write() as conn:
        a, _ = endpoints.create_endpoint(
            conn, workspace_id=workspace["workspace_id"], url="http://127.0.0.1:9/a", events=["action.created"],
            allow_private=True, instance_key=WEBHOOK_KEY,
        )  # fmt: skip
    [value] = stored(db)
    for key, endpoint_id in (("x" * 43, a.id), (WEBHOOK_KEY, "whe_other")):
        try:
            endpoints.open_secret(key, endpoint_id, value)
        except SealError:
            continue
        raise AssertionError(f"opened under {key[:1]}… for {endpoint_id}")


def test_secrets_stored_in_plaintext_before_are_sealed_by_db_upgrade(
    settings: Settings, db: Database, workspace: dict[str, Any]
) -> None:
    with db.write() as conn:
        endpoint, secret = endpoints.create_endpoint(
            conn, workspace_id=workspace["workspace_id"], url="http://127.0.0.1:9/a", events=["action.created"],
            allow_private=True, instance_key=WEBHOOK_KEY,
        )  # fmt: skip
        conn.execute(webhook_secrets.update().values(secret=secret))  # as every row was before sealing
    with db.read() as conn:  # read as it is until sealed: deliveries keep their signatures
        assert endpoints.signing_secrets(conn, [endpoint.id], utcnow(), instance_key=WEBHOOK_KEY) == {
            endpoint.id: [secret]
        }

    flokit(settings, "db", "upgrade")

    [value] = stored(db)
    assert value.startswith("v1.") and secret not in value
    assert endpoints.open_secret(WEBHOOK_KEY, endpoint.id, value) == secret
    flokit(settings, "db", "upgrade")  # idempotent
    assert stored(db) == [value]
