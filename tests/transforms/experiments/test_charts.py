"""The Experiments page's chart figures: the posterior curves match the results' statistics and
hold the mass, and nothing is drawn without data."""

from __future__ import annotations

import numpy as np
import pytest

from transforms.experiments.charts import POINTS, beta_density, lift_intervals, rate_posteriors
from transforms.experiments.statistics import _posterior, beta_chance_to_beat


def variant(variant_id: str, exposed: int, paid: int, trials: int = 0, lift: object = None) -> dict[str, object]:
    return {
        "variant_id": variant_id,
        "exposed_users": exposed,
        "paid_conversions": paid,
        "trial_starts": trials,
        "lift_vs_control": lift,
    }


def test_the_curves_are_the_statistics_posteriors_and_integrate_to_one() -> None:
    chart = rate_posteriors("paid_conversion_rate", [variant("a", 120, 30), variant("b", 130, 45)])
    assert chart is not None and [c.variant_id for c in chart.curves] == ["a", "b"]
    for curve, (s, n) in zip(chart.curves, [(30, 120), (45, 130)], strict=True):
        prior = _posterior(s, n)  # the results' own model (Beta(1, 1) prior)
        assert (curve.alpha, curve.beta) == (float(prior.alpha), float(prior.beta))
        assert len(curve.x) == POINTS and curve.x == sorted(curve.x)
        assert np.trapezoid(curve.density, curve.x) == pytest.approx(1.0, abs=1e-3)
        assert curve.mean == pytest.approx((1 + s) / (2 + n))
        assert 0.0 <= chart.x_min <= curve.x[0] and curve.x[-1] <= chart.x_max <= 1.0
    # The chance to beat control the page shows is the overlap these two curves draw.
    a, b = chart.curves
    grid = np.linspace(0, 1, 20_001)
    cdf_a = np.cumsum(beta_density(a.alpha, a.beta, grid)) * (grid[1] - grid[0])
    numeric = float(np.sum(beta_density(b.alpha, b.beta, grid) * cdf_a) * (grid[1] - grid[0]))
    assert numeric == pytest.approx(beta_chance_to_beat((30, 120), (45, 130)), abs=2e-3)


def test_trial_start_rate_reads_the_trial_starts_and_large_counts_do_not_overflow() -> None:
    chart = rate_posteriors("trial_start_rate", [variant("a", 2_000_000, 0, trials=400_000), variant("b", 10, 10, 0)])
    assert chart is not None
    big, none = chart.curves
    assert (big.alpha, big.beta) == (400_001.0, 1_600_001.0)
    assert all(np.isfinite(big.density)) and max(big.density) > 1000  # a narrow, tall peak near 0.2
    assert 0.198 < big.x[0] < big.x[-1] < 0.202  # ± 3.7 sd of 0.00028
    assert none.x[0] < 1e-5 and none.density[0] == pytest.approx(11.0, rel=1e-3)  # Beta(1, 11) near 0: its mode


def test_no_curve_without_data_and_none_for_revenue() -> None:
    assert rate_posteriors("paid_conversion_rate", [variant("a", 0, 0), variant("b", 0, 0)]) is None
    chart = rate_posteriors("paid_conversion_rate", [variant("a", 0, 0), variant("b", 50, 5)])
    assert chart is not None and [c.variant_id for c in chart.curves] == ["b"]
    assert rate_posteriors("revenue_per_user_d14", [variant("a", 50, 5)]) is None
    with pytest.raises(ValueError, match="between 0 and the exposed users"):
        rate_posteriors("paid_conversion_rate", [variant("a", 5, 6)])


def test_lift_intervals_leave_out_the_control_and_incomplete_lifts() -> None:
    found = lift_intervals(
        [
            variant("a", 100, 0),
            variant("b", 100, 0, lift={"mean": 0.1, "ci_low": -0.05, "ci_high": 0.3}),
            variant("c", 100, 0, lift={"mean": None, "ci_low": None, "ci_high": None}),
        ]
    )
    assert [(i.variant_id, i.mean, i.ci_low, i.ci_high) for i in found] == [("b", 0.1, -0.05, 0.3)]


def test_the_interval_is_the_betas_central_quantiles() -> None:
    chart = rate_posteriors("paid_conversion_rate", [variant("a", 1000, 100)], points=50)
    assert chart is not None
    low, high = chart.curves[0].interval()
    draws = np.random.default_rng(7).beta(101, 901, 200_000)
    assert (low, high) == pytest.approx(tuple(np.quantile(draws, [0.025, 0.975])), abs=1e-3)
