"""The systemd units in deploy/systemd start real `flokit serve` commands, and the environment file
they read holds settings FloKit accepts: what an operator copies works as shipped."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests.support.cli import flokit_in_process
from warehouse.settings import Settings

SYSTEMD = Path(__file__).resolve().parents[1] / "deploy" / "systemd"
UNITS = sorted(SYSTEMD.glob("*.service"))


def test_every_role_has_a_unit() -> None:
    assert [u.name for u in UNITS] == [
        "flokit-api.service",
        "flokit-daemon.service",
        "flokit-webserver.service",
        "flokit-worker@.service",
    ]


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_a_units_command_is_a_flokit_serve_command(unit: Path) -> None:
    (line,) = [line for line in unit.read_text().splitlines() if line.startswith("ExecStart=")]
    argv = shlex.split(line.removeprefix("ExecStart=").replace("%i", "w1"))
    assert argv[0] == "/opt/flokit/.venv/bin/flokit" and argv[1] == "serve"
    done = flokit_in_process({}, *argv[1:], "--help")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_environment_file_is_settings_flokit_accepts(tmp_path: Path) -> None:
    env = {}
    for line in (SYSTEMD / "flokit.env.example").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, value = line.partition("=")
            env[name] = value
    env["FLOKIT_DATA_DIR"] = str(tmp_path)  # /var/lib/flokit on a host
    settings = Settings.from_env(env)
    assert settings.lake_url == "s3://flokit-lake/prod"
    assert settings.run_launcher == "celery" and settings.celery is not None
    assert settings.dagster_database_url is not None
