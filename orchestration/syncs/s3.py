"""The Dagster side of the S3 connectors: resources holding a bucket's config that build a
`clients.s3` client and read through it (the Adapty event export, RevenueCat's Scheduled Data
Exports, the warehouse export).

What S3 answers and how it is retried is `clients.s3`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar, TypeVar

from botocore.exceptions import ClientError  # type: ignore[import-untyped]
from pydantic import PrivateAttr

from clients.http import RetryRules
from clients.s3 import ExportObject, call, error_code, listing, s3_client
from orchestration.syncs.http import ProviderClient

T = TypeVar("T")


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
