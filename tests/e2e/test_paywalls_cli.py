"""An operator publishes a paywall configuration with `flokit admin paywalls`; the gateway serves it."""

import json
from pathlib import Path

import pytest

from api.app import create_app
from tests.support.cli import run, run_json
from tests.support.paywalls import document
from warehouse.settings import Settings

pytestmark = pytest.mark.e2e


def test_publish_show_and_serve(settings: Settings, tmp_path: Path) -> None:
    boot = run_json(settings, "admin", "bootstrap", "--name", "Paywall Co")
    app_id = boot["app_id"]
    doc = tmp_path / "onboarding.json"
    doc.write_text(json.dumps(document([30, 70]).model_dump(mode="json") | {"experiment_active": True}))

    first = run_json(
        settings,
        "admin",
        "paywalls",
        "publish",
        "--app",
        app_id,
        "--paywall",
        "onboarding",
        "--file",
        str(doc),
        "--by",
        "ops@paywall.co",
    )
    second = run_json(
        settings, "admin", "paywalls", "publish", "--app", app_id, "--paywall", "onboarding", "--file", str(doc)
    )
    assert (first["version"], second["version"]) == (1, 2)
    shown = run_json(settings, "admin", "paywalls", "show", "--app", app_id, "--paywall", "onboarding")
    assert shown["version"] == 2 and [v["traffic_weight"] for v in shown["document"]["variants"]] == [30, 70]

    client = create_app(settings).test_client()
    served = client.get(
        "/api/paywall/config", query_string={"app_id": app_id, "paywall_id": "onboarding"}, headers={"x-user-id": "u-1"}
    )
    assert served.status_code == 200 and served.json["version"] == 2 and served.json["fallbackUsed"] is False
    assert served.json["variant"]["variant_id"] in {"v0", "v1"}


def test_invalid_documents_and_unknown_apps_are_refused(settings: Settings, tmp_path: Path) -> None:
    boot = run_json(settings, "admin", "bootstrap", "--name", "Paywall Co")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"variants": [{"variant_id": "a", "layout": "x", "offers": []}]}))
    refused = run(
        settings,
        "admin",
        "paywalls",
        "publish",
        "--app",
        boot["app_id"],
        "--paywall",
        "p",
        "--file",
        str(bad),
        "--json",
        ok=False,
    )
    assert refused.returncode == 1 and "offers" in json.loads(refused.stderr)["error"]
    good = tmp_path / "good.json"
    good.write_text(json.dumps(document([1]).model_dump(mode="json")))
    unknown = run(
        settings, "admin", "paywalls", "publish", "--app", "app_nope", "--paywall", "p", "--file", str(good), ok=False
    )
    assert unknown.returncode == 1 and "no active app app_nope" in unknown.stderr
    none = run(settings, "admin", "paywalls", "show", "--app", boot["app_id"], "--paywall", "p", ok=False)
    assert none.returncode == 1 and "fallback" in none.stderr
