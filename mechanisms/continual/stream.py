"""The state of one continual query across its emits: what to release, and its answers.

CREATE charges the whole horizon once (seed_gaps G3 §2): the noise of every row is
calibrated at creation to the sensitivity of the whole product strategy
A_time ⊗ A_cells for a unit with at most k rows (`strategies`) and to the budget — ρ for
discrete Gaussian noise (zCDP), ε for discrete Laplace noise (pure DP, S004 Algorithm 5).
Emit t releases only the rows due at t (`TimeStrategy.due`: nodes whose windows end at
t), each once, with that noise, so the horizon costs exactly the budget.

Emit t needs the exact cell counts of windows [`scan_from()`, t): the newest window for
SENSDIFF, and the closed windows under the due nodes for a tree. They are counted again
from the append-only table rather than kept (only noisy values are ever stored); that
needs the online-stable contribution bound (first k rows by arrival) and a late-row
policy, so closed windows count the same at every emit.

Answers: the cells' least squares (A_cells⁺) applies to each released time row, then a
time estimator (`estimators`): what emit t shows is the causal least-squares answer for
window t and the running total to t, which no later release changes; `answers(OFFLINE)`
refines every window from all releases so far. Variances are exact: the calibrated
variance of the discrete noise × the time estimator's × the cells' least squares'.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from mechanisms.arrays import to_numpy
from mechanisms.continual.estimators import CAUSAL, OFFLINE, estimate, variances
from mechanisms.continual.strategies import TimeStrategy
from mechanisms.matrices import Matrix, from_spec, to_spec
from mechanisms.measurement import GAUSSIAN, Calibration, calibrate, exact_answer, query_step, release
from mechanisms.noise import RandomSource

__all__ = ["ContinualRelease", "Report"]


@dataclass(frozen=True)
class Report:
    """Estimates for windows `first`+1.. (rows) and cells (columns), with exact variances."""

    first: int
    running: np.ndarray
    window: np.ndarray
    running_variance: np.ndarray
    window_variance: np.ndarray


class ContinualRelease:
    """One continual query: a time strategy ⊗ a cells strategy, its noise, and its releases.

    `cells` is the strategy over the query's cells (`Identity(n)`: each cell counted);
    `budget` is ρ (Gaussian) or ε (Laplace) for the whole horizon; `bound` is the most
    rows a privacy unit contributes over the horizon.
    """

    def __init__(self, strategy: TimeStrategy, cells: Matrix, noise: str, budget: float, bound: int,
                 rng: RandomSource | None = None, calibration: Calibration | None = None):
        if np.any((strategy.weights != 0) & (strategy.weights != 1)):
            raise ValueError("a continual release measures node totals: per-depth weights must be 0 or 1")
        self.strategy, self.cells, self.noise, self.budget, self.bound = strategy, cells, noise, budget, bound
        self.rng = rng or RandomSource()
        self.sensitivity = strategy.sensitivity(noise, bound) * cells.sensitivity(2 if noise == GAUSSIAN else 1)
        self.calibration = calibration or calibrate(noise, self.sensitivity, budget, query_step(cells))
        self.values = np.full((strategy.matrix.shape[0], cells.shape[0]), np.nan)
        self.now = 0
        self._cells_pinv = cells.pinv()  # diag((AᵀA)⁻¹) = squared row norms of A⁺
        self._cells_variance = (np.asarray(to_numpy(self._cells_pinv.dense()), dtype=float) ** 2).sum(axis=1)

    def scan_from(self) -> int:
        """The first window (0-based) whose counts the next emit needs."""
        return min(node.lo for node in self.strategy.due(self.now + 1))

    def emit(self, counts) -> Report:
        """Release the rows due at the next emit t from the exact counts of windows
        [`scan_from()`, t) × cells; returns what emit t shows (window t, running total to t)."""
        self.draw(counts)
        return self.shown()

    def draw(self, counts) -> None:
        """Draw the noise of the rows due at the next emit t (the counts as in `emit`) and advance to t;
        nothing computed from the noise is returned (a caller that must record the release first, then
        show it, calls `shown` after recording)."""
        t, first = self.now + 1, self.scan_from()
        counts = np.asarray(counts)
        if counts.shape != (t - first, self.cells.shape[1]):
            raise ValueError(f"emit {t} needs counts of windows {first}..{t - 1} × {self.cells.shape[1]} cells")
        released = {}
        for node in self.strategy.due(t):
            answer = exact_answer(counts[node.lo - first : node.hi - first].sum(axis=0), self.cells, self.noise)
            values, cal = release(replace(answer, sensitivity=self.sensitivity), self.noise, self.budget, self.rng)
            if cal.scale != self.calibration.scale:
                raise RuntimeError("the noise calibration changed since the horizon was charged")
            released[self.strategy.row(node)] = values
        for row, values in released.items():
            self.values[row] = values
        self.now = t

    def shown(self) -> Report:
        """What the latest emit shows: its window and the running total to it."""
        t = self.now
        report = self._report(OFFLINE, t)
        return Report(t - 1, *(a[-1:] for a in (report.running, report.window, report.running_variance,
                                                report.window_variance)))

    def released(self, t: int) -> np.ndarray:
        """The noisy values released at emit t (the due rows, in `TimeStrategy.due` order)."""
        return self.values[[self.strategy.row(node) for node in self.strategy.due(t)]]

    def answers(self, estimator: str = CAUSAL) -> Report:
        """Windows 1..now: as shown at each emit (`CAUSAL`) or from all releases so far (`OFFLINE`)."""
        if self.now == 0:
            raise ValueError("nothing has been released yet")
        return self._report(estimator, self.now)

    def _report(self, estimator: str, now: int) -> Report:
        cell_values = np.asarray(to_numpy(self._cells_pinv.matvec(np.nan_to_num(self.values).T)), dtype=float).T
        found = estimate(self.strategy, estimator, cell_values, now)
        running, window = variances(self.strategy, estimator, now)
        scale = self.calibration.variance * self._cells_variance[None, :]
        return Report(0, found.running, found.window, running[:, None] * scale, window[:, None] * scale)

    def largest_stderr(self, estimator: str = CAUSAL) -> tuple[float, float]:
        """The largest standard errors of a window's count and of a running total over the horizon."""
        running, window = variances(self.strategy, estimator)
        scale = self.calibration.variance * float(np.max(self._cells_variance))
        return float(np.sqrt(np.max(window) * scale)), float(np.sqrt(np.max(running) * scale))

    # --- what the ledger keeps ----------------------------------------------------
    def state(self) -> dict:
        """JSON-able: the strategies, the noise as drawn, and every release so far."""
        cal = self.calibration
        return {
            "strategy": self.strategy.spec(),
            "cells": to_spec(self.cells),
            "noise": self.noise,
            "budget": self.budget,
            "bound": self.bound,
            "calibration": {"scale": str(cal.scale), "granularity": str(cal.granularity), "variance": cal.variance},
            "releases": [self.released(t).tolist() for t in range(1, self.now + 1)],
        }

    @classmethod
    def from_state(cls, state: dict, rng: RandomSource | None = None) -> "ContinualRelease":
        c = state["calibration"]
        cal = Calibration(state["noise"], Fraction(c["scale"]), Fraction(c["granularity"]), float(c["variance"]))
        out = cls(TimeStrategy.from_spec(state["strategy"]), from_spec(state["cells"]), state["noise"],
                  float(state["budget"]), int(state["bound"]), rng, cal)
        for t, values in enumerate(state["releases"], start=1):
            out.values[[out.strategy.row(node) for node in out.strategy.due(t)]] = values
            out.now = t
        return out
