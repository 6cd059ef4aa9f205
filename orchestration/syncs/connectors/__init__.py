"""The connectors: for each integration type, how to build its client from the stored config,
how to check the credentials with one cheap call, and how to sync.

A connector module `orchestration/syncs/connectors/<type>.py` defines `CONNECTOR`. Its `sync`
pulls from the provider through the client (a `ProviderClient`, `orchestration/syncs/http.py`),
maps the records with pure code in `transforms/integrations/`, and writes only through the
`SyncTarget` it is given; it raises `SyncFailure` for anything the provider refused or could not
answer. Modules are imported on first use: the sync job loads one connector, not all of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from transforms.integrations.errors import SyncFailure
from transforms.integrations.kinds import ValidConfig
from warehouse.integrations.target import SyncTarget

Log = Callable[[str], None]


@dataclass(frozen=True)
class Connector:
    type: str
    # The provider client for one integration, from its validated (unsealed) config.
    client: Callable[[ValidConfig], Any]
    # One cheap authenticated call (`flokit admin integrations connect --check`): a one-line
    # summary of the provider's answer, or `SyncFailure`.
    check: Callable[[Any], str]
    # Pull and write through the target; `SyncFailure` when the provider refused or failed.
    sync: Callable[[Any, SyncTarget, ValidConfig, Log], None]


_MODULES: dict[str, str] = {
    "attribution_provider_a": "orchestration.syncs.connectors.attribution_provider_a",
    "attribution_provider_b": "orchestration.syncs.connectors.attribution_provider_b",
    "subscription_provider_a": "orchestration.syncs.connectors.subscription_provider_a",
    "subscription_provider_b": "orchestration.syncs.connectors.subscription_provider_b",
    "warehouse": "orchestration.syncs.connectors.warehouse",
    "payment_processor": "orchestration.syncs.connectors.payment_processor",
    "ios_store_connect": "orchestration.syncs.connectors.ios_store_connect",
    "android_store": "orchestration.syncs.connectors.android_store",
}
# Types that can be connected before their sync exists (their notifications are processed on
# their own): `--check` and every sync answer this, as a failure the operator can read.
_NOT_BUILT: dict[str, str] = {
    "payment_processor": "the payment processor (Stripe) sync is not built yet; its webhook notifications "
    "are processed without it",
}


def connector_for(integration_type: str) -> Connector:
    """The type's connector; `LookupError` when the type has none (yet), `SyncFailure` for a
    connectable type whose sync is not built yet (a clear refusal where a sync or check runs)."""
    module = _MODULES.get(integration_type)
    if module is None:
        raise LookupError(f"integration type {integration_type!r} has no connector")
    try:
        loaded = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        if integration_type in _NOT_BUILT:
            raise SyncFailure("provider_error", _NOT_BUILT[integration_type]) from None
        raise LookupError(f"integration type {integration_type!r} has no connector yet") from None
    connector: Connector = loaded.CONNECTOR
    return connector
