"""Monte-Carlo evaluation of plans: measured RMSE over repeated noise draws.

The exact marginals are computed once; each draw releases every planned
measurement with fresh exact noise (seeded), refits the least-squares model
and answers every block. `per_query_rmse` simulates what per-query DP SQL
systems do: each query gets its own noise and is answered on its own.
`adaptive_squared_errors` runs an adaptive procedure (AIM, RAP) on the exact
counts, one run per draw seeded by the draw, and scores its estimator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dpsql.backends import Backend
from dpsql.tables.table import Table
from mechanisms.arrays import to_numpy
from mechanisms.marginals import Clique
from mechanisms.measurement import exact_answer, release
from mechanisms.noise import RandomSource
from mechanisms.reconstruction import LeastSquaresModel
from mechanisms.workload import Block, Workload
from planner.adaptive import Procedure
from planner.families import PerQuery, split
from planner.plan import Plan


@dataclass
class Truth:
    """Exact marginals of every clique a plan or block needs, and each block's exact answer."""

    counts: dict
    answers: dict[str, np.ndarray]


def exact(table: Table, workload: Workload, backend: Backend, extra_cliques=()) -> Truth:
    cliques = {b.attributes(table.domain) for b in workload.blocks} | set(extra_cliques)
    counts = backend.marginals(table, sorted(cliques, key=len))
    answers = {
        b.name: to_numpy(b.matrix(table.domain).matvec(counts[b.attributes(table.domain)].astype(float)))
        for b in workload.blocks
    }
    return Truth(counts, answers)


def fetcher(backend: Backend, table: Table, truth: Truth) -> Callable[[list[Clique]], dict[Clique, np.ndarray]]:
    """Exact integer marginals for adaptive procedures, computed once per clique (seeded with `truth`)."""
    cache = dict(truth.counts)

    def fetch(cliques: list[Clique]) -> dict[Clique, np.ndarray]:
        missing = [c for c in dict.fromkeys(cliques) if c not in cache]
        if missing:
            cache.update(backend.marginals(table, missing))
        return {c: cache[c] for c in cliques}

    return fetch


def adaptive_squared_errors(
    procedure: Procedure, workload: Workload, blocks: list[Block], budget: float, truth: Truth,
    fetch: Callable[[list[Clique]], dict[Clique, np.ndarray]], rows: int, draws: int,
) -> dict[str, float]:
    """Mean squared error per row of every block when `procedure` answers `blocks` (seed = draw)."""
    domain = workload.domain
    squared = {b.name: 0.0 for b in workload.blocks}
    for draw in range(draws):
        release = procedure.run(domain, blocks, budget, fetch, RandomSource(seed=draw), rows, None)
        for b in blocks:
            squared[b.name] += float(np.mean((release.estimator.estimate(b) - truth.answers[b.name]) ** 2)) / draws
    return squared


def plan_squared_errors(plan: Plan, workload: Workload, truth: Truth, draws: int, noise: str) -> dict[str, float]:
    """Mean squared error per row of every block, averaged over `draws` noise draws."""
    domain = workload.domain
    squared = {b.name: 0.0 for b in workload.blocks}
    exact = [exact_answer(truth.counts[pm.clique], pm.query(domain), noise) for pm in plan.measurements]
    for draw in range(draws):
        rng = RandomSource(seed=draw)
        model = LeastSquaresModel(domain, [pm.release(None, domain, noise, rng, answer)
                                           for pm, answer in zip(plan.measurements, exact)])
        for b in workload.blocks:
            est, _ = model.answer(b)
            squared[b.name] += float(np.mean((est - truth.answers[b.name]) ** 2)) / draws
    return squared


def per_query_squared_errors(
    workload: Workload, truth: Truth, budget: float, draws: int, noise: str
) -> dict[str, float]:
    """Each block answered alone with its own noise; the budget split optimally across blocks."""
    domain = workload.domain
    family = PerQuery(domain, noise)
    blocks = [b for b in workload.blocks if b.terms]
    shares = split(family.costs(blocks), noise)
    squared = {b.name: 0.0 for b in workload.blocks}
    exact = [exact_answer(truth.counts[b.attributes(domain)], b.matrix(domain), noise) for b in blocks]
    for draw in range(draws):
        rng = RandomSource(seed=draw)
        for b, share, answer in zip(blocks, shares, exact):
            values, _ = release(answer, noise, budget * share, rng)
            squared[b.name] += float(np.mean((values - truth.answers[b.name]) ** 2)) / draws
    return squared


def workload_rmse(squared: dict[str, float], workload: Workload) -> float:
    """Root of the weighted mean squared error per row (queries in units of their sensitivity)."""
    rows = sum(b.weight * b.num_rows(workload.domain) for b in workload.blocks if b.terms)
    total = sum(b.weight * b.num_rows(workload.domain) * squared[b.name] for b in workload.blocks if b.terms)
    return float(np.sqrt(total / rows))
