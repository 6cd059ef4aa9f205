"""The vocabulary of an ad account's "sync now" request (`ad_account_sync_requests`).

`pending` (the dashboard asked) -> `running` (a Dagster run took it) -> `succeeded` or `failed`.
`pending` and `running` are the open statuses: at most one open request per account, so a second
click while one is open is answered with that one.
"""

from __future__ import annotations

from typing import Final

SYNC_REQUEST_STATUSES: Final = ("pending", "running", "succeeded", "failed")
OPEN_STATUSES: Final = ("pending", "running")
# The partial unique index's predicate, as the migration (0170) writes it.
OPEN_WHERE: Final = "status IN ('pending', 'running')"
