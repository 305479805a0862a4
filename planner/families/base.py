"""What every strategy family shares: the `Family` protocol, `Allocation`, and the budget maths.

A family turns a set of blocks into measurements. Its `unit_error` is the
expected total weighted squared error of the blocks at a unit budget (ρ = 1
for Gaussian noise, ε = 1 for Laplace); because every noise variance scales
as 1/ρ (Gaussian) or 1/ε² (Laplace), the error at budget B is
unit_error / B or unit_error / B² (`budget_exponent`). `allocate` gives the
measurement shares that achieve it. Independent parts share a budget in closed
form (`split`, `combined_unit_error`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from mechanisms.accounting import budget_split
from mechanisms.domain import Domain
from mechanisms.marginals import Clique
from mechanisms.matrices import Matrix
from mechanisms.measurement import GAUSSIAN
from mechanisms.workload import Block

# A clique measured only to serve others (not maximal) whose optimal share falls below this
# fraction of its family's budget is dropped, and the rest re-optimized (every marginal family).
NEGLIGIBLE_SHARE = 1e-3


@dataclass(frozen=True)
class Allocation:
    """What to measure and with which fraction of the family's budget.

    On the clique's marginal it measures one of: the block itself (`block`,
    answered directly), a strategy matrix (`strategy`), or, with both None,
    the marginal itself (the identity).
    """

    clique: Clique
    fraction: float
    block: Block | None
    sensitivity: float
    strategy: Matrix | None = None
    label: str | None = None  # how EXPLAIN names the strategy (e.g. its template)


def noise_unit_variance(noise: str, sensitivity: float) -> float:
    """Per-entry noise variance at unit budget (continuous Gaussian/Laplace formulas)."""
    return sensitivity**2 / 2.0 if noise == GAUSSIAN else 2.0 * sensitivity**2


def budget_exponent(noise: str) -> int:
    """Error scales as budget^-exponent."""
    return 1 if noise == GAUSSIAN else 2


def split(errors: list[float], noise: str) -> list[float]:
    """Fractions of a budget minimizing Σ errors_i / share_i^k (closed form; `budget_split`)."""
    return budget_split(errors, budget_exponent(noise))[0]


def combined_unit_error(errors: list[float], noise: str) -> float:
    """Unit error of several independent parts under the optimal split."""
    return budget_split(errors, budget_exponent(noise))[1]


class Family(Protocol):
    """A strategy family: exact expected error at a unit budget, and the allocation achieving it.

    `unit_error` returns math.inf for blocks the family cannot handle. A family
    whose measurements can serve several cliques at once sets
    `shares_across_groups = True`; the planner then tries moving groups into it.
    """

    name: str

    def __init__(self, domain: Domain, noise: str) -> None: ...
    def unit_error(self, blocks: list[Block]) -> float: ...
    def allocate(self, blocks: list[Block]) -> list[Allocation]: ...


__all__ = ["Allocation", "Family", "NEGLIGIBLE_SHARE", "budget_exponent", "combined_unit_error",
           "noise_unit_variance", "split"]
