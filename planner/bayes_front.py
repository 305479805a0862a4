"""DPareto's search: Gaussian-process Bayesian optimization of a 2-D front (ε and an error, both minimized).

Following DPareto (Avent et al.; ``shared/research/seed_avent.md`` §3), with ε one of the inputs (the
privacy oracle is the identity) so only log RMSE needs a GP, and the *expected* hypervolume
improvement in the (log ε, log RMSE) plane in closed form (`expected_improvement`). `bayes_front`
evaluates the first configuration given, then a seeded Latin-hypercube design, then BO, under a
bounded number of evaluations and a `PlanningLimit`; `planner.pareto.adaptive_front` runs it on AIM's
and RAP's simulations.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np
from scipy.linalg import cho_solve, cholesky
from scipy.optimize import minimize
from scipy.stats import norm, qmc

from planner.planning_limit import OutOfTime, PlanningLimit

MAX_EVALUATIONS = 12  # simulations per adaptive procedure
BAYES, RANDOM = "bayes", "random"  # the searches `bayes_front` runs


def hypervolume(points: Iterable[tuple[float, float]], reference: tuple[float, float]) -> float:
    """Area dominated by `points` (both coordinates minimized) and bounded by `reference` (2-D)."""
    area, floor = 0.0, reference[1]
    for x, y in sorted((x, y) for x, y in points if x < reference[0] and y < reference[1]):
        if y < floor:  # a new strip [x, rx] × [y, floor] that no point of smaller x covers
            area += (reference[0] - x) * (floor - y)
            floor = y
    return area


@dataclass(frozen=True)
class Knob:
    """One setting searched over: [low, high], on a log scale unless `log` is False; rounded if `integer`."""

    name: str
    low: float
    high: float
    log: bool = True
    integer: bool = False

    def value(self, u: float) -> float:
        if self.log:
            v = math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low)))
        else:
            v = self.low + u * (self.high - self.low)
        v = min(max(v, self.low), self.high)
        return float(round(v)) if self.integer else v

    def unit(self, v: float) -> float:
        if self.high == self.low:
            return 0.5
        if self.log:
            return (math.log(v) - math.log(self.low)) / (math.log(self.high) - math.log(self.low))
        return (v - self.low) / (self.high - self.low)


@dataclass(frozen=True)
class Evaluation:
    settings: tuple[tuple[str, float], ...]  # the knobs' values, "epsilon" among them
    epsilon: float
    rmse: float  # inf when the simulation broke down
    seconds: float


class _GP:
    """A Gaussian process on [0,1]^d with an ARD RBF kernel; hyperparameters maximize the marginal likelihood."""

    def __init__(self, x: np.ndarray, y: np.ndarray, rng: np.random.Generator, restarts: int = 3):
        self.x = x
        self.shift = float(y.mean())
        self.scale = float(y.std()) or 1.0
        z = (y - self.shift) / self.scale
        n, d = x.shape
        bounds = [(math.log(0.03), math.log(10.0))] * d + [(math.log(0.05), math.log(20.0)), (math.log(1e-6), math.log(0.5))]

        def nll(theta: np.ndarray) -> float:
            try:
                chol = cholesky(self._k(x, x, theta) + np.eye(n) * (math.exp(theta[-1]) + 1e-9), lower=True)
            except np.linalg.LinAlgError:
                return 1e10
            alpha = cho_solve((chol, True), z)
            return float(0.5 * z @ alpha + np.log(np.diag(chol)).sum() + 0.5 * n * math.log(2 * math.pi))

        starts = [np.array([math.log(0.3)] * d + [0.0, math.log(1e-3)])]
        starts += [np.array([rng.uniform(lo, hi) for lo, hi in bounds]) for _ in range(restarts - 1)]
        # Derivative-free (a handful of parameters, a dozen points): L-BFGS-B's BLAS-threaded steps cost more
        # than the whole fit on a busy machine.
        options = {"maxfev": 150 * (d + 2), "xatol": 1e-3, "fatol": 1e-6}
        best = min((minimize(nll, s, method="Nelder-Mead", bounds=bounds, options=options) for s in starts),
                   key=lambda r: r.fun)
        self.theta = best.x
        k = self._k(x, x, self.theta) + np.eye(n) * (math.exp(self.theta[-1]) + 1e-9)
        self.chol = cholesky(k, lower=True)
        self.alpha = cho_solve((self.chol, True), z)

    @staticmethod
    def _k(a: np.ndarray, b: np.ndarray, theta: np.ndarray) -> np.ndarray:
        d = a.shape[1]
        ls = np.exp(theta[:d])
        diff = (a[:, None, :] - b[None, :, :]) / ls
        return math.exp(theta[d]) * np.exp(-0.5 * np.sum(diff**2, axis=-1))

    def predict(self, xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation of the latent function (original units)."""
        ks = self._k(xs, self.x, self.theta)
        mean = ks @ self.alpha
        v = np.linalg.solve(self.chol, ks.T)
        var = np.maximum(math.exp(self.theta[len(self.x[0])]) - np.sum(v**2, axis=0), 1e-12)
        return self.shift + self.scale * mean, self.scale * np.sqrt(var)


def expected_improvement(front: list[tuple[float, float]], x: np.ndarray | float, mean: np.ndarray | float,
                         std: np.ndarray | float, reference: tuple[float, float]) -> np.ndarray:
    """Expected hypervolume improvement of points at known x whose y is N(mean, std²) (2-D, minimized).

    A point dominates [x, rx] × [y, ry]; above u ∈ [x, rx) the front already covers down to
    h(u) = min(ry, min{y_i : x_i ≤ u}), a step function. So the gain is Σ_j L_j · max(0, h_j − y)
    over the steps (L_j: the length of step j right of x), and its expectation is
    Σ_j L_j · ((h_j − m) Φ(z_j) + s φ(z_j)), z_j = (h_j − m)/s. Vectorized over the points.
    """
    x, mean = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(mean, dtype=float))
    std = np.maximum(np.broadcast_to(np.asarray(std, dtype=float), mean.shape), 1e-12)
    rx, ry = reference
    inside = sorted((xi, yi) for xi, yi in front if xi < rx)
    bounds = [-math.inf] + [xi for xi, _ in inside] + [rx]
    total = np.zeros(mean.shape)
    h = ry
    for j, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        if j > 0:
            h = min(h, inside[j - 1][1])
        length = np.clip(hi - np.maximum(lo, x), 0.0, None)
        z = (h - mean) / std
        total += length * ((h - mean) * norm.cdf(z) + std * norm.pdf(z))
    return total


def _pareto(pairs: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out, best = [], math.inf
    for x, y in sorted(pairs):
        if y < best:
            out.append((x, y))
            best = y
    return out


def bayes_front(
    evaluate: Callable[[dict[str, float]], float],
    knobs: Sequence[Knob],
    max_evaluations: int = MAX_EVALUATIONS,
    initial: int = 4,
    seed: int = 0,
    limit: PlanningLimit | None = None,
    first: dict[str, float] | None = None,
    candidates: int = 1024,
    search: str = BAYES,
) -> tuple[list[Evaluation], bool]:
    """Minimize (ε, RMSE) over the knobs (one named "epsilon"): (every evaluation, whether time ran out).

    `first` (e.g. the planner's defaults), a seeded Latin-hypercube design up to `initial`
    points, then expected hypervolume improvement in (log ε, log RMSE) under a GP on log
    RMSE, maximized over `candidates` seeded random settings (never one evaluated before).
    `search` = RANDOM replaces both the design and BO by i.i.d. uniform settings after `first`
    (random search, DPareto's baseline: `benchmarks.dpareto`). At most `max_evaluations` calls
    of `evaluate`, each stopped at the limit.
    """
    if search not in (BAYES, RANDOM):
        raise ValueError(f"unknown search {search!r}: use {BAYES!r} or {RANDOM!r}")
    if not any(k.name == "epsilon" for k in knobs):
        raise ValueError('the knobs need an "epsilon"')
    limit = limit or PlanningLimit()
    rng = np.random.default_rng(seed)
    index = [k.name for k in knobs].index("epsilon")
    eps_knob = knobs[index]
    done: list[Evaluation] = []
    seen: set[tuple] = set()

    def settings_of(u: np.ndarray) -> tuple[tuple[str, float], ...]:
        return tuple((k.name, k.value(float(v))) for k, v in zip(knobs, u))

    def coords(settings: tuple[tuple[str, float], ...]) -> np.ndarray:
        return np.array([k.unit(v) for k, (_, v) in zip(knobs, settings)])

    def run(settings: tuple[tuple[str, float], ...]) -> bool:
        seen.add(settings)
        values = dict(settings)
        started = time.perf_counter()
        try:
            with limit.optional():
                rmse = float(evaluate(values))
        except OutOfTime:
            limit.skip("adaptive simulations")
            return False
        done.append(Evaluation(settings, values["epsilon"], rmse if rmse == rmse else math.inf,
                               time.perf_counter() - started))
        return True

    design: list[tuple[tuple[str, float], ...]] = []
    if first is not None:
        design.append(tuple((k.name, float(first[k.name])) for k in knobs))
    extra = 0 if search == RANDOM else max(0, min(initial, max_evaluations) - len(design))
    if extra:
        design += [settings_of(u) for u in qmc.LatinHypercube(d=len(knobs), rng=rng).random(extra)]
    for settings in design:
        if len(done) >= max_evaluations:
            break
        if settings in seen:
            continue
        if not run(settings):
            return done, True

    while len(done) < max_evaluations:
        pool = [settings_of(u) for u in rng.random((candidates, len(knobs)))]
        pool = list(dict.fromkeys(s for s in pool if s not in seen))
        if not pool:
            break
        finite = [e for e in done if math.isfinite(e.rmse) and e.rmse > 0]
        if search == RANDOM or len(finite) < 2:
            choice = pool[0]
        else:
            x = np.array([coords(e.settings) for e in finite])
            y = np.log([e.rmse for e in finite])
            gp = _GP(x, y, rng)
            xs = np.array([coords(s) for s in pool])
            mean, std = gp.predict(xs)
            points = [(math.log(e.epsilon), math.log(e.rmse)) for e in finite]
            span = max(y.max() - y.min(), 1.0)
            reference = (math.log(eps_knob.high) + 0.05 * (math.log(eps_knob.high) - math.log(eps_knob.low)) + 1e-9,
                         float(y.max()) + 0.25 * span)
            front = _pareto(points)
            log_eps = np.array([math.log(dict(s)["epsilon"]) for s in pool])
            gain = expected_improvement(front, log_eps, mean, std, reference)
            choice = pool[int(np.argmax(gain))] if gain.max() > 0 else pool[int(np.argmax(std))]
        if not run(choice):
            return done, True
    return done, False


__all__ = ["BAYES", "MAX_EVALUATIONS", "RANDOM", "Evaluation", "Knob", "bayes_front", "expected_improvement", "hypervolume"]
