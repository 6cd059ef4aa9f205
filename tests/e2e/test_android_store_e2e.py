"""Google Play end to end through real processes: gunicorn serving FloKit, configured by its
environment (`FLOKIT_GOOGLE_PLAY_API_URL`, `FLOKIT_GOOGLE_OIDC_CERTS_URL`, `FLOKIT_SECRET_KEY`),
against the fake Play Developer API, token and certificate endpoints on 127.0.0.1."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import requests

from tests.providers.google_play_fake import (
    INSTANCE_KEY,
    PUSH_AUDIENCE,
    FakeGooglePlay,
    developer_notification,
    provision,
    push_body,
    settings_for,
    subscription,
    voided,
)
from tests.support import gunicorn_server
from warehouse.db import Database
from warehouse.settings import Settings

DAY = timedelta(days=1)


def test_receipts_lapse_grace_and_refund_through_the_gateway(
    settings: Settings, db: Database, workspace: dict[str, Any], tmp_path: Path
) -> None:
    with FakeGooglePlay() as play:
        push_token = provision(db, workspace["app_id"], play)
        configured = replace(settings_for(settings, play), surfaces=("v1", "gateway", "ingest", "processor"))
        env = {**os.environ, **configured.child_env(), "FLOKIT_SECRET_KEY": INSTANCE_KEY}
        with gunicorn_server(env, workers=2, log_dir=tmp_path) as server:
            # Timed from here: starting gunicorn on a loaded machine can take most of 4 s.
            now = datetime.now(UTC)
            play.subscriptions["tok-paid"] = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=now + 20 * DAY)
            play.subscriptions["tok-grace"] = subscription(
                "SUBSCRIPTION_STATE_IN_GRACE_PERIOD", expires=now + timedelta(seconds=4), order="GPA.1-2-3-4"
            )
            play.subscriptions["tok-lapsing"] = subscription(
                "SUBSCRIPTION_STATE_ACTIVE", expires=now + timedelta(seconds=4), order="GPA.5-6-7-8"
            )

            def receipt(token: str, user: str) -> requests.Response:
                body = {"provider": "android_store", "packageName": play.package, "purchaseToken": token}
                return requests.post(f"{server.base}/api/paywall/receipt", json=body, timeout=15,
                                     headers={"x-user-id": user, "x-app-key": workspace["app_key"]})  # fmt: skip

            def active(user: str) -> bool:
                answer = requests.get(f"{server.base}/api/paywall/entitlement", timeout=15,
                                      headers={"x-user-id": user, "x-app-key": workspace["app_key"]})  # fmt: skip
                assert answer.status_code == 200
                return bool(answer.json()["active"])

            for token, user in (("tok-paid", "payer"), ("tok-grace", "in-grace"), ("tok-lapsing", "lapsing")):
                answer = receipt(token, user)
                assert answer.status_code == 200, answer.text
                assert answer.json()["active"] is True
                assert active(user)
            assert sorted(a[2] for a in play.calls.acknowledged) == ["tok-grace", "tok-lapsing", "tok-paid"]

            # A refund: Google's voided-purchase notification on the gateway path, pushed with an
            # OIDC token; Google lists the void, and the purchase is off at once.
            play.voided = [voided("tok-paid", "GPA.3301-0000-1111-22222", voided_at=datetime.now(UTC))]
            void = {"voidedPurchaseNotification": {"purchaseToken": "tok-paid", "orderId": "GPA.3301-0000-1111-22222",
                                                   "productType": 1, "refundType": 1}}  # fmt: skip
            pushed = requests.post(
                f"{server.base}/webhooks/android_store",
                data=push_body(developer_notification(play.package, **void), "e2e-void-1"),
                headers={"Authorization": f"Bearer {play.mint_id_token(PUSH_AUDIENCE)}",
                         "Content-Type": "application/json"},
                timeout=15,
            )  # fmt: skip
            assert pushed.status_code == 200, pushed.text
            assert not active("payer")

            # The push token in the URL authenticates too (and a wrong one does not).
            test_note = push_body(developer_notification(play.package, testNotification={"version": "1.0"}), "t-1")
            url = f"{server.base}/webhooks/android_store"
            assert requests.post(url + f"?token={push_token}", data=test_note, timeout=15).status_code == 200
            assert requests.post(url + "?token=wrong", data=test_note, timeout=15).status_code == 401

            # No notification at all: the period's end and the grace period's end switch access off.
            time.sleep(max(0.0, (now + timedelta(seconds=4.5) - datetime.now(UTC)).total_seconds()))
            assert not active("lapsing")
            assert not active("in-grace")
