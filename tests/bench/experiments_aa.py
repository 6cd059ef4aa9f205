# The figures are written as the design note writes them (α, χ², ≥, ±); ruff would read them as typos.
# ruff: noqa: RUF001, RUF003
"""The A/A and power harness of experiment results (issue 35): `python -m tests.bench.experiments_aa`.

Simulated experiments through the shipped code: every user is assigned by
`transforms.experiments.assignment.first_assignment` under a fresh random salt, conversions are
drawn per user, and the figures come from `transforms.experiments.statistics` (the functions
`transforms.experiments.results` calls). Measured, with the issue's bars:
- A/A calibration: the share of experiments declaring "chance to beat control ≥ 95 %" at the
  planned sample size, within 3 binomial standard errors of the nominal 5 % (and not above it by
  more); the chance to beat control should be uniform under A/A (Kolmogorov-Smirnov, p > 0.01);
- SRM: flagged in ≤ 0.3 % of A/A experiments with the check repeated at every 6-hourly refresh
  over 28 days (112 looks), also with the weights changed mid-experiment (50/50 → 80/20 plus a
  10 % holdout on day 14): the expected split follows the weights in force at each exposure;
- power: a planted +20 % relative lift on a 10 % conversion rate at the design's planned sample
  size (normal approximation, one-sided 95 %, 80 % power) declared ≥ 95 % in ≥ 80 % of experiments;
- the revenue model (Bayesian bootstrap over levels) under A/A, ≥ 30 payers per arm.
Deterministic (fixed seed). `--runs N` changes the number of experiments per scenario (default
2 000); tests/transforms/experiments/test_aa_harness.py runs the same code smaller. Exit status 1
when a bar is missed.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from transforms.experiments.assignment import HOLDOUT, Weighted, first_assignment
from transforms.experiments.statistics import (
    SRM_ALPHA,
    beta_chance_to_beat,
    revenue_figures,
    sample_ratio,
)

SEED = 20261129
RUNS = 2_000
BASE_RATE = 0.10
LIFT = 0.20
DECLARE = 0.95  # "chance to beat control ≥ 95 %"
NOMINAL = 1.0 - DECLARE  # its nominal A/A rate, one-sided
SRM_BAR = 0.003
POWER_BAR = 0.80
DAYS = 28
LOOKS_PER_DAY = 4
CHANGE_DAY = 14
FIFTY_FIFTY = (Weighted("a", 1), Weighted("b", 1))
EIGHTY_TWENTY = (Weighted("a", 4), Weighted("b", 1))
CHANGED_HOLDOUT_PCT = 10.0
CELLS = ("a", "b", HOLDOUT)
# The revenue A/A: a 6 % payer rate over three price points, 1 000 users per arm (≥ 30 payers each).
REVENUE_USERS = 2_000
REVENUE_PAYER_RATE = 0.06
REVENUE_PRICES = (4.99, 9.99, 49.99)
REVENUE_PRICE_SHARES = (0.5, 0.35, 0.15)
REVENUE_DRAWS = 4_000


def planned_per_arm(base: float = BASE_RATE, lift: float = LIFT) -> int:
    """n per arm for a one-sided 95 %, 80 % power test of `base` → base·(1 + lift) (design note §5)."""
    z = 1.6448536269514722 + 0.8416212335729143  # z_0.95 + z_0.80
    treated = base * (1 + lift)
    return math.ceil(z * z * (base * (1 - base) + treated * (1 - treated)) / (treated - base) ** 2)


@dataclass(frozen=True)
class Figures:
    runs: int
    per_arm: int
    aa_declared: float
    aa_declared_bound: tuple[float, float]
    aa_mean_ctw: float
    aa_ks_statistic: float
    aa_ks_critical: float
    srm_any_look: float
    srm_any_look_uncorrected: float
    srm_final_look: float
    changed_srm_any_look: float
    changed_srm_current_weights: float
    power: float
    power_se: float
    revenue_aa_declared: float
    revenue_runs: int
    seconds: float

    def bars(self) -> dict[str, bool]:
        low, high = self.aa_declared_bound
        return {
            "A/A declarations within 3 SE of 5 % (not above)": low <= self.aa_declared <= high,
            "A/A chance to beat control uniform (KS p > 0.01)": self.aa_ks_statistic < self.aa_ks_critical,
            "SRM over all looks ≤ 0.3 %": self.srm_any_look <= SRM_BAR,
            "SRM after a weight change ≤ 0.3 %": self.changed_srm_any_look <= SRM_BAR,
            "power of +20 % at the planned n ≥ 80 %": self.power >= POWER_BAR,
        }


def _assign(
    salt: bytes, run: int, users: Sequence[int], weights: Sequence[Weighted], holdout_pct: float
) -> NDArray[np.int64]:
    """Cell index (into CELLS) of each new user, by the shipped first assignment."""
    index = {c: i for i, c in enumerate(CELLS)}
    cells = [index[first_assignment(salt, weights, holdout_pct, f"r{run}-u{i}")] for i in users]
    return np.array(cells, dtype=np.int64)


def _srm_over_looks(
    arrival: NDArray[np.float64],
    cell: NDArray[np.int64],
    version: NDArray[np.int64],
    shares: dict[int, dict[str, float]],
    naive: dict[str, float] | None = None,
) -> tuple[bool, bool, bool, bool]:
    """(flagged at any look, raw p < 0.001 at any look, flagged at the final look, flagged at any look
    against `naive` single-version shares) over the refreshes every 6 h for 28 days."""
    order = np.argsort(arrival, kind="stable")
    arrival, cell, version = arrival[order], cell[order], version[order]
    looks = np.arange(1, DAYS * LOOKS_PER_DAY + 1) / LOOKS_PER_DAY
    ends = np.searchsorted(arrival, looks, side="right")
    versions = sorted(shares)
    onehot = np.zeros((arrival.size, len(versions), len(CELLS)), dtype=np.int64)
    onehot[np.arange(arrival.size), np.searchsorted(versions, version), cell] = 1
    cumulative = np.concatenate([np.zeros((1, len(versions), len(CELLS)), dtype=np.int64), onehot.cumsum(axis=0)])
    any_flag = any_raw = final = any_naive = False
    for end in ends:
        counts = cumulative[end]
        by_version = {
            v: {c: int(counts[j, k]) for k, c in enumerate(CELLS) if counts[j, k]} for j, v in enumerate(versions)
        }
        by_version = {v: cells for v, cells in by_version.items() if cells}
        check = sample_ratio(by_version, shares)
        any_flag |= check.flagged
        any_raw |= check.raw_p_value < SRM_ALPHA and min(check.expected.values(), default=0) >= 100
        final = check.flagged
        if naive is not None:
            pooled = {c: sum(cells.get(c, 0) for cells in by_version.values()) for c in CELLS}
            any_naive |= sample_ratio({0: {c: n for c, n in pooled.items() if n}}, {0: naive}).flagged
    return any_flag, any_raw, final, any_naive


def run(runs: int = RUNS, seed: int = SEED, revenue_runs: int | None = None, log: bool = False) -> Figures:
    """Every scenario over `runs` simulated experiments (`revenue_runs` for revenue, default `runs`)."""
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    per_arm = planned_per_arm()
    users = 2 * per_arm
    shares_5050 = {1: {"a": 0.5, "b": 0.5}}
    aa_ctw = np.empty(runs)
    ab_ctw = np.empty(runs)
    srm_any = np.zeros(runs, dtype=bool)
    srm_raw = np.zeros(runs, dtype=bool)
    srm_final = np.zeros(runs, dtype=bool)
    for r in range(runs):
        salt = rng.bytes(16)
        cell = _assign(salt, r, range(users), FIFTY_FIFTY, 0.0)
        n = np.bincount(cell, minlength=len(CELLS))
        # A/A: one rate for both arms; A/B (power): the planted lift on b, same users and split.
        aa = rng.random(users) < BASE_RATE
        ab = rng.random(users) < np.where(cell == 1, BASE_RATE * (1 + LIFT), BASE_RATE)
        aa_s = np.bincount(cell, weights=aa, minlength=len(CELLS)).astype(int)
        ab_s = np.bincount(cell, weights=ab, minlength=len(CELLS)).astype(int)
        aa_ctw[r] = beta_chance_to_beat((aa_s[0], n[0]), (aa_s[1], n[1]))
        ab_ctw[r] = beta_chance_to_beat((ab_s[0], n[0]), (ab_s[1], n[1]))
        arrival = rng.uniform(0, DAYS, users)
        srm_any[r], srm_raw[r], srm_final[r], _ = _srm_over_looks(
            arrival, cell, np.ones(users, dtype=np.int64), shares_5050
        )
        if log and (r + 1) % 500 == 0:
            print(f"  … {r + 1} A/A and A/B experiments", flush=True)

    # The weights change on day 14: users first exposed after it follow 80/20 with a 10 % holdout,
    # those exposed before keep their cell (their exposure row exists; no new row is written).
    changed_shares = {
        1: {"a": 0.5, "b": 0.5},
        2: {"a": 0.9 * 0.8, "b": 0.9 * 0.2, HOLDOUT: CHANGED_HOLDOUT_PCT / 100},
    }
    changed_any = np.zeros(runs, dtype=bool)
    changed_naive = np.zeros(runs, dtype=bool)
    for r in range(runs):
        salt = rng.bytes(16)
        arrival = rng.uniform(0, DAYS, users)
        late = arrival >= CHANGE_DAY
        cell = np.empty(users, dtype=np.int64)
        cell[~late] = _assign(salt, r, np.flatnonzero(~late).tolist(), FIFTY_FIFTY, 0.0)
        cell[late] = _assign(salt, r, np.flatnonzero(late).tolist(), EIGHTY_TWENTY, CHANGED_HOLDOUT_PCT)
        version = np.where(late, 2, 1).astype(np.int64)
        changed_any[r], _, _, changed_naive[r] = _srm_over_looks(
            arrival, cell, version, changed_shares, naive=changed_shares[2]
        )
        if log and (r + 1) % 500 == 0:
            print(f"  … {r + 1} experiments with a weight change", flush=True)

    revenue_runs = runs if revenue_runs is None else revenue_runs
    revenue_declared = np.zeros(revenue_runs, dtype=bool)
    for r in range(revenue_runs):
        salt = rng.bytes(16)
        cell = _assign(salt, r, range(REVENUE_USERS), FIFTY_FIFTY, 0.0)
        paid = rng.random(REVENUE_USERS) < REVENUE_PAYER_RATE
        price = rng.choice(REVENUE_PRICES, size=REVENUE_USERS, p=REVENUE_PRICE_SHARES)
        value = np.round(np.where(paid, price, 0.0), 2)
        histograms = []
        for k in (0, 1):
            levels, counts = np.unique(value[cell == k], return_counts=True)
            histograms.append({float(v): int(c) for v, c in zip(levels, counts, strict=True)})
        _, b = revenue_figures(["a", "b"], histograms, seed=int(rng.integers(2**63)), draws=REVENUE_DRAWS)
        revenue_declared[r] = (b.chance_to_beat_control or 0.0) >= DECLARE

    se = math.sqrt(NOMINAL * (1 - NOMINAL) / runs)
    ordered = np.sort(aa_ctw)
    grid = np.arange(1, runs + 1) / runs
    ks = float(max(np.max(grid - ordered), np.max(ordered - (grid - 1 / runs))))
    power = float((ab_ctw >= DECLARE).mean())
    return Figures(
        runs=runs,
        per_arm=per_arm,
        aa_declared=float((aa_ctw >= DECLARE).mean()),
        aa_declared_bound=(NOMINAL - 3 * se, NOMINAL + 3 * se),
        aa_mean_ctw=float(aa_ctw.mean()),
        aa_ks_statistic=ks,
        aa_ks_critical=1.6276 / math.sqrt(runs),  # the asymptotic 1 % critical value of the KS statistic
        srm_any_look=float(srm_any.mean()),
        srm_any_look_uncorrected=float(srm_raw.mean()),
        srm_final_look=float(srm_final.mean()),
        changed_srm_any_look=float(changed_any.mean()),
        changed_srm_current_weights=float(changed_naive.mean()),
        power=power,
        power_se=math.sqrt(power * (1 - power) / runs),
        revenue_aa_declared=float(revenue_declared.mean()),
        revenue_runs=revenue_runs,
        seconds=time.perf_counter() - started,
    )


def report(f: Figures) -> str:
    low, high = f.aa_declared_bound
    lines = [
        f"experiments per scenario: {f.runs} (seed {SEED}); planned n per arm {f.per_arm} "
        f"({BASE_RATE:.0%} → {BASE_RATE * (1 + LIFT):.0%}, one-sided 95 %, 80 % power)",
        f"A/A chance to beat control ≥ 95 %: {f.aa_declared:.2%} (bar {low:.2%}–{high:.2%}); "
        f"mean CTW {f.aa_mean_ctw:.3f}; KS D {f.aa_ks_statistic:.4f} (1 % critical {f.aa_ks_critical:.4f})",
        f"A/A SRM flagged at any of {DAYS * LOOKS_PER_DAY} looks: {f.srm_any_look:.2%} (bar ≤ 0.30 %); "
        f"without the look correction (p < 0.001 at any look): {f.srm_any_look_uncorrected:.2%}; "
        f"final look only: {f.srm_final_look:.2%}",
        f"weights 50/50 → 80/20 + 10 % holdout on day {CHANGE_DAY}: SRM flagged at any look "
        f"{f.changed_srm_any_look:.2%} (bar ≤ 0.30 %); against the current weights alone: "
        f"{f.changed_srm_current_weights:.2%}",
        f"power, +{LIFT:.0%} on {BASE_RATE:.0%} at {f.per_arm}/arm: {f.power:.2%} ± {f.power_se:.2%} (bar ≥ 80 %)",
        f"revenue per user A/A (Bayesian bootstrap, {REVENUE_USERS // 2}/arm, {REVENUE_PAYER_RATE:.0%} payers, "
        f"{f.revenue_runs} experiments): chance to beat control ≥ 95 % in {f.revenue_aa_declared:.2%}",
        f"{f.seconds:.0f} s",
    ]
    lines += [f"{'ok  ' if passed else 'MISS'} {bar}" for bar, passed in f.bars().items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=RUNS)
    args = parser.parse_args(argv)
    figures = run(args.runs, log=True)
    print(report(figures), flush=True)
    return 0 if all(figures.bars().values()) else 1


if __name__ == "__main__":
    sys.exit(main())
