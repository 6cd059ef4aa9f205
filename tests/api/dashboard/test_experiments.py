"""The dashboard's Experiments page over HTTP: audiences in order, results, the chart's figures, and
Start / Stop / Ship with their effects on the rows, the paywall and the audit log.

Experiments are created and started through the repository, results computed by the asset's own
code (tests/support/experiments.py); what the page shows is read as a person reads it (text) and
what the forms did is read back from the database.
"""

from __future__ import annotations

import html
import json
import re

from flask.testing import FlaskClient

from tests.support.dashboard import OPERATOR
from tests.support.experiments import PAYWALL, create, plant_results, publish
from warehouse import audit
from warehouse.bootstrap import bootstrap
from warehouse.db import Database
from warehouse.experiments import repository as repo
from warehouse.paywalls import configs


def text(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def url(workspace: dict) -> str:
    return f"/dashboard/paywalls/{workspace['app_id']}/{PAYWALL}/experiments"


def status_of(db: Database, workspace: dict, experiment_id: str) -> str:
    with db.read() as conn:
        return repo.get(conn, workspace["workspace_id"], experiment_id).status


def audit_of(db: Database, workspace: dict, experiment_id: str) -> list[tuple[str, str]]:
    with db.read() as conn:
        entries = audit.entries(conn, workspace_id=workspace["workspace_id"], subject_id=experiment_id)
    return [(e["action"], e["actor"]) for e in entries]


def chart_data(page: str, experiment_id: str) -> dict:
    found = re.search(rf'<script type="application/json" id="chart-data-{experiment_id}">(.*?)</script>', page, re.S)
    assert found, "no chart data on the page"
    return json.loads(html.unescape(found.group(1)))


def test_the_way_in_nav_list_and_paywall_link_and_the_empty_state(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    empty = browser.get("/dashboard/experiments")
    assert empty.status_code == 200 and "No paywall published yet" in text(empty.get_data(as_text=True))
    publish(db, workspace["app_id"])
    create(db, workspace, "Annual first", start=True)
    listed = browser.get("/dashboard/experiments").get_data(as_text=True)
    assert '<a href="/dashboard/experiments" aria-current="page">Experiments</a>' in listed
    assert f'href="{url(workspace)}"' in listed
    row = re.search(rf'<tr id="paywall-{workspace["app_id"]}-{PAYWALL}">(.*?)</tr>', listed, re.S)
    assert row and text(row.group(1)).endswith("1 0 0")  # running, draft, stopped
    detail = browser.get(f"/dashboard/paywalls/{workspace['app_id']}/{PAYWALL}").get_data(as_text=True)
    assert f'href="{url(workspace)}"' in detail and "Experiments of this paywall" in detail
    # The paywall's facts say who decides the split now: its experiments, not the document's switch.
    assert "1 running experiment" in text(detail) and "traffic split by weight" not in detail

    other = browser.get(f"/dashboard/paywalls/{workspace['app_id']}/promo/experiments")
    page = text(other.get_data(as_text=True))
    assert other.status_code == 200
    assert "No experiment on this paywall yet" in page and "POST /v1/experiments" in page
    assert "Everyone (no experiment is running): the paywall's default." in page
    assert browser.get(f"/dashboard/paywalls/app_nope/{PAYWALL}/experiments").status_code == 404


def test_audiences_in_the_gateways_order_with_their_conditions_in_words(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    publish(db, workspace["app_id"])
    create(db, workspace, "Everyone else", priority=5, start=True)
    create(
        db, workspace, "German iOS", priority=1, start=True,
        audience={"country": ["DE", "AT"], "platform": ["ios"], "app_version": ">=2.1", "locale": ["de"],
                  "days_since_first_seen": {"lte": 7}, "has_active_entitlement": False, "attributes": {"plan": "free"}},
    )  # fmt: skip
    create(db, workspace, "Not yet", priority=0)
    page = text(browser.get(url(workspace)).get_data(as_text=True))
    order = page.split("Audiences in order", 1)[1].split("Everyone else: the paywall's default", 1)[0]
    assert order.index("German iOS") < order.index("Everyone else (priority 5)")
    assert "Not yet" not in order  # a draft is tried by no one
    assert (
        "German iOS (priority 1) : country is DE or AT and platform is ios and app version >=2.1 and locale is de "
        "(or a more specific one) and first seen at most 7 days ago and has no active entitlement and "
        'attribute plan is "free"'
    ) in order
    assert "Everyone else (priority 5) : everyone" in order
    assert "Everyone else: the paywall's default, variant control of live version 1." in page
    # the sections: running in that order, then the draft, with their status badges
    assert page.index("German iOS running") < page.index("Everyone else running") < page.index("Not yet draft")
    assert "Tried 1st of the running experiments" in page and "Tried 2nd of the running experiments" in page
    assert "No results yet: computed at the next refresh." in page
    assert "No results: a draft has no exposures." in page


def test_the_results_table_shows_percents_and_dashes_with_reasons_and_the_posterior_curves(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    publish(db, workspace["app_id"])
    x = create(db, workspace, "Annual first", start=True)
    plant_results(db, workspace, x.id, {"control": (1000, 100), "annual": (1000, 160)})
    raw = browser.get(url(workspace)).get_data(as_text=True)
    page = text(raw)
    assert "Sample ratio check: no mismatch" in page and "Sample ratio mismatch" not in page
    figures = text(re.search(rf'<table[^>]*id="figures-table-{x.id}">(.*?)</table>', raw, re.S).group(1))  # type: ignore[union-attr]
    assert "control control 10.0 % — — " in figures  # the control's own lift and chance: none
    assert re.search(r"annual 16\.0 % \+6\d\.\d % \(\+\d+\.\d % to \+\d+\.\d %\) 100\.0 % 100\.0 %", figures), figures
    assert 'title="The control is the baseline: it has no lift or chance against itself."' in raw
    counts = text(re.search(rf'<table[^>]*id="counts-table-{x.id}">(.*?)</table>', raw, re.S).group(1))  # type: ignore[union-attr]
    # 100 payers of 9.99 over 1 000 users: 1.00 a user at D7 and D14; D30 has not matured at day 20
    assert "control 1,000 100 100 0 1.00 USD 1.00 USD —" in counts, counts
    assert 'title="Not yet: no user of this variant was exposed 30 days ago."' in raw

    data = chart_data(raw, x.id)
    assert data["kind"] == "posterior" and [s["label"] for s in data["series"]] == ["control", "annual"]
    control = data["series"][0]
    assert len(control["x"]) == len(control["y"]) == 300
    peak = control["x"][control["y"].index(max(control["y"]))]
    assert abs(peak - 100 / 1000) < 0.002  # Beta(101, 901)'s mode
    assert "control centred on 10.1 %" in page  # the mean (1 + 100) / (2 + 1000), in the chart's summary
    assert "vendor/chart-4.6.1.umd.min.js" in raw and "experiments.js" in raw


def test_revenue_shows_the_lift_interval_instead_of_curves(browser: FlaskClient, db: Database, workspace: dict) -> None:
    publish(db, workspace["app_id"])
    x = create(db, workspace, "Price test", metric="revenue_per_user_d14", start=True)
    plant_results(db, workspace, x.id, {"control": (500, 50), "annual": (500, 80)})
    raw = browser.get(url(workspace)).get_data(as_text=True)
    data = chart_data(raw, x.id)
    assert data["kind"] == "interval" and [s["label"] for s in data["series"]] == ["annual"]
    (annual,) = data["series"]
    assert annual["low"] < annual["mean"] < annual["high"] and annual["mean"] > 0.3
    assert "the results keep no closed-form posterior" in text(raw)


def test_a_chart_only_with_data(browser: FlaskClient, db: Database, workspace: dict) -> None:
    publish(db, workspace["app_id"])
    x = create(db, workspace, "Quiet", start=True)
    plant_results(db, workspace, x.id, {})
    raw = browser.get(url(workspace)).get_data(as_text=True)
    page = text(raw)
    assert "No curve yet: no variant has an exposed user" in page
    assert "chart-data-" not in raw and "experiments.js" not in raw
    assert "control control — — — — —" in page  # counted as nothing, and no figure drawn from nothing


def test_start_then_stop_through_the_forms_moves_the_rows_audits_the_operator_and_409s_a_repeat(
    browser: FlaskClient, db: Database, workspace: dict, token: str
) -> None:
    publish(db, workspace["app_id"])
    x = create(db, workspace, "Annual first")
    started = browser.post(f"/dashboard/experiments/{x.id}/start", data={"csrf_token": token})
    assert started.status_code == 303
    assert started.headers["Location"] == f"{url(workspace)}?done=start&experiment={x.id}"
    assert status_of(db, workspace, x.id) == "running"
    assert "Started “Annual first”" in text(browser.get(started.headers["Location"]).get_data(as_text=True))

    again = browser.post(f"/dashboard/experiments/{x.id}/start", data={"csrf_token": token})
    assert again.status_code == 409
    assert "Could not start “Annual first”: it is running now" in text(again.get_data(as_text=True))

    stopped = browser.post(f"/dashboard/experiments/{x.id}/stop", data={"csrf_token": token})
    assert stopped.status_code == 303 and status_of(db, workspace, x.id) == "stopped"
    assert audit_of(db, workspace, x.id) == [
        ("experiment.created", "key_test"),
        ("experiment.started", OPERATOR),
        ("experiment.stopped", OPERATOR),
    ]
    page = text(browser.get(url(workspace)).get_data(as_text=True))
    assert "Annual first stopped" in page and "No verb left" in page


def test_a_post_without_the_csrf_token_is_refused_and_changes_nothing(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    publish(db, workspace["app_id"])
    x = create(db, workspace, "Annual first")
    assert browser.post(f"/dashboard/experiments/{x.id}/start").status_code == 400
    assert status_of(db, workspace, x.id) == "draft"


def test_the_confirmation_page_without_javascript_and_unknown_verbs_and_experiments(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    publish(db, workspace["app_id"])
    x = create(db, workspace, "Annual first", start=True)
    r = browser.get(f"/dashboard/experiments/{x.id}/stop")
    page = text(r.get_data(as_text=True))
    assert r.status_code == 200 and "Stop: Annual first?" in page and "Everyone it took returns at once" in page
    assert f'action="/dashboard/experiments/{x.id}/stop"' in r.get_data(as_text=True)
    assert "start is not possible for this experiment: it is running." in text(
        browser.get(f"/dashboard/experiments/{x.id}/start").get_data(as_text=True)
    )
    assert browser.get(f"/dashboard/experiments/{x.id}/delete").status_code == 404
    assert browser.get("/dashboard/experiments/exp_nope/stop").status_code == 404
    # another workspace's experiment is not found, to see or to stop
    with db.write() as conn:
        other = bootstrap(conn, name="Other")
    publish(db, other["app_id"])
    theirs = create(db, other, "Theirs", start=True)
    token = re.search(r'name="csrf_token" value="([^"]+)"', r.get_data(as_text=True)).group(1)  # type: ignore[union-attr]
    assert browser.get(f"/dashboard/experiments/{theirs.id}/stop").status_code == 404
    assert browser.post(f"/dashboard/experiments/{theirs.id}/stop", data={"csrf_token": token}).status_code == 404
    assert status_of(db, other, theirs.id) == "running"


def test_ship_with_a_flagged_srm_asks_for_the_acknowledgement_then_publishes_the_winner(
    browser: FlaskClient, db: Database, workspace: dict, token: str
) -> None:
    publish(db, workspace["app_id"])
    x = create(db, workspace, "Annual first", start=True)
    plant_results(db, workspace, x.id, {"control": (1000, 100), "annual": (760, 120)})  # 50/50 weights
    raw = browser.get(url(workspace)).get_data(as_text=True)
    page = text(raw)
    assert "Sample ratio mismatch: the users did not split as the weights say" in page
    assert "annual: 760 observed, 880 expected; control: 1,000 observed, 880 expected" in page
    assert 'name="acknowledge_srm"' in raw

    refused = browser.post(f"/dashboard/experiments/{x.id}/ship", data={"csrf_token": token, "variant_id": "annual"})
    assert refused.status_code == 400
    assert "The sample ratio check is flagged: tick the box" in text(refused.get_data(as_text=True))
    assert 'value="annual" checked' in refused.get_data(as_text=True)  # the choice is kept
    assert status_of(db, workspace, x.id) == "running"
    with db.read() as conn:
        assert configs.live(conn, app_id=workspace["app_id"], paywall_id=PAYWALL).version == 1  # type: ignore[union-attr]

    unknown = browser.post(
        f"/dashboard/experiments/{x.id}/ship", data={"csrf_token": token, "variant_id": "nope", "acknowledge_srm": "on"}
    )
    assert unknown.status_code == 400 and "Choose one of the experiment's variants." in text(
        unknown.get_data(as_text=True)
    )

    shipped = browser.post(
        f"/dashboard/experiments/{x.id}/ship",
        data={"csrf_token": token, "variant_id": "annual", "acknowledge_srm": "on"},
    )
    assert shipped.status_code == 303
    assert shipped.headers["Location"] == f"{url(workspace)}?done=ship&experiment={x.id}&version=2"
    with db.read() as conn:
        live = configs.live(conn, app_id=workspace["app_id"], paywall_id=PAYWALL)
        entries = audit.entries(conn, workspace_id=workspace["workspace_id"], subject_id=x.id)
    assert live is not None and live.version == 2 and live.published_by == OPERATOR
    assert [v.variant_id for v in live.document.variants] == ["annual", "control"]
    assert live.document.experiment_active is False
    assert status_of(db, workspace, x.id) == "stopped"
    (ship,) = [e for e in entries if e["action"] == "experiment.shipped"]
    assert ship["actor"] == OPERATOR and ship["detail"]["variant_id"] == "annual"
    assert ship["detail"]["paywall_version"] == 2 and ship["detail"]["results"]["srm"]["flagged"] is True
    page = text(browser.get(shipped.headers["Location"]).get_data(as_text=True))
    assert "Shipped annual of “Annual first”: paywall version 2 is live" in page
    assert "stopped — shipped annual" in page


def test_ship_without_a_flag_needs_no_acknowledgement(
    browser: FlaskClient, db: Database, workspace: dict, token: str
) -> None:
    publish(db, workspace["app_id"])
    x = create(db, workspace, "Annual first", start=True)
    raw = browser.get(url(workspace)).get_data(as_text=True)
    assert 'name="acknowledge_srm"' not in raw and "Ship a variant: Annual first?" in text(raw)
    r = browser.post(f"/dashboard/experiments/{x.id}/ship", data={"csrf_token": token, "variant_id": "control"})
    assert r.status_code == 303 and status_of(db, workspace, x.id) == "stopped"
    again = browser.post(f"/dashboard/experiments/{x.id}/ship", data={"csrf_token": token, "variant_id": "control"})
    assert again.status_code == 409 and "Could not ship" in text(again.get_data(as_text=True))
