"""Private selection: the exponential mechanism, sampled exactly, and exact budget shares.

The exponential mechanism picks candidate r with probability ∝ exp(ε·q_r / (2Δ))
when every score q_r changes by at most Δ between neighbouring tables. It is
ε-DP and, having bounded range, (ε²/8)-zCDP (Cesar & Rogers 2021; McKenna's
thesis Prop. 5).

Sampling is exact, with no floating-point step between the scores and the
choice: scores are rationals, and the sampler proposes a candidate uniformly
and accepts it with probability exp(−γ_r), γ_r = ε(q_max − q_r)/(2Δ) ≥ 0, by
the exact Bernoulli(exp(−γ)) sampler of Canonne, Kamath and Steinke
(`mechanisms.noise.bernoulli_exp`). An accepted draw has exactly the
exponential mechanism's distribution; the expected number of proposals is at
most the number of candidates (the best one is accepted with probability 1).

Scores that compare a private marginal with a released estimate use
`l1_distance`: the estimate is first rounded (post-processing) to a grid of
2⁻¹⁶, after which ‖counts − estimate‖₁ is an exact rational computed with
int64 arithmetic — so its sensitivity is exactly 1, not 1 plus rounding error.

`ExactBudget` hands out budget shares that sum to the total exactly in floating
point: every share is a multiple of the unit in the last place of the total,
so all partial sums are exactly representable and the last share is exactly
what remains.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Sequence

import numpy as np

from mechanisms.noise import RandomSource, bernoulli_exp

GRID_BITS = 16  # estimates are rounded to multiples of 2^-GRID_BITS before an L1 score


def exponential_mechanism_rho(epsilon: float) -> float:
    """zCDP charge ε²/8 of one exponential-mechanism selection."""
    return epsilon * epsilon / 8.0


def epsilon_for(rho: float) -> float:
    """The largest float ε with ε²/8 ≤ ρ exactly (the selection parameter a share ρ buys)."""
    if rho <= 0:
        raise ValueError("a selection needs a positive budget share")
    eps = math.sqrt(8.0 * rho)
    while Fraction(eps) ** 2 / 8 > Fraction(rho):
        eps = math.nextafter(eps, 0.0)
    return eps


def exponential_mechanism(
    scores: Sequence[Fraction], epsilon: float, sensitivity: Fraction, rng: RandomSource
) -> int:
    """Index drawn exactly with probability ∝ exp(ε·score / (2·sensitivity))."""
    if not scores:
        raise ValueError("the exponential mechanism needs at least one candidate")
    if epsilon <= 0 or sensitivity <= 0:
        raise ValueError("epsilon and sensitivity must be positive")
    best = max(scores)
    scale = Fraction(epsilon) / (2 * Fraction(sensitivity))
    gaps = [scale * (best - q) for q in scores]
    while True:
        i = rng.randbelow(len(scores))
        if bernoulli_exp(gaps[i], rng):
            return i


def l1_distance(counts: np.ndarray, estimate: np.ndarray) -> Fraction:
    """‖counts − round(estimate)‖₁ exactly, the estimate rounded to the 2^-16 grid.

    `counts` are exact integers. Exact (int64) while the counts and estimates stay
    below 2^62 / (2^16 · cells), e.g. 10^13 rows for a million-cell marginal.
    """
    scale = 1 << GRID_BITS
    grid = np.rint(np.asarray(estimate, dtype=float).ravel() * scale).astype(np.int64)
    exact = np.asarray(counts, dtype=np.int64).ravel() * scale
    return Fraction(int(np.abs(exact - grid).sum()), scale)


class ExactBudget:
    """Spends a total ρ in float shares whose float sum is exactly the total.

    Shares are rounded down to multiples of u = ulp(total); every partial sum
    is then a multiple of u not above the total, hence exact in binary64.
    """

    def __init__(self, total: float):
        if not (total > 0 and math.isfinite(total)):
            raise ValueError("the budget must be a positive finite number")
        self.total = float(total)
        self.unit = math.ulp(self.total)
        self.used = 0.0

    @property
    def remaining(self) -> float:
        return self.total - self.used  # exact: both are multiples of the unit

    def share(self, amount: float) -> float:
        """`amount` rounded down to a multiple of the unit (not above what remains)."""
        return min(math.floor(amount / self.unit) * self.unit, self.remaining)

    def spend(self, *shares: float) -> float:
        """Record shares (each already from `share`, or the exact remainder); returns their sum."""
        spent = 0.0
        for s in shares:
            if s < 0 or s / self.unit != math.floor(s / self.unit):
                raise ValueError("budget shares must come from ExactBudget.share")
            spent += s
        if spent > self.remaining:
            raise ValueError("the shares exceed the remaining budget")
        self.used += spent
        return spent
