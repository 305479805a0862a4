"""DROPPED ROWS: a charged DP count of the rows that bounding to k rows per privacy unit leaves out.

A release outside the planner: its noise is drawn through `Executor.charged`, like every other.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpsql.errors import ProgrammingError
from dpsql.executor import Executor, Pending, Release
from dpsql.answers.result import Result
from mechanisms.measurement import measure


def dropped_rows(executor: Executor, table: str, share: float, cap: int | None = None) -> Result:
    """A charged DP count of the rows that bounding to k rows per privacy unit drops.

    Each unit counts min(rows − k, cap), cap = k by default: a unit's excess is
    unbounded, so it is capped, and one unit then moves the count by at most cap,
    the sensitivity the noise is calibrated to (k, like every other measurement of
    the table). The count is exact when no unit has more than k + cap rows and a
    lower bound otherwise; cap = 1 counts the units that lost rows. Rows without a
    unit are not counted. Spends `share`, charged before release.
    """
    spec = executor.catalog.get(table)
    if spec is None:
        raise ProgrammingError(f"{table!r} is not a protected table of the catalog")
    if spec.unit is None:
        raise ProgrammingError(f"{spec.name!r} declares no privacy unit: nothing is bounded, nothing dropped")
    cap = spec.contribution if cap is None else cap
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise ProgrammingError(f"cap must be a positive integer, got {cap!r}")
    executor.ledger.check(share)
    statement = f"DROPPED ROWS {spec.name} (cap {cap})"
    drawn: list[tuple[np.ndarray, Any]] = []  # the noisy count, kept out of sight until it is charged

    def draw() -> Release:
        drawn.append(measure(np.asarray([executor.backend.dropped_rows(spec, cap)]), None, executor.budget.noise, share,
                             executor.rng, cap))
        return Release(spec, share, statement, [], None, "dropped rows")

    executor.charged([Pending(spec, share, statement, "dropped rows", draw)])
    values, cal = drawn[0]
    result = Result(["dropped_rows"], [(float(values[0]),)], [(float(np.sqrt(cal.variance)),)], charged=share)
    result.charge_text = executor.charge_text(share)
    return result
