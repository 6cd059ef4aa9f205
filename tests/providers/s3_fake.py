"""A real S3 endpoint on 127.0.0.1 for the connectors that read or write object storage.

moto's `ThreadedMotoServer` speaks the S3 REST API (listing with `MaxKeys` and continuation
tokens, ETags, the XML error bodies), and with its IAM authorisation switched on it checks
SigV4 signatures and policies the way AWS does: an unknown key is `InvalidAccessKeyId`, a wrong
secret `SignatureDoesNotMatch`, a key without a policy `AccessDenied`, all HTTP 403. What moto
never does is answer 503 `SlowDown`; `fail_next` puts that (or any S3 error) in front of it.

Use: `moto_server = s3_fake.moto_server` and `s3 = s3_fake.s3` at a test module's top level
(`from tests.providers import s3_fake`) register the fixtures there. The `s3` fixture is an
`S3Fake`: an empty bucket, a key allowed everything on S3, authorisation on (`s3.config()` is an
S3-kind integration config pointing at it). The server starts once per session; every test
starts from a reset (no buckets, no users) and leaves authorisation off.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
import requests
from botocore.config import Config
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from moto.server import ThreadedMotoServer
from werkzeug.serving import make_server

REGION = "us-east-1"
BUCKET = "flokit-test-exports"
_ALLOW_S3 = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
StartResponse = Callable[[str, list[tuple[str, str]]], Any]


@dataclass
class _Fault:
    status: int
    code: str
    message: str
    remaining: int


@dataclass
class Traffic:
    """What reached the fake (S3 calls only, not moto's own API), and the faults to answer with."""

    calls: list[tuple[str, str, str]] = field(default_factory=list)  # method, path, query
    _faults: list[_Fault] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def fail_next(self, times: int, status: int = 503, code: str = "SlowDown", message: str = "") -> None:
        message = message or {"SlowDown": "Please reduce your request rate."}.get(code, code)
        with self._lock:
            self._faults.append(_Fault(status, code, message, times))

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self._faults.clear()

    def count(self, method: str, query_contains: str = "") -> int:
        return sum(1 for m, _path, query in self.calls if m == method and query_contains in query)

    def _take(self, method: str, path: str, query: str) -> _Fault | None:
        with self._lock:
            self.calls.append((method, path, query))
            while self._faults and self._faults[0].remaining <= 0:
                self._faults.pop(0)
            if not self._faults:
                return None
            self._faults[0].remaining -= 1
            return self._faults[0]


class _FaultFront:
    """WSGI middleware: S3 requests are recorded and answered by a queued fault if there is one,
    with the S3 error document (`<Error><Code>…`) AWS sends."""

    def __init__(self, app: Any, traffic: Traffic) -> None:
        self.app = app
        self.traffic = traffic

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path.startswith("/moto-api"):
            return self.app(environ, start_response)  # type: ignore[no-any-return]
        fault = self.traffic._take(environ["REQUEST_METHOD"], path, environ.get("QUERY_STRING", ""))
        if fault is None:
            return self.app(environ, start_response)  # type: ignore[no-any-return]
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{fault.code}</Code><Message>{fault.message}</Message>"
            "<RequestId>FAKE0000</RequestId></Error>"
        ).encode()
        start_response(
            f"{fault.status} Fault", [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))]
        )
        return [body]


class FaultyMotoServer(ThreadedMotoServer):
    """`ThreadedMotoServer` with `Traffic` in front of its app (the only change: `_server_entry`
    wraps the app; moto is pinned below 6 in pyproject.toml)."""

    def __init__(self) -> None:
        super().__init__(ip_address="127.0.0.1", port=0, verbose=False)
        self.traffic = Traffic()

    def _server_entry(self) -> None:
        app = _FaultFront(DomainDispatcherApplication(create_backend_app), self.traffic)
        self._server = make_server(self._ip_address, self._port, app, True, request_handler=MotoRequestHandler)
        self._server_ready_event.set()
        self._server.serve_forever()

    @property
    def url(self) -> str:
        host, port = self.get_host_and_port()
        return f"http://{host}:{port}"


@dataclass
class S3Fake:
    server: FaultyMotoServer
    bucket: str
    access_key_id: str
    secret_access_key: str
    region: str = REGION
    _default: Any = None

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def traffic(self) -> Traffic:
        return self.server.traffic

    def config(self, **extra: Any) -> dict[str, Any]:
        """An S3-kind integration config (`transforms.integrations.kinds`) for this bucket."""
        return {
            "bucket": self.bucket,
            "region": self.region,
            "access_key_id": self.access_key_id,
            "secret_access_key": self.secret_access_key,
            "base_url": self.url,
            **extra,
        }

    def client(self, access_key_id: str | None = None, secret_access_key: str | None = None) -> Any:
        """A boto3 client signed with this fake's key (or the one given)."""
        if access_key_id is None and secret_access_key is None:
            if self._default is None:
                self._default = self._new_client(self.access_key_id, self.secret_access_key)
            return self._default
        return self._new_client(access_key_id or self.access_key_id, secret_access_key or self.secret_access_key)

    def _new_client(self, access_key_id: str, secret_access_key: str) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.url,
            region_name=self.region,
            aws_access_key_id=access_key_id,
            aws_secret_access_key=secret_access_key,
            config=Config(retries={"total_max_attempts": 1}),
        )

    def put(self, key: str, body: bytes | str) -> str:
        """Write an object; its ETag (quoted, as S3 returns it)."""
        data = body.encode("utf-8") if isinstance(body, str) else body
        etag: str = self.client().put_object(Bucket=self.bucket, Key=key, Body=data)["ETag"]
        return etag

    def get(self, key: str) -> bytes:
        body: bytes = self.client().get_object(Bucket=self.bucket, Key=key)["Body"].read()
        return body

    def keys(self, prefix: str = "") -> list[str]:
        found: list[str] = []
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            found.extend(item["Key"] for item in page.get("Contents", []))
        return found

    def delete(self, key: str) -> None:
        self.client().delete_object(Bucket=self.bucket, Key=key)

    def key_without_permissions(self) -> tuple[str, str]:
        """A real key of a user with no policy: every S3 call answers 403 `AccessDenied`."""
        return _user_key(self.url, "no-permissions", policy=None)


def _user_key(url: str, name: str, policy: dict[str, Any] | None) -> tuple[str, str]:
    iam = boto3.client(
        "iam", endpoint_url=url, region_name=REGION, aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap"
    )
    _without_auth(url, lambda: iam.create_user(UserName=name))
    if policy is not None:
        _without_auth(
            url, lambda: iam.put_user_policy(UserName=name, PolicyName="s3", PolicyDocument=json.dumps(policy))
        )
    key = _without_auth(url, lambda: iam.create_access_key(UserName=name))["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


def _set_auth(url: str, unauthenticated_calls: str) -> None:
    """moto's switch: the next N calls go unchecked ("inf": authorisation off, moto's default)."""
    requests.post(f"{url}/moto-api/reset-auth", data=unauthenticated_calls.encode(), timeout=10).raise_for_status()


def _without_auth(url: str, call: Callable[[], Any]) -> Any:
    _set_auth(url, "inf")
    try:
        return call()
    finally:
        _set_auth(url, "0")


@pytest.fixture(scope="session")
def moto_server() -> Iterator[FaultyMotoServer]:
    server = FaultyMotoServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3(moto_server: FaultyMotoServer) -> Iterator[S3Fake]:
    """An empty bucket, a key allowed everything on S3, and authorisation on: requests signed
    with anything else are refused as AWS refuses them."""
    url = moto_server.url
    requests.post(f"{url}/moto-api/reset", timeout=10).raise_for_status()
    moto_server.traffic.reset()
    access_key_id, secret = _user_key(url, "flokit-reader", policy=_ALLOW_S3)
    fake = S3Fake(server=moto_server, bucket=BUCKET, access_key_id=access_key_id, secret_access_key=secret)
    fake.client().create_bucket(Bucket=BUCKET)
    moto_server.traffic.reset()
    try:
        yield fake
    finally:
        _set_auth(url, "inf")
        moto_server.traffic.reset()
