"""The canonical event id scheme the store mappings share: `<prefix>:<raw id>:<type>`.

A webhook, a receipt and a sync that read the same fact must land it once, so the id is a pure
function of the store's own id; kept in one place so no mapping drifts from the others (an id
that changed shape would land every fact again). The lake's `event_id` column holds 80
characters (`warehouse/events/tables.py`); a longer raw id is replaced by its SHA-256 digest.
"""

from __future__ import annotations

import hashlib

MAX_EVENT_ID = 80


def event_id(prefix: str, raw: str, event_type: str) -> str:
    full = f"{prefix}:{raw}:{event_type}"
    if len(full) <= MAX_EVENT_ID:
        return full
    return f"{prefix}:{hashlib.sha256(raw.encode('utf-8')).hexdigest()[:40]}:{event_type}"
