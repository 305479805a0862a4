"""Multi-start L-BFGS-B for HDMM's non-convex templates, spending iterations and restarts only while they help.

HDMM's p-Identity (OPT₀, OPT⊗ axes) and marginal (OPT_M) objectives under Laplace noise
have many local optima, so the optimizers try several starts. Four rules keep the cost
to what is measured to pay (benchmarks/RESULTS.md, issue 34):

- a run stops once its objective improved by less than PROGRESS_TOL (relative) over its
  last WINDOW iterations (its tail gains little: on the thesis' 1-D workloads at
  n = 1024, the 700 iterations after the first 300 gained under 1%);
- a restart races the best cold run (from a random or structured start, not a warm one): at
  iterations c, 2c, 4c, ... it is abandoned unless ahead of that run at the same iteration
  by RESTART_TOL (relative). By default c = 10; p-Identity solves led by the hierarchical
  start use c = 20, since random starts trail that start's run at iteration 10 (by 7-38% on
  PREFIX at n = 128) and some lead it by 20 (PREFIX at n = 96 ends at 1,673.0 from c = 10,
  1,668.7 from c = 20; OPT_M from c = 20 ends 7% higher on the thesis' Example 4);
- restarts end once those since the best (or the best cold run) last improved by
  RESTART_TOL have spent as many iterations as the best cold run (patience "run"), or as it
  took to settle, i.e. to come within RESTART_TOL of its end value (patience "settled")
  (cheap abandoned restarts go on; a full run that does not help is the last). By default
  "run"; p-Identity solves led by the hierarchical start use "settled": behind that start's
  run, which crawls its last 0.1%, it cuts the restarts (OPT⊗ on 64-cell axes: 2-4 runs of
  49-65 iterations instead of 4-5 of 66-76) at the same error (OPT_M with "settled" ends 7%
  higher on Example 4, and random-led p-Identity solves lose: ALL RANGE at n = 64 ends at
  the identity);
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


@dataclass(frozen=True)
class Multistart:
    """The best point found, its objective, the iterations and the runs spent."""

    x: np.ndarray
    fun: float
    iterations: int
    runs: int


def _checkpoint(k: int, first: int) -> bool:
    """Iterations first, 2·first, 4·first, ..."""
    q, r = divmod(k, first)
    return r == 0 and q & (q - 1) == 0


def _settled(trajectory: list[float]) -> int:
    """The iterations a run took to come within RESTART_TOL of its end value."""
    end = trajectory[-1]
    return next(k for k, f in enumerate(trajectory, 1) if f <= end + RESTART_TOL * abs(end))


def _run(
    fun, x0, options: dict, race: list[float] | None, first_check: int
) -> tuple[np.ndarray, float, list[float]]:
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
        if race is not None and _checkpoint(k, first_check) and f > race[min(k, len(race)) - 1] * (1.0 - RESTART_TOL):
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
    patience: str = "run",
    first_check: int = 10,
) -> Multistart:
    """Minimize `fun` (returning (f, ∇f)) over x ≥ 0 from `starts` in order (drawn lazily), under the rules above.

    `final(x, f)` may re-evaluate a run's end value (e.g. exactly, where the fast objective loses precision).
    The first `warm` starts begin near an optimum (a warm start, a closed form): restarts race
    only cold runs, which begin about as far off as they do. `work_per_iteration`
    (floating-point operations) counts the work against `RESTART_WORK`; the first cold run
    always runs. `patience` ("run" or "settled") bounds the restarts that do not help and
    `first_check` is the race's first checkpoint, as above.
    """
    if patience not in ("run", "settled"):
        raise ValueError("patience is 'run' or 'settled'")
    tail = len if patience == "run" else _settled
    options = {"maxiter": max_iter, "maxfun": 2 * max_iter, "ftol": ftol, "gtol": 1e-12}
    best_x, best_f = None, np.inf
    race: list[float] | None = None  # the trajectory of the best cold run
    race_f = np.inf
    iterations = runs = unhelpful = 0
    for x0 in starts:
        x, f, trajectory = _run(fun, x0, options, race, first_check)
        if final is not None:
            f = final(x, f)
        runs += 1
        iterations += len(trajectory)
        helped = best_x is None or f < best_f * (1.0 - RESTART_TOL)
        if best_x is None or f < best_f:
            best_x, best_f = x, f
        if runs > warm and f < race_f * (1.0 - RESTART_TOL):  # the best cold run so far: the one to race
            race, race_f, helped = trajectory, f, True
        unhelpful = 0 if helped else unhelpful + len(trajectory)
        if race is not None and (unhelpful >= tail(race) or iterations * work_per_iteration > RESTART_WORK):
            break
    if best_x is None:
        raise ValueError("multistart needs at least one start")
    return Multistart(best_x, best_f, iterations, runs)
