"""AIM: adaptive, iterative selection of marginals to measure (McKenna et al., PVLDB 2022).

The procedure of McKenna's thesis, Algorithms 6–8, for a budget ρ (zCDP):

- candidates are the downward closure W₊ of the workload cliques (∅ excluded),
  weighted w_r = Σ_{s∈W} c_s·|r ∩ s|;
- T = 16·d rounds at most, α = 0.9 of each round's budget measures and 0.1 selects:
  σ₀ = √(T / (2αρ)), ε₀ = √(8(1−α)ρ / T);
- every 1-way candidate is measured at σ₀ and a graphical model is fitted;
- each round: if what remains is at most two rounds' worth, this round spends
  exactly the rest (ε = √(8(1−α)R), σ = √(1/(2αR))); candidates whose model
  would exceed `max_model_size`·ρ_used/ρ MB are dropped (unless already inside a
  model clique); the exponential mechanism (sensitivity max w_r) picks r_t by
  q_r = w_r(‖M_r(D) − M_r(p̂)‖₁ − √(2/π)·σ_t·n_r); r_t's marginal is measured with
  Gaussian noise and the model refitted (warm start); when the model's marginal
  on r_t moved by at most √(2/π)·σ_t·n_{r_t}, ε doubles and σ halves.

All ρ shares are exact: the round charges (selection + measurement) recorded on
the released `Measurement`s sum to ρ exactly in floating point, the last round
taking precisely the remainder. Noise is the exact discrete Gaussian of
`mechanisms.measurement.measure`; selection is the exact sampler of
`mechanisms.exponential`. Candidate scores use exact marginals through a
`marginal(clique)` callback and are never returned: what `AIMResult` holds is
all private output (measurements, chosen cliques, round parameters, models).

Speed: every round scores all candidates on the one calibrated junction tree of
the current model, the model refit is warm-started (it stops when an iteration
improves the loss by less than `tol` relative), and the size of a candidate's
model is computed from bitmasks without building it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from mechanisms.arrays import to_numpy
from mechanisms.domain import Domain
from mechanisms.measurement import GAUSSIAN, Measurement, measure
from mechanisms.noise import RandomSource
from mechanisms.pgm.bounds import selection_bound, supported_bound
from mechanisms.pgm.estimation import LinearMeasurement
from mechanisms.pgm.junction_tree import Clique, megabytes, model_sizes
from mechanisms.pgm.model import GraphicalModel
from mechanisms.exponential import ExactBudget, epsilon_for, exponential_mechanism, l1_distance
from mechanisms.interruption import checkpoint

MarginalFn = Callable[[Clique], np.ndarray]
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


@dataclass(frozen=True)
class Progress:
    """Reported after each step: `fraction` of the budget spent so far (reaches 1.0 at the end)."""

    stage: str  # "initialize", "round" or "finalize"
    round: int
    fraction: float
    message: str
    elapsed: float


ProgressFn = Callable[[Progress], None]


@dataclass(frozen=True)
class Round:
    """One AIM round, as released: what was chosen, among what, with which parameters."""

    clique: Clique
    candidates: tuple[Clique, ...]
    epsilon: float  # exponential-mechanism parameter ε_t
    sensitivity: float  # Δ_t = max weight among the candidates
    sigma: float  # nominal noise std σ_t of the measurement
    selection_rho: float
    measurement_rho: float
    annealed: bool  # ε doubled and σ halved after this round


@dataclass
class AIMResult:
    """Measurements released (identity marginals), the fitted model and the round log.

    `previous` is the model before the last round's measurement (needed by the
    a-posteriori bounds of unsupported marginals, `mechanisms.pgm.bounds`).
    """

    measurements: list[Measurement]
    model: GraphicalModel
    previous: GraphicalModel
    rounds: list[Round]
    weights: dict[Clique, float]
    selection_rho: float
    measurement_rho: float

    @property
    def rho(self) -> float:
        """Total charge: Σ of the measurements' costs (selection included), exactly ρ."""
        return math.fsum(m.cost for m in self.measurements)

    def bound(self, clique: Sequence[str], estimate: np.ndarray) -> float | None:
        """A ~95% upper bound on ‖M_r(D) − estimate‖₁ (model or synthetic marginal counts).

        Corollary 1 when r is inside a measured clique; otherwise Corollary 2 of
        the last round when r was one of its candidates; None for other cliques.
        """
        domain = self.model.domain
        r = domain.canonical(clique)
        supported = supported_bound(domain, self.model.measurements, r, estimate)
        if supported is not None or not self.rounds or r not in self.rounds[-1].candidates:
            return supported
        last = self.rounds[-1]
        return selection_bound(
            estimate,
            self.previous.project(r),
            self.weights[r],
            domain.size(r),
            self.previous.project(last.clique),
            self.measurements[-1].values,
            self.weights[last.clique],
            last.sigma,
            last.epsilon,
            last.sensitivity,
            len(last.candidates),
        )


def workload_candidates(domain: Domain, workload: Iterable[tuple[Sequence[str], float]]) -> dict[Clique, float]:
    """The downward closure of the workload cliques (∅ excluded), with weights Σ_s c_s·|r ∩ s|."""
    cliques = [(domain.canonical(c), float(w)) for c, w in workload]
    closure: dict[Clique, None] = {}
    for c, _ in cliques:
        for k in range(1, len(c) + 1):
            for r in combinations(c, k):
                closure.setdefault(r, None)
    return {r: sum(w * len(set(r) & set(c)) for c, w in cliques) for r in closure}


def aim(
    domain: Domain,
    marginal: MarginalFn,
    rho: float,
    workload: Iterable[tuple[Sequence[str], float]],
    rng: RandomSource,
    *,
    progress: ProgressFn | None = None,
    max_model_size: float = 80.0,
    rounds: int | None = None,
    alpha: float = 0.9,
    max_iters: int = 1000,
    tol: float = 3e-4,
) -> AIMResult:
    """Run AIM under ρ-zCDP. `marginal(clique)` returns exact integer counts (never released).

    `max_model_size` caps the model's tables in MB (scaled by the budget used);
    `rounds` overrides T = 16·d; `max_iters`/`tol` bound each warm-started
    refit (see `mechanisms.pgm.estimation.mirror_descent`).
    """
    started = time.perf_counter()
    weights = workload_candidates(domain, workload)
    oneway = [r for r in weights if len(r) == 1]
    rounds = rounds if rounds is not None else 16 * len(domain)
    if rounds < len(oneway):
        raise ValueError(f"AIM needs at least as many rounds as 1-way marginals ({len(oneway)})")
    budget = ExactBudget(rho)
    answers: dict[Clique, np.ndarray] = {}
    released: list[Measurement] = []
    linear: list[LinearMeasurement] = []
    spent = {"selection": 0.0, "measurement": 0.0}

    def counts(r: Clique) -> np.ndarray:
        if r not in answers:
            answers[r] = np.asarray(marginal(r), dtype=np.int64).ravel()
        return answers[r]

    def release(r: Clique, selection: float, measurement: float) -> None:
        values, cal = measure(counts(r), None, GAUSSIAN, measurement, rng)
        cost = budget.spend(selection, measurement)
        released.append(Measurement(r, GAUSSIAN, cost, cal.variance, values))
        linear.append(LinearMeasurement(r, values, cal.variance))
        spent["selection"] += selection
        spent["measurement"] += measurement

    def report(stage: str, t: int, message: str) -> None:
        if progress is not None:
            progress(Progress(stage, t, budget.used / budget.total, message, time.perf_counter() - started))

    measure_share = budget.share(alpha * rho / rounds)
    select_share = budget.share((1.0 - alpha) * rho / rounds)
    for r in oneway:
        release(r, 0.0, measure_share)
    refit = dict(max_iters=max_iters, tol=tol)
    model = GraphicalModel.fit(domain, linear, **refit)
    previous = model
    report("initialize", 0, f"measured {len(oneway)} 1-way marginals")

    log: list[Round] = []
    sizes: dict = {}  # model sizes by graph, shared across rounds
    t = 0
    while budget.remaining > 0:
        checkpoint(len(weights) * model.tree.size)  # scoring every candidate on the model
        t += 1
        if budget.remaining <= 2 * (select_share + measure_share):
            select_share = budget.share((1.0 - alpha) * budget.remaining)
            measure_share = budget.remaining - select_share
        epsilon = epsilon_for(select_share)
        sigma = math.sqrt(1.0 / (2.0 * measure_share))
        limit = max_model_size * (budget.used + select_share + measure_share) / budget.total
        candidates = small_candidates(domain, weights, model, [m.clique for m in linear], limit, sizes)
        sensitivity = max(weights[r] for r in candidates)
        scores = _scores(model, candidates, weights, counts, sigma)
        chosen = candidates[exponential_mechanism(scores, epsilon, Fraction(sensitivity), rng)]
        before = model.project(chosen)
        release(chosen, select_share, measure_share)
        previous, model = model, GraphicalModel.fit(domain, linear, warm_start=model, **refit)
        moved = float(np.abs(model.project(chosen) - before).sum())
        annealed = moved <= _SQRT_2_OVER_PI * sigma * domain.size(chosen)
        log.append(
            Round(chosen, tuple(candidates), epsilon, sensitivity, sigma, select_share, measure_share, annealed)
        )
        if annealed:
            select_share = budget.share(4.0 * select_share)
            measure_share = budget.share(4.0 * measure_share)
        report("round", t, f"round {t}: measured {', '.join(chosen)} (σ={sigma:.3g}, {model.tree.size} cells)")
    report("finalize", t, f"final model: {len(model.cliques)} cliques, {model.tree.size} cells")
    return AIMResult(released, model, previous, log, weights, spent["selection"], spent["measurement"])


def small_candidates(
    domain: Domain,
    weights: Mapping[Clique, float],
    model: GraphicalModel,
    measured: list[Clique],
    limit_mb: float,
    cache: dict,
) -> list[Clique]:
    """Candidates inside a model clique, or whose model would fit in `limit_mb` megabytes."""
    cliques = [set(c) for c in model.cliques]
    free = {r for r in weights if any(set(r) <= c for c in cliques)}
    sizes = model_sizes(domain, measured, [r for r in weights if r not in free], cache)
    return [r for r in weights if r in free or megabytes(sizes[r]) <= limit_mb]


def _scores(
    model: GraphicalModel,
    candidates: list[Clique],
    weights: Mapping[Clique, float],
    counts: Callable[[Clique], np.ndarray],
    sigma: float,
) -> list[Fraction]:
    """q_r = w_r(‖M_r(D) − M_r(p̂)‖₁ − √(2/π)·σ·n_r) as exact rationals (sensitivity w_r)."""
    tables = model.beliefs.project_many(candidates)
    out = []
    for r, table in zip(candidates, tables):
        estimate = to_numpy(table).ravel() * model.total
        penalty = Fraction(_SQRT_2_OVER_PI * sigma * estimate.size)
        out.append(Fraction(weights[r]) * (l1_distance(counts(r), estimate) - penalty))
    return out
