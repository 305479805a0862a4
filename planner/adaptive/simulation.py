"""Predicting an adaptive procedure's error by simulation on public stand-in data.

The procedure runs on *domain-shaped synthetic data* (`synthetic_records`: a public,
seeded mixture of product distributions over the same domain) — never on the private
table — and its answers to every block are compared with the stand-in's truth. The
stand-in has at most `STAND_IN_ROWS` rows, whatever the table's size: for N rows it has
n = min(N, STAND_IN_ROWS), the procedure runs at ρ·(N/n)², which gives every count the
same noise relative to n as ρ gives relative to N, and errors are scaled back by N/n.
Memory and time are therefore bounded by the stand-in, not the table. `SIMULATIONS`
seeds are run; the prediction is their mean and its stated uncertainty their relative
spread — except that a first run already `CLEAR_LOSS` times worse than the best linear
plan ends the simulation (a simulated AIM run costs seconds to minutes; its loss is
clear after one). Predictions are cached per workload, budget and row count.
"""

from __future__ import annotations

import math
import time

import numpy as np

from mechanisms.arrays import to_numpy
from mechanisms.domain import Domain
from mechanisms.marginals import Clique
from mechanisms.noise import RandomSource
from mechanisms.workload import Block
from planner.adaptive.base import Prediction, Procedure

SIMULATIONS = 2  # seeds per prediction
STAND_IN_ROWS = 100_000  # the most rows a simulation's stand-in data has
CLEAR_LOSS = 1.5  # a first run this many times worse than the alternative ends the simulation
_PREDICTIONS: dict[tuple, Prediction] = {}


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


def marginal_of(domain: Domain, records: np.ndarray, clique: Clique) -> np.ndarray:
    """Exact integer counts of the clique's marginal of `records` (flattened in clique order)."""
    columns = [domain.attributes.index(a) for a in clique]
    if not columns:
        return np.asarray([len(records)], dtype=np.int64)
    index = np.ravel_multi_index(tuple(records[:, c] for c in columns), domain.shape(clique))
    return np.bincount(index, minlength=domain.size(clique)).astype(np.int64)


def predict(
    procedure: Procedure, domain: Domain, blocks: list[Block], rho: float, rows: float, alternative: float = math.inf
) -> Prediction:
    """The procedure's error on the blocks at budget ρ, simulated on public synthetic data (cached).

    `alternative` is the best linear plan's total squared error (for the early stop).
    """
    key = (procedure.name, domain, tuple(sorted((b.fingerprint(domain), b.weight) for b in blocks)), rho, round(rows))
    if key not in _PREDICTIONS:
        _PREDICTIONS[key] = _simulate(procedure, domain, blocks, rho, int(round(rows)), alternative)
    return _PREDICTIONS[key]


def _simulate(
    procedure: Procedure, domain: Domain, blocks: list[Block], rho: float, rows: int, alternative: float
) -> Prediction:
    totals, per_block, seconds = [], {b.name: 0.0 for b in blocks}, 0.0
    stand_in = max(1, min(rows, STAND_IN_ROWS))
    scale = rows / stand_in  # counts of the table per count of the stand-in
    for seed in range(SIMULATIONS):
        if totals and totals[0] > CLEAR_LOSS * alternative:
            break
        records = synthetic_records(domain, stand_in, seed)

        def fetch(cliques: list[Clique]) -> dict[Clique, np.ndarray]:
            return {c: marginal_of(domain, records, c) for c in cliques}

        started = time.perf_counter()
        release = procedure.run(domain, blocks, rho * scale**2, fetch, RandomSource(seed), stand_in, None)
        seconds += time.perf_counter() - started
        total = 0.0
        for b in blocks:
            truth = to_numpy(b.matrix(domain).matvec(marginal_of(domain, records, b.attributes(domain))))
            squared = float(np.sum((to_numpy(release.estimator.estimate(b)) - truth) ** 2)) * scale**2
            per_block[b.name] += squared / b.num_rows(domain)
            total += b.weight * squared
        if not math.isfinite(total):  # the procedure broke down numerically: it cannot be trusted to win
            return Prediction({b.name: math.inf for b in blocks}, math.inf, math.nan, seconds)
        totals.append(total)
    runs = len(totals)
    mean = float(np.mean(totals))
    spread = (max(totals) - min(totals)) / 2 / mean if mean > 0 and runs > 1 else math.nan
    rmse = {name: math.sqrt(v / runs) for name, v in per_block.items()}
    return Prediction(rmse, mean, spread, seconds / runs)


__all__ = ["CLEAR_LOSS", "SIMULATIONS", "STAND_IN_ROWS", "marginal_of", "predict", "synthetic_records"]
