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

from collections.abc import Iterator
from datetime import date, timedelta
from typing import Any

import polars as pl
import pytest

from api.app import create_app
from tests.e2e.truth_world import NO_SIGNAL_SEED, Seeded, TruthWorld, truth_world
from tests.support import bearer
from warehouse.actions import repository as repo
from warehouse.db import database_for
from warehouse.reports.report_lake import ACTION_SIGNALS, scan_days

pytestmark = pytest.mark.e2e
SEEDS = (1, 2)  # the default world's; the truth world has a third, which test_planted_truth.py reads


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def deployment(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TruthWorld]:
    """The planted-truth world (tests/e2e/truth_world.py): its refresh ran the engine last before the catalog."""
    with truth_world(request, tmp_path_factory.mktemp(f"engine-{request.param}")) as world:
        yield world


def open_actions(deployment: TruthWorld, ws: Seeded) -> list[repo.Action]:
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
def test_the_planted_story_is_proposed_and_nothing_the_truth_contradicts(deployment: TruthWorld, seed: int) -> None:
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


def test_the_aa_world_gets_no_budget_shift_and_no_creative_pause(deployment: TruthWorld) -> None:
    ws = deployment.workspaces[NO_SIGNAL_SEED]
    assert ws.truth["story"]["weak_creative"] is None
    assert {a.type for a in open_actions(deployment, ws)} <= {"offer_test"}


def test_a_shifts_signals_and_guardrails_are_recomputed_from_the_reports(deployment: TruthWorld) -> None:
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
