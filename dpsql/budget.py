"""The numbers an analyst or owner may give for budgets and accuracy, checked in one place.

Every surface (connect, SET dpsql.*, BEGIN WORKLOAD WITH (...), WEIGHT hints,
dp_workload, dropped_rows, synth) reads its numbers through `checked`, so a
value outside its range is a dpsql error that says the range, never an
overflow or a division by zero deep in the planner. The ranges are wide enough
for any real use and narrow enough that every conversion and plan stays finite.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from dpsql.errors import ProgrammingError

# name -> (least, greatest) allowed value; every value must also be finite.
RANGES: dict[str, tuple[float, float]] = {
    "epsilon": (1e-9, 1e6),
    "rho": (1e-18, 1e12),
    "max_rmse": (1e-9, 1e15),
    "weight": (1e-6, 1e6),
    "planning_seconds": (1e-3, 86400.0),
}


def checked(name: str, value: Any, what: str | None = None) -> float:
    """`value` as a float if it is a number in the range of `name` (epsilon, rho, max_rmse, weight,
    or delta in [0, 1)); else ProgrammingError naming `what` (default: `name`) and the range."""
    label = what or name
    if isinstance(value, str):
        text = value.strip().strip("'")
        try:
            value = float(text)
        except ValueError:
            raise ProgrammingError(f"{label} must be a number, got {text!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProgrammingError(f"{label} must be a number, got {value!r}")
    value = float(value)
    if name == "delta":
        if not 0 <= value < 1:
            raise ProgrammingError(f"{label} must be at least 0 and below 1, got {value!r}")
        return value
    low, high = RANGES[name]
    if not (math.isfinite(value) and low <= value <= high):
        raise ProgrammingError(f"{label} must be a number from {low:g} to {high:g}, got {value!r}")
    return value


@dataclass(frozen=True)
class Sizing:
    """How a statement's new measurements are sized.

    `budget` (ρ, or ε for pure-DP ledgers) to spend, or instead `max_rmse`, the least budget
    giving every query that RMSE; `objective` the planner's ("total" or "max"). With
    `measure_unmeasured`, the statement asked for its own budget or accuracy (a workload
    WITH (...), SET dpsql.max_rmse): blocks that least squares does not determine are
    measured, not answered from a generative model, whose error is not bounded.
    """

    budget: float | None
    objective: str
    max_rmse: float | None = None
    measure_unmeasured: bool = False

    def with_budget(self, budget: float) -> "Sizing":
        return replace(self, budget=budget, max_rmse=None, measure_unmeasured=True)

    def with_accuracy(self, max_rmse: float) -> "Sizing":
        return replace(self, budget=None, max_rmse=max_rmse, measure_unmeasured=True)


__all__ = ["RANGES", "Sizing", "checked"]
