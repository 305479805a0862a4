"""Routing large batches of counting queries to RAP, by simulated error.

RAP's error has no closed form (it adapts to the data), so it is predicted by
running RAP itself on *domain-shaped synthetic data*: a public, seeded mixture
of product distributions over the same domain with the same (public or
estimated) row count, never the private table. The prediction is the RMSE per
query row of RAP's answers against the synthetic truth, at the real budget and
with the real (T, K) rule; the planner compares it with the exact expected
errors of the other families and routes the batch to RAP when it is lower.
Predictions are cached per (workload fingerprint, budget).

Only Gaussian (zCDP) plans are eligible, and only blocks that are counting
queries (integer answers, sensitivity at most 1), with at least
`RAP_MIN_QUERIES` rows in all: below that, matrix strategies are cheap and exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import sqrt

import numpy as np

from mechanisms.domain import Domain
from mechanisms.measurement import GAUSSIAN, query_step
from mechanisms.noise import RandomSource
from mechanisms.rap import BlockQueries, RAPConfig, RecordCounts, run_rap
from mechanisms.rap.sources import QuerySource
from mechanisms.workload import Block

RAP = "rap"
RAP_MIN_QUERIES = 256


@dataclass(frozen=True)
class RAPPrediction:
    """Simulated error of RAP on a workload: RMSE and max error per query row, in counts."""

    rmse: float
    max_error: float
    rows: int
    rounds: int
    per_round: int

    @property
    def total_squared_error(self) -> float:
        return self.rmse**2 * self.rows


@dataclass(frozen=True)
class RAPPlan:
    """A planned RAP run, planned as a budget and a procedure: what the session executes."""

    blocks: tuple[Block, ...]
    share: float  # rho
    config: RAPConfig
    prediction: RAPPrediction

    def describe(self) -> str:
        p = self.prediction
        return (
            f"RAP over {p.rows} counting queries: {p.rounds} rounds of {p.per_round} selected queries, "
            f"n'={self.config.synthetic_rows} relaxed rows; simulated RMSE {p.rmse:.4g} per query "
            f"(max {p.max_error:.4g}) on synthetic data"
        )


def synthetic_records(domain: Domain, rows: int, seed: int, components: int = 8, concentration: float = 0.5) -> np.ndarray:
    """Public stand-in data: a mixture of `components` product distributions with Dirichlet marginals.

    A small concentration makes each component's marginals skewed, as real
    categorical data are, so the workload's answers are as sparse as real ones.
    Memory is the records themselves (rows × attributes), nothing per cell.
    """
    rng = np.random.default_rng(seed)
    which = rng.integers(0, components, rows)
    out = np.empty((rows, len(domain)), dtype=np.int32 if max(domain.sizes, default=0) < 2**31 else np.int64)
    for i, size in enumerate(domain.sizes):
        cumulative = np.cumsum(rng.dirichlet(np.full(size, concentration), size=components), axis=1)
        u = rng.random(rows) * cumulative[which, -1]
        for k in range(components):  # inverse-CDF sampling within each component
            mine = which == k
            out[mine, i] = np.minimum(np.searchsorted(cumulative[k], u[mine], side="right"), size - 1)
    return out


def counting_blocks(domain: Domain, blocks: list[Block]) -> bool:
    """Every block a counting query: integer answers, L2 sensitivity at most 1 per row."""
    return all(
        b.terms and b.sensitivity(domain, 2) <= 1.0 + 1e-9 and query_step(b.matrix(domain)).denominator == 1
        for b in blocks
    )


class RAPRoute:
    """Predicts RAP's error on a workload by simulation and decides whether RAP should answer it."""

    name = RAP

    def __init__(self, domain: Domain, rows: float, config: RAPConfig = RAPConfig(), seed: int = 0):
        self.domain, self.rows, self.config, self.seed = domain, float(rows), config, seed
        self._cache: dict[tuple, RAPPrediction] = {}

    def eligible(self, blocks: list[Block], noise: str) -> bool:
        """Gaussian noise, counting blocks only, and a large enough batch."""
        if noise != GAUSSIAN or sum(b.num_rows(self.domain) for b in blocks) < RAP_MIN_QUERIES:
            return False
        return counting_blocks(self.domain, blocks)

    def predict(self, blocks: list[Block], rho: float) -> RAPPrediction:
        """RAP's RMSE per row (counts) at budget rho, simulated on domain-shaped synthetic data."""
        key = (tuple(sorted(b.fingerprint(self.domain) for b in blocks)), rho)
        if key not in self._cache:
            self._cache[key] = self.simulate(BlockQueries(self.domain, blocks), rho)
        return self._cache[key]

    def simulate(self, source: QuerySource, rho: float) -> RAPPrediction:
        """Run RAP on synthetic records and measure its error on every query of `source`."""
        rows = int(round(self.rows))
        records = synthetic_records(self.domain, rows, self.seed)
        result = run_rap(source, RecordCounts(self.domain, records), rho, RandomSource(self.seed), self.config, rows=rows)
        squared, worst = 0.0, 0.0
        for _, exact, synthetic in source.scan(result.model.relaxed, result.model.encoding):
            error = np.abs(exact - rows * synthetic)
            squared += float((error**2).sum())
            worst = max(worst, float(error.max(initial=0.0)))
        release = result.release
        return RAPPrediction(sqrt(squared / source.n_queries), worst, source.n_queries, release.rounds, release.per_round)

    def plan(self, blocks: list[Block], rho: float) -> RAPPlan:
        return RAPPlan(tuple(blocks), rho, self.config, self.predict(blocks, rho))

    def route(self, blocks: list[Block], rho: float, noise: str, best_alternative: float) -> bool:
        """True when RAP's simulated total squared error beats `best_alternative` (same units)."""
        return self.eligible(blocks, noise) and self.predict(blocks, rho).total_squared_error < best_alternative
