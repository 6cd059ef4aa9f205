"""The integration and sync state machines (ARCHITECTURE, "Decisions": integration status).

An integration is `connected` once credentials are saved; a sync makes it `syncing`; it ends
`connected`, or `error` when the provider refused the credentials or the config. A transient
failure (rate limit, 5xx, timeout) is the sync's failure, not the integration's: the status goes
back to what it was. `disconnected` erases the credentials; connecting again starts over.
"""

from __future__ import annotations

from typing import Literal

IntegrationStatus = Literal["connected", "error", "syncing", "disconnected"]
INTEGRATION_STATUSES: tuple[IntegrationStatus, ...] = ("connected", "error", "syncing", "disconnected")
SyncStatus = Literal["queued", "running", "succeeded", "failed"]
SYNC_STATUSES: tuple[SyncStatus, ...] = ("queued", "running", "succeeded", "failed")
ACTIVE_SYNC_STATUSES: tuple[SyncStatus, ...] = ("queued", "running")
SyncTrigger = Literal["manual", "scheduled"]


def after_sync(*, refused: bool | None, had_error: bool) -> IntegrationStatus:
    """The status an integration takes when its sync ends: `refused` None for a success, True
    when the provider refused credentials/config, False for a transient failure (the status it
    had before: `error` stays until a sync succeeds)."""
    if refused is None:
        return "connected"
    if refused or had_error:
        return "error"
    return "connected"
