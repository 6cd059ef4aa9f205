"""Object storage (`s3://bucket/prefix`): the few operations the lake and the published files need.

Any S3-compatible store works (AWS S3, GCS interoperability, MinIO, SeaweedFS, R2): the endpoint
and credentials come from the standard AWS variables (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`), read by obstore as the AWS tools read
them. obstore drives Rust's `object_store`, the crate Polars reads `s3://` Parquet with, and it
exposes the conditional PUTs (`If-None-Match: *` to create, `If-Match: <etag>` to replace) the
lake's manifests are committed with (warehouse/object_lake.py); boto3 has them too but is the
clients' tool, kept out of the warehouse by the import contracts (docs/architecture-notes.md).

Every failure to reach the store becomes `StoreUnavailable` with one readable sentence: callers
decide whether that fails a run (a refresh) or keeps the last copy (an API host's reports).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError, NotModifiedError, PreconditionError
from obstore.store import S3Store

if TYPE_CHECKING:
    from obstore.store import ClientConfig, RetryConfig

DEFAULT_REGION = "us-east-1"
# A store that does not answer is retried briefly, then reported: a refresh fails in seconds
# instead of hanging three minutes (object_store's default), and an API host keeps its copy.
_RETRY: RetryConfig = {"max_retries": 3, "retry_timeout": timedelta(seconds=20)}
_CLIENT: ClientConfig = {"connect_timeout": timedelta(seconds=5), "timeout": timedelta(seconds=300)}


class StoreUnavailable(RuntimeError):
    """The object store could not be reached, refused the credentials, or failed the request."""


class ObjectUrlError(ValueError):
    """An `s3://` URL that names no bucket, or another scheme."""


@dataclass(frozen=True)
class ObjectUrl:
    bucket: str
    prefix: str  # no leading or trailing slash; "" for the bucket's root

    @classmethod
    def parse(cls, url: str) -> ObjectUrl:
        parts = urlsplit(url)
        if parts.scheme != "s3" or not parts.netloc or parts.query or parts.fragment:
            raise ObjectUrlError(f"expected s3://bucket/prefix, got {url!r}")
        return cls(parts.netloc, parts.path.strip("/"))

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")


@dataclass(frozen=True)
class Blob:
    data: bytes
    etag: str


_CREDENTIALS = (
    ("AWS_ACCESS_KEY_ID", "access_key_id"),
    ("AWS_SECRET_ACCESS_KEY", "secret_access_key"),
    ("AWS_SESSION_TOKEN", "session_token"),
)


def _region(env: Mapping[str, str]) -> str:
    return env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or DEFAULT_REGION


def _endpoint(env: Mapping[str, str]) -> str | None:
    return env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None


class ObjectStore:
    """A bucket and a key prefix: keys given to the methods are relative to the prefix."""

    def __init__(self, url: str, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self.location = ObjectUrl.parse(url)
        self.endpoint = _endpoint(env)
        self.region = _region(env)
        config: dict[str, Any] = {"region": self.region}
        if self.endpoint:
            config["endpoint"] = self.endpoint
        # Named, not left to obstore's own look at os.environ: a store built for another `env`
        # (a test, a host's settings) must not borrow this process's credentials, or miss its own.
        for variable, key in _CREDENTIALS:
            if env.get(variable):
                config[key] = env[variable]
        client: ClientConfig = dict(_CLIENT)  # type: ignore[assignment]
        if self.endpoint and self.endpoint.startswith("http://"):
            client["allow_http"] = True  # a store on a private network or 127.0.0.1
        self._store = S3Store(
            self.location.bucket,
            prefix=self.location.prefix or None,
            config=config,  # type: ignore[arg-type]
            client_options=client,
            retry_config=_RETRY,
        )
        self._env = env

    def __str__(self) -> str:
        return str(self.location)

    def url(self, key: str) -> str:
        """The object's `s3://` URL, as Polars scans it."""
        return "/".join(p for p in ("s3:/", self.location.bucket, self.location.prefix, key) if p)

    def storage_options(self) -> dict[str, str]:
        """The same endpoint and credentials for Polars' readers (object_store's key names)."""
        options = {"aws_region": self.region}
        if self.endpoint:
            options["aws_endpoint_url"] = self.endpoint
            options["aws_allow_http"] = "true" if self.endpoint.startswith("http://") else "false"
        for variable, key in (
            ("AWS_ACCESS_KEY_ID", "aws_access_key_id"),
            ("AWS_SECRET_ACCESS_KEY", "aws_secret_access_key"),
            ("AWS_SESSION_TOKEN", "aws_session_token"),
        ):
            if self._env.get(variable):
                options[key] = self._env[variable]
        return options

    def get(self, key: str) -> Blob | None:
        """The object and its ETag (None when there is none)."""
        try:
            result = obstore.get(self._store, key)
            return Blob(bytes(result.bytes()), str(result.meta["e_tag"]))
        except FileNotFoundError:
            return None
        except BaseError as exc:
            raise self._unavailable("read", key, exc) from exc

    def get_if_changed(self, key: str, etag: str | None) -> Blob | None:
        """The object when its ETag is not `etag` (None: unchanged, or absent when `etag` is None).
        One conditional GET: a 304 carries no body."""
        if etag is None:
            return self.get(key)
        try:
            result = obstore.get(self._store, key, options={"if_none_match": etag})
            return Blob(bytes(result.bytes()), str(result.meta["e_tag"]))
        except NotModifiedError:
            return None
        except FileNotFoundError:
            return Blob(b"", "")  # it was there and is gone: a change the caller must see
        except BaseError as exc:
            raise self._unavailable("read", key, exc) from exc

    def put(self, key: str, data: bytes | Path) -> str:
        """Write (or overwrite) an object; a Path is streamed, in parts when large. Returns its ETag."""
        try:
            payload = data if isinstance(data, bytes) else data.open("rb")
            try:
                return str(obstore.put(self._store, key, payload)["e_tag"])
            finally:
                if not isinstance(payload, bytes):
                    payload.close()
        except BaseError as exc:
            raise self._unavailable("write", key, exc) from exc

    def create(self, key: str, data: bytes) -> str | None:
        """Write an object only if none exists (`If-None-Match: *`). Returns its ETag, None if one existed."""
        try:
            return str(obstore.put(self._store, key, data, mode="create")["e_tag"])
        except AlreadyExistsError:
            return None
        except BaseError as exc:
            raise self._unavailable("write", key, exc) from exc

    def swap(self, key: str, data: bytes, etag: str) -> str | None:
        """Replace an object only if it is still the one with `etag` (`If-Match`). Returns the new
        ETag, None when another writer replaced (or deleted) it first."""
        try:
            return str(obstore.put(self._store, key, data, mode={"e_tag": etag})["e_tag"])
        except (PreconditionError, FileNotFoundError, AlreadyExistsError):
            return None
        except BaseError as exc:
            if "409" in str(exc) and "ConditionalRequestConflict" in str(exc):
                return None  # AWS: a concurrent conditional write is in flight; the caller re-reads
            raise self._unavailable("write", key, exc) from exc

    def delete(self, key: str) -> None:
        try:
            obstore.delete(self._store, key)
        except FileNotFoundError:
            return
        except BaseError as exc:
            raise self._unavailable("delete", key, exc) from exc

    def download(self, key: str, path: Path) -> int:
        """Stream an object into `path` (created or truncated). Returns the bytes written."""
        written = 0
        try:
            result = obstore.get(self._store, key)
            with path.open("wb") as out:
                for chunk in result.stream(min_chunk_size=8 * 1024 * 1024):
                    out.write(chunk)
                    written += len(chunk)
                out.flush()
                os.fsync(out.fileno())
        except FileNotFoundError:
            raise StoreUnavailable(f"{self.url(key)} is not in the object store") from None
        except BaseError as exc:
            raise self._unavailable("read", key, exc) from exc
        return written

    def keys(self, prefix: str) -> Iterator[str]:
        """Every key under `prefix` (for clean-up and tests; readers never discover data by listing)."""
        try:
            for batch in obstore.list(self._store, prefix):
                for meta in batch:
                    yield str(meta["path"])
        except BaseError as exc:
            raise self._unavailable("list", prefix, exc) from exc

    def _unavailable(self, verb: str, key: str, exc: BaseError) -> StoreUnavailable:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return StoreUnavailable(f"could not {verb} {self.url(key)}: {first[:300]}")
