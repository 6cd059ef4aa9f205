"""Signed entitlement answers, checked by the reference verifier of docs/trusted-entitlements.md.

The verifier is the fenced python block of that document, executed as written (not a copy), so
the document cannot drift from what the server signs. It is run against real answers of the
Flask app and against the forgeries an on-device proxy could make.
"""

from __future__ import annotations

import base64
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from api.app import create_app
from api.gateway.trusted import CACHE, KeyRing
from tests.support import WEBHOOK_KEY
from tests.support.entitlements import fact, receipt
from transforms import trusted
from warehouse.db import Database, utcnow
from warehouse.settings import Settings
from warehouse.signing import keys

DOC = Path(__file__).resolve().parents[2] / "docs" / "trusted-entitlements.md"
PATH = "/api/paywall/entitlement"


def _doc_verifier() -> dict[str, Any]:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    assert len(blocks) == 1, "docs/trusted-entitlements.md has one python block: the verifier"
    namespace: dict[str, Any] = {}
    exec(compile(blocks[0], str(DOC), "exec"), namespace)  # noqa: S102  (our own document's code)
    return namespace


VERIFIER = _doc_verifier()
verify: Callable[..., None] = VERIFIER["verify"]
Forged: type[Exception] = VERIFIER["Forged"]


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", database_url=database_url, instance_key=WEBHOOK_KEY)


@pytest.fixture
def root(db: Database) -> bytes:
    """The pinned root: what `flokit db upgrade` creates and `signing-keys show` prints."""
    with db.write() as conn:
        public, _ = keys.ensure_root(conn, instance_key=WEBHOOK_KEY)
    return public.public_key


def nonce() -> str:
    return base64.b64encode(os.urandom(16)).decode()


def ask(client: FlaskClient, workspace: dict, user: str, sent_nonce: str | None, target: str = PATH) -> TestResponse:
    headers = {"x-app-key": workspace["app_key"], "x-user-id": user}
    if sent_nonce is not None:
        headers["x-nonce"] = sent_nonce
    return client.get(target, headers=headers)


def check(root: bytes, sent_nonce: str, user: str, answer: TestResponse, target: str = PATH) -> None:
    verify([root], sent_nonce, "GET", target, user, answer.headers, answer.get_data())


@pytest.mark.both_backends(reason="keys created on demand in the operational database by the first signer")
def test_a_signed_answer_verifies_against_the_pinned_root(
    client: FlaskClient, db: Database, workspace: dict, root: bytes
) -> None:
    receipt(db, workspace, "user-7", fact("1000001", now=utcnow()))
    sent = nonce()
    before = time.time_ns() // 1_000_000
    answer = ask(client, workspace, "user-7", sent)
    assert answer.status_code == 200 and answer.json == {"active": True, "source": "iap"}
    check(root, sent, "user-7", answer)
    assert before <= int(answer.headers["X-Signature-Time"]) <= time.time_ns() // 1_000_000
    chain = base64.b64decode(answer.headers["X-Signature-Intermediate"])
    assert answer.headers["X-Signature-Key-Id"] == trusted.kid(chain[:32])
    assert answer.headers["Cache-Control"] == "private, no-store"
    vary = {v.strip().lower() for v in answer.headers["Vary"].split(",")}
    assert {"x-app-key", "x-app-token", "x-user-id", "x-nonce"} <= vary
    # The current read, with its identity in the query and the query signed as sent.
    target = "/api/entitlements/current?userId=user-7&x=%20y"
    current = client.get(target, headers={"x-app-key": workspace["app_key"], "x-nonce": sent})
    assert current.status_code == 200 and current.json == {"active": True, "source": "iap"}
    check(root, sent, "user-7", current, target)


def test_without_a_nonce_nothing_changes(client: FlaskClient, workspace: dict, root: bytes) -> None:
    answer = ask(client, workspace, "user-7", None)
    assert answer.status_code == 200 and answer.json == {"active": False, "source": "none"}
    assert not [name for name, _ in answer.headers if name.lower().startswith("x-signature")]


@pytest.mark.parametrize("bad", ["", "abc", base64.b64encode(b"x" * 8).decode(), base64.b64encode(b"x" * 40).decode()])
def test_an_invalid_nonce_is_400_in_the_gateway_shape(
    client: FlaskClient, workspace: dict, root: bytes, bad: str
) -> None:
    answer = ask(client, workspace, "user-7", bad)
    assert answer.status_code == 400
    assert set(answer.json) == {"error"} and "x-nonce" in answer.json["error"]


def test_the_body_changed_is_detected(client: FlaskClient, workspace: dict, root: bytes) -> None:
    sent = nonce()
    answer = ask(client, workspace, "user-7", sent)
    assert answer.json == {"active": False, "source": "none"}
    answer.set_data(answer.get_data().replace(b"false", b"true"))
    with pytest.raises(Forged, match="does not cover"):
        check(root, sent, "user-7", answer)


def test_an_answer_replayed_for_another_request_or_user_is_detected(
    client: FlaskClient, db: Database, workspace: dict, root: bytes
) -> None:
    receipt(db, workspace, "payer", fact("1000002", now=utcnow()))
    first = nonce()
    old = ask(client, workspace, "payer", first)
    check(root, first, "payer", old)
    with pytest.raises(Forged):  # the proxy answers a new request (new nonce) with the old answer
        check(root, nonce(), "payer", old)
    with pytest.raises(Forged):  # the payer's answer served to another user, same nonce even
        check(root, first, "free-user", old)
    with pytest.raises(Forged):  # another path's answer
        check(root, first, "payer", old, "/api/entitlements/current?userId=payer")


def test_an_intermediate_not_signed_by_the_pinned_root_is_detected(
    client: FlaskClient, workspace: dict, root: bytes
) -> None:
    """The proxy signs its own body with its own key and certifies it with its own root."""
    sent = nonce()
    answer = ask(client, workspace, "user-7", sent)
    fake_root, fake_intermediate = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    chain = trusted.certify(fake_root, trusted.raw_public(fake_intermediate), int(time.time()) + 86400)
    body = b'{"active":true,"source":"iap"}\n'
    time_ms = answer.headers["X-Signature-Time"]
    signed = trusted.message(nonce=sent, method="GET", target=PATH, user_id="user-7", time_ms=time_ms, body=body)
    answer.headers["X-Signature"] = base64.b64encode(fake_intermediate.sign(signed)).decode()
    answer.headers["X-Signature-Intermediate"] = base64.b64encode(chain).decode()
    answer.set_data(body)
    with pytest.raises(Forged, match="not signed by a pinned root"):
        check(root, sent, "user-7", answer)
    verify([trusted.raw_public(fake_root)], sent, "GET", PATH, "user-7", answer.headers, body)  # coherent forgery


def test_an_expired_intermediate_is_detected(client: FlaskClient, db: Database, workspace: dict, root: bytes) -> None:
    """A leaked old intermediate (genuinely certified by the root) cannot sign past its expiry."""
    with db.write() as conn:
        then = utcnow() - keys.INTERMEDIATE_LIFETIME
        leaked = keys.next_intermediate(conn, instance_key=WEBHOOK_KEY, after=0, now=then)
    sent = nonce()
    answer = ask(client, workspace, "user-7", sent)
    check(root, sent, "user-7", answer)  # the server replaced the expired key on its own
    assert answer.headers["X-Signature-Key-Id"] != leaked.kid
    body = b'{"active":true,"source":"iap"}\n'
    time_ms = answer.headers["X-Signature-Time"]
    signed = trusted.message(nonce=sent, method="GET", target=PATH, user_id="user-7", time_ms=time_ms, body=body)
    answer.headers["X-Signature"] = base64.b64encode(leaked.private_key.sign(signed)).decode()
    answer.headers["X-Signature-Intermediate"] = base64.b64encode(leaked.chain).decode()
    answer.set_data(body)
    with pytest.raises(Forged, match="expired"):
        check(root, sent, "user-7", answer)


def test_missing_headers_are_a_forgery(client: FlaskClient, workspace: dict, root: bytes) -> None:
    answer = ask(client, workspace, "user-7", None)
    with pytest.raises(Forged, match="missing"):
        check(root, nonce(), "user-7", answer)


@pytest.mark.both_backends(reason="a rotation read back by the API process: the published set's query on each backend")
def test_a_rotation_reaches_the_api_and_old_answers_keep_verifying(
    app: Flask, client: FlaskClient, db: Database, workspace: dict, root: bytes
) -> None:
    app.extensions[CACHE] = KeyRing(ttl=0)  # look at the database on every request: no waiting in a test
    sent = nonce()
    before = ask(client, workspace, "user-7", sent)
    with db.write() as conn:
        rotated = keys.rotate(conn, instance_key=WEBHOOK_KEY)
    after_nonce = nonce()
    after = ask(client, workspace, "user-7", after_nonce)
    assert after.headers["X-Signature-Key-Id"] == rotated.kid != before.headers["X-Signature-Key-Id"]
    check(root, sent, "user-7", before)
    check(root, after_nonce, "user-7", after)
    jwks = client.get("/api/paywall/keys")
    assert [(k["flokit_role"], k["kid"]) for k in jwks.json["keys"]] == [
        ("root", trusted.kid(root)),
        ("intermediate", rotated.kid),
        ("intermediate", before.headers["X-Signature-Key-Id"]),
    ]


def test_the_jwks_publishes_the_root_and_the_current_intermediate(
    client: FlaskClient, workspace: dict, root: bytes
) -> None:
    answer = client.get("/api/paywall/keys")
    assert answer.status_code == 200
    assert answer.headers["Cache-Control"] == "public, max-age=300"
    published = answer.json["keys"]
    assert [k["flokit_role"] for k in published] == ["root", "intermediate"]
    for key in published:
        raw = base64.urlsafe_b64decode(key["x"] + "=")
        assert len(raw) == 32 and "=" not in key["x"]
        assert {k: key[k] for k in ("kty", "crv", "alg", "use", "kid")} == {
            "kty": "OKP",
            "crv": "Ed25519",
            "alg": "Ed25519",
            "use": "sig",
            "kid": trusted.kid(raw),
        }
    assert base64.urlsafe_b64decode(published[0]["x"] + "=") == root
    assert published[0]["flokit_expires_at"] is None and published[1]["flokit_expires_at"] > time.time()
    sent = nonce()
    signed = ask(client, workspace, "user-7", sent)
    assert signed.headers["X-Signature-Key-Id"] == published[1]["kid"]


def test_without_keys_a_signed_request_is_503_and_an_unsigned_one_still_answers(
    client: FlaskClient, workspace: dict
) -> None:
    assert ask(client, workspace, "user-7", nonce()).status_code == 503
    assert ask(client, workspace, "user-7", None).status_code == 200
    assert client.get("/api/paywall/keys").status_code == 503


def test_without_an_instance_key_a_signed_request_is_503(database_url: str, tmp_path: Path, workspace: dict) -> None:
    client = create_app(Settings(data_dir=tmp_path / "data", database_url=database_url)).test_client()
    answer = ask(client, workspace, "user-7", nonce())
    assert answer.status_code == 503 and "instance" in answer.json["error"]
