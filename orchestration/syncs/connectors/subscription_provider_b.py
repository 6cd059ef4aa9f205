"""`subscription_provider_b` (Adapty): its daily event export, read from the customer's bucket.

Adapty has no API that lists raw transactions (design/integrations.md §1.3); its S3 integration
writes the events as CSV files into a folder of the customer's bucket, each day at 04:00 UTC
with the previous UTC day's events, plus the files a customer exports by hand for a date range.
The customer gives FloKit a key that may list and read that folder (the same bucket Adapty
writes to; Adapty's own policy grants `s3:ListBucket` and `s3:*Object`).

A sync lists the folder (ListObjectsV2, `ContinuationToken` paging) and reads only the files it
has not read in that version: `target.state["files"]` maps each key to the ETag it was read at,
so syncing again changes nothing, and a file Adapty delivers again with new content (new ETag)
is read again, landing keeping one copy of each event (ids `adapty:<transaction>:<type>`). The
first sync reads every file in the folder, i.e. the whole history Adapty has delivered. A manual
export older than the 30-day dedup window is held off by the target's high-water mark.

The export folder's client: `clients.subscription_provider_b`; retries and S3's errors: `clients/s3.py` (the
shared RetryRules, 5 attempts from 1 s).
"""

from __future__ import annotations

from typing import TypeVar

from clients.subscription_provider_b import AdaptyExportClient
from orchestration.syncs.connectors import Connector, Log
from transforms.client_errors import error_for
from transforms.integrations.kinds import ValidConfig
from transforms.integrations.subscription_provider_b import ExportProblem, map_rows, read_export
from warehouse.integrations.target import SyncTarget

TYPE = "subscription_provider_b"
_FILES = "files"  # state key: {object key: ETag it was read at}
T = TypeVar("T")


def client(config: ValidConfig) -> AdaptyExportClient:
    """The client of one integration. Adapty lets a customer type nested folders into its
    "S3 bucket name" field (`adapty-events/com.sample-app`, its docs' example), so a bucket
    copied from there is split into the bucket and the folders before `prefix`."""
    bucket, _, nested = str(config.get("bucket")).partition("/")
    prefix = "/".join(part for part in (nested.strip("/"), str(config.get("prefix") or "").strip("/")) if part)
    return AdaptyExportClient(
        base_url=config.get("base_url"),
        bucket=bucket,
        prefix=prefix,
        region=config.get("region") or "us-east-1",
        access_key_id=config.get("access_key_id"),
        secret_access_key=config.get("secret_access_key"),
    )


def check(export: AdaptyExportClient) -> str:
    page = export.first_page(lambda _line: None)
    contents = page.get("Contents", [])
    if not contents:
        return f"{export.location}: listing allowed; no files yet (Adapty delivers each day at 04:00 UTC)"
    first = contents[0]
    more = " and more" if page.get("IsTruncated") else ""
    return f"{export.location}: listing allowed; files present (first: {first['Key']}{more})"


def sync(export: AdaptyExportClient, target: SyncTarget, config: ValidConfig, log: Log) -> None:
    """Read the files not read yet (or changed since) and land their events.

    A file that cannot be read as an export does not stop the others: every readable file is
    landed, then the sync fails with `bad_response` naming the unreadable ones (the next sync
    tries them again; the operator sees which file to look at)."""

    def land(_key: str, data: bytes) -> str:
        parsed = read_export(data)
        if parsed.kind == "paywall_visits":
            return "holds paywall visits, not events; skipped"
        mapped = map_rows(parsed.rows, workspace_id=target.workspace_id, source=target.source, received_at=target.now)
        landed = target.land_events(mapped.events)
        reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(mapped.skipped.items()))
        return f"{len(parsed.rows)} row(s), {len(mapped.events)} event(s), {landed} new" + (
            f"; left out: {reasons}" if reasons else ""
        )

    read_as, broken = export.import_changed(
        dict(target.state.get(_FILES, {})),
        wanted=lambda key: key.lower().endswith(".csv"),
        kind="CSV file",
        land=land,
        unreadable=ExportProblem,
        log=log,
    )
    target.state[_FILES] = read_as
    if broken:
        raise error_for(
            "bad_response", f"{len(broken)} unreadable Adapty export file(s) in {export.location}: " + "; ".join(broken)
        )


CONNECTOR = Connector(type=TYPE, client=client, check=check, sync=sync)
