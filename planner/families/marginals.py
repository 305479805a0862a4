"""Marginal families: identity marginals, chosen directly or in the residual basis.

- `Marginals`: the identity on each needed marginal, answered by least squares in
  the residual basis, budget split by convex optimization over the cliques' shares.

The other two choose in the residual basis (`mechanisms.residual`):

Any blocks — GROUP BY marginals, filtered counts, SUMs, ranges — have total
error Σ_S A_S v_S under strategies that are isotropic in each residual, so the
whole workload is summarized by one `ResidualTable` (no full-domain object,
no search over 2^d marginals).

- `MarginalPlanner` measures whole marginals (identity queries, reconstructed
  today by `ResidualLeastSquares`): the cliques of the blocks and every subset
  of them, with budget shares optimized from the residual closed form
  (`marginal_bundle_plan`, convex for Gaussian noise). Shares that come out
  negligible are dropped and the rest re-optimized.
- `ResidualPlanner` measures each residual directly with its closed-form
  budget share (`sum_variance_plan`): the optimum over all strategies for
  these workloads (it attains the SVD bound), Gaussian noise only. Its
  measurements (`residual_strategy`) need the least-squares model to pool
  residual measurements with marginals; until it does, it is not in FAMILIES.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from mechanisms.domain import Domain
from mechanisms.marginals import Clique, residual_weights, subsets
from mechanisms.measurement import GAUSSIAN
from mechanisms.residual import (
    BundlePlan,
    ResidualTable,
    downward_closure,
    marginal_bundle_plan,
    residual_strategy,
    sum_variance_plan,
)
from mechanisms.work_cache import WorkCache
from mechanisms.workload import Block
from planner.families.base import NEGLIGIBLE_SHARE, Allocation, budget_exponent, noise_unit_variance

MARGINALS = "marginals"
MARGINAL_PLANNER = "marginal planner"
RESIDUAL_PLANNER = "residual planner"


class Marginals:
    name = MARGINALS
    shares_across_groups = True  # residuals are shared by every marginal containing them

    def __init__(self, domain: Domain, noise: str):
        self.domain, self.noise = domain, noise

    def _objective(self, blocks: list[Block], cliques: list[Clique]):
        """(f, grad) for f(s) = Σ_S A_S / Σ_{C ⊇ S} κ_{C,S} g(s_C), s the cliques' shares."""
        weights: dict[Clique, float] = {}
        for b in blocks:
            for s, a in residual_weights(b, self.domain).items():
                weights[s] = weights.get(s, 0.0) + b.weight * a
        residuals = list(weights)
        unit = noise_unit_variance(self.noise, 1.0)
        kappa = np.zeros((len(residuals), len(cliques)))
        for j, c in enumerate(cliques):
            for s in subsets(c):
                if s in weights:
                    kappa[residuals.index(s), j] = 1.0 / (unit * (self.domain.size(c) // self.domain.size(s)))
        a = np.asarray([weights[s] for s in residuals])
        power = budget_exponent(self.noise)

        def f(shares):
            return float(np.sum(a / (kappa @ shares**power)))

        def grad(shares):
            precision = kappa @ shares**power
            return -(kappa.T @ (a / precision**2)) * power * shares ** (power - 1)

        return f, grad

    def _solve(self, blocks: list[Block], cliques: list[Clique]) -> tuple[np.ndarray, float]:
        """Optimal shares of the cliques (summing to 1) and the unit error they achieve."""
        f, grad = self._objective(blocks, cliques)
        if len(cliques) == 1:
            return np.ones(1), f(np.ones(1))

        def softmax(theta):
            e = np.exp(theta - theta.max())
            return e / e.sum()

        def objective(theta):
            s = softmax(theta)
            g = grad(s)
            return f(s), s * (g - s @ g)

        shares = softmax(minimize(objective, np.zeros(len(cliques)), jac=True, method="L-BFGS-B").x)
        return shares, f(shares)

    def _optimize(self, blocks: list[Block]) -> tuple[list[Clique], np.ndarray, float]:
        return _SHARES.get((self.noise, *_declared(self.domain, blocks)), lambda: self._optimized(blocks))

    def _optimized(self, blocks: list[Block]) -> tuple[list[Clique], np.ndarray, float]:
        cliques = list(dict.fromkeys(b.attributes(self.domain) for b in blocks if b.terms))
        if not cliques:
            return [], np.zeros(0), 0.0
        shares, error = self._solve(blocks, cliques)
        maximal = {c for c in cliques if not any(set(c) < set(d) for d in cliques)}
        keep = [c for c, s in zip(cliques, shares) if c in maximal or s >= NEGLIGIBLE_SHARE]
        if len(keep) < len(cliques):  # blocks of dropped cliques are answered from supersets
            cliques = keep
            shares, error = self._solve(blocks, cliques)
        return cliques, shares, error

    def unit_error(self, blocks: list[Block]) -> float:
        return self._optimize(blocks)[2]

    def allocate(self, blocks: list[Block]) -> list[Allocation]:
        cliques, shares, _ = self._optimize(blocks)
        return [Allocation(c, float(s), None, 1.0) for c, s in zip(cliques, shares)]




class MarginalPlanner:
    """Identity marginals over the blocks' cliques and their subsets, shares from the residual basis."""

    name = MARGINAL_PLANNER
    shares_across_groups = True  # residuals serve every block that needs them

    def __init__(self, domain: Domain, noise: str):
        self.domain, self.noise = domain, noise
        self._tables: dict[tuple, ResidualTable] = {}
        self._plans: dict[tuple, BundlePlan] = {}

    def _key(self, blocks: list[Block]) -> tuple:
        return tuple(sorted((b.fingerprint(self.domain), b.weight) for b in blocks if b.terms))

    def table(self, blocks: list[Block]) -> ResidualTable:
        key = self._key(blocks)
        if key not in self._tables:
            self._tables[key] = ResidualTable.from_blocks(self.domain, [b for b in blocks if b.terms])
        return self._tables[key]

    def plan(self, blocks: list[Block]) -> BundlePlan:
        key = self._key(blocks)
        if key not in self._plans:
            self._plans[key] = _BUNDLES.get((self.noise, *_declared(self.domain, blocks)), lambda: self._bundle(blocks))
        return self._plans[key]

    def _bundle(self, blocks: list[Block]) -> BundlePlan:
        table = self.table(blocks)
        cliques = list(dict.fromkeys(b.attributes(self.domain) for b in blocks if b.terms))
        maximal = [c for c in cliques if not any(set(c) < set(d) for d in cliques)]
        candidates = downward_closure(maximal)
        gaussian = self.noise == GAUSSIAN
        plan = marginal_bundle_plan(table, candidates, gaussian)
        keep = [c for c, s in zip(plan.cliques, plan.share) if c in maximal or s >= NEGLIGIBLE_SHARE]
        if len(keep) < len(candidates):
            plan = marginal_bundle_plan(table, keep, gaussian)
        return plan

    def unit_error(self, blocks: list[Block]) -> float:
        if not any(b.terms for b in blocks):
            return 0.0
        if not self.table(blocks).residuals:
            return 0.0
        return self.plan(blocks).unit_error

    def allocate(self, blocks: list[Block]) -> list[Allocation]:
        if not self.table(blocks).residuals:
            return []
        plan = self.plan(blocks)
        return [Allocation(c, float(s), None, 1.0) for c, s in zip(plan.cliques, plan.share) if s > 0]


def _declared(domain: Domain, blocks: list[Block]) -> tuple:
    """What a family's optimization of `blocks` reads: their attributes' sizes and queries (in order)."""
    attributes = domain.canonical(a for b in blocks for a in b.attributes(domain))
    return attributes, domain.shape(attributes), tuple((b.fingerprint(domain), b.weight) for b in blocks if b.terms)


# Optimized shares kept across planning calls of this process, by `_declared` (small ones only: a plan of
# millions of marginals is not kept).
_SHARES = WorkCache(256, max_bytes=16 << 20, size=lambda solved: 64 * len(solved[0]))
_BUNDLES = WorkCache(64, max_bytes=16 << 20, size=lambda plan: 64 * len(plan.cliques))


class ResidualPlanner(MarginalPlanner):
    """Every needed residual measured directly, with the closed-form budget split (Gaussian noise)."""

    name = RESIDUAL_PLANNER

    def unit_error(self, blocks: list[Block]) -> float:
        if self.noise != GAUSSIAN:
            return float("inf")
        table = self.table(blocks)
        return sum_variance_plan(table, 1.0).total_squared_error if table.residuals else 0.0

    def allocate(self, blocks: list[Block]) -> list[Allocation]:
        table = self.table(blocks)
        if not table.residuals:
            return []
        plan = sum_variance_plan(table, 1.0)
        out = []
        for s, share in zip(table.residuals, plan.share):
            if not s:  # the residual of no attribute is the total: a plain marginal
                out.append(Allocation(s, float(share), None, 1.0))
                continue
            strategy = residual_strategy(self.domain, s)
            out.append(Allocation(s, float(share), None, strategy.sensitivity(2), strategy, "residual"))
        return out


__all__ = ["MARGINALS", "MARGINAL_PLANNER", "RESIDUAL_PLANNER", "MarginalPlanner", "Marginals", "ResidualPlanner"]
