"""The result figures of an experiment against known values (design note §3) and their invariants."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from transforms.experiments.statistics import (
    beta_chance_to_beat,
    beta_expected_loss,
    expected_counts,
    monte_carlo_seed,
    rate_figures,
    revenue_figures,
    revenue_levels,
    sample_ratio,
)

AS_OF = datetime(2026, 11, 29, 6, tzinfo=UTC)


def test_chance_to_beat_control_matches_the_design_notes_worked_example() -> None:
    # 30/120 vs 45/130: 0.9504 closed form (0.9501 with 200 000 draws).
    assert beta_chance_to_beat((30, 120), (45, 130)) == pytest.approx(0.9504, abs=5e-5)


def test_expected_loss_matches_the_design_notes_worked_example() -> None:
    assert beta_expected_loss((30, 120), (45, 130)) == pytest.approx(0.001196, abs=1e-6)
    assert beta_expected_loss((45, 130), (30, 120)) == pytest.approx(0.095582, abs=1e-6)


def test_two_variant_rate_figures_are_exact_and_the_lift_interval_holds_the_observed_lift() -> None:
    control, treatment = rate_figures(["a", "b"], [30, 45], [120, 130], seed=monte_carlo_seed("exp_1", AS_OF))
    assert control.chance_to_beat_control is None and control.lift_vs_control is None
    assert treatment.chance_to_beat_control == pytest.approx(0.9504, abs=5e-5)
    assert treatment.chance_to_be_best == treatment.chance_to_beat_control
    assert control.chance_to_be_best == pytest.approx(1 - 0.9504, abs=5e-5)
    assert treatment.expected_loss == pytest.approx(0.001196, abs=1e-6)
    lift = treatment.lift_vs_control
    assert lift is not None
    observed = (45 / 130) / (30 / 120) - 1  # +38 %
    assert lift.ci_low < 0 < observed < lift.ci_high
    assert lift.ci_low < lift.mean < lift.ci_high


def test_chance_to_be_best_sums_to_one_and_is_repeatable_for_the_same_data() -> None:
    args = (["a", "b", "c"], [30, 45, 40], [120, 130, 125])
    first = rate_figures(*args, seed=monte_carlo_seed("exp_1", AS_OF), draws=20_000)
    again = rate_figures(*args, seed=monte_carlo_seed("exp_1", AS_OF), draws=20_000)
    later = rate_figures(*args, seed=monte_carlo_seed("exp_1", datetime(2026, 11, 29, 12, tzinfo=UTC)), draws=20_000)
    assert first == again
    assert first != later
    assert sum(f.chance_to_be_best or 0 for f in first) == pytest.approx(1.0)
    best = max(first, key=lambda f: f.chance_to_be_best or 0)
    assert best.variant_id == "b"  # the highest rate is most likely the best …
    assert best.expected_loss == min(f.expected_loss or 1 for f in first)  # … and the cheapest to ship


def test_a_variant_without_users_gives_no_figures() -> None:
    figures = rate_figures(["a", "b"], [3, 0], [10, 0], seed=1)
    assert all(f.chance_to_beat_control is None and f.chance_to_be_best is None for f in figures)


def test_successes_above_trials_is_refused() -> None:
    with pytest.raises(ValueError, match="successes"):
        rate_figures(["a", "b"], [11, 3], [10, 10], seed=1)


def test_revenue_per_user_prefers_the_arm_with_more_payers_at_the_same_price() -> None:
    control = revenue_levels([0.0] * 900 + [9.99] * 100)
    treatment = revenue_levels([0.0] * 850 + [9.99] * 150)
    assert control == {0.0: 900, 9.99: 100}
    a, b = revenue_figures(["a", "b"], [control, treatment], seed=7, draws=50_000)
    assert b.chance_to_beat_control is not None and b.chance_to_beat_control > 0.99
    assert b.lift_vs_control is not None
    assert b.lift_vs_control.ci_low < 0.5 < b.lift_vs_control.ci_high  # observed +50 %
    assert (b.expected_loss or 1) < (a.expected_loss or 0)


def test_revenue_of_an_arm_with_no_payer_is_not_a_point_mass_at_zero() -> None:
    _, b = revenue_figures(["a", "b"], [{0.0: 50}, {0.0: 48, 19.99: 2}], seed=3, draws=20_000)
    assert b.chance_to_beat_control is not None and 0.5 < b.chance_to_beat_control < 1.0


def test_srm_is_silent_on_a_fair_split_and_flags_a_gross_one() -> None:
    fair = sample_ratio({1: {"a": 5040, "b": 4960}}, {1: {"a": 0.5, "b": 0.5}})
    assert not fair.flagged and fair.p_value > 0.001
    broken = sample_ratio({1: {"a": 5500, "b": 4500}}, {1: {"a": 0.5, "b": 0.5}})
    assert broken.flagged
    assert broken.raw_p_value < broken.p_value <= 1
    assert broken.observed == {"a": 5500, "b": 4500} and broken.expected == {"a": 5000.0, "b": 5000.0}


def test_srm_raw_p_value_is_the_chi_square_p_value() -> None:
    # χ² = (5150 - 5000)²/5000·2 = 9, df 1: p = erfc(√(9/2)) = 0.0026998
    check = sample_ratio({1: {"a": 5150, "b": 4850}}, {1: {"a": 0.5, "b": 0.5}})
    assert check.chi2 == pytest.approx(9.0)
    assert check.raw_p_value == pytest.approx(0.0026998, rel=1e-4)
    assert check.p_value == pytest.approx(min(1.0, 0.0026998 * 112), rel=1e-4)


def test_srm_follows_the_weights_in_force_at_each_exposure() -> None:
    # 50/50 for 2 000 users, then 80/20 for 8 000: 1 000 + 6 400 expected in a, 1 000 + 1 600 in b.
    by_version = {1: {"a": 1000, "b": 1000}, 2: {"a": 6400, "b": 1600}}
    shares = {1: {"a": 0.5, "b": 0.5}, 2: {"a": 0.8, "b": 0.2}}
    assert expected_counts(by_version, shares) == {"a": 7400.0, "b": 2600.0}
    assert not sample_ratio(by_version, shares).flagged
    assert sample_ratio({2: {"a": 7400, "b": 2600}}, {2: {"a": 0.5, "b": 0.5}}).flagged  # the current weights alone


def test_srm_needs_a_minimum_sample_but_traffic_in_a_cell_that_expects_none_is_flagged() -> None:
    small = sample_ratio({1: {"a": 60, "b": 10}}, {1: {"a": 0.5, "b": 0.5}})
    assert small.raw_p_value < 1e-6 and not small.flagged
    stray = sample_ratio({1: {"a": 60, "b": 10, "holdout": 3}}, {1: {"a": 0.5, "b": 0.5}})
    assert stray.flagged and stray.p_value == 0.0


def test_srm_holdout_is_a_cell() -> None:
    check = sample_ratio({1: {"a": 4500, "b": 4500, "holdout": 1000}}, {1: {"a": 0.45, "b": 0.45, "holdout": 0.1}})
    assert check.df == 2 and check.chi2 == pytest.approx(0.0) and not check.flagged
    starved = sample_ratio({1: {"a": 4800, "b": 4800, "holdout": 400}}, {1: {"a": 0.45, "b": 0.45, "holdout": 0.1}})
    assert starved.flagged


def test_no_exposures_is_not_a_mismatch() -> None:
    check = sample_ratio({}, {})
    assert check.p_value == 1.0 and not check.flagged
    assert np.isfinite(check.chi2)


def test_revenue_in_many_converted_amounts_is_merged_into_few_levels_with_the_same_mean() -> None:
    # 3 000 users in each arm, a tenth of them paying ~9.99 converted at slightly different rates.
    rng = np.random.default_rng(5)
    arms = []
    for _ in range(2):
        paid = np.round(9.99 * rng.uniform(0.9, 1.1, 300), 2).tolist()
        arms.append(revenue_levels([0.0] * 2700 + paid))
    assert sum(len(h) for h in arms) > 256
    figures = revenue_figures(["a", "b"], arms, seed=1, draws=20_000)
    assert figures[1].chance_to_beat_control is not None and 0.05 < figures[1].chance_to_beat_control < 0.95
    lift = figures[1].lift_vs_control
    assert lift is not None
    means = [sum(v * c for v, c in h.items()) / sum(h.values()) for h in arms]
    assert lift.ci_low < means[1] / means[0] - 1 < lift.ci_high
