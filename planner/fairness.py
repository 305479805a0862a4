"""No query left behind: each query's even-split error, and the budget split that respects it.

The default objective (`TOTAL_SQUARED`) minimizes the total weighted squared error
Σ_b w_b·n_b·E_b (E_b a block's mean per-row noise variance, n_b its rows, w_b its weight)
**subject to** E_b ≤ Ē_b for every block b, where Ē_b is the block's *even-split*
variance: what it gets when each of the workload's k queries is measured as asked
(per query) with budget B/k, a query's blocks sharing that B/k as the per-query family
splits it for that query alone (closed form). A query's error (a count, a sum, AVG's ratio)
grows with its blocks' variances, so no query's expected error exceeds its even-split
error, whatever the other queries are (minimizing the total alone gave a filtered
single-cell COUNT beside GROUP BYs 1.85× its even-split error: its one cell weighs little
in the total).

**How the planner solves it** (`planner.planner._floored`). A plan is parts — each a family's
pool of blocks, or one block measured per query — that share the budget: part p at a fraction
φ_p of B has total error U_p/φ_p^κ (κ = 1 Gaussian, 2 Laplace: every noise variance scales as
share^-κ). For a block b of a pool p, let r_b be its RMSE from the pool's own measurements alone
at the pool's unconstrained fraction φ⁰_p; least squares over all measurements can only lower it
(it is the best linear unbiased estimate), so b meets its floor once φ_p ≥ n_b = φ⁰_p·(r_b/r̄_b)^(2/κ)
(r̄_b = √Ē_b; `block_needs`). A block the pool leaves short at φ_p = x is *topped up*: measured as
asked too, at ψ_b = s_b·(1 − (x/n_b)^κ)^(1/κ) (s_b its even-split fraction), since the inverse-
variance mix of the two estimates (which least squares matches or beats) then has variance Ē_b
(`topup`). A pool's floor x minimizes x + Σψ_b over candidate x (`pool_floor`); where nothing
costs less than its blocks' even shares, the pool is replaced by measuring each block as asked.
A block measured per query has floor s_b. Minimizing Σ U_p/φ_p^κ subject to φ_p ≥ l_p and
Σφ_p = 1 is convex; its KKT conditions give φ_p = max(l_p, c·U_p^(1/(κ+1))) with c set so the
fractions sum to one (`floored_split`, water-filling; without floors it is the unconstrained
optimum). Top-ups take no slack; once the pools' final fractions are known they shrink to what
those leave short and the split is redone until stable. The floors sum to at most the even
split's total, so a feasible plan always exists; the whole workload in one family is floored
too and the lower total wins (families that tie unconstrained differ under floors). The even
split itself meets every floor with equality: it is the plan of last resort (calibration
rounding). Multiple tables share a statement's budget the same way, each at least its queries'
even share. Not done: re-optimizing a family's strategy under raised weights (the Lagrangian
form of the constraint: weights w_b + λ_b) — a pool's strategy is taken as optimized for the
unconstrained total.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import sqrt
from typing import Sequence

from mechanisms.domain import Domain
from mechanisms.measurement import calibrate, query_step
from mechanisms.workload import Block
from planner.families import PerQuery, budget_exponent, split

TOLERANCE = 1e-6  # relative RMSE above the even split that counts as meeting it (calibration rounding)


@dataclass(frozen=True)
class EvenSplit:
    """Every block's budget share and per-row RMSE when each query is measured per query with budget/k."""

    share: dict[str, float]  # block name -> absolute budget share (ρ or ε)
    rmse: dict[str, float]  # block name -> per-row RMSE

    def meets(self, rmse: dict[str, float]) -> bool:
        """Whether no block's RMSE in `rmse` exceeds its even-split RMSE (beyond `TOLERANCE`)."""
        return all(rmse.get(name, 0.0) <= r * (1 + TOLERANCE) for name, r in self.rmse.items())


def query_groups(blocks: list[Block], queries: Sequence[Sequence[str]] | None) -> list[list[str]]:
    """The analyst's queries as lists of block names (of `blocks` only); a block named by none is a query alone."""
    names = {b.name for b in blocks if b.terms}
    groups = [[n for n in q if n in names] for q in queries or ()]
    groups = [g for g in groups if g]
    named = {n for g in groups for n in g}
    return groups + [[b.name] for b in blocks if b.terms and b.name not in named]


def even_split(blocks: list[Block], domain: Domain, budget: float, noise: str, contribution: int = 1,
               queries: Sequence[Sequence[str]] | None = None) -> EvenSplit:
    """The even-split reference (module docstring): k queries at budget/k each, measured per query.

    `queries` groups block names into the analyst's queries (default: each block is one); a block
    in several queries takes the largest of its shares (each query's error must be met).
    """
    by_name = {b.name: b for b in blocks if b.terms}
    groups = query_groups(blocks, queries)
    per_query = PerQuery(domain, noise)
    share: dict[str, float] = {}
    for group in groups:
        members = [by_name[n] for n in group]
        for b, fraction in zip(members, split(per_query.costs(members), noise)):
            share[b.name] = max(share.get(b.name, 0.0), budget * fraction / len(groups))
    rmse = {}
    for name, s in share.items():
        b = by_name[name]
        sensitivity = per_query.sensitivity(b) * contribution
        if sensitivity == 0 or s <= 0:
            rmse[name] = 0.0
            continue
        query = None if b.is_marginal() else b.matrix(domain)
        rmse[name] = sqrt(calibrate(noise, sensitivity, s, query_step(query)).variance)
    return EvenSplit(share, rmse)


def floored_split(errors: list[float], floors: list[float], noise: str) -> list[float] | None:
    """Fractions φ minimizing Σ errors_p/φ_p^κ with φ_p ≥ floors_p and Σφ = 1 (None: the floors exceed 1).

    KKT: φ_p = max(floors_p, c·errors_p^(1/(κ+1))), c found by fixing the parts whose floor binds (water-filling).
    """
    if sum(floors) > 1 + 1e-12:
        return None
    power = 1.0 / (budget_exponent(noise) + 1)
    weight = [max(e, 0.0) ** power for e in errors]
    if not any(weight):
        slack = 1.0 - sum(floors)
        return [f + slack / len(floors) for f in floors]
    fixed: set[int] = set()
    while True:
        free = [i for i in range(len(errors)) if i not in fixed]
        total = sum(weight[i] for i in free)
        left = 1.0 - sum(floors[i] for i in fixed)
        if total <= 0:
            return [floors[i] if i in fixed else left / max(len(free), 1) for i in range(len(errors))]
        c = left / total
        binding = {i for i in free if c * weight[i] < floors[i]}
        if not binding:
            return [floors[i] if i in fixed else c * weight[i] for i in range(len(errors))]
        fixed |= binding


def block_needs(fraction: float, rmse: dict[str, float], reference: EvenSplit, noise: str) -> dict[str, float]:
    """The fraction of the budget a part must get for each of its blocks (RMSE `rmse` when the part gets
    `fraction`) to meet its even split from the part's own measurements."""
    kappa = budget_exponent(noise)
    out = {}
    for name, r in rmse.items():
        target = reference.rmse.get(name, 0.0)
        out[name] = 0.0 if r <= 0 else float("inf") if target <= 0 else fraction * (r / target) ** (2.0 / kappa)
    return out


def topup(need: float, even: float, pool: float, noise_exponent: int) -> float:
    """The direct measurement's fraction that lets a block needing `need` meet its even split (fraction `even`)
    beside its pool at fraction `pool` (`pool_floor`)."""
    if need <= pool:
        return 0.0
    if need == float("inf"):
        return even
    return even * (1 - (pool / need) ** noise_exponent) ** (1 / noise_exponent)


def pool_floor(needs: dict[str, float], even: dict[str, float], noise: str) -> tuple[float, dict[str, float]] | None:
    """A shared pool's floor x and the direct top-ups ψ_b of the blocks it leaves short: the least x + Σψ_b.

    `needs`: each block's fraction for the pool alone (`block_needs`); `even`: each block's even-split
    fraction s_b. At pool fraction x a block needing n_b > x has variance Ē_b·(n_b/x)^κ; a direct measurement
    at ψ has Ē_b·(s_b/ψ)^κ; least squares does at least as well as their inverse-variance mix, which meets
    Ē_b when ψ_b = s_b·(1 − (x/n_b)^κ)^(1/κ). Candidates x are the needs and the pool's even total S = Σs_b;
    None when none costs less than S (the pool helps no query more than measuring each as asked would).
    """
    kappa = budget_exponent(noise)
    entitled = sum(even.values())
    best: tuple[float, float, dict[str, float]] | None = None
    for x in sorted({n for n in needs.values() if 0 < n < float("inf")} | {entitled}):
        if x <= 0:
            continue
        topups = {b: topup(n, even[b], x, kappa) for b, n in needs.items() if n > x}
        total = x + sum(topups.values())
        if best is None or total < best[0]:
            best = (total, x, topups)
    if best is None or best[0] >= entitled:
        return None
    return best[1], best[2]


__all__ = ["EvenSplit", "TOLERANCE", "block_needs", "even_split", "floored_split", "pool_floor", "query_groups",
           "topup"]
