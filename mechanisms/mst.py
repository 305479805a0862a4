"""MST: a maximum spanning tree of 2-way marginals (McKenna, Miklau & Sheldon, 2021).

The budget ρ (zCDP) is split in three equal parts:

1. every 1-way marginal is measured with Gaussian noise (ρ/3 over d marginals);
   values whose noisy count is below 3σ are merged into one "rare" bin
   (domain compression, post-processing);
2. a spanning tree over the attributes is chosen by an exponential-mechanism
   Kruskal (ρ/3 over d−1 steps, ε = √(8ρ/(3(d−1))) each): a pair's score is the L1
   error of the 1-way model on its compressed 2-way marginal (sensitivity 1);
3. the tree's compressed 2-way marginals are measured (ρ/3 over d−1 edges).

A compressed marginal is the linear query K_a ⊗ K_b of the original one (K
merges rare values), so the graphical model is fitted on the original domain
and synthetic rows need no decompression. Charges are exact as in AIM: each
edge measurement records its selection step and measurement, and the shares
sum to ρ exactly.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations

import networkx as nx
import numpy as np

from mechanisms.aim import MarginalFn, Progress, ProgressFn
from mechanisms.domain import Domain
from mechanisms.matrices import Dense, Identity, Kronecker, Matrix
from mechanisms.measurement import GAUSSIAN, Measurement, measure
from mechanisms.noise import RandomSource
from mechanisms.pgm.estimation import LinearMeasurement
from mechanisms.pgm.model import GraphicalModel
from mechanisms.exponential import ExactBudget, epsilon_for, exponential_mechanism, l1_distance

_RARE_THRESHOLD = 3.0  # values with noisy count below 3σ are merged


@dataclass
class MSTResult:
    measurements: list[Measurement]
    model: GraphicalModel
    edges: list[tuple[str, str]]
    selection_rho: float
    measurement_rho: float

    @property
    def rho(self) -> float:
        return math.fsum(m.cost for m in self.measurements)


def compression(values: np.ndarray, sigma: float) -> np.ndarray | None:
    """0/1 matrix keeping values with noisy count ≥ 3σ and merging the rest (None: keep all)."""
    keep = np.flatnonzero(values >= _RARE_THRESHOLD * sigma)
    if len(keep) == len(values):
        return None
    matrix = np.zeros((len(keep) + 1, len(values)), dtype=np.int64)
    matrix[np.arange(len(keep)), keep] = 1
    matrix[-1, np.setdiff1d(np.arange(len(values)), keep)] = 1
    return matrix


def mst(
    domain: Domain,
    marginal: MarginalFn,
    rho: float,
    rng: RandomSource,
    *,
    progress: ProgressFn | None = None,
    max_iters: int = 2000,
    tol: float = 1e-5,
) -> MSTResult:
    """Run MST under ρ-zCDP; `marginal(clique)` returns exact integer counts (never released).

    `max_iters`/`tol` bound the model fits (mirror descent).
    """
    started = time.perf_counter()
    budget = ExactBudget(rho)
    attrs = domain.attributes
    released: list[Measurement] = []
    linear: list[LinearMeasurement] = []

    def release(clique, query: Matrix | None, selection: float, share: float) -> np.ndarray:
        counts = np.asarray(marginal(clique), dtype=np.int64).ravel()
        values, cal = measure(counts, query, GAUSSIAN, share, rng)
        released.append(Measurement(clique, GAUSSIAN, budget.spend(selection, share), cal.variance, values, strategy=query))
        linear.append(LinearMeasurement(clique, values, cal.variance, query))
        return values

    def report(stage: str, message: str) -> None:
        if progress is not None:
            progress(Progress(stage, 0, budget.used / budget.total, message, time.perf_counter() - started))

    if len(attrs) == 1:
        release(attrs, None, 0.0, budget.remaining)
        model = GraphicalModel.fit(domain, linear, max_iters=max_iters, tol=tol)
        return MSTResult(released, model, [], 0.0, rho)
    one_share = budget.share(rho / 3 / len(attrs))
    sigma = math.sqrt(1.0 / (2.0 * one_share))
    compress = {a: compression(release((a,), None, 0.0, one_share), sigma) for a in attrs}
    report("initialize", f"measured {len(attrs)} 1-way marginals")
    independent = GraphicalModel.fit(domain, linear, max_iters=max_iters, tol=tol)

    def compressed(a: str, b: str, table: np.ndarray) -> np.ndarray:
        t = table.reshape(domain.size_of(a), domain.size_of(b))
        if compress[a] is not None:
            t = compress[a] @ t
        if compress[b] is not None:
            t = t @ compress[b].T
        return t

    scores = {}
    for a, b in combinations(attrs, 2):
        truth = compressed(a, b, np.asarray(marginal((a, b)), dtype=np.int64))
        scores[a, b] = l1_distance(truth, compressed(a, b, independent.project((a, b))))
    steps = len(attrs) - 1
    select_share = budget.share(rho / 3 / steps)
    epsilon = epsilon_for(select_share)
    forest = nx.utils.UnionFind(attrs)
    edges = []
    for _ in range(steps):
        candidates = [e for e in scores if forest[e[0]] != forest[e[1]]]
        a, b = candidates[exponential_mechanism([scores[e] for e in candidates], epsilon, Fraction(1), rng)]
        forest.union(a, b)
        edges.append((a, b))
    report("select", f"selected {steps} edges")
    edge_share = budget.share(rho / 3 / steps)
    for i, (a, b) in enumerate(edges):
        factors = [Identity(domain.size_of(x)) if compress[x] is None else Dense(compress[x]) for x in (a, b)]
        share = edge_share if i < steps - 1 else budget.remaining - select_share
        release((a, b), Kronecker(factors), select_share, share)
    model = GraphicalModel.fit(domain, linear, warm_start=independent, max_iters=max_iters, tol=tol)
    report("finalize", f"model with {len(model.cliques)} cliques")
    selection = math.fsum([select_share] * steps)
    return MSTResult(released, model, edges, selection, budget.total - selection)

