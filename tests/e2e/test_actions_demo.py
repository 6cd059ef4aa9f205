"""The engine on the demo, through the `flokit` commands (in-process): `flokit demo seed --truth-out` (which connects
a sandbox ad account), one `flokit refresh` (the real Dagster runs, the engine last before the
catalog), then the actions in the database and the published reports.

On the default world the open actions include a budget shift from the planted slowest campaign to
the planted fastest and a pause of the planted weak creative, and nothing the truth contradicts
(a shift toward a campaign whose true 30-day ROAS is lower, a pause of a creative that does not
truly convert worse, an offer test of an offer that does not truly convert better in its country).
On the A/A world (`--no-signal`): no budget shift and no creative pause. And the data signals and
guardrail details of an action are recomputed from the published reports and the signals.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from api.app import create_app
from tests.cli_support import Ran, flokit_in_process
from tests.conftest import bearer, fresh_database_url
from warehouse.actions import repository as repo
from warehouse.db import database_for
from warehouse.reports.store import ACTION_SIGNALS, scan_days
from warehouse.settings import Settings
from warehouse.workspaces import create_key, create_workspace

pytestmark = pytest.mark.e2e
FLOKIT = str(Path(sys.executable).parent / "flokit")
USERS, DAYS = 3000, 60  # the smallest demo whose story stands out of the noise (flokit up seeds 8000)
SEEDS = (1, 2)
NO_SIGNAL_SEED = 4


@dataclass
class Seeded:
    workspace_id: str
    key: str
    truth: dict[str, Any]


@dataclass
class Deployment:
    settings: Settings
    workspaces: dict[int, Seeded]


def _flokit(settings: Settings, *args: str) -> Ran:
    env = {**os.environ, **settings.child_env()}
    return flokit_in_process(env, *args)


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def deployment(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    tmp = tmp_path_factory.mktemp(f"engine-{request.param}")
    urls = fresh_database_url(request, request.param, tmp)
    url = next(urls)
    settings = Settings(data_dir=tmp / "data", database_url=url)
    db = database_for(url)
    seeded: dict[int, Seeded] = {}
    for seed in (*SEEDS, NO_SIGNAL_SEED):
        with db.write() as conn:
            ws = create_workspace(conn, name=f"Engine {seed}")
            key = create_key(conn, workspace_id=ws.id, scope="read_only").api_key
        truth_file = tmp / f"truth-{seed}.json"
        args = ["--workspace", ws.id, "--users", str(USERS), "--days", str(DAYS), "--seed", str(seed)]
        args += ["--truth-out", str(truth_file), *(["--no-signal"] if seed == NO_SIGNAL_SEED else [])]
        done = _flokit(settings, "demo", "seed", *args, "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["sandbox_ad_account_id"].startswith("adacct_")
        seeded[seed] = Seeded(ws.id, key, json.loads(truth_file.read_text()))
    refreshed = _flokit(settings, "refresh", "--json")
    assert refreshed.returncode == 0, refreshed.stdout + refreshed.stderr
    runs = json.loads(refreshed.stdout)["runs"]
    assert "actions_engine" in [r["name"] for r in runs] and all(r["success"] for r in runs)
    yield Deployment(settings, seeded)
    db.dispose()
    with pytest.raises(StopIteration):
        next(urls)


def open_actions(deployment: Deployment, ws: Seeded) -> list[repo.Action]:
    db = database_for(deployment.settings.database_url)
    with db.read() as conn:
        page, _ = repo.list_actions(conn, workspace_id=ws.workspace_id, limit=100)
    return [a for a in page if a.status in ("draft", "ready", "approved", "running")]


def true_roas_30(truth: dict[str, Any], campaign: str) -> float:
    c = truth["true"]["campaigns"][campaign]
    return c["cumulative_net_revenue_by_day"][29] / c["cac"]


def creative_multiplier(truth: dict[str, Any], campaign: str, creative: str) -> tuple[float, float]:
    """(the creative's true trial->paid multiplier, the weighted multiplier of the rest of its campaign)."""
    [params] = [c for c in truth["world"]["campaigns"] if c["name"] == campaign]
    index = int(creative.rsplit("_cr", 1)[1]) - 1
    rest = [(k["weight"], k["trial_to_paid"]) for i, k in enumerate(params["creatives"]) if i != index]
    return params["creatives"][index]["trial_to_paid"], sum(w * m for w, m in rest) / sum(w for w, _ in rest)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_planted_story_is_proposed_and_nothing_the_truth_contradicts(deployment: Deployment, seed: int) -> None:
    ws = deployment.workspaces[seed]
    story = ws.truth["story"]
    found = open_actions(deployment, ws)
    assert all(a.origin == "engine" for a in found)
    shifts = [a.parameters for a in found if a.type == "budget_shift"]
    pauses = [a.parameters for a in found if a.type == "creative_pause"]
    assert any(
        p["from_campaign"] == story["slowest_payback_campaign"]
        and p["to_campaign"] == story["fastest_payback_campaign"]
        for p in shifts
    ), shifts
    assert {"creative": story["weak_creative"]["creative"], "campaign": story["weak_creative"]["campaign"]} in pauses
    for p in shifts:  # never toward a campaign that truly returns less
        assert true_roas_30(ws.truth, p["to_campaign"]) > true_roas_30(ws.truth, p["from_campaign"]), p
    for p in pauses:  # never a creative that does not truly convert worse than the rest
        own, rest = creative_multiplier(ws.truth, p["campaign"], p["creative"])
        assert own < rest, p
    for a in found:
        if a.type == "offer_test":  # the treatment truly converts better in that country
            [offer] = [o for o in ws.truth["world"]["offers"] if o["product_id"] == a.parameters["treatment_offer"]]
            assert dict(offer["trial_to_paid_by_country"]).get(a.parameters["country"], 1.0) > 1.0, a.parameters


def test_the_aa_world_gets_no_budget_shift_and_no_creative_pause(deployment: Deployment) -> None:
    ws = deployment.workspaces[NO_SIGNAL_SEED]
    assert ws.truth["story"]["weak_creative"] is None
    assert {a.type for a in open_actions(deployment, ws)} <= {"offer_test"}


def test_a_shifts_signals_and_guardrails_are_recomputed_from_the_reports(deployment: Deployment) -> None:
    ws = deployment.workspaces[SEEDS[0]]
    [shift] = [a for a in open_actions(deployment, ws) if a.type == "budget_shift"]
    db = database_for(deployment.settings.database_url)
    with db.read() as conn:
        [proposal] = [e for e in repo.evaluations(conn, workspace_id=ws.workspace_id, action_id=shift.id)]
    evidence = proposal.detail["evidence"]
    first, last = (date.fromisoformat(d) for d in evidence["cohorts"])
    h = evidence["horizon_days"]
    source, target = shift.parameters["from_campaign"], shift.parameters["to_campaign"]
    signals = {s["label"]: s["value"] for s in shift.data_signals}
    # 1. From the published payback report (the API the dashboards read): ROAS per campaign over
    #    the compared cohorts, and their installs and spend.
    client = create_app(deployment.settings).test_client()
    body = client.get(
        "/v1/reports/payback",
        query_string={
            "start_date": first.isoformat(),
            "end_date": last.isoformat(),
            "group_by": "campaign",
            "cohort_window_days": 30,
        },
        headers=bearer(ws.key),
    )
    assert body.status_code == 200, body.json
    rows = {r["cohort"]: r for r in body.json["data"]}
    for campaign in (source, target):
        assert signals[f"ROAS {h}d, {campaign}"] == f"{rows[campaign][f'roas_{h}d']:.2f}"
        assert signals[f"Spend, {campaign}"] == f"{rows[campaign]['spend']:,.2f} USD"
    # 2. From the signals dataset: the installs and the minimum_cohort_size detail.
    lake = deployment.settings.paths.lake()
    frame = (
        scan_days(lake, ACTION_SIGNALS)
        .filter(
            (pl.col("workspace_id") == ws.workspace_id)
            & pl.col("cohort_date").is_between(first, last)
            & (pl.col("complete_days") >= h)
        )
        .collect()
    )
    installs = {c: int(frame.filter(pl.col("campaign") == c).get_column("installs").sum()) for c in (source, target)}
    assert signals[f"Installs, {source}"] == str(installs[source])
    checks = {c["check"]: c for c in shift.guardrail_checks}
    assert checks["minimum_cohort_size"]["detail"].startswith(
        f"{installs[source]} installs in {source} and {installs[target]} in {target} with {h} complete days"
    )
    # 3. From the registry: the budgets and the spend-change detail.
    budgets = evidence["budgets"]
    amount = shift.parameters["amount_per_day"]
    assert signals[f"Daily budget, {source}"] == f"{budgets['source']:,.2f} USD"
    assert checks["spend_change_within_limit"]["detail"].startswith(
        f"moves {amount:,.2f} USD/day: {amount / budgets['source'] * 100:.0f} % of {source}, "
        f"{amount / budgets['target'] * 100:.0f} % of {target}, {amount / budgets['managed'] * 100:.0f} % of managed"
    )
    assert amount == min(0.2 * budgets["source"], 0.2 * budgets["target"], 0.1 * budgets["managed"]) // 1
    assert (last - first) == timedelta(days=27)
