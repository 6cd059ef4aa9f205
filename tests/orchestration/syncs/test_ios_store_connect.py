"""The App Store notification history sync against a fake App Store Server API on 127.0.0.1
(pytest-httpserver): Apple's own library makes the calls (its ES256 JWT, checked by the fake with
the public half of a .p8 key made here), the fake serves Get Notification History pages of
notifications signed by the test PKI, and Apple's `SignedDataVerifier` checks them against the
test root, as in production against Apple's."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from flask.testing import FlaskClient
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from orchestration.syncs.connectors.ios_store_connect import CONNECTOR, STATE_KEY, AppStoreConnect
from orchestration.syncs.execute import execute_sync
from tests.providers.apple_pki import BUNDLE_ID, DAY_MS, ApplePki, now_ms, renewal, transaction
from tests.support.ios import INSTANCE_KEY, active, landed, notify, pki_settings_fields, receipt, set_up_ios
from transforms.client_errors import ClientError
from transforms.integrations.kinds import ValidConfig, validate_config
from warehouse.db import Database, utcnow
from warehouse.entitlements import ledger
from warehouse.integrations import repository as repo
from warehouse.integrations.target import SyncTarget
from warehouse.lake import LocalLake
from warehouse.settings import Settings

TYPE = "ios_store_connect"
ISSUER = "57246542-96fe-1a63-e053-0824d011072a"
KEY_ID = "2X9R4HXF34"
PAGE = 20
HISTORY = "/inApps/v1/notifications/history"
RATE_LIMITED = {"errorCode": 4290000, "errorMessage": "Rate limit exceeded."}
UNKNOWN_ERROR = {"errorCode": 5000000, "errorMessage": "An unknown error occurred."}
TOKEN_EXPIRED = {"errorCode": 4000017, "errorMessage": "Invalid request. The pagination token is expired."}


def _p8() -> tuple[str, ec.EllipticCurvePublicKey]:
    """An In-App Purchase key as App Store Connect hands it out: P-256, PKCS#8 PEM (.p8)."""
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return pem, key.public_key()  # with its final newline, as the .p8 file has it


def _signed_ms(payload: str) -> int:
    try:
        return int(jwt.decode(payload, options={"verify_signature": False})["signedDate"])
    except (jwt.PyJWTError, KeyError, ValueError):
        return now_ms() - DAY_MS  # not a JWS: dated yesterday, in every window


@dataclass
class FakeAppStore:
    """Get Notification History as Apple documents it: JWT auth (401 without a body), 20 records a
    page, an opaque `paginationToken` valid only with the same body, Apple's error objects."""

    public_key: ec.EllipticCurvePublicKey
    bundle_id: str = BUNDLE_ID
    history: list[str] = field(default_factory=list)
    faults: list[tuple[int, dict[str, Any] | None]] = field(default_factory=list)
    expire_tokens: int = 0
    seen: list[dict[str, Any]] = field(default_factory=list)
    server: HTTPServer = field(default_factory=lambda: HTTPServer(host="127.0.0.1", port=0))

    def __enter__(self) -> FakeAppStore:
        self.server.expect_request(HISTORY, method="POST").respond_with_handler(self.handle)
        self.server.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.clear()
        self.server.stop()

    @property
    def url(self) -> str:
        return self.server.url_for("/").rstrip("/")

    def _answer(self, status: int, body: dict[str, Any] | None) -> Response:
        if body is None:
            return Response(status=status)
        return Response(json.dumps(body), status=status, content_type="application/json")

    def _authorized(self, request: Request) -> bool:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme != "Bearer":
            return False
        try:
            claims = jwt.decode(
                token,
                self.public_key,  # type: ignore[arg-type]
                algorithms=["ES256"],
                audience="appstoreconnect-v1",
                options={"require": ["exp", "iss", "aud", "bid"]},
            )
            kid = jwt.get_unverified_header(token).get("kid")
        except jwt.PyJWTError:
            return False
        return bool(claims["iss"] == ISSUER and claims["bid"] == self.bundle_id and kid == KEY_ID)

    def handle(self, request: Request) -> Response:
        token = request.args.get("paginationToken")
        body = request.get_json(silent=True)
        self.seen.append({"token": token, "body": body})
        if self.faults:
            return self._answer(*self.faults.pop(0))
        if not self._authorized(request):
            return self._answer(401, None)
        if not isinstance(body, dict) or not isinstance(body.get("startDate"), int) or "endDate" not in body:
            return self._answer(400, {"errorCode": 4000015, "errorMessage": "Invalid request. The start date..."})
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
        offset = 0
        if token is not None:
            at, _, for_body = token.partition(".")
            if self.expire_tokens or for_body != digest:
                self.expire_tokens = max(0, self.expire_tokens - 1)
                return self._answer(400, TOKEN_EXPIRED)
            offset = int(at)
        records = [p for p in self.history if body["startDate"] <= _signed_ms(p) <= body["endDate"]]
        page = records[offset : offset + PAGE]
        more = offset + PAGE < len(records)
        answer: dict[str, Any] = {
            "notificationHistory": [
                {"signedPayload": p, "sendAttempts": [{"attemptDate": now_ms(), "sendAttemptResult": "NO_RESPONSE"}]}
                for p in page
            ],
            "hasMore": more,
        }
        if more:
            answer["paginationToken"] = f"{offset + PAGE}.{digest}"
        return self._answer(200, answer)


@pytest.fixture
def pki(tmp_path: Path) -> ApplePki:
    return ApplePki(tmp_path / "apple")


@pytest.fixture
def settings(settings: Settings, pki: ApplePki) -> Settings:
    """The gateway's (for receipts and notifications) and, through the environment, the run
    process's: the same roots, the same database."""
    return replace(settings, **pki_settings_fields(pki))


@pytest.fixture
def env(settings: Settings, pki: ApplePki, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOKIT_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("FLOKIT_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("FLOKIT_APPLE_ROOT_CERTS", str(pki.root_path))
    monkeypatch.setenv("FLOKIT_APPLE_ONLINE_CHECKS", "0")


@pytest.fixture
def key() -> tuple[str, ec.EllipticCurvePublicKey]:
    return _p8()


@pytest.fixture
def fake(key: tuple[str, ec.EllipticCurvePublicKey]) -> Iterator[FakeAppStore]:
    with FakeAppStore(key[1]) as running:
        yield running


@pytest.fixture
def ios(db: Database, workspace: dict[str, Any], env: None) -> dict[str, Any]:
    set_up_ios(db, workspace["app_id"])
    return workspace


def _config(fake: FakeAppStore, workspace: dict[str, Any], private_key: str) -> ValidConfig:
    raw = {
        "issuer_id": ISSUER,
        "key_id": KEY_ID,
        "private_key": private_key,
        "app_id": workspace["app_id"],
        "base_url": fake.url,
    }
    return validate_config(TYPE, raw)


def _store(config: ValidConfig) -> AppStoreConnect:
    store = CONNECTOR.client(config)
    assert isinstance(store, AppStoreConnect)
    store.backoff_s = 0.01  # Apple gives no wait to honour; ours doubles from here
    return store


def _sync(
    fake: FakeAppStore,
    db: Database,
    workspace: dict[str, Any],
    key: tuple[str, ec.EllipticCurvePublicKey],
    tmp_path: Path,
    state: dict[str, Any] | None = None,
) -> tuple[SyncTarget, list[str]]:
    config = _config(fake, workspace, key[0])
    target = SyncTarget(
        db, LocalLake(tmp_path / "lake"), workspace["workspace_id"], "int_test", TYPE, state=state or {}
    )
    lines: list[str] = []
    CONNECTOR.sync(_store(config), target, config, lines.append)
    return target, lines


def _purchase(n: int, **fields: Any) -> dict[str, Any]:
    tid = f"{4000000000000000 + n}"
    return transaction(transactionId=tid, originalTransactionId=tid, **fields)


def _grant(db: Database, workspace: dict[str, Any], store_key: str) -> Any:
    with db.read() as conn:
        return ledger.grant_for(conn, app_id=workspace["app_id"], source="ios_store", store_key=store_key)


def test_several_pages_and_a_renewal_the_notifications_missed_makes_the_user_active(
    client: FlaskClient,
    db: Database,
    ios: dict[str, Any],
    fake: FakeAppStore,
    key: tuple[str, ec.EllipticCurvePublicKey],
    pki: ApplePki,
    tmp_path: Path,
) -> None:
    now = now_ms()
    lapsed = transaction(purchaseDate=now - 40 * DAY_MS, expiresDate=now - 10 * DAY_MS, signedDate=now - 40 * DAY_MS)
    assert receipt(client, ios, pki.sign(lapsed)).json["active"] is False
    renewed = lapsed | {
        "transactionId": "2000000000000002",
        "purchaseDate": now - 10 * DAY_MS,
        "expiresDate": now + 20 * DAY_MS,
        "signedDate": now - 10 * DAY_MS,
    }
    others = [pki.notification("SUBSCRIBED", "INITIAL_BUY", txn=_purchase(i)) for i in range(44)]
    fake.history = [*others[:30], pki.notification("DID_RENEW", txn=renewed, renewal_info=renewal()), *others[30:]]
    target, lines = _sync(fake, db, ios, key, tmp_path)
    assert active(db, ios, "user-7")
    assert [s["token"] is None for s in fake.seen] == [True, False, False]  # 45 records, 20 a page
    assert all(s["body"] == fake.seen[0]["body"] for s in fake.seen)  # the same body for every page
    first_window = fake.seen[0]["body"]
    assert first_window["startDate"] == pytest.approx(_ms_ago(180), abs=20 * 60_000)
    events = landed(db)
    assert events["ios:2000000000000002:renewal"]["user_id"] == "user-7"
    assert events["ios:2000000000000002:renewal"]["source"] == "ios_store"
    assert len([e for e in events if e.endswith(":subscription_start")]) == 45  # 44 others, user-7's receipt
    assert target.records == 45  # 44 starts and the renewal; user-7's start came with the receipt
    assert target.state[STATE_KEY]["records"] == 45 and target.state[STATE_KEY]["unverified"] == 0
    assert "45 notification(s) on 3 page(s)" in lines[-1]
    # The next sync reads from the previous end, less an hour of overlap.
    fake.seen.clear()
    previous_end = target.state[STATE_KEY]["end_ms"]
    _sync(fake, db, ios, key, tmp_path, state=target.state)
    assert fake.seen[0]["body"]["startDate"] == previous_end - 3_600_000
    summary = CONNECTOR.check(_store(_config(fake, ios, key[0])))
    assert summary.startswith(f"App Store Server API (Production) for {BUNDLE_ID}: the key can read")


def _ms_ago(days: int) -> int:
    return int((utcnow() - timedelta(days=days)).timestamp() * 1000)


def test_a_refund_only_the_history_knows_revokes(
    client: FlaskClient,
    db: Database,
    ios: dict[str, Any],
    fake: FakeAppStore,
    key: tuple[str, ec.EllipticCurvePublicKey],
    pki: ApplePki,
    tmp_path: Path,
) -> None:
    bought = transaction()
    assert receipt(client, ios, pki.sign(bought)).json["active"] is True
    refunded = bought | {"revocationDate": now_ms(), "revocationReason": 1, "signedDate": now_ms() + 1}
    fake.history = [pki.notification("REFUND", txn=refunded)]
    _sync(fake, db, ios, key, tmp_path)
    assert not active(db, ios, "user-7")
    refund = landed(db)["ios:2000000000000001:refund"]
    assert refund["user_id"] == "user-7" and json.loads(refund["properties"])["revenue"] == -9.99


def test_a_purchase_only_the_history_knows_is_recorded_and_its_buyer_then_active(
    client: FlaskClient,
    db: Database,
    ios: dict[str, Any],
    fake: FakeAppStore,
    key: tuple[str, ec.EllipticCurvePublicKey],
    pki: ApplePki,
    tmp_path: Path,
) -> None:
    bought = _purchase(1)
    renewal_info = renewal(originalTransactionId=bought["originalTransactionId"])
    fake.history = [pki.notification("SUBSCRIBED", "INITIAL_BUY", txn=bought, renewal_info=renewal_info)]
    assert _grant(db, ios, bought["originalTransactionId"]) is None
    target, _ = _sync(fake, db, ios, key, tmp_path)
    grant = _grant(db, ios, bought["originalTransactionId"])
    assert grant is not None and grant.revoked_at is None and grant.user_id is None
    assert target.records == 1
    # The app then shows the receipt: the purchase is the user's, no event twice.
    assert receipt(client, ios, pki.sign(bought)).json["active"] is True
    assert active(db, ios, "user-7")
    assert list(landed(db)) == ["ios:4000000000000001:subscription_start"]


def test_a_notification_then_the_same_in_the_history_lands_once(
    client: FlaskClient,
    db: Database,
    ios: dict[str, Any],
    fake: FakeAppStore,
    key: tuple[str, ec.EllipticCurvePublicKey],
    pki: ApplePki,
    tmp_path: Path,
) -> None:
    renewal_info = renewal(originalTransactionId="4000000000000002")
    payload = pki.notification("SUBSCRIBED", "INITIAL_BUY", txn=_purchase(2), renewal_info=renewal_info)
    assert notify(client, payload).json["status"] == "applied"
    before = landed(db)
    grant = _grant(db, ios, "4000000000000002")
    fake.history = [payload]
    target, _ = _sync(fake, db, ios, key, tmp_path)
    assert target.records == 0
    assert landed(db) == before and list(before) == ["ios:4000000000000002:subscription_start"]
    assert _grant(db, ios, "4000000000000002") == grant


def test_the_same_window_twice_changes_nothing(
    db: Database,
    ios: dict[str, Any],
    fake: FakeAppStore,
    key: tuple[str, ec.EllipticCurvePublicKey],
    pki: ApplePki,
    tmp_path: Path,
) -> None:
    fake.history = [pki.notification("SUBSCRIBED", "INITIAL_BUY", txn=_purchase(i)) for i in range(25)]
    first, _ = _sync(fake, db, ios, key, tmp_path)
    events, grants = landed(db), [_grant(db, ios, f"{4000000000000000 + i}") for i in range(25)]
    again, lines = _sync(fake, db, ios, key, tmp_path)
    assert first.records == 25 and again.records == 0
    assert landed(db) == events
    assert [_grant(db, ios, f"{4000000000000000 + i}") for i in range(25)] == grants
    assert "0 new event(s)" in lines[-1]


def test_an_invalid_signed_payload_is_skipped_counted_and_logged(
    db: Database,
    ios: dict[str, Any],
    fake: FakeAppStore,
    key: tuple[str, ec.EllipticCurvePublicKey],
    pki: ApplePki,
    tmp_path: Path,
) -> None:
    impostor = ApplePki(tmp_path / "impostor", name="impostor")  # a chain to a root FloKit does not trust
    forged = impostor.notification("SUBSCRIBED", "INITIAL_BUY", txn=_purchase(3))
    genuine = pki.notification("SUBSCRIBED", "INITIAL_BUY", txn=_purchase(4))
    fake.history = [forged, "not.a.jws", genuine]
    target, lines = _sync(fake, db, ios, key, tmp_path)
    assert _grant(db, ios, "4000000000000003") is None
    assert _grant(db, ios, "4000000000000004") is not None
    assert list(landed(db)) == ["ios:4000000000000004:subscription_start"]
    assert target.state[STATE_KEY]["unverified"] == 2
    assert any("skipped 2 notification(s) whose signature did not verify" in line for line in lines)


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: settings.py")
def test_429_waits_then_succeeds_and_429_throughout_is_rate_limited(
    db: Database,
    ios: dict[str, Any],
    fake: FakeAppStore,
    key: tuple[str, ec.EllipticCurvePublicKey],
    pki: ApplePki,
    tmp_path: Path,
) -> None:
    fake.history = [pki.notification("SUBSCRIBED", "INITIAL_BUY", txn=_purchase(5))]
    fake.faults = [(429, RATE_LIMITED), (429, RATE_LIMITED)]
    target, lines = _sync(fake, db, ios, key, tmp_path)
    assert target.records == 1 and target.state[STATE_KEY]["rate_limited"] == 2
    assert sum("HTTP 429" in line and "waiting" in line for line in lines) == 2
    fake.faults = [(429, RATE_LIMITED)] * 10
    with pytest.raises(ClientError) as failure:
        _sync(fake, db, ios, key, tmp_path)
    assert failure.value.code == "rate_limited" and not failure.value.refused
    assert "Rate limit exceeded. (errorCode 4290000)" in failure.value.message


def test_5xx_then_success_and_5xx_throughout_is_the_providers_fault(
    db: Database,
    ios: dict[str, Any],
    fake: FakeAppStore,
    key: tuple[str, ec.EllipticCurvePublicKey],
    pki: ApplePki,
    tmp_path: Path,
) -> None:
    fake.history = [pki.notification("SUBSCRIBED", "INITIAL_BUY", txn=_purchase(6))]
    fake.faults = [(500, UNKNOWN_ERROR), (503, None)]
    target, _ = _sync(fake, db, ios, key, tmp_path)
    assert target.records == 1
    fake.faults = [(500, UNKNOWN_ERROR)] * 10
    with pytest.raises(ClientError) as failure:
        _sync(fake, db, ios, key, tmp_path)
    assert failure.value.code == "provider_error" and failure.value.status == 500


def test_a_key_apple_does_not_accept_is_an_auth_failure(
    db: Database,
    ios: dict[str, Any],
    fake: FakeAppStore,
    pki: ApplePki,
    tmp_path: Path,
) -> None:
    fake.history = [pki.notification("SUBSCRIBED", "INITIAL_BUY", txn=_purchase(7))]
    other = _p8()  # a key whose public half the fake does not know
    with pytest.raises(ClientError) as failure:
        _sync(fake, db, ios, other, tmp_path)
    with pytest.raises(ClientError) as checked:
        CONNECTOR.check(_store(_config(fake, ios, other[0])))
    for f in (failure.value, checked.value):
        assert f.code == "auth" and f.refused and f.status == 401
    assert len(fake.seen) == 2  # a 401 is not retried
    assert landed(db) == {}


def test_an_expired_pagination_token_reads_the_window_again(
    db: Database,
    ios: dict[str, Any],
    fake: FakeAppStore,
    key: tuple[str, ec.EllipticCurvePublicKey],
    pki: ApplePki,
    tmp_path: Path,
) -> None:
    fake.history = [pki.notification("SUBSCRIBED", "INITIAL_BUY", txn=_purchase(i)) for i in range(30)]
    fake.expire_tokens = 1
    target, lines = _sync(fake, db, ios, key, tmp_path)
    assert [s["token"] is None for s in fake.seen] == [True, False, True, False]
    assert target.records == 30 and len(landed(db)) == 30
    assert any("pagination token expired" in line for line in lines)


def test_sandbox_reads_30_days_and_an_empty_history_is_a_success(
    db: Database,
    workspace: dict[str, Any],
    env: None,
    fake: FakeAppStore,
    key: tuple[str, ec.EllipticCurvePublicKey],
    tmp_path: Path,
) -> None:
    set_up_ios(db, workspace["app_id"], environment="Sandbox")
    target, lines = _sync(fake, db, workspace, key, tmp_path)
    assert fake.seen[0]["body"]["startDate"] == pytest.approx(_ms_ago(30), abs=20 * 60_000)
    assert target.records == 0 and "0 notification(s) on 1 page(s)" in lines[-1]
    summary = CONNECTOR.check(_store(_config(fake, workspace, key[0])))
    assert summary.startswith("App Store Server API (Sandbox)") and summary.endswith(
        "0 notification(s) in the last hour"
    )


def test_an_app_without_a_bundle_id_or_of_another_workspace_is_a_config_failure(
    db: Database,
    workspace: dict[str, Any],
    env: None,
    fake: FakeAppStore,
    key: tuple[str, ec.EllipticCurvePublicKey],
    tmp_path: Path,
) -> None:
    with pytest.raises(ClientError) as failure:
        _sync(fake, db, workspace, key, tmp_path)
    assert failure.value.code == "config" and "no App Store bundle id" in failure.value.message
    set_up_ios(db, workspace["app_id"])
    elsewhere = workspace | {"workspace_id": f"ws_{uuid.uuid4().hex[:12]}"}
    with pytest.raises(ClientError) as failure:
        _sync(fake, db, elsewhere, key, tmp_path)
    assert failure.value.code == "config" and "not an app of this workspace" in failure.value.message
    assert fake.seen == []


def test_run_by_the_framework_the_cursor_persists_and_a_refused_key_puts_the_integration_in_error(
    db: Database,
    ios: dict[str, Any],
    fake: FakeAppStore,
    key: tuple[str, ec.EllipticCurvePublicKey],
    pki: ApplePki,
    tmp_path: Path,
) -> None:
    fake.history = [pki.notification("SUBSCRIBED", "INITIAL_BUY", txn=_purchase(8))]

    def run(private_key: str) -> tuple[Any, str]:
        with db.write() as conn:
            integration = repo.connect(
                conn,
                workspace_id=ios["workspace_id"],
                integration_type=TYPE,
                config=_config(fake, ios, private_key),
                instance_key=INSTANCE_KEY,
                actor="ops@example.com",
            )
            sync, _ = repo.request_sync_for_operator(conn, integration_id=integration.id)
        outcome = execute_sync(db, LocalLake(tmp_path / "lake"), INSTANCE_KEY, sync.id, "run-1")
        return outcome, integration.id

    outcome, integration_id = run(key[0])
    assert outcome is not None and outcome.status == "succeeded" and outcome.records == 1
    with db.write() as conn:
        sync, _ = repo.request_sync_for_operator(conn, integration_id=integration_id)
    fake.seen.clear()
    again = execute_sync(db, LocalLake(tmp_path / "lake"), INSTANCE_KEY, sync.id, "run-2")
    assert again is not None and again.status == "succeeded" and again.records == 0
    assert fake.seen[0]["body"]["startDate"] > _ms_ago(1)  # from the persisted cursor, not 180 days back
    with db.write() as conn:
        repo.disconnect(conn, integration_id=integration_id, actor="ops@example.com")
    refused, refused_id = run(_p8()[0])
    assert refused is not None and refused.status == "failed" and refused.error_code == "auth"
    with db.read() as conn:
        assert repo.get_integration_for_operator(conn, integration_id=refused_id).status == "error"
