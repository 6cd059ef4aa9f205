"""The customer's bucket for the warehouse export: moto's S3 server on 127.0.0.1.

moto answers S3's real XML and error codes. With IAM simulation switched on
(`authenticating()`), it checks the request signature against the IAM users created on the same
server, so an unknown key answers `InvalidAccessKeyId` and a wrong secret `SignatureDoesNotMatch`,
with S3's own messages. moto keeps its backends per process: each test makes its own bucket.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3
import polars as pl
from moto.core.authorization import enable_iam_authentication
from moto.server import ThreadedMotoServer

REGION = "us-east-1"


@dataclass
class S3Export:
    url: str

    def client(self, service: str = "s3", key: str = "testing", secret: str = "testing") -> Any:  # noqa: S107 (moto accepts any key)
        return boto3.client(
            service, endpoint_url=self.url, region_name=REGION, aws_access_key_id=key, aws_secret_access_key=secret
        )

    def new_bucket(self) -> str:
        name = f"export-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    def read(self, bucket: str, key: str) -> pl.DataFrame:
        body = self.client().get_object(Bucket=bucket, Key=key)["Body"].read()
        return pl.read_parquet(io.BytesIO(body))

    def iam_user(self) -> tuple[str, str]:
        """An IAM user allowed every S3 action: the credentials a customer would hand over."""
        iam = self.client("iam")
        name = f"exporter-{uuid.uuid4().hex[:8]}"
        iam.create_user(UserName=name)
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
        iam.put_user_policy(UserName=name, PolicyName="export", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName=name)["AccessKey"]
        return key["AccessKeyId"], key["SecretAccessKey"]


@contextmanager
def authenticating() -> Iterator[None]:
    """Requests are signed-checked against IAM while inside (moto's IAM simulation)."""
    with enable_iam_authentication():
        yield


@contextmanager
def s3_export_server() -> Iterator[S3Export]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield S3Export(url=f"http://{host}:{port}")
    finally:
        server.stop()
