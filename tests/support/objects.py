"""The object store of `scripts/with-s3.sh` (SeaweedFS on 127.0.0.1), for tests and the processes they start."""

from __future__ import annotations

import os

import boto3


def s3_environment() -> dict[str, str]:
    """The standard AWS variables that reach the test server (FloKit reads no other)."""
    return {
        "AWS_ENDPOINT_URL": os.environ["FLOKIT_TEST_S3_ENDPOINT"],
        "AWS_ACCESS_KEY_ID": os.environ["FLOKIT_TEST_S3_KEY"],
        "AWS_SECRET_ACCESS_KEY": os.environ["FLOKIT_TEST_S3_SECRET"],
        "AWS_REGION": "us-east-1",
    }


def bucket_keys(url: str) -> list[str]:
    """Every key under an s3:// URL, listed with boto3 as an operator would (not through FloKit)."""
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    env = s3_environment()
    client = boto3.client(
        "s3",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name=env["AWS_REGION"],
    )
    keys: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        keys.extend(item["Key"].removeprefix(prefix + "/") for item in page.get("Contents", []))
    return sorted(keys)
