"""Strategy families: the ways the planner can measure a group of blocks, each with an exact cost.

`FAMILIES` is the registry, in order of preference on ties (`planner.planner.cheapest`).
Each family implements `base.Family`:

- ``name``: how EXPLAIN and the ledger name it;
- ``__init__(domain, noise)``: one instance per planning call (it may cache freely);
- ``unit_error(blocks)``: the exact expected total weighted squared error of the blocks at
  a unit budget (ρ = 1, or ε = 1 for Laplace), from the measurements' noise variances
  alone — ``math.inf`` for blocks it cannot take;
- ``allocate(blocks)``: the `Allocation`s that achieve it (clique, share, and the block,
  a strategy matrix, or None for the identity marginal);
- optionally ``shares_across_groups = True`` when one measurement serves several cliques
  (the planner then tries moving groups into the family).

To add a family: write a module here that implements the protocol with the shared budget
maths of `base` (`split`, `combined_unit_error`, `noise_unit_variance`), call
`mechanisms.interruption.checkpoint()` in any long loop (the planning budget and
Ctrl-C stop it there), add the class to `FAMILIES`, and add its strategy matrices to
`mechanisms.matrices.STORED_KINDS` if they are structured (so ledgers can rebuild them).
The cheap, always-available families are `planner.planner.ESSENTIAL`; every other
family is optional work under the planning budget.
"""

from planner.families.base import (
    NEGLIGIBLE_SHARE,
    Allocation,
    Family,
    budget_exponent,
    combined_unit_error,
    noise_unit_variance,
    split,
)
from planner.families.factorization import FACTORIZATION, FactorizationFamily
from planner.families.hdmm import HDMM, HDMMFamily
from planner.families.marginals import MARGINAL_PLANNER, MARGINALS, RESIDUAL_PLANNER, MarginalPlanner, Marginals, ResidualPlanner
from planner.families.per_query import PER_QUERY, PerQuery
from planner.families.ranges import RANGE_TREES, RangeTrees

FAMILIES: tuple[type[Family], ...] = (
    PerQuery, Marginals, RangeTrees, MarginalPlanner, ResidualPlanner, HDMMFamily, FactorizationFamily,
)

__all__ = [
    "FACTORIZATION", "FAMILIES", "HDMM", "MARGINALS", "MARGINAL_PLANNER", "NEGLIGIBLE_SHARE", "PER_QUERY",
    "RANGE_TREES", "RESIDUAL_PLANNER", "Allocation", "FactorizationFamily", "Family", "HDMMFamily",
    "MarginalPlanner", "Marginals", "PerQuery", "RangeTrees", "ResidualPlanner", "budget_exponent",
    "combined_unit_error", "noise_unit_variance", "split",
]
