# ruff: noqa: RUF003  (comments quote the design note's formulas: α, −, ×)
"""The actions engine's statistics: the design note's reference values, closed forms checked against SciPy or
a seeded Monte Carlo, and the edge cases an engine meets on real data (no conversions, one user, no variance)."""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from transforms.actions import sequential as sq
from transforms.actions import statistics as st


def moments(n: float, mean: float, sd: float) -> st.Moments:
    """Sufficient statistics of an arm described by its size, mean and sample sd."""
    return st.Moments.of(n, n * mean, (n - 1) * sd * sd + n * mean * mean)


# ---------------------------------------------------------------- beta-binomial


def test_prob_greater_reproduces_the_design_notes_check() -> None:
    # §2.2: 30/120 vs 45/130 under a uniform prior (Beta(1, 1): rate 0.5, κ = 2) → 0.9504.
    a = st.beta_posterior(30, 120, 0.5, 2)
    b = st.beta_posterior(45, 130, 0.5, 2)
    assert float(st.prob_greater(a, b)) == pytest.approx(0.9504, abs=5e-5)
    draws = np.random.default_rng(7)
    mc = (draws.beta(b.alpha, b.beta, 400_000) > draws.beta(a.alpha, a.beta, 400_000)).mean()
    assert float(st.prob_greater(a, b)) == pytest.approx(mc, abs=0.002)
    assert float(st.prob_greater(a, b) + st.prob_greater(b, a)) == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ((6.0, 14.0), (11.5, 40.25)),  # only α_A integral: the sum runs the other way
        ((6.3, 14.0), (11.5, 40.25)),  # neither integral: quadrature
        ((5006.0, 15014.0), (5121.0, 14899.0)),  # thousands of terms, summed in log space
    ],
)
def test_prob_greater_matches_monte_carlo_on_every_path(a: tuple[float, float], b: tuple[float, float]) -> None:
    pa = st.BetaPosterior(np.float64(a[0]), np.float64(a[1]))
    pb = st.BetaPosterior(np.float64(b[0]), np.float64(b[1]))
    rng = np.random.default_rng(11)
    mc = (rng.beta(b[0], b[1], 400_000) > rng.beta(a[0], a[1], 400_000)).mean()
    assert float(st.prob_greater(pa, pb)) == pytest.approx(mc, abs=0.003)


def test_prob_greater_is_vectorised_and_handles_zero_conversions() -> None:
    a = st.beta_posterior(np.array([0, 10, 0]), np.array([50, 100, 1]), 0.3)
    b = st.beta_posterior(np.array([0, 20, 1]), np.array([50, 100, 1]), 0.3)
    p = st.prob_greater(a, b)
    assert p.shape == (3,)
    assert p[0] == pytest.approx(0.5, abs=1e-9)  # the same evidence on both sides
    assert p[1] > 0.95
    assert 0.5 < p[2] < 0.8  # one trial moves a 20-trial prior a little, not to certainty


def test_beta_posterior_is_the_prior_plus_the_counts_and_refuses_nonsense() -> None:
    post = st.beta_posterior(30, 100, 0.25)
    assert (float(post.alpha), float(post.beta)) == (35.0, 85.0)
    with pytest.raises(ValueError, match="prior rate"):
        st.beta_posterior(1, 10, 0.0)
    with pytest.raises(ValueError, match="successes"):
        st.beta_posterior(11, 10, 0.3)


def test_empirical_bayes_recovers_a_known_prior() -> None:
    rng = np.random.default_rng(3)
    rates = rng.beta(0.3 * 50, 0.7 * 50, 2000)
    trials = rng.integers(100, 400, 2000)
    prior = st.fit_beta_prior(rng.binomial(trials, rates), trials)
    assert prior.rate == pytest.approx(0.3, abs=0.01)
    assert prior.kappa == pytest.approx(50, rel=0.15)


def test_empirical_bayes_clips_and_falls_back() -> None:
    # Groups with identical rates: no spread beyond chance, the strongest prior allowed.
    assert st.fit_beta_prior([30, 30, 30], [100, 100, 100]).kappa == st.EB_KAPPA_MAX
    # Wildly different groups: the weakest prior allowed.
    assert st.fit_beta_prior([0, 100, 0, 100], [100, 100, 100, 100]).kappa == st.EB_KAPPA_MIN
    # One group holding trials: nothing to measure the spread on.
    assert st.fit_beta_prior([5, 0], [50, 0]) == st.EmpiricalBayesPrior(rate=0.1, kappa=st.PRIOR_STRENGTH)
    # No conversions anywhere: a valid Beta centre half a trial inside (0, 1).
    zero = st.fit_beta_prior([0, 0], [100, 100])
    assert zero.rate == pytest.approx(0.5 / 200)
    assert float(st.beta_posterior(0, 100, zero.rate, zero.kappa).alpha) > 0
    with pytest.raises(ValueError, match="no trials"):
        st.fit_beta_prior([0], [0])


def test_empirical_bayes_fits_many_campaigns_at_once_as_it_fits_each() -> None:
    # The harness fits a thousand campaigns in one call; each row must get the prior the engine gives it alone
    # (groups without trials left out, a campaign without any trials has none).
    rng = np.random.default_rng(4)
    trials = rng.integers(0, 300, (200, 5)) * (rng.random((200, 5)) < 0.8)
    trials[0] = 0
    successes = rng.binomial(trials, rng.uniform(0.0, 1.0, (200, 1)))
    rate, kappa = st.fit_beta_priors(successes, trials)
    assert np.isnan(rate[0]) and np.isnan(kappa[0])
    for row in range(1, 200):
        one = st.fit_beta_prior(successes[row], trials[row])
        assert (rate[row], kappa[row]) == (pytest.approx(one.rate, rel=1e-12), pytest.approx(one.kappa, rel=1e-12))


@pytest.mark.parametrize(
    ("candidate", "rest", "margin"),
    [((20, 100), (120, 300), 0.2), ((3, 10), (60, 200), 0.2), ((70, 400), (300, 900), 0.1), ((0, 100), (40, 200), 0.5)],
)
def test_prob_worse_by_matches_monte_carlo(candidate: tuple[int, int], rest: tuple[int, int], margin: float) -> None:
    c = st.beta_posterior(*candidate, 0.3)
    r = st.beta_posterior(*rest, 0.3)
    rng = np.random.default_rng(5)
    mc = (rng.beta(c.alpha, c.beta, 1_000_000) < (1 - margin) * rng.beta(r.alpha, r.beta, 1_000_000)).mean()
    assert float(st.prob_worse_by(c, r, margin)) == pytest.approx(mc, abs=0.002)
    assert float(st.prob_worse_by(c, r, margin, method="normal")) == pytest.approx(mc, abs=0.03)


@pytest.mark.parametrize(
    ("candidate", "rest"),
    [((30000, 100000), (70, 200)), ((0, 100), (1, 200)), ((300, 1000), (20000, 60000))],
)
@pytest.mark.parametrize("margin", [0.0, 0.2])
def test_prob_worse_by_matches_adaptive_quadrature(
    candidate: tuple[int, int], rest: tuple[int, int], margin: float
) -> None:
    # Including the hardest shape for a fixed rule: a sharp candidate posterior against a wide rest.
    c = st.beta_posterior(*candidate, 0.3)
    r = st.beta_posterior(*rest, 0.3)
    reference, _ = integrate.quad(
        lambda x: stats.beta.pdf(x, r.alpha, r.beta) * stats.beta.cdf((1 - margin) * x, c.alpha, c.beta),
        0,
        1,
        limit=500,
        points=[float(r.mean)],
    )
    assert float(st.prob_worse_by(c, r, margin)) == pytest.approx(reference, abs=5e-5)


def test_prob_worse_by_without_margin_is_the_closed_form() -> None:
    c = st.beta_posterior(np.array([20, 35]), np.array([100, 120]), 0.3)
    r = st.beta_posterior(np.array([120, 40]), np.array([300, 130]), 0.3)
    np.testing.assert_allclose(st.prob_worse_by(c, r, 0.0), st.prob_greater(c, r), atol=1e-5)


# ---------------------------------------------------------------- relative lift


def test_lift_posterior_reproduces_the_worked_roas_example() -> None:
    # §2.3: S 1,200 installs at CPI $5.00, ARPI $3.90 sd $12; T 900 at CPI $5.50, ARPI $6.30 sd $15.
    control = moments(1200, 3.90 / 5.00, 12 / 5.00)
    treatment = moments(900, 6.30 / 5.50, 15 / 5.50)
    lp = st.lift_posterior(control, treatment)
    assert round(float(lp.raw), 2) == 0.47
    assert round(float(lp.raw_se), 3) == 0.175
    assert round(float(lp.mean), 2) == 0.35
    assert round(float(lp.sd), 2) == 0.15
    assert round(float(lp.chance_to_win), 3) == 0.990
    assert round(float(lp.risk), 4) == 0.0005
    # The risk is E[max(−lift, 0)] under the posterior: check the closed form by quadrature.
    post = stats.norm(float(lp.mean), float(lp.sd))
    expected_loss, _ = integrate.quad(lambda x: -x * post.pdf(x), -np.inf, 0)
    assert float(lp.risk) == pytest.approx(expected_loss, rel=1e-6)


def test_delta_method_standard_error_matches_simulated_experiments() -> None:
    rng = np.random.default_rng(13)
    worlds, n = 4000, 2000
    control = rng.lognormal(0.0, 1.0, (worlds, n))
    treatment = rng.lognormal(0.2, 1.0, (worlds, n))
    raw, se = st.relative_change(
        st.Moments.of(n, control.sum(1), (control**2).sum(1)),
        st.Moments.of(n, treatment.sum(1), (treatment**2).sum(1)),
    )
    assert float(np.median(se)) == pytest.approx(float(raw.std()), rel=0.05)


def test_lift_posterior_edge_cases() -> None:
    # No variance in either arm: every user paid the same; the data are a point mass.
    flat = st.lift_posterior(moments(50, 4.99, 0.0), moments(50, 5.99, 0.0))
    assert float(flat.mean) == pytest.approx(1.0 / 4.99)
    assert float(flat.chance_to_win) == 1.0 and float(flat.risk) == 0.0
    same = st.lift_posterior(moments(50, 4.99, 0.0), moments(50, 4.99, 0.0))
    assert float(same.chance_to_win) == 0.5
    # One user per arm has no variance estimate; nothing is decided on it.
    one = st.lift_posterior(st.Moments.of(1, 3.0, 9.0), st.Moments.of(1, 9.0, 81.0))
    assert math.isnan(float(one.chance_to_win)) and not bool(one.chance_to_win >= 0.95)
    # A control that earned nothing has no relative lift.
    zero = st.lift_posterior(st.Moments.of(100, 0.0, 0.0), moments(100, 1.0, 2.0))
    assert math.isnan(float(zero.mean))
    # The prior pulls a noisy raw lift toward 0, never past it.
    noisy = st.lift_posterior(moments(30, 1.0, 3.0), moments(30, 1.6, 3.0))
    assert 0 < float(noisy.mean) < float(noisy.raw)


# ---------------------------------------------------------------- power, SRM, FDR


def test_mde_reproduces_the_design_notes_table() -> None:
    mde = st.mde_proportion(0.35, np.array([100, 200, 500, 1000]))
    assert [round(100 * float(x)) for x in mde] == [54, 38, 24, 17]
    # §5.3's detail example: a 40 % gap at a 35 % base rate needs 158 per arm.
    assert float(st.sample_size_proportion(0.35, -0.40)) == 158


def test_sample_size_gives_the_promised_power() -> None:
    n = int(st.sample_size_proportion(0.35, -0.40))
    rng = np.random.default_rng(17)
    a = rng.binomial(n, 0.35, 20_000) / n
    b = rng.binomial(n, 0.21, 20_000) / n
    pooled = (a + b) / 2
    z = (a - b) / np.sqrt(pooled * (1 - pooled) * 2 / n)
    assert float((np.abs(z) > 1.959964).mean()) == pytest.approx(0.80, abs=0.02)


def test_power_functions_without_a_baseline_give_no_number() -> None:
    # No conversions, no sample, no effect: inf or NaN, never a number a guardrail could pass on.
    for value in (
        st.mde_proportion(0.0, 100),
        st.mde_proportion(0.3, 0),
        st.sample_size_proportion(0.3, 0.0),
        st.mde_mean(0.0, 1.0, 100),
        st.sample_size_mean(1.0, 1.0, 0.0),
    ):
        assert not math.isfinite(float(value))


def test_mean_mde_and_sample_size_are_inverses() -> None:
    n = st.sample_size_mean(2.0, 5.0, st.mde_mean(2.0, 5.0, 1000))
    assert float(n) == pytest.approx(1000, abs=1)  # rounded up from 1000 + float noise
    assert float(st.sample_size_mean(1.0, 3.0, 0.2)) == math.ceil(2 * 9 * (1.959964 + 0.841621) ** 2 / 0.04)


def test_srm_matches_scipy_and_flags_only_below_one_in_a_thousand() -> None:
    observed = np.array([[5000, 5300], [5000, 5500], [0, 0]])
    p = st.srm_p_value(observed, [0.5, 0.5])
    chi2_first = 2 * 150**2 / 5150
    assert float(p[0]) == pytest.approx(math.erfc(math.sqrt(chi2_first / 2)), rel=1e-9)
    assert float(p[1]) == pytest.approx(stats.chisquare([5000, 5500]).pvalue, rel=1e-9)
    assert float(p[2]) == 1.0
    assert st.srm_flag(observed, [0.5, 0.5]).tolist() == [False, True, False]
    # Traffic in an arm the split gives nothing: a broken assignment, whatever the other counts say.
    assert float(st.srm_p_value([500, 480, 3], [1, 1, 0])) == 0.0
    three = st.srm_p_value([1000, 2100, 950], [1, 2, 1])
    expected = np.array([1, 2, 1]) / 4 * 4050
    assert float(three) == pytest.approx(stats.chisquare([1000, 2100, 950], expected).pvalue, rel=1e-9)


def test_srm_false_alarms_are_rare_and_a_broken_split_is_caught() -> None:
    rng = np.random.default_rng(23)
    healthy = rng.multinomial(10_000, [0.5, 0.5], size=1000)
    false_alarms = st.srm_flag(healthy, [0.5, 0.5]).mean()
    assert false_alarms <= 0.005, f"SRM flagged {false_alarms:.1%} of healthy 50/50 splits"
    broken = rng.multinomial(10_000, [0.47, 0.53], size=1000)
    caught = st.srm_flag(broken, [0.5, 0.5]).mean()
    assert caught >= 0.99, f"SRM caught {caught:.1%} of 47/53 splits"


def test_benjamini_hochberg_matches_scipy() -> None:
    rng = np.random.default_rng(19)
    p = np.concatenate([rng.uniform(size=40), rng.uniform(0, 0.004, 10)])
    expected = stats.false_discovery_control(p, method="bh") <= 0.10
    np.testing.assert_array_equal(st.benjamini_hochberg(p, q=0.10), expected)
    assert st.benjamini_hochberg([0.01, 0.02, 0.03, 0.5]).tolist() == [True, True, True, False]
    assert st.benjamini_hochberg([np.nan, 0.01, 0.9]).tolist() == [False, True, False]
    assert st.benjamini_hochberg([]).tolist() == []


# ---------------------------------------------------------------- confidence sequences


def test_half_width_is_wider_than_a_fixed_sample_interval_and_shrinks() -> None:
    n = np.array([60.0, 600.0, 1680.0, 6000.0])
    se = 0.5 / np.sqrt(n)  # a per-unit sd of 0.5
    width = sq.half_width(se, n, alpha=0.10, n_star=1680)
    assert np.all(width > stats.norm.ppf(0.95) * se)  # the price of looking any number of times
    assert np.all(np.diff(width) < 0)
    assert float(sq.half_width(0.1, 0)) == math.inf
    with pytest.raises(ValueError, match="alpha"):
        sq.half_width(0.1, 10, alpha=1.5)


def test_breached_reads_the_side_that_is_worse() -> None:
    est, se, n = sq.proportion_difference(90, 300, 45, 300)  # 30 % → 15 %
    lower = sq.breached(est, se, n, threshold=0.0, worse="lower", n_star=1680)
    assert bool(lower.breached) and float(lower.bound) < 0 and float(lower.estimate) == pytest.approx(-0.15)
    higher = sq.breached(est, se, n, threshold=0.0, worse="higher", n_star=1680)
    assert not bool(higher.breached) and float(higher.bound) < float(est)
    refunds = sq.breached(*sq.proportion_difference(10, 500, 45, 500), threshold=0.0, worse="higher")
    assert bool(refunds.breached)
    # No data yet, or no baseline: never a breach.
    empty = sq.breached(*sq.proportion_difference(0, 0, 0, 0), threshold=0.0, worse="lower")
    assert not bool(empty.breached)
    with pytest.raises(ValueError, match="worse"):
        sq.breached(0.0, 0.1, 10, 0.0, worse="sideways")  # type: ignore[arg-type]


def test_relative_mean_change_against_a_relative_threshold() -> None:
    baseline = moments(2000, 1.0, 2.0)
    est, se, n = sq.relative_mean_change(baseline, moments(2000, 0.6, 2.0))
    assert float(est) == pytest.approx(-0.4)
    assert float(n) == 4000
    # "roas_d7 below 0.80× baseline": the whole sequence must lie below −20 %.
    assert bool(sq.breached(est, se, n, threshold=-0.20, worse="lower").breached)
    mild = sq.relative_mean_change(baseline, moments(2000, 0.85, 2.0))
    assert not bool(sq.breached(*mild, threshold=-0.20, worse="lower").breached)
