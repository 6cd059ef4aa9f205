"""Adapty (subscription_provider_b): its daily event export, read from the customer's bucket.

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

Retries: botocore's own retries are off (`total_max_attempts=1`) and this client retries by the
shared `RetryRules` instead: S3's `SlowDown`, 5xx answers, timeouts and dropped connections are
retried with exponential backoff (1 s doubling, at most 30 s, 5 attempts; S3 sends no
`Retry-After`, AWS asks for backoff), every wait logged; botocore's standard mode would wait a
random, unlogged time that a test cannot keep short.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, TypeVar

import boto3  # type: ignore[import-untyped]
from botocore.config import Config  # type: ignore[import-untyped]
from botocore.exceptions import (  # type: ignore[import-untyped]
    BotoCoreError,
    ClientError,
    HTTPClientError,
    IncompleteReadError,
    ParamValidationError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError
from botocore.parsers import ResponseParserError  # type: ignore[import-untyped]
from pydantic import PrivateAttr

from orchestration.syncs.connectors import Connector, Log
from orchestration.syncs.http import ProviderClient, RetryRules
from transforms.integrations.errors import ErrorCode, SyncFailure, code_for_status, truncate
from transforms.integrations.kinds import KINDS, ValidConfig
from transforms.integrations.subscription_provider_b import ExportProblem, map_rows, read_export
from warehouse.integrations.target import SyncTarget

TYPE = "subscription_provider_b"
_FILES = "files"  # state key: {object key: ETag it was read at}
_AWS_DEFAULT = KINDS[TYPE].default_base_url

# S3 error codes (https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html) by what
# they mean for the integration. The credentials: the key is unknown, the secret wrong, the key
# may not list or read, or the temporary token is bad.
_AUTH_CODES = frozenset(
    {
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "TokenRefreshRequired",
        "AllAccessDisabled",
        "AccountProblem",
    }
)
# The configuration: no such bucket, a name S3 refuses, or the bucket lives in another region
# than the config says (S3 names the right one in the message).
_CONFIG_CODES = frozenset(
    {
        "NoSuchBucket",
        "InvalidBucketName",
        "PermanentRedirect",
        "AuthorizationHeaderMalformed",
        "IllegalLocationConstraintException",
    }
)
_THROTTLED = frozenset({"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests"})
_RETRY_CODES = _THROTTLED | frozenset({"RequestTimeout", "InternalError", "ServiceUnavailable"})
# Connection refused or reset, DNS, TLS, proxy, timeouts, a body cut short: the network's fault.
_NETWORK = (BotoConnectionError, HTTPClientError, IncompleteReadError)

T = TypeVar("T")


@dataclass(frozen=True)
class ExportObject:
    key: str
    etag: str
    size: int


class AdaptyExportClient(ProviderClient):
    """The bucket folder Adapty exports to. `base_url` is the S3 endpoint (the AWS default lets
    boto pick the region's endpoint; anything else, e.g. MinIO or R2, is used as given)."""

    PROVIDER: ClassVar[str] = "Adapty S3 export"
    SECRET_FIELDS: ClassVar[frozenset[str]] = frozenset({"access_key_id", "secret_access_key"})

    bucket: str
    prefix: str = ""
    region: str = "us-east-1"
    access_key_id: str
    secret_access_key: str
    # S3 returns at most 1000 keys a page; tests page with less.
    page_size: int = 1000
    retry_attempts: int = 5
    retry_backoff_s: float = 1.0
    _s3: Any = PrivateAttr(default=None)

    def rules(self) -> RetryRules:
        return RetryRules(attempts=self.retry_attempts, backoff_s=self.retry_backoff_s)

    @property
    def folder(self) -> str:
        """The prefix as a folder (Adapty's "Folder inside the bucket"): `a/b` lists `a/b/...`,
        not a sibling `a/b-old/...`; empty lists the whole bucket."""
        stripped = self.prefix.strip("/")
        return f"{stripped}/" if stripped else ""

    @property
    def location(self) -> str:
        return f"s3://{self.bucket}/{self.folder}"

    def s3(self) -> Any:
        if self._s3 is None:
            session = boto3.session.Session(
                aws_access_key_id=self.access_key_id,
                aws_secret_access_key=self.secret_access_key,
                region_name=self.region,
            )
            self._s3 = session.client(
                "s3",
                endpoint_url=None if self.base_url.rstrip("/") == _AWS_DEFAULT else self.base_url,
                config=Config(
                    retries={"total_max_attempts": 1, "mode": "standard"},
                    connect_timeout=self.connect_timeout_s,
                    read_timeout=self.read_timeout_s,
                    signature_version="s3v4",
                    user_agent_extra="FloKit-sync/1",
                ),
            )
        return self._s3

    def first_page(self, log: Log) -> dict[str, Any]:
        """One ListObjectsV2 of at most one key: proves the key may list the folder."""
        what = f"listing {self.location}"
        page: dict[str, Any] = self.call(
            what, lambda: self.s3().list_objects_v2(Bucket=self.bucket, Prefix=self.folder, MaxKeys=1), log
        )
        return _listing(page, what)

    def list_files(self, log: Log) -> list[ExportObject]:
        """Every object under the folder, following `NextContinuationToken` to the last page."""
        found: list[ExportObject] = []
        token: str | None = None
        pages = 0
        while True:
            params: dict[str, Any] = {"Bucket": self.bucket, "Prefix": self.folder, "MaxKeys": self.page_size}
            if token:
                params["ContinuationToken"] = token
            pages += 1
            what = f"listing {self.location} (page {pages})"
            page = _listing(self.call(what, partial(self.s3().list_objects_v2, **params), log), what)
            for item in page.get("Contents", []):
                found.append(ExportObject(key=item["Key"], etag=item.get("ETag", ""), size=int(item.get("Size", 0))))
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return found

    def read(self, key: str, log: Log) -> tuple[bytes, str] | None:
        """The object's bytes and the ETag of the version read; None when it vanished since the
        listing (`NoSuchKey`: a customer's lifecycle rule or cleanup)."""

        def get() -> tuple[bytes, str] | None:
            try:
                answer = self.s3().get_object(Bucket=self.bucket, Key=key)
            except ClientError as exc:
                if _code(exc) == "NoSuchKey":
                    return None
                raise
            body: bytes = answer["Body"].read()
            return body, str(answer.get("ETag", ""))

        return self.call(f"reading s3://{self.bucket}/{key}", get, log)

    def call(self, what: str, fn: Callable[[], T], log: Log) -> T:
        """`fn` with retries by `rules()`; a failure it cannot retry, or the last one, becomes a
        `SyncFailure` carrying S3's own code and message."""
        rules = self.rules()
        wait = 0.0
        for attempt in range(1, rules.attempts + 1):
            if wait:
                log(f"{self.PROVIDER}: waiting {wait:.2f} s before retrying {what} (attempt {attempt})")
                time.sleep(wait)
            last = attempt == rules.attempts
            try:
                return fn()
            except ClientError as exc:
                code, status = _code(exc), _status(exc)
                retryable = code in _RETRY_CODES or status >= 500
                if not retryable or last:
                    raise _failure(exc, what, attempt) from exc
                log(f"{self.PROVIDER}: {what}: S3 {code or status}: {_message(exc)}")
            except _NETWORK as exc:
                if last:
                    raise SyncFailure("provider_error", f"{what}: {type(exc).__name__}: {exc}") from exc
                log(f"{self.PROVIDER}: {what}: {type(exc).__name__}: {exc}")
            except ParamValidationError as exc:  # e.g. a bucket name S3 could never accept
                raise SyncFailure("config", f"{what}: {exc}") from exc
            except ResponseParserError as exc:  # the endpoint is not S3 (a proxy's page, ...)
                raise SyncFailure("bad_response", f"{what}: the answer is not S3's: {truncate(str(exc), 300)}") from exc
            except BotoCoreError as exc:
                raise SyncFailure("provider_error", f"{what}: {type(exc).__name__}: {exc}") from exc
            wait = float(min(rules.backoff_s * 2 ** (attempt - 1), rules.max_backoff_s))
        raise AssertionError("unreachable: the last attempt returns or raises")


def _listing(page: dict[str, Any], what: str) -> dict[str, Any]:
    """A ListObjectsV2 answer always names its bucket and says whether it is truncated; a 200
    page without them came from something else at that address (botocore parses any XML, or
    HTML, into an empty listing, which would sync nothing and look fine)."""
    if "Name" not in page or "IsTruncated" not in page:
        raise SyncFailure("bad_response", f"{what}: the answer is not an S3 listing (is base_url an S3 endpoint?)")
    return page


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


def _message(exc: ClientError) -> str:
    return truncate(str(exc.response.get("Error", {}).get("Message", "")) or str(exc))


def _failure(exc: ClientError, what: str, attempts: int) -> SyncFailure:
    code, status = _code(exc), _status(exc)
    error: ErrorCode
    if code in _AUTH_CODES:
        error = "auth"
    elif code in _CONFIG_CODES:
        error = "config"
    elif code in _THROTTLED:
        error = "rate_limited"
    elif status:
        error = code_for_status(status)
    else:
        error = "provider_error"
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    return SyncFailure(error, f"{what}: S3 {code or 'error'} (HTTP {status}){tries}: {_message(exc)}", status=status)


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
    listed = export.list_files(log)
    seen: dict[str, str] = dict(target.state.get(_FILES, {}))
    files = [o for o in listed if not o.key.endswith("/") and o.key.lower().endswith(".csv")]
    todo = sorted((o for o in files if seen.get(o.key) != o.etag), key=lambda o: o.key)
    log(
        f"{export.PROVIDER}: {export.location}: {len(listed)} object(s), {len(files)} CSV file(s), "
        f"{len(todo)} new or changed ({sum(o.size for o in todo) / 1e6:.1f} MB)"
    )
    broken: list[str] = []
    for obj in todo:
        got = export.read(obj.key, log)
        if got is None:
            log(f"{export.PROVIDER}: {obj.key} was deleted after the listing; skipped")
            continue
        data, etag = got
        try:
            parsed = read_export(data)
        except ExportProblem as exc:
            broken.append(f"{obj.key}: {exc}")
            continue
        if parsed.kind == "paywall_visits":
            log(f"{export.PROVIDER}: {obj.key} holds paywall visits, not events; skipped")
        else:
            mapped = map_rows(
                parsed.rows, workspace_id=target.workspace_id, source=target.source, received_at=target.now
            )
            landed = target.land_events(mapped.events)
            reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(mapped.skipped.items()))
            log(
                f"{export.PROVIDER}: {obj.key}: {len(parsed.rows)} row(s), {len(mapped.events)} event(s), "
                f"{landed} new" + (f"; left out: {reasons}" if reasons else "")
            )
        seen[obj.key] = etag or obj.etag
    present = {o.key for o in files}
    target.state[_FILES] = {key: etag for key, etag in sorted(seen.items()) if key in present}
    if broken:
        raise SyncFailure(
            "bad_response", f"{len(broken)} unreadable Adapty export file(s) in {export.location}: " + "; ".join(broken)
        )


CONNECTOR = Connector(type=TYPE, client=client, check=check, sync=sync)
