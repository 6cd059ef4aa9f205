"""subscription_provider_b, warehouse and RevenueCat's exports: Amazon S3 (and S3-compatible stores), through boto3.

For every connector that reads or writes the customer's object storage (the Adapty event
export, the warehouse export): one client recipe, one retry loop, one reading of S3's errors.

Retries: botocore's own are off (`total_max_attempts=1`) and `call` retries by the
shared `RetryRules` instead: `SlowDown`, 5xx answers, timeouts and dropped connections are
retried with exponential backoff (S3 sends no `Retry-After`; AWS asks for backoff), each wait
logged. botocore's standard mode would wait a random, unlogged time that a test cannot keep short.

Errors are read by S3's error code (https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html):
refused credentials are `auth` with S3's own message, a missing, misnamed or misplaced bucket
`config`, throttling `rate_limited`, 5xx and the network `provider_error`, and an endpoint that
does not answer as S3 does (a proxy's page would read as an empty listing) `bad_response`.
"""

from __future__ import annotations

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

from clients.http import ProviderClient, RetryRules
from transforms.integrations.errors import MAX_PROVIDER_TEXT, ErrorCode, SyncFailure, code_for_status, truncate

AWS_S3 = "https://s3.amazonaws.com"  # the S3 kinds' default base_url: boto picks the region's endpoint
# The credentials: the key is unknown, the secret wrong, the key may not list, read or write, or
# the temporary token is bad.
AUTH_CODES = frozenset(
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
CONFIG_CODES = frozenset(
    {
        "NoSuchBucket",
        "InvalidBucketName",
        "PermanentRedirect",
        "AuthorizationHeaderMalformed",
        "IllegalLocationConstraintException",
    }
)
THROTTLE_CODES = frozenset({"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests"})
# Transient although S3 may answer them with a 4xx status (RequestTimeout is a 400).
TRANSIENT_CODES = frozenset({"RequestTimeout", "RequestTimeoutException", "InternalError", "ServiceUnavailable"})
RETRY_CODES = THROTTLE_CODES | TRANSIENT_CODES
# Connection refused or reset, DNS, TLS, proxy, timeouts, a body cut short: the network's fault.
NETWORK_ERRORS = (BotoConnectionError, HTTPClientError, IncompleteReadError)

T = TypeVar("T")


def s3_client(
    *,
    base_url: str,
    region: str,
    access_key_id: str,
    secret_access_key: str,
    connect_timeout_s: float,
    read_timeout_s: float,
) -> Any:
    """A boto3 S3 client for one integration. Off AWS, path-style addresses: S3-compatible stores
    (MinIO, Ceph, R2 behind a custom host) rarely have the wildcard DNS virtual-hosted buckets need."""
    on_aws = base_url.rstrip("/") == AWS_S3 or base_url.rstrip("/").endswith("amazonaws.com")
    session = boto3.session.Session(
        aws_access_key_id=access_key_id, aws_secret_access_key=secret_access_key, region_name=region
    )
    return session.client(
        "s3",
        endpoint_url=None if base_url.rstrip("/") == AWS_S3 else base_url,
        config=Config(
            retries={"total_max_attempts": 1, "mode": "standard"},
            connect_timeout=connect_timeout_s,
            read_timeout=read_timeout_s,
            signature_version="s3v4",
            s3={"addressing_style": "auto" if on_aws else "path"},
            user_agent_extra="FloKit-sync/1",
        ),
    )


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def http_status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


def error_message(exc: ClientError) -> str:
    """S3's `<Message>`, short; else only the status (the error text could quote another answer)."""
    message = str(exc.response.get("Error", {}).get("Message", ""))
    return truncate(message, MAX_PROVIDER_TEXT) if message else f"HTTP {http_status(exc)} {error_code(exc)}".strip()


def failure(exc: ClientError, what: str, attempts: int = 1) -> SyncFailure:
    """An S3 refusal in the sync vocabulary, with S3's own code and message."""
    code, status = error_code(exc), http_status(exc)
    kind: ErrorCode
    if code in THROTTLE_CODES or status == 429:
        kind = "rate_limited"
    elif code in TRANSIENT_CODES or status >= 500:
        kind = "provider_error"
    elif code in AUTH_CODES or status in (401, 403):
        kind = "auth"
    elif code in CONFIG_CODES or status in (301, 400, 404):
        kind = "config"
    else:
        kind = code_for_status(status) if status else "provider_error"
    tries = f", after {attempts} attempts" if attempts > 1 else ""
    return SyncFailure(
        kind, f"{what}: {code or 'S3 error'}: {error_message(exc)} (HTTP {status}{tries})", status=status
    )


def call(
    what: str,
    fn: Callable[[], T],
    *,
    rules: RetryRules,
    log: Callable[[str], None],
    provider: str,
    sleep: Callable[[float], None] | None = None,
) -> T:
    """`fn` (one S3 call) with retries by `rules`; a failure it cannot retry, or the last one,
    becomes a `SyncFailure` carrying S3's own code and message."""
    wait = 0.0
    for attempt in range(1, rules.attempts + 1):
        if wait:
            log(f"{provider}: waiting {wait:.2f} s before retrying {what} (attempt {attempt})")
            (sleep or rules.sleep)(wait)
        last = attempt == rules.attempts
        try:
            return fn()
        except ClientError as exc:
            code, status = error_code(exc), http_status(exc)
            if not (code in RETRY_CODES or status >= 500 or status == 429) or last:
                raise failure(exc, what, attempt) from exc
            log(f"{provider}: {what}: S3 {code or status}: {error_message(exc)}")
        except NETWORK_ERRORS as exc:
            if last:
                raise SyncFailure("provider_error", f"{what}: {type(exc).__name__}: {exc}") from exc
            log(f"{provider}: {what}: {type(exc).__name__}: {exc}")
        except ParamValidationError as exc:  # e.g. a bucket name S3 could never accept
            raise SyncFailure("config", f"{what}: {exc}") from exc
        except ResponseParserError as exc:  # the endpoint is not S3 (a proxy's page, ...)
            raise SyncFailure("bad_response", f"{what}: the answer is not S3's (is base_url an S3 endpoint?)") from exc
        except BotoCoreError as exc:
            raise SyncFailure("provider_error", f"{what}: {type(exc).__name__}: {exc}") from exc
        wait = rules.backoff(attempt)
    raise AssertionError("unreachable: the last attempt returns or raises")


@dataclass(frozen=True)
class ExportObject:
    key: str
    etag: str
    size: int


def listing(page: dict[str, Any], what: str) -> dict[str, Any]:
    """A ListObjectsV2 answer always names its bucket and says whether it is truncated; a 200
    page without them came from something else at that address (botocore parses any XML, or
    HTML, into an empty listing, which would sync nothing and look fine)."""
    if "Name" not in page or "IsTruncated" not in page:
        raise SyncFailure("bad_response", f"{what}: the answer is not an S3 listing (is base_url an S3 endpoint?)")
    return page


class S3ProviderClient(ProviderClient):
    """A provider client whose provider is a bucket (and a prefix in it) of the customer's
    S3-compatible storage: the fields every S3 kind's config has, one boto3 client built on first
    use, and `call` with the shared retries and error reading."""

    SECRET_FIELDS: ClassVar[frozenset[str]] = frozenset({"access_key_id", "secret_access_key"})

    bucket: str
    prefix: str = ""
    region: str = "us-east-1"
    access_key_id: str
    secret_access_key: str
    retry_attempts: int = 5
    retry_backoff_s: float = 1.0
    _s3: Any = PrivateAttr(default=None)

    def rules(self) -> RetryRules:
        return RetryRules(attempts=self.retry_attempts, backoff_s=self.retry_backoff_s)

    def s3(self) -> Any:
        if self._s3 is None:
            self._s3 = s3_client(
                base_url=self.base_url,
                region=self.region,
                access_key_id=self.access_key_id,
                secret_access_key=self.secret_access_key,
                connect_timeout_s=self.connect_timeout_s,
                read_timeout_s=self.read_timeout_s,
            )
        return self._s3

    def call(self, what: str, fn: Callable[[], T], log: Callable[[str], None] = lambda _line: None) -> T:
        return call(what, fn, rules=self.rules(), log=log, provider=self.PROVIDER)


class S3ExportFolder(S3ProviderClient):
    """A folder of the customer's bucket that a provider delivers export files to (Adapty's event
    export, RevenueCat's Scheduled Data Exports): listed whole, each file read with the ETag of
    the version read, so a connector reads only what is new or changed since its last sync."""

    # S3 returns at most 1000 keys a page; tests page with less.
    page_size: int = 1000

    @property
    def folder(self) -> str:
        """The prefix as a folder (Adapty's "Folder inside the bucket"): `a/b` lists `a/b/...`,
        not a sibling `a/b-old/...`; empty lists the whole bucket."""
        stripped = self.prefix.strip("/")
        return f"{stripped}/" if stripped else ""

    @property
    def location(self) -> str:
        return f"s3://{self.bucket}/{self.folder}"

    def first_page(self, log: Callable[[str], None]) -> dict[str, Any]:
        """One ListObjectsV2 of at most one key: proves the key may list the folder."""
        what = f"listing {self.location}"
        page: dict[str, Any] = self.call(
            what, lambda: self.s3().list_objects_v2(Bucket=self.bucket, Prefix=self.folder, MaxKeys=1), log
        )
        return listing(page, what)

    def list_files(self, log: Callable[[str], None]) -> list[ExportObject]:
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
            page = listing(self.call(what, partial(self.s3().list_objects_v2, **params), log), what)
            for item in page.get("Contents", []):
                found.append(ExportObject(key=item["Key"], etag=item.get("ETag", ""), size=int(item.get("Size", 0))))
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return found

    def read(self, key: str, log: Callable[[str], None]) -> tuple[bytes, str] | None:
        """The object's bytes and the ETag of the version read; None when it vanished since the
        listing (`NoSuchKey`: a customer's lifecycle rule or cleanup)."""

        def get() -> tuple[bytes, str] | None:
            try:
                answer = self.s3().get_object(Bucket=self.bucket, Key=key)
            except ClientError as exc:
                if error_code(exc) == "NoSuchKey":
                    return None
                raise
            body: bytes = answer["Body"].read()
            return body, str(answer.get("ETag", ""))

        return self.call(f"reading s3://{self.bucket}/{key}", get, log)

    def import_changed(
        self,
        read_as: dict[str, str],
        *,
        wanted: Callable[[str], bool],
        kind: str,
        land: Callable[[str, bytes], str],
        unreadable: type[Exception],
        log: Callable[[str], None],
    ) -> tuple[dict[str, str], list[str]]:
        """Read and `land` every wanted file not read yet, or changed since (`read_as`: each key
        and the ETag it was read at). Returns the new `read_as` (keys gone from the bucket pruned)
        and the files that could not be read (`unreadable` raised by `land`): every readable file
        is landed first, and the unreadable ones are tried again next time."""
        listed = self.list_files(log)
        seen = dict(read_as)
        files = [o for o in listed if not o.key.endswith("/") and wanted(o.key)]
        todo = sorted((o for o in files if seen.get(o.key) != o.etag), key=lambda o: o.key)
        log(
            f"{self.PROVIDER}: {self.location}: {len(listed)} object(s), {len(files)} {kind}(s), "
            f"{len(todo)} new or changed ({sum(o.size for o in todo) / 1e6:.1f} MB)"
        )
        broken: list[str] = []
        for obj in todo:
            got = self.read(obj.key, log)
            if got is None:
                log(f"{self.PROVIDER}: {obj.key} was deleted after the listing; skipped")
                continue
            data, etag = got
            try:
                detail = land(obj.key, data)
            except unreadable as exc:
                broken.append(f"{obj.key}: {exc}")
                continue
            log(f"{self.PROVIDER}: {obj.key}: {detail}")
            seen[obj.key] = etag or obj.etag
        present = {o.key for o in files}
        return {key: etag for key, etag in sorted(seen.items()) if key in present}, broken
