"""An integration connected straight through the repository, with an instance key for its sealing."""

from __future__ import annotations

from typing import Any

from transforms.integrations.kinds import validate_config
from warehouse.db import Database
from warehouse.integrations import repository as repo

KEY = "k" * 43  # an instance key for the tests' sealing


ADJUST = {"api_token": "adjust-token-0123456789abcdef", "base_url": "http://127.0.0.1:9"}


def connect(db: Database, workspace_id: str, kind: str = "attribution_provider_a", raw: Any = None) -> str:
    with db.write() as conn:
        return repo.connect(
            conn,
            workspace_id=workspace_id,
            integration_type=kind,
            config=validate_config(kind, raw or ADJUST),
            instance_key=KEY,
            actor="ops@example.com",
        ).id
