"""An experiment's results from literal exposures and billing facts: what counts, what does not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from transforms.experiments.assignment import Weighted
from transforms.experiments.results import (
    BILLING_COLUMNS,
    EXPOSURE_SCHEMA,
    RESULTS_SCHEMA,
    ExperimentDefinition,
    VersionWeights,
    experiment_results,
    results_frame,
)

START = datetime(2026, 10, 1, tzinfo=UTC)
AS_OF = datetime(2026, 10, 31, tzinfo=UTC)
FIFTY_FIFTY = VersionWeights((Weighted("a", 1), Weighted("b", 1)))


def definition(metric: str = "paid_conversion_rate", **versions: VersionWeights) -> ExperimentDefinition:
    return ExperimentDefinition(
        experiment_id="exp_1",
        variant_ids=("a", "b"),
        primary_metric=metric,  # type: ignore[arg-type]
        started_at=START,
        versions={int(k[1:]): v for k, v in versions.items()} or {1: FIFTY_FIFTY},
    )


def exposures(*rows: tuple[str, str, datetime] | tuple[str, str, datetime, int]) -> pl.LazyFrame:
    return pl.LazyFrame(
        [
            {
                "experiment_id": "exp_1",
                "app_id": "app_1",
                "user_id": r[0],
                "variant_id": r[1],
                "experiment_version": r[3] if len(r) > 3 else 1,
                "exposed_at": r[2],
            }
            for r in rows
        ],
        schema=EXPOSURE_SCHEMA,
    )


def billing(*rows: tuple[str, str, datetime, float]) -> pl.LazyFrame:
    return pl.LazyFrame(
        [{"user_id": u, "event_type": e, "occurred_at": at, "amount": amount} for u, e, at, amount in rows],
        schema=BILLING_COLUMNS,
    )


def day(n: int, hour: int = 0) -> datetime:
    return START + timedelta(days=n, hours=hour)


def test_counts_only_events_after_the_exposure_and_exposures_after_the_start() -> None:
    (result,) = experiment_results(
        [definition()],
        exposures(
            ("u1", "a", day(1)),
            ("u2", "a", day(2)),
            ("u3", "b", day(1)),
            ("u4", "b", day(-1)),  # before the start: not analysed
        ),
        billing(
            ("u1", "trial_start", day(0), 0.0),  # before u1's exposure
            ("u2", "trial_start", day(2, 1), 0.0),
            ("u2", "trial_converted", day(9), 9.99),
            ("u3", "subscription_start", day(1, 5), 4.99),
            ("u3", "refund", day(3), 4.99),
            ("u4", "subscription_start", day(1), 4.99),
        ),
        AS_OF,
    )
    a, b = result.variants
    assert (a.exposed_users, a.trial_starts, a.paid_conversions, a.refunds) == (2, 1, 1, 0)
    assert (b.exposed_users, b.trial_starts, b.paid_conversions, b.refunds) == (1, 0, 1, 1)
    assert a.primary_metric_value == pytest.approx(0.5)
    assert b.primary_metric_value == pytest.approx(1.0)
    assert a.revenue_per_user_d14 == pytest.approx(9.99 / 2)
    assert b.revenue_per_user_d7 == pytest.approx(0.0)  # charged and refunded


def test_revenue_counts_only_users_matured_for_the_horizon_and_is_null_before() -> None:
    as_of = day(20)
    (result,) = experiment_results(
        [definition()],
        exposures(("u1", "a", day(1)), ("u2", "a", day(10)), ("u3", "b", day(15))),
        billing(
            ("u1", "subscription_start", day(2), 10.0),
            ("u1", "renewal", day(16), 10.0),  # outside u1's 14-day window
            ("u2", "subscription_start", day(11), 30.0),  # u2 has not matured for D14
        ),
        as_of,
    )
    a, b = result.variants
    assert a.revenue_per_user_d7 == pytest.approx((10.0 + 30.0) / 2)
    assert a.revenue_per_user_d14 == pytest.approx(10.0)  # u1 alone
    assert a.revenue_per_user_d30 is None
    assert (b.revenue_per_user_d7, b.revenue_per_user_d14) == (None, None)
    doc = result.document()
    assert doc["variants"][0]["revenue_per_user_d30"] is None
    assert doc["variants"][1]["revenue_per_user_d14"] is None


def test_the_document_has_the_issues_shape_and_the_control_has_no_lift() -> None:
    rows = [(f"a{i}", "a", day(1)) for i in range(120)] + [(f"b{i}", "b", day(1)) for i in range(130)]
    paid = [(f"a{i}", "trial_converted", day(2), 5.0) for i in range(30)]
    paid += [(f"b{i}", "subscription_start", day(2), 5.0) for i in range(45)]
    (result,) = experiment_results([definition()], exposures(*rows), billing(*paid), AS_OF, draws=20_000)
    doc = result.document()
    assert doc["as_of"] == "2026-10-31T00:00:00Z"
    assert set(doc["srm"]) >= {"p_value", "flagged"} and doc["srm"]["flagged"] is False
    control, treatment = doc["variants"]
    assert control["lift_vs_control"] is None and control["chance_to_beat_control"] is None
    assert treatment["chance_to_beat_control"] == pytest.approx(0.9504, abs=5e-5)  # design note §3
    assert treatment["expected_loss"] == pytest.approx(0.001196, abs=1e-6)
    assert set(treatment["lift_vs_control"]) == {"mean", "ci_low", "ci_high"}
    assert control["chance_to_be_best"] + treatment["chance_to_be_best"] == pytest.approx(1.0)
    frame = results_frame([result])
    assert frame.schema == RESULTS_SCHEMA
    assert frame["variant_id"].to_list() == ["a", "b"]


def test_the_same_data_gives_the_same_figures_on_every_refresh() -> None:
    rows = [(f"u{i}", "ab"[i % 2], day(1)) for i in range(400)]
    paid = [(f"u{i}", "purchase", day(3), 2.99 if i % 4 else 9.99) for i in range(0, 400, 7)]
    defn = definition("revenue_per_user_d14")
    first = experiment_results([defn], exposures(*rows), billing(*paid), AS_OF, draws=5_000)
    again = experiment_results([defn], exposures(*rows), billing(*paid), AS_OF, draws=5_000)
    assert first[0].document() == again[0].document()
    assert first[0].variants[1].figures.chance_to_beat_control is not None


def test_srm_follows_each_versions_weights_and_counts_the_holdout() -> None:
    v1 = FIFTY_FIFTY
    v2 = VersionWeights((Weighted("a", 4), Weighted("b", 1)), holdout_pct=10)
    rows = [(f"x{i}", "ab"[i % 2], day(1), 1) for i in range(400)]
    rows += [(f"y{i}", "holdout" if i % 10 == 0 else ("b" if i % 10 == 1 else "a"), day(5), 2) for i in range(1000)]
    (result,) = experiment_results([definition(v1=v1, v2=v2)], exposures(*rows), billing(), AS_OF, draws=2_000)
    assert result.srm.observed == {"a": 200 + 800, "b": 200 + 100, "holdout": 100}
    assert result.srm.expected == pytest.approx({"a": 200 + 720, "b": 200 + 180, "holdout": 100})
    assert [v.variant_id for v in result.variants] == ["a", "b"]  # the holdout is no variant
    assert result.srm.flagged  # b got 100 where 180 were expected


def test_a_variant_nobody_saw_yet_has_zero_counts_and_no_figures() -> None:
    (result,) = experiment_results([definition()], exposures(("u1", "a", day(1))), billing(), AS_OF)
    b = result.variants[1]
    assert (b.exposed_users, b.primary_metric_value, b.figures.chance_to_beat_control) == (0, None, None)
    assert result.document()["variants"][1]["lift_vs_control"] is None


def test_an_unknown_primary_metric_is_refused() -> None:
    with pytest.raises(ValueError, match="primary_metric"):
        definition("arpu")


def test_a_users_first_exposure_counts_and_none_after_the_as_of() -> None:
    (result,) = experiment_results(
        [definition()],
        exposures(
            ("u1", "b", day(3)),
            ("u1", "a", day(2)),  # u1's first exposure: a
            ("u2", "b", AS_OF + timedelta(hours=1)),  # after the as-of
        ),
        billing(("u1", "purchase", day(4), 3.0), ("u2", "purchase", AS_OF + timedelta(hours=2), 3.0)),
        AS_OF,
    )
    a, b = result.variants
    assert (a.exposed_users, a.paid_conversions, b.exposed_users) == (1, 1, 0)
    assert result.srm.observed == {"a": 1, "b": 0}


def test_three_variants_share_the_chance_to_be_best() -> None:
    defn = ExperimentDefinition(
        experiment_id="exp_3",
        variant_ids=("a", "b", "c"),
        primary_metric="trial_start_rate",
        started_at=START,
        versions={1: VersionWeights((Weighted("a", 1), Weighted("b", 1), Weighted("c", 1)))},
    )
    rows = [(f"u{i}", "abc"[i % 3], day(1)) for i in range(900)]
    trials = [(f"u{i}", "trial_start", day(2), 0.0) for i in range(900) if (i % 3 == 2 and i % 4 == 0) or i % 7 == 0]
    frame = exposures(*rows).with_columns(pl.lit("exp_3").alias("experiment_id"))
    (result,) = experiment_results([defn], frame, billing(*trials), AS_OF, draws=20_000)
    best = [v.figures.chance_to_be_best for v in result.variants]
    loss = [v.figures.expected_loss for v in result.variants]
    assert None not in best and None not in loss
    assert sum(b for b in best if b is not None) == pytest.approx(1.0)
    assert max(range(3), key=lambda i: best[i] or 0.0) == 2  # c has the most trials …
    assert loss[2] == min(x for x in loss if x is not None)  # … and is the cheapest to ship
    assert all(x is not None and x >= 0 for x in loss)
