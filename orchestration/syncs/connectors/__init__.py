"""The connectors: for each integration type, how to build its client from the stored config,
how to check the credentials with one cheap call, and how to sync.

A connector module `orchestration/syncs/connectors/<type>.py` defines `CONNECTOR`. Its `sync`
pulls from the provider through the client (a `ProviderClient`, `clients/http.py`),
maps the records with pure code in `transforms/integrations/`, and writes only through the
`SyncTarget` it is given; it raises `ClientError` for anything the provider refused or could not
answer. Modules are imported on first use: the sync job loads one connector, not all of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from transforms.integrations.kinds import ValidConfig
from warehouse.integrations.target import SyncTarget

Log = Callable[[str], None]


@dataclass(frozen=True)
class Connector:
    type: str
    # The provider client for one integration, from its validated (unsealed) config.
    client: Callable[[ValidConfig], Any]
    # One cheap authenticated call (`flokit admin integrations connect --check`): a one-line
    # summary of the provider's answer, or `ClientError`.
    check: Callable[[Any], str]
    # Pull and write through the target; `ClientError` when the provider refused or failed.
    sync: Callable[[Any, SyncTarget, ValidConfig, Log], None]


_MODULES: dict[str, str] = {
    "attribution_provider_a": "orchestration.syncs.connectors.attribution_provider_a",
    "attribution_provider_b": "orchestration.syncs.connectors.attribution_provider_b",
    "subscription_provider_a": "orchestration.syncs.connectors.subscription_provider_a",
    "subscription_provider_b": "orchestration.syncs.connectors.subscription_provider_b",
    "warehouse": "orchestration.syncs.connectors.warehouse_export",
    "payment_processor": "orchestration.syncs.connectors.payment_processor",
    "ios_store_connect": "orchestration.syncs.connectors.ios_store_connect",
    "android_store": "orchestration.syncs.connectors.android_store",
}


def connector_for(integration_type: str) -> Connector:
    """The type's connector; `LookupError` when the type has none."""
    module = _MODULES.get(integration_type)
    if module is None:
        raise LookupError(f"integration type {integration_type!r} has no connector")
    loaded = importlib.import_module(module)
    connector: Connector = loaded.CONNECTOR
    return connector
