"""A paywall experiment end to end through the real processes, on both databases (issue 35's
"done when"): publish a paywall, create an experiment for Germany and start it; 5 000 users fetch
the config (DE and elsewhere, iOS and Android), log an impression and buy through the generic
subscription provider with a planted lift (+60 % on a 20 % base) on one variant; `flokit refresh`
(the real Dagster runs); the results show the lift with chance to win ≥ 95 % and no SRM; new
weights move no exposed user; shipping the winner makes it everyone's config."""

from __future__ import annotations

import os
import random
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient

from api.app import create_app
from api.gateway.experiments import flush_exposures
from tests.support import bearer
from tests.support.cli import flokit_in_process
from tests.support.notifications import SUBSCRIPTION, iso, post
from tests.support.provider_notifications import KEY, settings
from transforms import paywall
from warehouse.db import Database
from warehouse.entitlements.stores import StoresUpdate, set_stores
from warehouse.paywalls import configs
from warehouse.settings import Settings

__all__ = ["settings"]  # the provider tests' settings: an instance key, which the generic secret is sealed under
pytestmark = pytest.mark.e2e
USERS = 5000
BASE, LIFTED = 0.20, 0.32  # paid conversion: the control's, and +60 % on the treatment
SEED = 20261129


def _document() -> paywall.PaywallDocument:
    offer = {"name": "Pro", "price_usd_cents": 999, "currency": "USD", "trial_days": 0}
    return paywall.parse_document({"variants": [
        {"variant_id": "monthly_first", "layout": "standard", "traffic_weight": 1,
         "offers": [offer | {"product_id": "pro_monthly", "billing_period": "monthly"}]},
        {"variant_id": "annual_first", "layout": "standard", "traffic_weight": 0,
         "offers": [offer | {"product_id": "pro_yearly", "billing_period": "yearly", "price_usd_cents": 5999}]},
    ]})  # fmt: skip


def _config(client: FlaskClient, app_id: str, user: str, country: str, platform: str) -> str:
    response = client.get(
        "/api/paywall/config",
        query_string={"app_id": app_id, "paywall_id": "onboarding"},
        headers={"x-user-id": user, "x-country": country, "x-platform": platform},
    )
    assert response.status_code == 200, response.json
    return str(response.json["variant"]["variant_id"])


@pytest.mark.both_backends(reason="exposures and results are written per dialect (insert-or-nothing, upsert)")
def test_an_experiment_for_germany_finds_the_planted_lift_and_ships_the_winner(
    db: Database, workspace: dict[str, Any], settings: Settings
) -> None:
    app_id, rw = workspace["app_id"], bearer(workspace["api_key_read_write"])
    client = create_app(replace(settings, config_cache_s=0)).test_client()  # read each change at once
    with db.write() as conn:
        configs.publish(conn, app_id=app_id, paywall_id="onboarding", document=_document(), actor="ops")
        secret = set_stores(
            conn, app_id=app_id, update=StoresUpdate(new_generic_secret=True), instance_key=KEY
        ).generic_secret
    assert secret is not None
    made = client.post("/v1/experiments", headers=rw, json={
        "app_id": app_id, "paywall_id": "onboarding", "name": "Annual first in Germany",
        "variants": [{"variant_id": "monthly_first", "weight": 50}, {"variant_id": "annual_first", "weight": 50}],
        "primary_metric": "paid_conversion_rate", "audience": {"country": ["DE"]},
    })  # fmt: skip
    assert made.status_code == 201, made.json
    experiment_id = made.json["experiment"]["id"]
    assert client.post(f"/v1/experiments/{experiment_id}/start", headers=rw).status_code == 200

    rng = random.Random(SEED)
    served: dict[str, tuple[str, str]] = {}
    for i in range(USERS):
        user, country, platform = f"user-{i}", "DE" if i % 2 else "FR", ("ios", "android")[i // 2 % 2]
        served[user] = (country, _config(client, app_id, user, country, platform))
        logged = client.post(
            "/api/paywall/events",
            headers={"x-app-key": workspace["app_key"], "x-user-id": user},
            json={"events": [{"event_type": "impression", "app_id": app_id, "properties": {
                "paywall_id": "onboarding", "variant_id": served[user][1]}}]},
        )  # fmt: skip
        assert logged.status_code == 200, logged.json
        if rng.random() < (LIFTED if served[user][1] == "annual_first" else BASE):
            at = datetime.now(UTC)
            bought = post(client, SUBSCRIPTION, app_id, {
                "id": f"evt_{user}", "type": "purchase", "user_id": user, "purchase_id": f"sub_{user}",
                "product_id": "pro_monthly", "kind": "subscription", "channel": "iap", "occurred_at": iso(at),
                "expires_at": iso(at + timedelta(days=30)), "revenue": 9.99, "currency": "USD",
                "billing_period": "monthly",
            }, secret)  # fmt: skip
            assert bought.status_code == 200 and bought.json["status"] == "applied", bought.json
    outside = {variant for country, variant in served.values() if country != "DE"}
    assert outside == {"monthly_first"}  # France is not in the audience: the paywall's default
    split = Counter(variant for country, variant in served.values() if country == "DE")
    assert set(split) == {"monthly_first", "annual_first"}

    flush_exposures(client.application)  # what the worker's thread writes within 50 ms
    done = flokit_in_process({**os.environ, **settings.child_env()}, "refresh", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    read = client.get(f"/v1/experiments/{experiment_id}", headers=bearer(workspace["api_key_read_only"]))
    results = read.json["experiment"]["results"]
    assert results is not None, read.json
    control, treatment = results["variants"]
    assert (control["variant_id"], treatment["variant_id"]) == ("monthly_first", "annual_first")
    assert control["exposed_users"] + treatment["exposed_users"] == USERS // 2  # only Germany is analysed
    assert (control["exposed_users"], treatment["exposed_users"]) == (split["monthly_first"], split["annual_first"])
    assert treatment["chance_to_beat_control"] >= 0.95 and treatment["lift_vs_control"]["ci_low"] > 0
    assert treatment["primary_metric_value"] > control["primary_metric_value"]
    assert results["srm"]["flagged"] is False
    assert control["revenue_per_user_d14"] is None  # exposed today: nobody has had 14 days yet

    changed = client.patch(
        f"/v1/experiments/{experiment_id}",
        headers=rw,
        json={"variants": [{"variant_id": "monthly_first", "weight": 0}, {"variant_id": "annual_first", "weight": 1}]},
    )
    assert changed.status_code == 200, changed.json
    germans = [u for u, (country, _) in served.items() if country == "DE"][:400]
    assert {u: _config(client, app_id, u, "DE", "ios") for u in germans} == {u: served[u][1] for u in germans}

    shipped = client.post(f"/v1/experiments/{experiment_id}/ship", headers=rw, json={"variant_id": "annual_first"})
    assert shipped.status_code == 200, shipped.json
    everyone = {_config(client, app_id, f"user-{i}", ("DE", "FR")[i % 2], "android") for i in range(0, USERS, 25)}
    assert everyone == {"annual_first"}
