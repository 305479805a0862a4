"""Budgets: the ledger's unit, every conversion into it, and the numbers people give for them.

`Budget` is made once per connection from the ledger (its noise kind and δ) and asked
everywhere a share is needed: ε at the ledger's δ, or ρ, becomes the ledger's unit (ρ for
zCDP with Gaussian noise, ε for pure DP with Laplace noise) in `Budget.share`, and a share
is shown in both units by `Budget.amount`. No other module converts ε to ρ.

Every surface (connect, SET dpsql.*, BEGIN WORKLOAD WITH (...), WEIGHT hints,
dp_workload, dropped_rows, synth, profiles) reads its numbers through `checked`, so a
value outside its range is a dpsql error that says the range, never an overflow or a
division by zero deep in the planner. The ranges are wide enough for any real use and
narrow enough that every conversion and plan stays finite. `Sizing` says how one
statement's new measurements are sized.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from dpsql.errors import ProgrammingError
from mechanisms.accounting import Amount, epsilon_delta_to_zcdp
from mechanisms.measurement import GAUSSIAN, LAPLACE

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
class Budget:
    """A ledger's unit: ρ-zCDP at `delta` (Gaussian noise), or pure ε-DP (Laplace noise)."""

    noise: str
    delta: float

    @classmethod
    def requested(cls, epsilon: float | None, delta: float | None, rho: float | None,
                  default_delta: float) -> tuple["Budget", float | None]:
        """The unit a connection asks for, and its total in that unit (None: not given).

        ``delta=0`` with ε selects pure ε-DP; otherwise zCDP at δ (default `default_delta`)."""
        if rho is not None and epsilon is not None:
            raise ProgrammingError("give either epsilon (with delta) or rho, not both")
        pure = delta == 0 and rho is None
        budget = cls(LAPLACE, 0.0) if pure else cls(GAUSSIAN, default_delta if delta is None else float(delta))
        total = None if epsilon is None and rho is None else budget.share(epsilon, rho)
        return budget, total

    @property
    def unit(self) -> str:
        return "ρ" if self.noise == GAUSSIAN else "ε"

    def share(self, epsilon: float | None = None, rho: float | None = None, *, delta: float | None = None,
              default_epsilon: float | None = None) -> float:
        """ε (converted at `delta`, default the ledger's δ) or ρ in this unit, each checked first."""
        if rho is not None:
            if self.noise == LAPLACE:
                raise ProgrammingError("this ledger uses pure ε-DP: give amounts as epsilon, not rho")
            return checked("rho", rho)
        if epsilon is None and default_epsilon is None:
            raise ProgrammingError("give an amount: epsilon or rho")
        epsilon = checked("epsilon", default_epsilon if epsilon is None else epsilon)
        if self.noise == LAPLACE:
            return epsilon
        return epsilon_delta_to_zcdp(epsilon, self.delta if delta is None else delta)

    def amount(self, share: float) -> Amount:
        """A share of this unit, in both units."""
        return Amount.pure(share) if self.noise == LAPLACE else Amount.zcdp(share, self.delta)


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


__all__ = ["RANGES", "Budget", "Sizing", "checked"]
