"""Subscriptions end to end through real processes: gunicorn started as `flokit up` starts it,
App Store transactions and notifications signed by a test chain whose root the server trusts.

A receipt makes the user active; a refund notification on the gateway's provider path makes them
inactive at once; a period that ends turns access off with no notification at all; a grace
period keeps access until its end. Then the same with the processor deployed on its own, behind
a gateway that forwards to it (`FLOKIT_PASSTHROUGH_URL`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.providers.apple_pki import ApplePki, now_ms, renewal, transaction
from tests.support import GunicornServer, free_port, gunicorn_server
from tests.support.ios import pki_settings_fields, set_up_ios
from warehouse.db import database_for
from warehouse.settings import Settings

pytestmark = pytest.mark.e2e


@pytest.fixture
def pki(tmp_path: Path) -> ApplePki:
    return ApplePki(tmp_path / "pki")


def env_for(settings: Settings, pki: ApplePki, **changes: Any) -> dict[str, str]:
    configured = replace(settings, **pki_settings_fields(pki), **changes)
    return {**os.environ, **configured.child_env(), "FLOKIT_SECRET_KEY": "e2e-instance-key-" + "x" * 40}


@contextmanager
def servers(settings: Settings, pki: ApplePki, tmp_path: Path, *, split: bool) -> Iterator[GunicornServer]:
    """The gateway the app and Apple call: the processor in-process, or (split) a gateway that
    forwards to a processor-only deployment."""
    with ExitStack() as stack:
        if not split:
            yield stack.enter_context(gunicorn_server(env_for(settings, pki), workers=2, log_dir=tmp_path))
            return
        processor = stack.enter_context(
            gunicorn_server(env_for(settings, pki, surfaces=("processor",)), workers=1, log_dir=tmp_path)
        )
        gateway_env = env_for(settings, pki, surfaces=("gateway",), passthrough_url=processor.base)
        yield stack.enter_context(gunicorn_server(gateway_env, workers=2, log_dir=tmp_path))


def entitled(base: str, workspace: dict[str, Any], user: str) -> bool:
    answer = requests.get(
        f"{base}/api/paywall/entitlement", headers={"x-app-key": workspace["app_key"], "x-user-id": user}, timeout=10
    )
    assert answer.status_code == 200 and answer.headers["Cache-Control"] == "private, no-store"
    return bool(answer.json()["active"])


def receipt(base: str, workspace: dict[str, Any], user: str, jws: str) -> requests.Response:
    return requests.post(
        f"{base}/api/paywall/receipt",
        json={"provider": "ios_store", "signedTransactionInfo": jws},
        headers={"x-app-key": workspace["app_key"], "x-user-id": user},
        timeout=10,
    )


def notify(base: str, signed: str) -> requests.Response:
    return requests.post(f"{base}/webhooks/ios_store", json={"signedPayload": signed}, timeout=10)


@pytest.mark.parametrize("split", [False, True], ids=["in-process", "processor-apart"])
def test_receipts_refunds_lapses_and_grace_periods(
    settings: Settings, workspace: dict[str, Any], pki: ApplePki, tmp_path: Path, split: bool
) -> None:
    set_up_ios(database_for(settings.database_url), workspace["app_id"])
    settings = replace(settings, api_port=free_port())
    with servers(settings, pki, tmp_path, split=split) as gateway:
        base = gateway.base
        # A receipt makes the user active.
        assert entitled(base, workspace, "ana") is False
        bought = transaction(transactionId="3000000000000001", originalTransactionId="3000000000000001")
        answer = receipt(base, workspace, "ana", pki.sign(bought))
        assert answer.status_code == 200, answer.text
        assert answer.json()["active"] is True and answer.json()["original_transaction_id"] == "3000000000000001"
        assert entitled(base, workspace, "ana") is True
        # A refund notification on the gateway's provider path: inactive at once.
        refunded = bought | {"revocationDate": now_ms() - 1000, "revocationReason": 0, "signedDate": now_ms()}
        done = notify(base, pki.notification("REFUND", txn=refunded, renewal_info=renewal(
            originalTransactionId="3000000000000001")))  # fmt: skip
        assert done.status_code == 200 and done.json()["status"] == "applied", done.text
        assert entitled(base, workspace, "ana") is False

        # A period that ends: inactive without any notification.
        ends = now_ms() + 3000
        short = transaction(
            transactionId="3000000000000002", originalTransactionId="3000000000000002", expiresDate=ends
        )
        assert receipt(base, workspace, "ben", pki.sign(short)).json()["active"] is True
        assert entitled(base, workspace, "ben") is True
        time.sleep(max(0.0, (ends - now_ms()) / 1000) + 0.5)
        assert entitled(base, workspace, "ben") is False

        # Billing trouble with a grace period: active until the grace period's end, then not.
        lapsed = transaction(
            transactionId="3000000000000003", originalTransactionId="3000000000000003", expiresDate=now_ms() - 1000
        )
        assert receipt(base, workspace, "cleo", pki.sign(lapsed)).json()["active"] is False
        grace_ends = now_ms() + 3000
        failing = renewal(
            originalTransactionId="3000000000000003", gracePeriodExpiresDate=grace_ends, isInBillingRetryPeriod=True
        )
        done = notify(base, pki.notification("DID_FAIL_TO_RENEW", "GRACE_PERIOD", txn=lapsed | {"signedDate": now_ms()},
                                             renewal_info=failing))  # fmt: skip
        assert done.status_code == 200, done.text
        assert entitled(base, workspace, "cleo") is True
        time.sleep(max(0.0, (grace_ends - now_ms()) / 1000) + 0.5)
        assert entitled(base, workspace, "cleo") is False
