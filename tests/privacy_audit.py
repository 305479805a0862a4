"""Statistical lower bounds on the privacy loss of a mechanism, from its outputs.

Run the mechanism many times on two neighbouring inputs and pick an event S
(here: a threshold on one released statistic). For any (ε, δ)-DP mechanism,
P[M(D) ∈ S] ≤ e^ε P[M(D') ∈ S] + δ. With Clopper–Pearson bounds at confidence
1 − α on both probabilities, ε_lb = log((p_lower(D) − δ) / p_upper(D')) is a
lower bound on the true ε with confidence 1 − 2α: if ε_lb exceeds the claimed
ε, the mechanism is (with that confidence) not as private as claimed.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from scipy.stats import beta


def clopper_pearson(successes: int, trials: int, alpha: float) -> tuple[float, float]:
    """Two-sided (1 - 2·alpha) bounds, i.e. each side holds with probability 1 - alpha."""
    lo = beta.ppf(alpha, successes, trials - successes + 1) if successes > 0 else 0.0
    hi = beta.ppf(1 - alpha, successes + 1, trials - successes) if successes < trials else 1.0
    return float(lo), float(hi)


def epsilon_lower_bound(
    outputs_d: np.ndarray, outputs_d_prime: np.ndarray, delta: float, alpha: float = 1e-3, thresholds: int = 40
) -> float:
    """The largest audited ε over threshold events {x ≥ t} and {x ≤ t}, both directions.

    Thresholds are chosen on a grid of quantiles of the pooled outputs. Taking the
    maximum over several events needs a union bound: alpha is divided by their number.
    """
    pooled = np.concatenate([outputs_d, outputs_d_prime])
    grid = np.unique(np.quantile(pooled, np.linspace(0.01, 0.99, thresholds)))
    events = 4 * len(grid)
    a = alpha / events
    best = 0.0
    n1, n0 = len(outputs_d), len(outputs_d_prime)
    for t in grid:
        for first, second, m1, m2 in ((outputs_d, outputs_d_prime, n1, n0), (outputs_d_prime, outputs_d, n0, n1)):
            for hit in (lambda x: x >= t, lambda x: x <= t):
                lo, _ = clopper_pearson(int(hit(first).sum()), m1, a)
                _, hi = clopper_pearson(int(hit(second).sum()), m2, a)
                if lo - delta > 0 and hi > 0:
                    best = max(best, math.log((lo - delta) / hi))
    return best


def audit(mechanism: Callable[[int, int], np.ndarray], delta: float, alpha: float = 1e-3) -> float:
    """ε lower bound for `mechanism(neighbour, seed)` (outputs of many runs) on neighbours 0 and 1."""
    return epsilon_lower_bound(mechanism(0, 1), mechanism(1, 2), delta, alpha)
