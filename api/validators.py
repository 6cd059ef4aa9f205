"""Input checks that more than one route applies, declared once as annotated types.

    class EventBody(BaseModel):
        timestamp: LakeTimestamp = Field(description="...")
        properties: JsonObject = Field(default_factory=dict)

A check raises ValueError; `api.openapi.operation` turns it into a 400 naming the field, in the
surface's error shape.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from transforms.api_events import canonical_json
from transforms.events import LAKE_START, lake_can_hold
from transforms.ids import ID_MAX_LENGTH
from transforms.timefmt import parse_iso8601
from warehouse.db import utcnow

# A JWS in compact serialization (RFC 7515 section 7.1): header, payload and signature, each
# base64url without padding, joined by dots. What the App Store sends as signedTransactionInfo.
_COMPACT_JWS = re.compile(r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$")


def lake_timestamp(value: str) -> str:
    """ISO 8601 (no offset means UTC) within the days the lake holds: accepted but never in the
    lake would be an event lost in silence, so it is refused instead."""
    if not lake_can_hold(parse_iso8601(value), utcnow()):
        raise ValueError(f"must be on or after {LAKE_START.isoformat()} and at most one day ahead of now")
    return value


def json_object(value: dict[str, Any]) -> dict[str, Any]:
    """A JSON object the database's json type stores: no NaN or Infinity."""
    try:
        canonical_json(value)
    except ValueError:
        raise ValueError("must be a JSON object without NaN or Infinity") from None
    return value


def compact_jws(value: str) -> str:
    """Three base64url parts separated by dots, checked before anything is sent upstream."""
    if not _COMPACT_JWS.match(value):
        raise ValueError("must be a JWS: three base64url parts separated by dots")
    return value


LakeTimestamp = Annotated[str, Field(json_schema_extra={"format": "date-time"}), AfterValidator(lake_timestamp)]
JsonObject = Annotated[dict[str, Any], AfterValidator(json_object)]
# The pattern is documented, not enforced by pydantic, so that the refusal says what a JWS is.
CompactJws = Annotated[str, Field(json_schema_extra={"pattern": _COMPACT_JWS.pattern}), AfterValidator(compact_jws)]
# An id in a request (body field or query parameter): at most what the columns hold.
Id = Annotated[str, Field(min_length=1, max_length=ID_MAX_LENGTH)]


def path_id() -> dict[str, Any]:
    """The OpenAPI schema of an id path parameter. The view does not check it: an id no row can
    have (too long, other characters) answers the same 404 as an unknown one."""
    return {"type": "string", "minLength": 1, "maxLength": ID_MAX_LENGTH, "pattern": "^[A-Za-z0-9_]+$"}
