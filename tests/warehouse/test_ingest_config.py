"""Ingest settings and the repository's refusals (both databases)."""

from pathlib import Path

import pytest

from warehouse.db import Database
from warehouse.errors import InvalidIngestConfig
from warehouse.ingest import repository
from warehouse.settings import Settings, SettingsError

VENDOR = "attribution_provider_a"


def test_ingest_settings_defaults_and_values(tmp_path: Path) -> None:
    s = Settings.from_env({"FLOKIT_DATA_DIR": str(tmp_path)})
    assert (s.trusted_proxies, s.sensor_interval_s) == (0, 5)
    s = Settings.from_env(
        {"FLOKIT_DATA_DIR": str(tmp_path), "FLOKIT_TRUSTED_PROXIES": "2", "FLOKIT_SENSOR_INTERVAL_S": "30"}
    )
    assert (s.trusted_proxies, s.sensor_interval_s) == (2, 30)
    assert Settings.from_env(s.child_env()) == s
    for name, bad in [
        ("FLOKIT_TRUSTED_PROXIES", "-1"),
        ("FLOKIT_TRUSTED_PROXIES", "many"),
        ("FLOKIT_SENSOR_INTERVAL_S", "0"),
    ]:
        with pytest.raises(SettingsError, match=name):
            Settings.from_env({"FLOKIT_DATA_DIR": str(tmp_path), name: bad})


def test_repository_refuses_bad_configuration(db: Database, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    with db.write() as conn:
        with pytest.raises(InvalidIngestConfig, match="unknown event type"):
            repository.set_mapping(conn, workspace_id=ws, vendor=VENDOR, token="t", event_type="signup")
        with pytest.raises(InvalidIngestConfig, match="unknown vendor"):
            repository.set_mapping(conn, workspace_id=ws, vendor="other", token="t", event_type="install")
        with pytest.raises(InvalidIngestConfig, match="not a CIDR"):
            repository.allow(conn, vendor=VENDOR, cidr="10.0.0.0/33")
        assert repository.allow(conn, vendor=VENDOR, cidr="10.1.2.3/8") == "10.0.0.0/8"
        assert repository.allow(conn, vendor=VENDOR, cidr="10.0.0.0/8") == "10.0.0.0/8"  # idempotent
        repository.set_mapping(conn, workspace_id=ws, vendor=VENDOR, token="t", event_type="renewal")
        repository.set_mapping(conn, workspace_id=ws, vendor=VENDOR, token="t", event_type="refund")  # replaces
    with db.read() as conn:
        assert repository.allowlist(conn, vendor=VENDOR) == ["10.0.0.0/8"]
        assert repository.mappings(conn, workspace_id=ws, vendor=VENDOR) == {
            "activity_kind:install": "install",
            "t": "refund",
        }


def test_secrets_are_stored_hashed(db: Database, workspace: dict) -> None:
    import sqlalchemy as sa

    from warehouse.ingest.tables import ingest_credentials

    with db.read() as conn:
        stored = conn.execute(sa.select(ingest_credentials.c.secret_hash)).scalar_one()
    assert stored == repository.hash_secret(workspace["ingest_secret"]) and workspace["ingest_secret"] not in stored
