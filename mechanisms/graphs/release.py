"""Node-DP release of a graph statistic through `mechanisms.continual` (an adapter, nothing new).

`ContinualRelease` measures a time strategy ⊗ the cells over the T × cells difference data
and calibrates its noise to `bound` × the product's largest column norm, `bound` being the
most rows a unit adds (k). Its argument needs only ‖u‖₁ ≤ k for the change u one unit
makes (‖Mu‖_p ≤ Σ_j |u_j|·‖M_{:,j}‖_p: the triangle inequality; u ≥ 0 is not used). A node's
change of a statistic's difference sequence is bounded exactly so, by the integer
`Statistic.sensitivity(...).l1` over the T × bins data, so that number is passed as
`bound` and the cells are the identity over the statistic's bins: SENSDIFF (S004
Algorithm 5) is the `identity` time strategy, and `choose` may pick a tree instead.

A one-shot release is the same with one window and the one-graph sensitivity — of the
declared-bound graph, or (`projected`) of the graph projected to the bound (`projection`).
"""

from __future__ import annotations

import numpy as np

from mechanisms.continual import CAUSAL, ContinualRelease, Report, TimeStrategy, TimeWorkload, choose
from mechanisms.graphs.sequence import DegreeBound
from mechanisms.graphs.statistics import Statistic
from mechanisms.matrices import Identity
from mechanisms.noise import RandomSource

__all__ = ["emit", "node_release"]


def node_release(statistic: Statistic, bound: DegreeBound, horizon: int, noise: str, budget: float,
                 strategy: TimeStrategy | None = None, projected: bool = False,
                 rng: RandomSource | None = None) -> ContinualRelease:
    """The continual release of `statistic` over `horizon` windows under node DP.

    `budget` is ρ (Gaussian) or ε (Laplace) for the whole horizon; `strategy` defaults to
    `choose`'s for running totals (the f(G_t)) answered causally.
    """
    if strategy is None:
        strategy = choose(horizon, noise, TimeWorkload(running=1.0, estimator=CAUSAL)).strategy
    if strategy.horizon != horizon:
        raise ValueError(f"the strategy covers {strategy.horizon} windows, not {horizon}")
    contribution = statistic.sensitivity(bound, horizon, projected).l1
    return ContinualRelease(strategy, Identity(statistic.bins(bound)), noise, budget, contribution, rng)


def emit(release: ContinualRelease, differences: np.ndarray) -> Report:
    """The next emit, from the statistic's whole difference sequence (only the windows it needs are read)."""
    return release.emit(np.asarray(differences)[release.scan_from() : release.now + 1])
