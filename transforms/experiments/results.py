# Comments and docstrings write "experiment × variant" as the issue does; ruff would read × as a typo.
# ruff: noqa: RUF002, RUF003
"""An experiment's results: from its exposures and its users' billing facts to the issue's `results`
object (as_of, srm, variants[...]).

Pure: frames and definitions in, values out. The Dagster asset reads the exposures from the
operational database and the billing facts from the lake (`transforms.subscriptions.periods.
billing_events`, amounts already in the reporting currency), calls `experiment_results`, and
stores what it returns; nothing here knows where the rows came from.

What counts (docs/metrics.md, "Experiment results"):
- a user's first exposure, and only if it is at or after the experiment's `started_at` and not
  after the as-of (exposures of a migrated document before the start were bucketed under other
  rules);
- only billing facts at or after the user's exposure, up to the as-of: trial starts, paid
  conversions (a first paid period, with or without a trial, or a one-off purchase) and refunds
  are counted as *users* who had at least one, so the rates are per exposed user;
- revenue per user at D days: charges minus refunds in [exposure, exposure + D days), averaged over
  the users exposed at least D days before the as-of; null (never 0) while none has matured.
The holdout is a cell of the sample-ratio check but not a variant of the results.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Literal

import polars as pl

from transforms import event_types as t
from transforms.experiments.assignment import Weighted, expected_shares
from transforms.experiments.statistics import (
    DRAWS,
    Lift,
    SampleRatio,
    VariantFigures,
    monte_carlo_seed,
    rate_figures,
    revenue_figures,
    sample_ratio,
)

PrimaryMetric = Literal["trial_start_rate", "paid_conversion_rate", "revenue_per_user_d14"]
PRIMARY_METRICS: Final[tuple[PrimaryMetric, ...]] = ("trial_start_rate", "paid_conversion_rate", "revenue_per_user_d14")
# The revenue horizons the results show, in days after the exposure.
HORIZONS: Final = (7, 14, 30)
# The horizon of the revenue primary metric.
PRIMARY_HORIZON: Final = 14
PAID_TYPES: Final = (t.SUBSCRIPTION_START, t.TRIAL_CONVERTED, t.PURCHASE)
CHARGE_TYPES: Final = (t.SUBSCRIPTION_START, t.TRIAL_CONVERTED, t.RENEWAL, t.PURCHASE)
# Revenue is summed in integer millionths of the reporting currency: a float sum depends on the
# order a parallel group-by adds in, and the same data must give the same figures on every refresh.
MICROS: Final = 1_000_000

EXPOSURE_SCHEMA: Final = pl.Schema(
    {
        "experiment_id": pl.String(),
        "app_id": pl.String(),
        "user_id": pl.String(),
        "variant_id": pl.String(),
        "experiment_version": pl.Int64(),
        "exposed_at": pl.Datetime("us", "UTC"),
    }
)
# The billing facts read: a projection of `transforms.subscriptions.periods.BILLING_SCHEMA`.
BILLING_COLUMNS: Final = pl.Schema(
    {
        "user_id": pl.String(),
        "event_type": pl.String(),
        "occurred_at": pl.Datetime("us", "UTC"),
        "amount": pl.Float64(),  # in the reporting currency, >= 0 (a refund's amount refunded)
    }
)
# Per experiment × cell (variants and holdout): the counts of the results.
VARIANT_COUNTS_SCHEMA: Final = pl.Schema(
    {
        "experiment_id": pl.String(),
        "variant_id": pl.String(),
        "exposed_users": pl.UInt32(),
        "trial_starts": pl.UInt32(),
        "paid_conversions": pl.UInt32(),
        "refunds": pl.UInt32(),
        **{f"matured_users_d{d}": pl.UInt32() for d in HORIZONS},
        **{f"revenue_per_user_d{d}": pl.Float64() for d in HORIZONS},
    }
)
# Per experiment × version × cell: exposures, the sample-ratio check's input.
VERSION_COUNTS_SCHEMA: Final = pl.Schema(
    {
        "experiment_id": pl.String(),
        "experiment_version": pl.Int64(),
        "variant_id": pl.String(),
        "exposures": pl.UInt32(),
    }
)
# Per experiment × cell × revenue level (cents) at the primary horizon: the revenue model's input.
REVENUE_LEVEL_SCHEMA: Final = pl.Schema(
    {
        "experiment_id": pl.String(),
        "variant_id": pl.String(),
        "revenue": pl.Float64(),
        "users": pl.UInt32(),
    }
)
# One row per experiment × variant of the results, for the asset to store.
RESULTS_SCHEMA: Final = pl.Schema(
    {
        "experiment_id": pl.String(),
        "as_of": pl.Datetime("us", "UTC"),
        "position": pl.Int32(),
        "variant_id": pl.String(),
        "exposed_users": pl.Int64(),
        "trial_starts": pl.Int64(),
        "paid_conversions": pl.Int64(),
        "refunds": pl.Int64(),
        "revenue_per_user_d7": pl.Float64(),
        "revenue_per_user_d14": pl.Float64(),
        "revenue_per_user_d30": pl.Float64(),
        "primary_metric_value": pl.Float64(),
        "lift_mean": pl.Float64(),
        "lift_ci_low": pl.Float64(),
        "lift_ci_high": pl.Float64(),
        "chance_to_beat_control": pl.Float64(),
        "chance_to_be_best": pl.Float64(),
        "expected_loss": pl.Float64(),
        "srm_p_value": pl.Float64(),
        "srm_flagged": pl.Boolean(),
    }
)


@dataclass(frozen=True)
class VersionWeights:
    """The split in force while the experiment had this version: what SRM expects of its exposures."""

    variants: tuple[Weighted, ...]
    holdout_pct: float = 0.0


@dataclass(frozen=True)
class ExperimentDefinition:
    """What the results need to know of an experiment. `variant_ids` in the experiment's order (the
    first is the control); `versions` maps every version exposures were recorded under to its split."""

    experiment_id: str
    variant_ids: tuple[str, ...]
    primary_metric: PrimaryMetric
    started_at: datetime
    versions: Mapping[int, VersionWeights] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.primary_metric not in PRIMARY_METRICS:
            raise ValueError(f"primary_metric must be one of {', '.join(PRIMARY_METRICS)}")
        if len(self.variant_ids) < 2 or len(set(self.variant_ids)) != len(self.variant_ids):
            raise ValueError("an experiment has at least two distinct variants")


@dataclass(frozen=True)
class VariantResult:
    variant_id: str
    exposed_users: int
    trial_starts: int
    paid_conversions: int
    refunds: int
    revenue_per_user_d7: float | None
    revenue_per_user_d14: float | None
    revenue_per_user_d30: float | None
    primary_metric_value: float | None
    figures: VariantFigures


@dataclass(frozen=True)
class ExperimentResult:
    experiment_id: str
    as_of: datetime
    srm: SampleRatio
    variants: tuple[VariantResult, ...]

    def document(self) -> dict[str, Any]:
        """The issue's `results` object: fractions, immature or undefined figures null (never NaN)."""
        return {
            "as_of": self.as_of.isoformat().replace("+00:00", "Z"),
            "srm": {
                "p_value": _number(self.srm.p_value),
                "flagged": self.srm.flagged,
                "raw_p_value": _number(self.srm.raw_p_value),
                "observed": dict(self.srm.observed),
                "expected": {k: _number(v) for k, v in self.srm.expected.items()},
            },
            "variants": [
                {
                    "variant_id": v.variant_id,
                    "exposed_users": v.exposed_users,
                    "trial_starts": v.trial_starts,
                    "paid_conversions": v.paid_conversions,
                    "refunds": v.refunds,
                    "revenue_per_user_d7": _number(v.revenue_per_user_d7),
                    "revenue_per_user_d14": _number(v.revenue_per_user_d14),
                    "revenue_per_user_d30": _number(v.revenue_per_user_d30),
                    "primary_metric_value": _number(v.primary_metric_value),
                    "lift_vs_control": _lift(v.figures.lift_vs_control),
                    "chance_to_beat_control": _number(v.figures.chance_to_beat_control),
                    "chance_to_be_best": _number(v.figures.chance_to_be_best),
                    "expected_loss": _number(v.figures.expected_loss),
                }
                for v in self.variants
            ],
        }


def _number(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _lift(lift: Lift | None) -> dict[str, float | None] | None:
    if lift is None:
        return None
    return {"mean": _number(lift.mean), "ci_low": _number(lift.ci_low), "ci_high": _number(lift.ci_high)}


# ---------------------------------------------------------------- the Polars part


def analysed_exposures(exposures: pl.LazyFrame, starts: pl.LazyFrame, as_of: datetime) -> pl.LazyFrame:
    """Each user's first exposure per experiment, kept when at or after the start and not after as-of.
    `starts` has (experiment_id, started_at); an experiment missing from it is not analysed."""
    return (
        exposures.select(list(EXPOSURE_SCHEMA))
        .cast(EXPOSURE_SCHEMA)
        .join(starts, on="experiment_id", how="inner")
        .filter((pl.col("exposed_at") >= pl.col("started_at")) & (pl.col("exposed_at") <= as_of))
        .sort("exposed_at", "variant_id")
        .unique(subset=["experiment_id", "user_id"], keep="first", maintain_order=True)
        .drop("started_at")
    )


def per_user(exposed: pl.LazyFrame, billing: pl.LazyFrame, as_of: datetime) -> pl.LazyFrame:
    """One row per analysed exposure with what the user did after it: trial, paid, refund (bools) and
    net revenue (micros) in each horizon's window, and whether that horizon has matured."""
    facts = (
        billing.select(list(BILLING_COLUMNS))
        .cast(BILLING_COLUMNS)
        .filter(pl.col("occurred_at") <= as_of)
        .with_columns(
            pl.when(pl.col("event_type").is_in(CHARGE_TYPES))
            .then(pl.col("amount"))
            .when(pl.col("event_type") == t.REFUND)
            .then(-pl.col("amount"))
            .otherwise(0.0)
            .fill_null(0.0)
            .mul(MICROS)
            .round()
            .cast(pl.Int64)
            .alias("net")
        )
    )
    after = (pl.col("occurred_at") >= pl.col("exposed_at")).fill_null(False)
    keys = ["experiment_id", "variant_id", "experiment_version", "user_id", "exposed_at"]
    return (
        exposed.join(facts, on="user_id", how="left")
        .group_by(keys)
        .agg(
            (after & (pl.col("event_type") == t.TRIAL_START)).any().alias("trial"),
            (after & pl.col("event_type").is_in(PAID_TYPES)).any().alias("paid"),
            (after & (pl.col("event_type") == t.REFUND)).any().alias("refund"),
            *[
                pl.col("net")
                .filter(after & (pl.col("occurred_at") < pl.col("exposed_at") + timedelta(days=d)))
                .sum()
                .alias(f"revenue_d{d}")
                for d in HORIZONS
            ],
        )
        .with_columns((pl.col("exposed_at") + timedelta(days=d) <= as_of).alias(f"matured_d{d}") for d in HORIZONS)
    )


def variant_counts(users: pl.LazyFrame) -> pl.LazyFrame:
    """Per experiment × cell: the counts and revenue per matured user (null while none matured)."""
    return (
        users.group_by("experiment_id", "variant_id")
        .agg(
            pl.len().alias("exposed_users"),
            pl.col("trial").sum().alias("trial_starts"),
            pl.col("paid").sum().alias("paid_conversions"),
            pl.col("refund").sum().alias("refunds"),
            *[pl.col(f"matured_d{d}").sum().alias(f"matured_users_d{d}") for d in HORIZONS],
            *[pl.col(f"revenue_d{d}").filter(pl.col(f"matured_d{d}")).sum().alias(f"_micros_d{d}") for d in HORIZONS],
        )
        .with_columns(
            pl.when(pl.col(f"matured_users_d{d}") > 0)
            .then(pl.col(f"_micros_d{d}") / MICROS / pl.col(f"matured_users_d{d}"))
            .otherwise(None)
            .alias(f"revenue_per_user_d{d}")
            for d in HORIZONS
        )
        .select(list(VARIANT_COUNTS_SCHEMA))
        .cast(VARIANT_COUNTS_SCHEMA)
    )


def version_counts(users: pl.LazyFrame) -> pl.LazyFrame:
    """Per experiment × version × cell: the exposures the sample-ratio check compares."""
    return (
        users.group_by("experiment_id", "experiment_version", "variant_id")
        .agg(pl.len().alias("exposures"))
        .select(list(VERSION_COUNTS_SCHEMA))
        .cast(VERSION_COUNTS_SCHEMA)
    )


def revenue_level_counts(users: pl.LazyFrame, horizon: int = PRIMARY_HORIZON) -> pl.LazyFrame:
    """Per experiment × cell: matured users per revenue level (rounded to cents) at `horizon` days."""
    return (
        users.filter(pl.col(f"matured_d{horizon}"))
        .group_by("experiment_id", "variant_id", (pl.col(f"revenue_d{horizon}") / MICROS).round(2).alias("revenue"))
        .agg(pl.len().alias("users"))
        .select(list(REVENUE_LEVEL_SCHEMA))
        .cast(REVENUE_LEVEL_SCHEMA)
    )


# ---------------------------------------------------------------- the statistics per experiment


def experiment_results(
    definitions: Sequence[ExperimentDefinition],
    exposures: pl.LazyFrame,
    billing: pl.LazyFrame,
    as_of: datetime,
    draws: int = DRAWS,
) -> list[ExperimentResult]:
    """The results of every experiment in `definitions`, as of `as_of` (a UTC datetime).

    `exposures` has `EXPOSURE_SCHEMA`; `billing` at least `BILLING_COLUMNS` (the lake's billing
    facts of the experiments' workspace; user ids as the exposures key them)."""
    if as_of.tzinfo is None:
        raise ValueError("as_of must be timezone-aware (UTC)")
    starts = pl.LazyFrame(
        {"experiment_id": [d.experiment_id for d in definitions], "started_at": [d.started_at for d in definitions]},
        schema={"experiment_id": pl.String(), "started_at": pl.Datetime("us", "UTC")},
    )
    users = per_user(analysed_exposures(exposures, starts, as_of), billing, as_of)
    counts, versions, levels = pl.collect_all(
        [variant_counts(users), version_counts(users), revenue_level_counts(users)]
    )
    return [_result(d, counts, versions, levels, as_of, draws) for d in definitions]


def _result(
    definition: ExperimentDefinition,
    counts: pl.DataFrame,
    versions: pl.DataFrame,
    levels: pl.DataFrame,
    as_of: datetime,
    draws: int,
) -> ExperimentResult:
    eid = definition.experiment_id
    rows = {r["variant_id"]: r for r in counts.filter(pl.col("experiment_id") == eid).iter_rows(named=True)}
    by_version: dict[int, dict[str, int]] = {}
    for r in versions.filter(pl.col("experiment_id") == eid).iter_rows(named=True):
        by_version.setdefault(r["experiment_version"], {})[r["variant_id"]] = r["exposures"]
    shares = {v: expected_shares(w.variants, w.holdout_pct) for v, w in definition.versions.items()}
    srm = sample_ratio(by_version, shares)

    ids = definition.variant_ids
    zero: dict[str, Any] = {"exposed_users": 0, "trial_starts": 0, "paid_conversions": 0, "refunds": 0}
    row = [rows.get(v, zero) for v in ids]
    seed = monte_carlo_seed(eid, as_of)
    metric = definition.primary_metric
    if metric == "revenue_per_user_d14":
        histograms: list[dict[float, int]] = [{} for _ in ids]
        position = {v: i for i, v in enumerate(ids)}
        for r in levels.filter(pl.col("experiment_id") == eid).iter_rows(named=True):
            if r["variant_id"] in position:
                histograms[position[r["variant_id"]]][r["revenue"]] = r["users"]
        figures = revenue_figures(ids, histograms, seed, draws=draws)
        values = [r.get("revenue_per_user_d14") for r in row]
    else:
        column = "trial_starts" if metric == "trial_start_rate" else "paid_conversions"
        successes = [int(r[column]) for r in row]
        trials = [int(r["exposed_users"]) for r in row]
        figures = rate_figures(ids, successes, trials, seed, draws=draws)
        values = [s / n if n > 0 else None for s, n in zip(successes, trials, strict=True)]
    variants = tuple(
        VariantResult(
            variant_id=v,
            exposed_users=int(r["exposed_users"]),
            trial_starts=int(r["trial_starts"]),
            paid_conversions=int(r["paid_conversions"]),
            refunds=int(r["refunds"]),
            revenue_per_user_d7=r.get("revenue_per_user_d7"),
            revenue_per_user_d14=r.get("revenue_per_user_d14"),
            revenue_per_user_d30=r.get("revenue_per_user_d30"),
            primary_metric_value=value,
            figures=figure,
        )
        for v, r, value, figure in zip(ids, row, values, figures, strict=True)
    )
    return ExperimentResult(eid, as_of, srm, variants)


def results_frame(results: Sequence[ExperimentResult]) -> pl.DataFrame:
    """One row per experiment × variant (`RESULTS_SCHEMA`), NaN as null: what the asset stores."""
    rows = []
    for result in results:
        for position, v in enumerate(result.variants):
            lift = _lift(v.figures.lift_vs_control) or {}
            rows.append(
                {
                    "experiment_id": result.experiment_id,
                    "as_of": result.as_of,
                    "position": position,
                    "variant_id": v.variant_id,
                    "exposed_users": v.exposed_users,
                    "trial_starts": v.trial_starts,
                    "paid_conversions": v.paid_conversions,
                    "refunds": v.refunds,
                    "revenue_per_user_d7": _number(v.revenue_per_user_d7),
                    "revenue_per_user_d14": _number(v.revenue_per_user_d14),
                    "revenue_per_user_d30": _number(v.revenue_per_user_d30),
                    "primary_metric_value": _number(v.primary_metric_value),
                    "lift_mean": lift.get("mean"),
                    "lift_ci_low": lift.get("ci_low"),
                    "lift_ci_high": lift.get("ci_high"),
                    "chance_to_beat_control": _number(v.figures.chance_to_beat_control),
                    "chance_to_be_best": _number(v.figures.chance_to_be_best),
                    "expected_loss": _number(v.figures.expected_loss),
                    "srm_p_value": _number(result.srm.p_value),
                    "srm_flagged": result.srm.flagged,
                }
            )
    return pl.DataFrame(rows, schema=RESULTS_SCHEMA)
