"""`flokit admin integrations connect` refuses a webhook credential too weak to be the only one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from cli.main import main
from warehouse.settings import Settings

KEY = "k" * 43


def connect(settings: Settings, workspace: dict[str, Any], tmp_path: Path, authorization: str) -> Any:
    config = tmp_path / "revenuecat.json"
    config.write_text(json.dumps({"api_key": "sk_rc_0123456789abcdef", "project_id": "proj1a2b3c4d",
                                  "webhook_authorization": authorization, "app_id": workspace["app_id"]}))  # fmt: skip
    args = ["admin", "integrations", "connect", "--workspace", workspace["workspace_id"],
            "--type", "subscription_provider_a", "--config", str(config)]  # fmt: skip
    return CliRunner().invoke(main, args, env=settings.child_env() | {"FLOKIT_SECRET_KEY": KEY})


def test_a_short_webhook_authorization_is_refused_with_the_rule(
    settings: Settings, workspace: dict[str, Any], tmp_path: Path
) -> None:
    refused = connect(settings, workspace, tmp_path, "Bearer s3cret")
    assert refused.exit_code == 1
    assert "invalid config: webhook_authorization: must hold at least 32 characters" in refused.stderr
    assert "openssl rand -hex 24" in refused.stderr
    done = connect(settings, workspace, tmp_path, "Bearer 9c2f4e71a0b83d56e1f7a9c40b2d8e63f5a1")
    assert done.exit_code == 0, done.stderr
    assert done.stdout.startswith("int_")
