"""The Experiments page of each paywall (issue 35, preview): its audiences in the order the
gateway tries them, every experiment with its status, results and a chart of its primary metric,
and Start / Stop / Ship from a browser.

The same repository functions as `api/v1/experiments.py` (`transition`, `ship` with the last
refresh's results as its evidence), with the signed-in operator's email as the actor: the same
rules, the same audit entries, the same webhook events. Creating and editing experiments stays
with the API (the issue asks the page for the verbs only).

Every verb is a plain POST answered with a redirect (POST-redirect-GET), opened from a `<dialog>`
that states its consequence; without JavaScript the trigger leads to a confirmation page holding
the same form. A refusal of the state machine (v1's 409: someone started, stopped or shipped
first) answers 409 with the page as it is now and the reason on top. Shipping while the sample
ratio check is flagged is not blocked, but the form asks the operator to acknowledge the SRM by
name (400 beside the field otherwise), because the results it ships on may be those of a broken
split.

The results are the last refresh's (`warehouse.experiments.results.stored`); before a refresh
has computed them the page says so, and shows no zeros. Figures the results hold as null (the
control's own lift, immature revenue) are "—" with a title saying why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from flask import Response, g, redirect, request, url_for
from flask.typing import ResponseReturnValue

from api.context import state
from api.dashboard import blueprint
from api.dashboard.forms import Checkbox, DashboardForm, Stripped, read_form
from api.dashboard.pages import error_page, page
from transforms.experiments import charts
from transforms.experiments.audience import Audience, parse_audience
from transforms.experiments.model import DefinitionProblem
from transforms.experiments.results import HORIZONS, PRIMARY_HORIZON
from transforms.experiments.statistics import SRM_ALPHA
from transforms.timefmt import iso_z
from warehouse.errors import NotFound, TransitionRefused
from warehouse.experiments import repository as repo
from warehouse.experiments import results as experiment_store
from warehouse.experiments.repository import Experiment
from warehouse.experiments.results import Stored
from warehouse.paywalls import configs, history
from warehouse.workspaces import get_workspace

VERBS = ("start", "stop", "ship")
VERB_LABELS = {"start": "Start", "stop": "Stop", "ship": "Ship a variant"}
METRIC_LABELS = {
    "trial_start_rate": "trial start rate",
    "paid_conversion_rate": "paid conversion rate",
    "revenue_per_user_d14": f"revenue per user at D{PRIMARY_HORIZON}",
}
STATUS_TEXT = {
    "draft": "draft — not started",
    "running": "running",
    "stopped": "stopped",
}
NO_RESULTS = "No results yet: computed at the next refresh."
# Why a figure is "—", said in the cell's title.
WHY_CONTROL = "The control is the baseline: it has no lift or chance against itself."
WHY_NO_FIGURE = "Not computed: some variant has no exposed user (or no matured user) yet."


class ShipForm(DashboardForm):
    """Ship: the variant to publish, and the acknowledgement of a flagged SRM (checked in the view,
    which knows whether the last refresh flagged it)."""

    variant_id: Stripped = ""
    acknowledge_srm: Checkbox = False


@dataclass(frozen=True)
class Control:
    """One verb offered for one experiment, with what it does, in words."""

    verb: str
    label: str
    consequence: str


# ---------------------------------------------------------------- words and numbers


def _or(values: list[str]) -> str:
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " or " + values[-1]


def audience_words(raw: dict[str, Any] | None) -> list[str]:
    """An audience's conditions written out, one sentence part each; every one must hold.
    [] for no audience (everyone)."""
    audience: Audience | None = parse_audience(raw)
    if audience is None:
        return []
    out = []
    if audience.country is not None:
        out.append(f"country is {_or(audience.country)}")
    if audience.platform is not None:
        out.append(f"platform is {_or(audience.platform)}")
    if audience.app_version is not None:
        out.append(f"app version {audience.app_version}")
    if audience.locale is not None:
        out.append(f"locale is {_or(audience.locale)} (or a more specific one)")
    days = audience.days_since_first_seen
    if days is not None:
        if days.gte is not None and days.lte is not None:
            out.append(f"first seen {days.gte} to {days.lte} days ago")
        elif days.gte is not None:
            out.append(f"first seen at least {days.gte} days ago")
        else:
            out.append(f"first seen at most {days.lte} days ago")
    if audience.has_active_entitlement is not None:
        out.append("has an active entitlement" if audience.has_active_entitlement else "has no active entitlement")
    for key, value in (audience.attributes or {}).items():
        out.append(f"attribute {key} is {json.dumps(value)}")
    return out


def _percent(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "—"
    return f"{Decimal(str(value)) * 100:{'+' if signed else ''}.1f} %"


def _money(value: float | None, currency: str) -> str:
    return "—" if value is None else f"{Decimal(str(value)):,.2f} {currency}"


def _minute(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


def _count(value: int) -> str:
    return f"{value:,}"


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


@dataclass(frozen=True)
class Cell:
    """A figure as shown, and why it is "—" when it is (the cell's title)."""

    text: str
    why: str | None = None


def _figure(value: float | None, text: str, why: str) -> Cell:
    return Cell(text, why if value is None else None)


def _split(x: Experiment) -> str:
    total = sum(v.weight for v in x.variants)
    parts = [f"{v.variant_id} {v.weight / total * 100:.1f} %" for v in x.variants]
    holdout = f", after a holdout of {x.holdout_pct:g} % served the default" if x.holdout_pct else ""
    return ", ".join(parts) + holdout


def _loss(value: float | None, metric: str, currency: str) -> str:
    """Expected loss is in the metric's own unit: percentage points of a rate, money per user."""
    if value is None:
        return "—"
    if metric in charts.RATE_METRICS:
        return f"{Decimal(str(value)) * 100:.3f} pp"
    return _money(value, currency)


def _result_rows(x: Experiment, results: dict[str, Any], currency: str) -> list[dict[str, Any]]:
    rows = []
    for i, v in enumerate(results["variants"]):
        control = i == 0
        why_lift = WHY_CONTROL if control else WHY_NO_FIGURE
        lift = v.get("lift_vs_control") or {}
        if lift.get("mean") is None:
            lift_cell = Cell("—", why_lift)
        else:
            low, high = lift.get("ci_low"), lift.get("ci_high")
            interval = (
                f" ({_percent(low, True)} to {_percent(high, True)})" if low is not None and high is not None else ""
            )
            lift_cell = Cell(_percent(lift["mean"], True) + interval)
        value = v.get("primary_metric_value")
        value_text = _money(value, currency) if x.primary_metric == "revenue_per_user_d14" else _percent(value)
        revenue = {}
        for d in HORIZONS:
            r = v.get(f"revenue_per_user_d{d}")
            revenue[d] = _figure(r, _money(r, currency), f"Not yet: no user of this variant was exposed {d} days ago.")
        rows.append(
            {
                "variant_id": v["variant_id"],
                "control": control,
                "exposed": _count(v["exposed_users"]),
                "trial_starts": _count(v["trial_starts"]),
                "paid_conversions": _count(v["paid_conversions"]),
                "refunds": _count(v["refunds"]),
                "revenue": revenue,
                "value": _figure(
                    value,
                    value_text,
                    f"Not yet: no user exposed {PRIMARY_HORIZON} days ago."
                    if x.primary_metric == "revenue_per_user_d14"
                    else "No exposed user yet.",
                ),
                "lift": lift_cell,
                "ctw": _figure(v.get("chance_to_beat_control"), _percent(v.get("chance_to_beat_control")), why_lift),
                "best": _figure(v.get("chance_to_be_best"), _percent(v.get("chance_to_be_best")), WHY_NO_FIGURE),
                "loss": _figure(
                    v.get("expected_loss"), _loss(v.get("expected_loss"), x.primary_metric, currency), WHY_NO_FIGURE
                ),
            }
        )
    return rows


def _srm(results: dict[str, Any]) -> dict[str, Any]:
    srm = results["srm"]
    cells = sorted(srm.get("observed", {}))
    expected = srm.get("expected", {})
    split = "; ".join(
        f"{c}: {srm['observed'][c]:,} observed, "
        + (f"{expected[c]:,.0f} expected" if expected.get(c) is not None else "none expected")
        for c in cells
    )
    p = srm.get("p_value")
    return {
        "flagged": bool(srm.get("flagged")),
        "p_value": "—" if p is None else f"{p:.2g}",
        "split": split,
    }


def _chart(x: Experiment, results: dict[str, Any] | None) -> tuple[dict[str, Any] | None, str]:
    """The chart's JSON (for experiments.js) and its accessible summary; None when there is
    nothing to draw (then the summary says why)."""
    label = METRIC_LABELS[x.primary_metric]
    if results is None:
        return None, NO_RESULTS
    if x.primary_metric in charts.RATE_METRICS:
        posteriors = charts.rate_posteriors(x.primary_metric, results["variants"])
        if posteriors is None:
            return None, f"No curve yet: no variant has an exposed user ({label})."
        summary = "; ".join(
            f"{c.variant_id} centred on {_percent(c.mean)} (95 % between {_percent(c.interval()[0])} "
            f"and {_percent(c.interval()[1])})"
            for c in posteriors.curves
        )
        data = {
            "kind": "posterior",
            "axis": label,
            "series": [
                {"label": c.variant_id, "x": [round(v, 7) for v in c.x], "y": [float(f"{v:.5g}") for v in c.density]}
                for c in posteriors.curves
            ],
        }
        return data, f"Posterior density of the {label} per variant: {summary}."
    intervals = charts.lift_intervals(results["variants"])
    if not intervals:
        return None, f"No interval yet: the lift of {label} needs matured users in every variant."
    summary = "; ".join(
        f"{i.variant_id} {_percent(i.mean, True)} (95 % from {_percent(i.ci_low, True)} to {_percent(i.ci_high, True)})"
        for i in intervals
    )
    data = {
        "kind": "interval",
        "axis": f"lift of {label} vs {results['variants'][0]['variant_id']}",
        "series": [{"label": i.variant_id, "mean": i.mean, "low": i.ci_low, "high": i.ci_high} for i in intervals],
    }
    return data, f"Lift of {label} against the control, 95 % credible interval per variant: {summary}."


def _controls(x: Experiment, live: configs.Published | None, words: list[str], results: Stored | None) -> list[Control]:
    who = f"users who match its audience ({'; '.join(words)})" if words else "every user"
    # A paywall with experiments no longer splits by its document's weights (transforms/experiments/
    # serving.py): whoever no experiment takes gets the live document's first variant.
    default = (
        f"the paywall's default (live version {live.version}, variant {live.document.variants[0].variant_id})"
        if live
        else "the paywall's default"
    )
    if x.status == "draft":
        return [
            Control(
                "start",
                VERB_LABELS["start"],
                f"From now on {who} fetching this paywall, and not taken by a running experiment tried before it, "
                f"are split {_split(x)}. Each keeps their variant for the experiment's life; only exposures from "
                "now on are analysed.",
            )
        ]
    if x.status != "running":
        return []
    as_of = f"the results as of {_minute(results.as_of)} UTC" if results else "no results yet"
    return [
        Control(
            "stop",
            VERB_LABELS["stop"],
            f"Everyone it took returns at once to {default}. A stopped experiment cannot be started again; "
            "its results are kept and its revenue keeps maturing.",
        ),
        Control(
            "ship",
            VERB_LABELS["ship"],
            f"Publishes version {(live.version if live else 0) + 1} of the paywall with the variant you choose "
            "first and experiment_active off, so it is the config of everyone no other running experiment takes; "
            f"then stops this experiment. Audited with {as_of}.",
        ),
    ]


def _experiment(
    x: Experiment, order: int | None, results: Stored | None, live: configs.Published | None, currency: str
) -> dict[str, Any]:
    words = audience_words(x.audience)
    chart, summary = _chart(x, results.results if results else None)
    return {
        "x": x,
        "order": _ordinal(order) if order is not None else None,
        "status_text": STATUS_TEXT[x.status] + (f" — shipped {x.shipped_variant_id}" if x.shipped_variant_id else ""),
        "words": words,
        "split": _split(x),
        "metric": METRIC_LABELS[x.primary_metric],
        "created": iso_z(x.created_at),
        "started": iso_z(x.started_at),
        "stopped": iso_z(x.stopped_at),
        "as_of": iso_z(results.as_of) if results else None,
        "rows": _result_rows(x, results.results, currency) if results else None,
        "srm": _srm(results.results) if results else None,
        "chart": chart,
        "chart_summary": summary,
        "controls": _controls(x, live, words, results),
        "variant_ids": [v.variant_id for v in x.variants],
    }


# ---------------------------------------------------------------- pages


def _app(conn: Any, app_id: str) -> history.AppRef:
    found = history.app_in_workspace(conn, workspace_id=g.workspace_id, app_id=app_id)
    if found is None:
        raise NotFound(f"No app {app_id} in this workspace")
    return found


def _sorted(found: list[Experiment], running: list[Experiment]) -> list[Experiment]:
    """Running ones in the order the gateway tries them, then drafts by priority, then stopped
    ones, the latest stopped first."""
    drafts = sorted((x for x in found if x.status == "draft"), key=lambda x: (x.priority, x.created_at, x.id))
    stopped = sorted((x for x in found if x.status == "stopped"), key=lambda x: x.stopped_at or x.created_at)
    return [*running, *drafts, *reversed(stopped)]


def _paywall_page(
    app_id: str, paywall_id: str, *, status: int = 200, notice: str | None = None, **extra: Any
) -> Response:
    if not paywall_id or len(paywall_id) > configs.MAX_PAYWALL_ID:
        raise NotFound(f"No paywall {paywall_id[:40]!r}")
    with state().db.read() as conn:
        app = _app(conn, app_id)
        live = configs.live(conn, app_id=app_id, paywall_id=paywall_id)
        found = repo.listed(conn, g.workspace_id, app_id=app_id, paywall_id=paywall_id)
        running = list(repo.for_paywall(conn, app_id, paywall_id).running)
        stored = experiment_store.stored(conn, [x.id for x in found])
        currency = get_workspace(conn, g.workspace_id).reporting_currency
    order = {x.id: i + 1 for i, x in enumerate(running)}
    experiments = [_experiment(x, order.get(x.id), stored.get(x.id), live, currency) for x in _sorted(found, running)]
    return page(
        "dashboard/experiments/paywall.html",
        status,
        title=f"Experiments of paywall {paywall_id}",
        section="experiments",
        app=app,
        paywall_id=paywall_id,
        live=live,
        experiments=experiments,
        audiences=[e for e in experiments if e["order"] is not None],
        notice=notice,
        done=_done(experiments),
        srm_alpha=SRM_ALPHA,
        here=url_for("dashboard.paywall_experiments", app_id=app_id, paywall_id=paywall_id),
        **extra,
    )


def _done(experiments: list[dict[str, Any]]) -> str | None:
    """The success line after a verb's redirect (`?done=verb&experiment=id[&version=n]`)."""
    verb, experiment_id = request.args.get("done"), request.args.get("experiment")
    names = {e["x"].id: e["x"] for e in experiments}
    if verb not in VERBS or experiment_id not in names:
        return None
    x = names[experiment_id]
    if verb == "start":
        return f"Started “{x.name}”: users fetching the paywall are split from now on."
    if verb == "stop":
        return f"Stopped “{x.name}”: everyone it took gets the paywall's default again."
    version = request.args.get("version", type=int)
    return (
        f"Shipped {x.shipped_variant_id} of “{x.name}”: paywall version {version} is live and the experiment stopped."
    )


@blueprint.get("/experiments")
def experiments() -> Response:
    """Every published paywall of the workspace with its experiments by status: the way in."""
    with state().db.read() as conn:
        paywalls = history.paywalls(conn, workspace_id=g.workspace_id)
        found = repo.listed(conn, g.workspace_id)
    counts: dict[tuple[str, str], dict[str, int]] = {}
    for x in found:
        by_status = counts.setdefault((x.app_id, x.paywall_id), {})
        by_status[x.status] = by_status.get(x.status, 0) + 1
    rows = [{"p": p, "counts": counts.get((p.app.id, p.paywall_id), {})} for p in paywalls]
    return page("dashboard/experiments/list.html", title="Experiments", section="experiments", rows=rows)


@blueprint.get("/paywalls/<app_id>/<paywall_id>/experiments")
def paywall_experiments(app_id: str, paywall_id: str) -> Response:
    return _paywall_page(app_id, paywall_id)


def _get(experiment_id: str) -> Experiment:
    with state().db.read() as conn:
        return repo.get(conn, g.workspace_id, experiment_id)  # NotFound: the 404 page


@blueprint.get("/experiments/<experiment_id>/<verb>")
def experiment_confirm(experiment_id: str, verb: str) -> Response:
    """Without JavaScript the dialogs cannot open: their triggers lead here, to the same form."""
    if verb not in VERBS:
        return error_page(404, f"No such page: {request.path}")
    x = _get(experiment_id)
    return _paywall_page(x.app_id, x.paywall_id, confirm=(experiment_id, verb))


@blueprint.post("/experiments/<experiment_id>/<verb>")
def experiment_act(experiment_id: str, verb: str) -> ResponseReturnValue:
    if verb not in VERBS:
        return error_page(404, f"No such page: {request.path}")
    x = _get(experiment_id)
    version: int | None = None
    try:
        with state().db.write() as conn:
            if verb == "ship":
                version = _ship(conn, x)
            else:
                repo.transition(conn, g.workspace_id, experiment_id, verb, actor=g.operator)
    except _Refused as refused:
        return _paywall_page(
            x.app_id, x.paywall_id, status=400, confirm=(experiment_id, verb), form_error=refused.message,
            form_values=refused.values,
        )  # fmt: skip
    except TransitionRefused as exc:
        now = _get(experiment_id)
        notice = f"Could not {verb} “{x.name}”: it is {now.status} now ({exc}). The page shows it as it is."
        return _paywall_page(x.app_id, x.paywall_id, status=409, notice=notice)
    args: dict[str, Any] = {"app_id": x.app_id, "paywall_id": x.paywall_id, "done": verb, "experiment": experiment_id}
    if version is not None:
        args["version"] = version
    return redirect(url_for("dashboard.paywall_experiments", **args), 303)


class _Refused(Exception):
    """A ship form refused before anything changed: `message` is shown beside the form."""

    def __init__(self, message: str, values: ShipForm) -> None:
        super().__init__(message)
        self.message = message
        self.values = values


def _ship(conn: Any, x: Experiment) -> int:
    """Ship the form's variant with the last refresh's results as evidence, as v1 does; refuses
    (400) an unknown variant, and a flagged SRM the operator did not acknowledge."""
    form = read_form(ShipForm).values
    if form.variant_id not in {v.variant_id for v in x.variants}:
        raise _Refused("Choose one of the experiment's variants.", form)
    results = experiment_store.stored(conn, [x.id]).get(x.id)
    if results is not None and results.srm_flagged and not form.acknowledge_srm:
        raise _Refused(
            "The sample ratio check is flagged: tick the box to ship on these results anyway.",
            form,
        )
    try:
        _, published = repo.ship(
            conn, g.workspace_id, x.id, form.variant_id, actor=g.operator,
            evidence=results.results if results else {},
        )  # fmt: skip
    except DefinitionProblem as exc:
        raise _Refused(exc.message, form) from None
    return published.version
