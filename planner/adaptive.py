"""Adaptive procedures (AIM, RAP): planned as a budget and a procedure, costed by simulation.

A linear strategy's error is an exact formula; an adaptive mechanism's is not:
it depends on the data through what it selects. The planner therefore predicts
it by running the mechanism itself on *domain-shaped synthetic data* (a public,
seeded mixture of product distributions over the same domain and row count,
`planner.rap_family.synthetic_records`) — never on the private table —
measuring the error of its answers to every block against the synthetic truth.
The stand-in has at most `STAND_IN_ROWS` rows, whatever the table's size: for N
rows it has n = min(N, STAND_IN_ROWS), the procedure runs at ρ·(N/n)², which
gives every count the same noise relative to n as ρ gives relative to N, and
errors are scaled back by N/n. Memory and time are therefore bounded by the
stand-in, not the table. `SIMULATIONS` seeds are run; the prediction is their mean and
its stated uncertainty their relative spread — except that a first run already
`CLEAR_LOSS` times worse than the best linear plan ends the simulation (a
simulated AIM run costs seconds to minutes; its loss is clear after one).

Each procedure says which workloads it can take (`eligible`), predicts its
error (`predict`, cached per workload, budget and row count) and executes on
real counts (`run`): it returns the measurements to record in the ledger and
an estimator that answers any later block over its attributes (a graphical
model for AIM, relaxed synthetic data for RAP).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

from mechanisms.aim import aim, workload_candidates
from mechanisms.domain import Domain
from mechanisms.marginals import Clique
from mechanisms.measurement import GAUSSIAN, Measurement
from mechanisms.noise import RandomSource
from mechanisms.rap import BlockQueries, MarginalCounts, RAPConfig, run_rap
from mechanisms.reconstruction import Estimator
from mechanisms.workload import Block
from planner.rap_family import RAP, RAP_MIN_QUERIES, counting_blocks, synthetic_records

AIM = "aim"
SIMULATIONS = 2  # seeds per prediction
STAND_IN_ROWS = 100_000  # the most rows a simulation's stand-in data has
CLEAR_LOSS = 1.5  # a first run this many times worse than the alternative ends the simulation
AIM_MIN_CLIQUES = 4  # fewer marginals: identity marginals and least squares are hard to beat

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


def _marginal_of(domain: Domain, records: np.ndarray, clique: Clique) -> np.ndarray:
    """Exact integer counts of the clique's marginal of `records` (flattened in clique order)."""
    columns = [domain.attributes.index(a) for a in clique]
    if not columns:
        return np.asarray([len(records)], dtype=np.int64)
    index = np.ravel_multi_index(tuple(records[:, c] for c in columns), domain.shape(clique))
    return np.bincount(index, minlength=domain.size(clique)).astype(np.int64)


class AIMProcedure:
    """AIM on the workload's GROUP BY marginals; later blocks are answered from its graphical model."""

    name = AIM

    def eligible(self, domain: Domain, blocks: list[Block], noise: str) -> str | None:
        if noise != GAUSSIAN:
            return "AIM needs a zCDP (Gaussian) budget"
        if not all(b.is_marginal() for b in blocks):
            return "AIM answers GROUP BY count workloads (marginals) only"
        if len({b.attributes(domain) for b in blocks}) < AIM_MIN_CLIQUES:
            return f"fewer than {AIM_MIN_CLIQUES} marginals"
        return None

    def run(self, domain, blocks, rho, fetch, rng, rows=None, progress=None) -> AdaptiveRelease:
        workload: dict[Clique, float] = {}
        for b in blocks:
            clique = b.attributes(domain)
            workload[clique] = workload.get(clique, 0.0) + b.weight
        # One scan for every candidate marginal AIM may read (the workload's downward closure).
        counts = fetch(list(workload_candidates(domain, workload.items())))
        shown = None if progress is None else (lambda p: progress(p.fraction, p.message))
        result = aim(domain, counts.__getitem__, rho, list(workload.items()), rng, progress=shown)
        return AdaptiveRelease(result.measurements, result.model)


class RAPProcedure:
    """RAP on large batches of counting queries (conjunctions, thresholds); answers from relaxed data."""

    name = RAP

    def __init__(self, config: RAPConfig = RAPConfig()):
        self.config = config

    def eligible(self, domain: Domain, blocks: list[Block], noise: str) -> str | None:
        if noise != GAUSSIAN:
            return "RAP needs a zCDP (Gaussian) budget"
        if sum(b.num_rows(domain) for b in blocks) < RAP_MIN_QUERIES:
            return f"fewer than {RAP_MIN_QUERIES} query rows"
        if not counting_blocks(domain, blocks):
            return "RAP answers counting queries only"
        return None

    def run(self, domain, blocks, rho, fetch, rng, rows=None, progress=None) -> AdaptiveRelease:
        result = run_rap(BlockQueries(domain, blocks), MarginalCounts(domain, fetch), rho, rng, self.config, rows=rows)
        if progress is not None:
            progress(1.0, "RAP done")
        measurements = [
            Measurement((a,), GAUSSIAN, 0.0, result.release.one_way_variance, values)
            for a, values in result.release.one_way.items()
        ]
        return AdaptiveRelease(measurements, result.model)


PROCEDURES: list[Procedure] = [AIMProcedure(), RAPProcedure()]
_PREDICTIONS: dict[tuple, Prediction] = {}


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
            return {c: _marginal_of(domain, records, c) for c in cliques}

        started = time.perf_counter()
        release = procedure.run(domain, blocks, rho * scale**2, fetch, RandomSource(seed), stand_in, None)
        seconds += time.perf_counter() - started
        total = 0.0
        for b in blocks:
            truth = b.matrix(domain).matvec(_marginal_of(domain, records, b.attributes(domain)))
            squared = float(np.sum((release.estimator.estimate(b) - truth) ** 2)) * scale**2
            per_block[b.name] += squared / b.num_rows(domain)
            total += b.weight * squared
        totals.append(total)
    runs = len(totals)
    mean = float(np.mean(totals))
    spread = (max(totals) - min(totals)) / 2 / mean if mean > 0 and runs > 1 else math.nan
    rmse = {name: math.sqrt(v / runs) for name, v in per_block.items()}
    return Prediction(rmse, mean, spread, seconds / runs)
