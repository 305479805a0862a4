"""MWEM+PGM: MWEM's select–measure loop with a graphical model as its estimate (the AIM baseline).

McKenna's thesis, Algorithm 5 (§5.3.1), under ρ-zCDP with T rounds: each round
spends ρ/T, half on selection and half on measurement (ε = √(8·ρ/2T) for the
exponential mechanism, σ = √(T/ρ) for the Gaussian noise), and

- selects r_t among the workload cliques by the exponential mechanism with
  score q_r = ‖M_r(D) − M_r(p̂)‖₁ − n_r (sensitivity 1), p̂ the current model;
- measures r_t's marginal with Gaussian noise;
- refits the graphical model to all measurements so far (warm-started mirror
  descent, as AIM's refits).

The first round has no model: the thesis' θ₀ = 0 is the uniform distribution,
scaled here to the table's own row count N (not released), so that score is
computed exactly as ‖M_r(D) − N/n_r‖₁ − n_r, whose sensitivity is 2 (one row moves
one cell by 1 and N/n_r by 1/n_r in each of n_r cells); later rounds use the
model's total estimated from released measurements (sensitivity 1).

Beyond the thesis' listing, as in the public reference implementation: candidates
whose model would pass `max_model_size`·t/T MB are dropped (unless already inside
a model clique; default 25 MB), since the thesis' algorithm has no safeguard and
its junction tree can grow to the full domain. Budget shares are exact
(`ExactBudget`, the last round takes the remainder), noise the exact discrete
Gaussian, selection the exact exponential-mechanism sampler.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Sequence

import numpy as np

from mechanisms.aim import MarginalFn, small_candidates
from mechanisms.arrays import to_numpy
from mechanisms.domain import Domain
from mechanisms.exponential import ExactBudget, epsilon_for, exponential_mechanism, l1_distance
from mechanisms.interruption import checkpoint
from mechanisms.measurement import GAUSSIAN, Measurement, measure
from mechanisms.noise import RandomSource
from mechanisms.pgm.estimation import LinearMeasurement
from mechanisms.pgm.junction_tree import Clique
from mechanisms.pgm.model import GraphicalModel


@dataclass
class MWEMResult:
    """Measurements released (identity marginals), the fitted model and the cliques chosen per round."""

    measurements: list[Measurement]
    model: GraphicalModel
    chosen: list[Clique]

    @property
    def rho(self) -> float:
        """Total charge: Σ of the measurements' costs (selection included), exactly ρ."""
        return math.fsum(m.cost for m in self.measurements)


def uniform_score(counts: np.ndarray) -> Fraction:
    """‖c − N/n·1‖₁ − n exactly, for the first round's uniform model at the table's own N."""
    c = np.asarray(counts, dtype=np.int64).ravel()
    n = c.size
    return Fraction(int(np.abs(c * n - int(c.sum())).sum()), n) - n


def mwem_pgm(
    domain: Domain,
    marginal: MarginalFn,
    rho: float,
    workload: Iterable[Sequence[str]],
    rng: RandomSource,
    *,
    rounds: int | None = None,
    max_model_size: float = 25.0,
    max_iters: int = 1000,
    tol: float = 3e-4,
) -> MWEMResult:
    """Run MWEM+PGM under ρ-zCDP over the workload's cliques. `marginal(clique)` gives exact counts.

    `rounds` defaults to the number of attributes (the reference implementation's default).
    """
    candidates_all = list(dict.fromkeys(domain.canonical(c) for c in workload))
    if not candidates_all:
        raise ValueError("MWEM+PGM needs at least one workload clique")
    rounds = rounds if rounds is not None else len(domain)
    if rounds < 1:
        raise ValueError("MWEM+PGM needs at least one round")
    budget = ExactBudget(rho)
    answers: dict[Clique, np.ndarray] = {}

    def counts(r: Clique) -> np.ndarray:
        if r not in answers:
            answers[r] = np.asarray(marginal(r), dtype=np.int64).ravel()
        return answers[r]

    released: list[Measurement] = []
    linear: list[LinearMeasurement] = []
    chosen: list[Clique] = []
    model: GraphicalModel | None = None
    weights = {r: 1.0 for r in candidates_all}
    sizes: dict = {}
    for t in range(1, rounds + 1):
        if t == rounds:
            select_share = budget.share(budget.remaining / 2.0)
            measure_share = budget.remaining - select_share
        else:
            select_share = budget.share(rho / (2.0 * rounds))
            measure_share = budget.share(rho / (2.0 * rounds))
        if model is None:
            candidates = candidates_all
            scores = [uniform_score(counts(r)) for r in candidates]
            sensitivity = Fraction(2)
        else:
            checkpoint(len(candidates_all) * model.tree.size)
            limit = max_model_size * t / rounds
            candidates = small_candidates(domain, weights, model, [m.clique for m in linear], limit, sizes)
            tables = model.beliefs.project_many(candidates)
            scores = [
                l1_distance(counts(r), to_numpy(table).ravel() * model.total) - domain.size(r)
                for r, table in zip(candidates, tables)
            ]
            sensitivity = Fraction(1)
        r = candidates[exponential_mechanism(scores, epsilon_for(select_share), sensitivity, rng)]
        values, cal = measure(counts(r), None, GAUSSIAN, measure_share, rng)
        cost = budget.spend(select_share, measure_share)
        released.append(Measurement(r, GAUSSIAN, cost, cal.variance, values))
        linear.append(LinearMeasurement(r, values, cal.variance))
        chosen.append(r)
        model = GraphicalModel.fit(domain, linear, warm_start=model, max_iters=max_iters, tol=tol)
    return MWEMResult(released, model, chosen)
