"""What an adaptive procedure is to the planner: the `Procedure` protocol and what it returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

from mechanisms.domain import Domain
from mechanisms.marginals import Clique
from mechanisms.measurement import Measurement
from mechanisms.noise import RandomSource
from mechanisms.reconstruction.least_squares import Estimator
from mechanisms.workload import Block

Fetch = Callable[[list[Clique]], dict[Clique, np.ndarray]]  # exact marginal counts (never released)


@dataclass(frozen=True)
class Prediction:
    """Simulated error of an adaptive procedure: per-block RMSE per row (counts) and its spread."""

    rmse: dict[str, float]
    total_squared_error: float  # Σ_b weight_b · Σ_rows squared error, as the planner weighs it
    spread: float  # relative half-range of the total over the simulations (nan after one run)
    seconds: float  # wall time of one simulated run


@dataclass(frozen=True)
class AdaptiveRelease:
    """What executing a procedure released: measurements for the ledger and an answering model."""

    measurements: list[Measurement]
    estimator: Estimator


class Procedure(Protocol):
    name: str

    def eligible(self, domain: Domain, blocks: list[Block], noise: str) -> str | None:
        """None when the procedure can answer the blocks, else why not."""

    def run(
        self, domain: Domain, blocks: list[Block], rho: float, fetch: Fetch, rng: RandomSource,
        rows: float | None, progress: Callable[[float, str], None] | None,
    ) -> AdaptiveRelease:
        """Execute under ρ-zCDP on exact counts from `fetch`."""


__all__ = ["AdaptiveRelease", "Fetch", "Prediction", "Procedure"]
