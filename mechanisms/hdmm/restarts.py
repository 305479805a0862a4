"""Multi-start L-BFGS-B for HDMM's non-convex templates, spending iterations and restarts only while they help.

HDMM's p-Identity (OPT₀, OPT⊗ axes) and marginal (OPT_M) objectives under Laplace noise
have many local optima, so the optimizers try several starts. Four rules keep the cost
to what is measured to pay (benchmarks/RESULTS.md, issue 34):

- a run stops once its objective improved by less than PROGRESS_TOL (relative) over its
  last WINDOW iterations (its tail gains little: on the thesis' 1-D workloads at
  n = 1024, the 700 iterations after the first 300 gained under 1%);
- a restart races the best run from a random start: at iterations 10, 20, 40, ... it is
  abandoned unless ahead of that run at the same iteration by RESTART_TOL (relative);
- restarts end once those since the best (or the best from a random start) last improved
  by RESTART_TOL have spent as many iterations as the best run from a random start
  (cheap abandoned restarts go on; a full run that does not help is the last);
- and no restart starts once the solve has done RESTART_WORK floating-point operations
  (counted from the objective's cost per evaluation): restarts are spent where they are
  cheap. Measured against the reference hdmm: on small problems (OPT⊗ axes of 64 cells,
  CPS marginals) restarts lowered the error 0.7-10% for milliseconds; on OPT₀ at
  n = 1024 a second run doubled the CPU time and changed the error by 0.05-0.4%.

Everything is deterministic for given starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np
from scipy.optimize import Bounds, minimize

__all__ = ["Multistart", "multistart"]

WINDOW = 10
PROGRESS_TOL = 1e-4
RESTART_TOL = 1e-3
RESTART_WORK = 1e10
_FIRST_CHECK = 10  # the race's checkpoints: 10, 20, 40, ...


@dataclass(frozen=True)
class Multistart:
    """The best point found, its objective, the iterations and the runs spent."""

    x: np.ndarray
    fun: float
    iterations: int
    runs: int


def _checkpoint(k: int) -> bool:
    """Iterations 10, 20, 40, 80, ..."""
    q, r = divmod(k, _FIRST_CHECK)
    return r == 0 and q & (q - 1) == 0


def _run(fun, x0, options: dict, race: list[float] | None) -> tuple[np.ndarray, float, list[float]]:
    """One L-BFGS-B run under the progress and race rules; (x, f, the objective after each iteration)."""
    trajectory: list[float] = []
    best: list = [x0, np.inf]

    def callback(intermediate_result):
        f = float(intermediate_result.fun)
        trajectory.append(f)
        k = len(trajectory)
        if f < best[1]:
            best[0], best[1] = np.array(intermediate_result.x), f
        if k > WINDOW and trajectory[k - 1 - WINDOW] - f < PROGRESS_TOL * abs(f):
            raise StopIteration
        if race is not None and _checkpoint(k) and f > race[min(k, len(race)) - 1] * (1.0 - RESTART_TOL):
            raise StopIteration  # not ahead of the best run: abandoned

    res = minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=Bounds(0.0, np.inf), options=options, callback=callback)
    x, f = (res.x, float(res.fun)) if float(res.fun) <= best[1] else (best[0], best[1])
    return x, f, trajectory or [f]


def multistart(
    fun: Callable,
    starts: Iterable[np.ndarray],
    max_iter: int,
    ftol: float = 1e-12,
    final: Callable[[np.ndarray, float], float] | None = None,
    warm: int = 0,
    work_per_iteration: float = 0.0,
) -> Multistart:
    """Minimize `fun` (returning (f, ∇f)) over x ≥ 0 from `starts` in order (drawn lazily), under the rules above.

    `final(x, f)` may re-evaluate a run's end value (e.g. exactly, where the fast objective loses precision).
    The first `warm` starts are not random (a warm start, a closed form): random restarts race
    only runs from random starts, which begin as far off as they do. `work_per_iteration`
    (floating-point operations) counts the work against `RESTART_WORK`; the first run from a
    random start always runs.
    """
    options = {"maxiter": max_iter, "maxfun": 2 * max_iter, "ftol": ftol, "gtol": 1e-12}
    best_x, best_f = None, np.inf
    race: list[float] | None = None  # the trajectory of the best run from a random start
    race_f = np.inf
    iterations = runs = unhelpful = 0
    for x0 in starts:
        x, f, trajectory = _run(fun, x0, options, race)
        if final is not None:
            f = final(x, f)
        runs += 1
        iterations += len(trajectory)
        helped = best_x is None or f < best_f * (1.0 - RESTART_TOL)
        if best_x is None or f < best_f:
            best_x, best_f = x, f
        if runs > warm and f < race_f * (1.0 - RESTART_TOL):  # the best random start so far: the one to race
            race, race_f, helped = trajectory, f, True
        unhelpful = 0 if helped else unhelpful + len(trajectory)
        if race is not None and (unhelpful >= len(race) or iterations * work_per_iteration > RESTART_WORK):
            break
    if best_x is None:
        raise ValueError("multistart needs at least one start")
    return Multistart(best_x, best_f, iterations, runs)
