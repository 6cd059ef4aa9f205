"""Statistical-honesty figures of the shipped rules: `python -m tests.bench.honesty`.

The suite (tests/transforms/actions/test_statistical_honesty.py) asserts issue 18's bars at one sample per
rule; this prints the same measurements (the same world generators and the engine's own decisions, same
seeds) and the ones docs/actions-engine.md records beside them: the `ready` share of the proposals, the
power at other samples and volumes, and the A/A rate of the shift rule over 10 000 more worlds. Not timed;
deterministic (seeded), about a minute on two cores.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from tests.transforms.actions import test_statistical_honesty as h

W = h.WORLDS


def _line(label: str, flags: NDArray[np.bool_]) -> None:
    print(f"{label}: {flags.mean():.1%} of {flags.size}", flush=True)


def pauses() -> None:
    rng = np.random.default_rng(101)  # drawn in the test's order, so the worlds are the test's
    rates = rng.uniform(0.15, 0.50, W)[:, None]
    trials = rng.integers(5, 401, (W, 4))
    conversions = rng.binomial(trials, rates)
    d = h.pause(conversions, trials)
    _line("creative_pause A/A proposed (seed 101)", d.signal.any(axis=1))
    _line("creative_pause A/A ready", (d.signal & d.sample_ok).any(axis=1))
    _line("creative_pause A/A proposed without the 20 % margin", h.pause(conversions, trials, 0.0).signal.any(axis=1))
    d = h.planted_pause(102, 0.40, 500)
    _line("creative_pause -40 % at 500 matured trials (seed 102)", d.signal[:, 0])
    for n in (500, 2000, 4000, 6000, 8000):
        _line(f"creative_pause -25 % at {n} matured trials (seed 103)", h.planted_pause(103, 0.25, n).signal[:, 0])


def shifts() -> None:
    def ready(campaigns: list) -> NDArray[np.bool_]:
        out = np.zeros(len(campaigns[0].n), dtype=bool)
        for i, a in enumerate(campaigns):
            for j, b in enumerate(campaigns):
                if i != j:
                    d = h.shift(a, b)
                    out |= d.signal & d.sample_ok
        return out

    two = h.equal_campaigns(203, 2, 4 * W)
    _line("budget_shift A/A, 2 campaigns, D = 30 (seed 203)", h.shifts_proposed(two))
    _line("budget_shift A/A, 2 campaigns, D = 30, ready", ready(two))
    more = np.concatenate([h.shifts_proposed(h.equal_campaigns(10_000 + s, 2)) for s in range(10)])
    _line("budget_shift A/A, 2 campaigns, D = 30 (seeds 10000-10009)", more)
    rng = np.random.default_rng(208)
    big = [h.revenue_moments(rng, rng.integers(3000, 6001, 4 * W), 1.0) for _ in range(2)]
    _line("budget_shift A/A, 2 campaigns of 3 000-6 000 installs, D = 30 (seed 208)", h.shifts_proposed(big))
    _line("budget_shift A/A, 2 campaigns, D = 14 (seed 204)", h.shifts_proposed(h.equal_campaigns(204, 2, 4 * W), 14))
    _line("budget_shift A/A, 2 campaigns, D = 30 data at the D = 14 bar 0.975 (seed 203)", h.shifts_proposed(two, 14))
    _line("budget_shift A/A, 4 campaigns, D = 30 (seed 205)", h.shifts_proposed(h.equal_campaigns(205, 4)))
    for n in (1500, 3000, 5000):
        rng = np.random.default_rng(206)
        source, target = h.revenue_moments(rng, np.full(W, n), 0.75), h.revenue_moments(rng, np.full(W, n), 1.0)
        d, strict = h.shift(source, target), h.shift(source, target, 14)
        _line(f"budget_shift -25 % at {n} installs (seed 206)", d.signal)
        _line(f"budget_shift -25 % at {n} installs, ready", d.signal & d.sample_ok)
        _line(f"budget_shift -25 % at {n} installs at the bar 0.975", strict.signal)


def offers() -> None:
    rng = np.random.default_rng(401)
    rates = rng.uniform(0.03, 0.30, W)[:, None]
    users = rng.integers(50, 2001, (W, h.COUNTRIES))
    d = h.offers(rng.binomial(users, rates), users)
    _line("offer_test A/A proposed (seed 401)", d.signal.any(axis=1))
    _line("offer_test A/A ready", (d.signal & d.sample_ok).any(axis=1))
    _line("offer_test 1.8x at 600 users (seed 402)", h.planted_offer(402, 1.8, 600).signal[:, 0])
    for n in (5000, 10_000):
        _line(f"offer_test -25 % elsewhere at {n} users (seed 403)", h.planted_offer(403, 1 / 0.75, n).signal[:, 0])


def monitor() -> None:
    for action in ("budget_shift", "creative_pause"):
        for volume in (40, 120):
            world = h.watched_world(np.random.default_rng(301), W, volume)
            _line(f"monitor A/A, {action}, {volume} installs/day (seed 301)", h.rolled_back(action, world, W))
    for (action, harm), _why in h.MISSES.items():
        for volume in (120, 400, 1000):
            world = h.watched_world(np.random.default_rng(302), W, volume, **{harm: 0.75})
            _line(f"monitor -25 % {harm}, {action}, {volume} installs/day (seed 302)", h.rolled_back(action, world, W))
    rule = h.STRICT_REVENUE_RULE
    statuses = h.watch([rule], h.watched_world(np.random.default_rng(303), W, 100), W)[rule.id]
    rolled = np.any(np.array(statuses) == h.BREACH, axis=0)
    _line("monitor A/A, strict revenue rule (0.95x, 100 users), 100 installs/day (seed 303)", rolled)


def main() -> int:
    pauses()
    shifts()
    offers()
    monitor()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
