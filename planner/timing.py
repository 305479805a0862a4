"""Predicted wall time of executing a plan, from data-free quantities only.

A plan runs in three phases after planning (whose time is measured, not predicted):

- **scan**: one pass over the table computing every measured clique's
  marginal. Its speed is the backend's (`ScanSpeed`, measured by the caller on
  synthetic data of its own); the table's size must be public or released.
- **release**: per measurement, the strategy's exact integer answer and the
  exact noise samples, at per-entry costs measured once per machine
  (`release_speeds`, kept by `planner.speed_cache`) on synthetic inputs. A strategy's first release also
  reads its entries as exact decimals (cached afterwards); the calibration
  includes that, so repeated releases run faster than predicted.
- **reconstruction**: the least-squares fit and the answer to every block. Its
  cost does not depend on the data, and planning already ran the same fit on
  the noise variances alone to compute the expected errors: that time
  (`Plan.fit_seconds`) is the prediction.

An adaptive procedure (AIM, RAP) is predicted by its simulated run on public
synthetic data of the same domain and size (`Prediction.seconds`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cache

import numpy as np

from mechanisms.domain import Domain
from mechanisms.matrices import Dense
from mechanisms.measurement import GAUSSIAN, exact_work, measure
from mechanisms.noise import RandomSource
from planner.speed_cache import machine_cached

_CALIBRATION_ROWS = 64  # rows of the synthetic strategy timed for exact answers


@dataclass(frozen=True)
class ScanSpeed:
    """A backend's marginal scan: seconds per scan, per table row, per row and measured clique, per output cell."""

    per_scan: float
    per_row: float
    per_row_clique: float
    per_cell: float

    def seconds(self, rows: float, cliques: int, cells: int) -> float:
        return self.per_scan + rows * (self.per_row + cliques * self.per_row_clique) + cells * self.per_cell


@dataclass(frozen=True)
class ReleaseSpeeds:
    """Seconds per measurement, per released entry (exact noise), per strategy entry read as an exact
    decimal (first release only; cached after), and per exact integer multiply-add (see `exact_work`)."""

    per_measurement: float
    per_entry: float
    per_read: float
    per_operation: float

    def seconds(self, entries: int, work: tuple[int, int]) -> float:
        return self.per_measurement + entries * self.per_entry + work[0] * self.per_read + work[1] * self.per_operation


def _release_seconds(counts, strategy=None) -> float:
    started = time.perf_counter()
    measure(counts, strategy, GAUSSIAN, 0.01, RandomSource(0))
    return time.perf_counter() - started


@cache
def release_speeds() -> ReleaseSpeeds:
    """Measured once per machine (`planner.speed_cache`) on synthetic counts and a synthetic dense strategy."""
    return machine_cached("release", ReleaseSpeeds, _measure_release_speeds)


def _measure_release_speeds() -> ReleaseSpeeds:
    rng = np.random.default_rng(0)
    small, large = rng.integers(0, 1000, 256), rng.integers(0, 1000, 8192)
    t_small = min(_release_seconds(small) for _ in range(3))
    per_entry = max(min(_release_seconds(large) for _ in range(2)) - t_small, 0.0) / (large.size - small.size)
    per_measurement = max(t_small - small.size * per_entry, 0.0)
    strategy = Dense(np.round(rng.uniform(-1, 1, (_CALIBRATION_ROWS, small.size)), 6))  # distinct entries
    reads, operations = exact_work(strategy)
    fixed = per_measurement + _CALIBRATION_ROWS * per_entry
    first = _release_seconds(small, strategy) - fixed  # reads the entries as exact decimals
    again = min(_release_seconds(small, strategy) for _ in range(2)) - fixed  # finds them cached
    return ReleaseSpeeds(per_measurement, per_entry, max(first - again, 0.0) / reads, max(again, 0.0) / operations)


@dataclass(frozen=True)
class TimePrediction:
    """Seconds: planning (measured), then predicted scan, release, reconstruction or adaptive run."""

    planning: float
    scan: float | None  # None: the table's size is not known (or the backend's speed is not)
    scan_per_million_rows: float | None  # None: the backend's speed is not known
    release: float
    reconstruction: float
    adaptive: float | None = None  # an adaptive procedure's whole run (it scans as it goes)

    @property
    def total(self) -> float | None:
        """Predicted execution seconds (planning excluded); None when the scan cannot be predicted."""
        if self.adaptive is not None:
            return self.adaptive
        return None if self.scan is None else self.scan + self.release + self.reconstruction

    def describe(self) -> str:
        if self.adaptive is not None:
            return f"planned in {_s(self.planning)}; the run is predicted to take {_s(self.adaptive)} (simulated)"
        if self.scan is not None:
            scan = f"scan {_s(self.scan)}"
        elif self.scan_per_million_rows is not None:
            scan = f"scan {_s(self.scan_per_million_rows)} per million rows (table size not released)"
        else:
            scan = "scan not predicted (unknown backend speed)"
        return (f"planned in {_s(self.planning)}; predicted {scan}, noise and exact answers {_s(self.release)}, "
                f"reconstruction {_s(self.reconstruction)}")


def _s(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def predict(plan, domain: Domain, rows: float | None, scan: ScanSpeed | None) -> TimePrediction:
    """The predicted seconds of executing `plan` (a `planner.plan.Plan`) on a table of `rows` rows.

    `rows` must be public or already released (None: unknown), never read from the data.
    """
    if plan.adaptive is not None:
        return TimePrediction(plan.planning_seconds, None, None, 0.0, 0.0, plan.adaptive.prediction.seconds)
    speeds = release_speeds()
    cliques = list(dict.fromkeys(m.clique for m in plan.measurements))
    cells = sum(domain.size(c) for c in cliques)
    release = 0.0
    for m in plan.measurements:
        query = m.query(domain)
        entries = domain.size(m.clique) if query is None else query.shape[0]
        release += speeds.seconds(entries, exact_work(query))
    if not cliques or scan is None:
        scan_seconds = 0.0 if not cliques else None
        per_million = 0.0 if not cliques else None
    else:
        scan_seconds = None if rows is None else scan.seconds(rows, len(cliques), cells)
        per_million = scan.seconds(1e6, len(cliques), cells)
    return TimePrediction(plan.planning_seconds, scan_seconds, per_million, release, plan.fit_seconds)


__all__ = ["ScanSpeed", "ReleaseSpeeds", "TimePrediction", "predict", "release_speeds"]
