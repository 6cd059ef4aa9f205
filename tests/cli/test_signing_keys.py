"""`flokit db upgrade` creates the root signing key; `flokit admin signing-keys show|rotate`."""

import base64
import json

import pytest

from tests.support import WEBHOOK_KEY
from tests.support.cli import run, run_json
from transforms import trusted
from warehouse.db import database_for, utcnow
from warehouse.settings import Settings
from warehouse.signing import keys


@pytest.fixture(autouse=True)
def instance_key(settings: Settings) -> None:
    """The instance key `flokit db upgrade` would create: the keys are sealed with it."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    (settings.data_dir / "instance.key").write_text(WEBHOOK_KEY + "\n")


def test_show_before_the_upgrade_says_what_to_run(settings: Settings) -> None:
    refused = run(settings, "admin", "signing-keys", "show", ok=False)
    assert refused.returncode == 1 and "flokit db upgrade" in refused.stderr


def test_upgrade_creates_the_root_once_and_show_prints_it_for_pinning(settings: Settings) -> None:
    upgraded = run(settings, "db", "upgrade", "--json")
    kid = json.loads(upgraded.stdout)["signing_root_kid"]
    assert "created the root signing key" in upgraded.stderr
    again = run(settings, "db", "upgrade", "--json")
    assert json.loads(again.stdout)["signing_root_kid"] == kid and "created the root" not in again.stderr
    shown = run_json(settings, "admin", "signing-keys", "show")
    public = base64.b64decode(shown["root_public_key"], validate=True)
    assert len(public) == 32 and shown["root_kid"] == kid == trusted.kid(public)
    human = run(settings, "admin", "signing-keys", "show").stdout
    assert shown["root_public_key"] in human and kid in human


def test_rotate_makes_a_new_intermediate_certified_by_the_same_root(settings: Settings) -> None:
    run(settings, "db", "upgrade")
    root = base64.b64decode(run_json(settings, "admin", "signing-keys", "show")["root_public_key"])
    first = run_json(settings, "admin", "signing-keys", "rotate")
    second = run_json(settings, "admin", "signing-keys", "rotate")
    assert (first["generation"], second["generation"]) == (1, 2) and first["kid"] != second["kid"]
    assert run_json(settings, "admin", "signing-keys", "show")["intermediate_generation"] == 2
    db = database_for(settings.database_url)
    with db.read() as conn:
        current = keys.current_intermediate(conn, instance_key=WEBHOOK_KEY, now=utcnow())
    assert current is not None and current.kid == second["kid"]
    public, _expiry = trusted.open_chain(current.chain, root)
    assert trusted.kid(public) == second["kid"]
