"""The exact cost of a time strategy, and the choice among them for a horizon.

Why the time strategy is chosen alone. A continual query asks W_time ⊗ W_cells (running
totals or per-window values over time, the query's cells) of the T × cells difference
data, and measures A_time ⊗ A_cells with i.i.d. noise of variance v per row. The
sensitivity of a Kronecker product is the product of its factors' (largest column norm),
so v = (k·s_time·s_cells)²/(2ρ) under ρ-zCDP, 2(k·s_time·s_cells)²/ε² under pure ε (S004
Algorithm 5's Lap(GS(Δ)/ε), with GS(Δ) = k·s_time·s_cells; see `strategies`). Least
squares is (A_time ⊗ A_cells)⁺ = A_time⁺ ⊗ A_cells⁺ with error covariance
v·(G_time⁻¹ ⊗ G_cells⁻¹), G = AᵀA, so the total squared error factorises:

    v · tr(W_time G_time⁻¹ W_timeᵀ) · tr(W_cells G_cells⁻¹ W_cellsᵀ)
      = [cells' unit error] × k²·s_time²·tr(W_time G_time⁻¹ W_timeᵀ) / budget^e,

with e = 1 (ρ) or 2 (ε). It factorises for the causal estimators too: the releases by
emit t are (the rows of A_time completed by t) ⊗ A_cells. The first factor is what the
planner's families already cost (`Family.unit_error` of the cells' blocks); the second,
`unit_error` here, is the time factor (the seed_song §2.4 table is its ratio between the
tree and the identity). A query asking several terms (running totals and per-window
values, possibly over different cells) weighs each time workload by its term's cells'
unit error (`TimeWorkload`), and the time strategy minimising the weighted time factor
is the best product strategy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from mechanisms.continual.estimators import CAUSAL, ESTIMATORS, variances
from mechanisms.continual.strategies import TimeStrategy, identity, tree
from mechanisms.measurement import calibrate

__all__ = ["BRANCHINGS", "TimeChoice", "TimeWorkload", "candidates", "choose", "expected_error", "time_error",
           "unit_error"]

BRANCHINGS = (2, 3, 4, 8, 16)


@dataclass(frozen=True)
class TimeWorkload:
    """What is asked over time: weights of the T running totals and of the T per-window
    values (each its cells' unit error), answered by `estimator` (`estimators.ESTIMATORS`)."""

    running: float = 1.0
    window: float = 0.0
    estimator: str = CAUSAL

    def __post_init__(self):
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"unknown estimator {self.estimator!r}: one of {ESTIMATORS}")
        if min(self.running, self.window) < 0 or self.running + self.window <= 0:
            raise ValueError("workload weights must be non-negative and not all zero")


def time_error(strategy: TimeStrategy, workload: TimeWorkload) -> float:
    """Σ_t weighted variances of the running totals and windows at unit noise per row."""
    running, window = variances(strategy, workload.estimator)
    return workload.running * float(running.sum()) + workload.window * float(window.sum())


def unit_error(strategy: TimeStrategy, noise: str, workload: TimeWorkload) -> float:
    """The time factor: s_time² × `time_error` (one row per unit, unit noise per unit of sensitivity)."""
    return strategy.sensitivity(noise) ** 2 * time_error(strategy, workload)


def expected_error(
    strategy: TimeStrategy,
    noise: str,
    budget: float,
    workload: TimeWorkload,
    bound: int = 1,
    cells_error: float = 1.0,
    cells_sensitivity: float = 1.0,
) -> float:
    """Exact expected total squared error of the continual query with exact discrete noise.

    `budget` is ρ (Gaussian) or ε (Laplace) for the whole horizon; `cells_error` is
    tr(W_cells G_cells⁻¹ W_cellsᵀ) (the number of cells when each is measured directly)
    and `cells_sensitivity` the cells strategy's largest column norm. The noise is the one
    `stream.ContinualRelease` draws (`measurement.calibrate`, counts on the unit lattice).
    """
    sensitivity = strategy.sensitivity(noise, bound) * cells_sensitivity
    variance = calibrate(noise, sensitivity, budget).variance
    return variance * time_error(strategy, workload) * cells_error


def candidates(horizon: int, branchings: Sequence[int] = BRANCHINGS) -> list[TimeStrategy]:
    """SENSDIFF and the b-ary trees (root measured or not) shallower than the identity."""
    out = [identity(horizon)]
    for b in branchings:
        if b < horizon:
            out += [tree(horizon, b, root=True), tree(horizon, b, root=False)]
    return out


@dataclass(frozen=True)
class TimeChoice:
    """The chosen time strategy, its `unit_error`, and every candidate's (by label)."""

    strategy: TimeStrategy
    error: float
    errors: dict[str, float]


def choose(
    horizon: int, noise: str, workload: TimeWorkload = TimeWorkload(), branchings: Sequence[int] = BRANCHINGS
) -> TimeChoice:
    """The candidate with the least time factor (the first, SENSDIFF, on ties)."""
    errors = {s.label: (unit_error(s, noise, workload), s) for s in candidates(horizon, branchings)}
    error, strategy = min(errors.values(), key=lambda pair: pair[0])
    return TimeChoice(strategy, error, {label: e for label, (e, _) in errors.items()})
