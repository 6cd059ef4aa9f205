"""Event envelopes and their frozen bytes.

The envelope is `{id, type, created_at, workspace_id, data}` (plus `"test": true` for samples
sent by POST /v1/webhooks/test). It is serialized exactly once, at emission; those bytes are
stored and sent unchanged on every retry, so the signature always covers what was first frozen
(spec: "Body and event id are identical across retries"). The `data` of each type, and the samples
POST /v1/webhooks/test sends, are declared in `transforms.webhooks.payloads`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from transforms.timefmt import iso_z

EVENT_TYPES: tuple[str, ...] = (
    "action.created",
    "action.approved",
    "action.rolled_back",
    "guardrail.triggered",
    "report.payback_updated",
    "integration.error",
    "experiment.started",
    "experiment.stopped",
    "experiment.srm_detected",
)


class UnknownEventType(ValueError):
    """The event type is not one of EVENT_TYPES."""


def check_event_type(event_type: str) -> str:
    if event_type not in EVENT_TYPES:
        raise UnknownEventType(f"unknown event type {event_type!r}; expected one of {', '.join(EVENT_TYPES)}")
    return event_type


def envelope(
    *,
    event_id: str,
    event_type: str,
    created_at: datetime,
    workspace_id: str,
    data: Mapping[str, object],
    test: bool = False,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": event_id,
        "type": check_event_type(event_type),
        "created_at": iso_z(created_at),
        "workspace_id": workspace_id,
        "data": data,
    }
    if test:
        body["test"] = True
    return body


def freeze(body: dict[str, Any]) -> bytes:
    """The exact bytes to store, sign and send: compact UTF-8 JSON, key order as built.

    `allow_nan=False` because NaN/Infinity are not JSON and would break strict receivers."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
