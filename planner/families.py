"""Strategy families and their exact, data-free cost models.

A family turns a set of blocks into measurements. Its `unit_error` is the
expected total weighted squared error of the blocks at a unit budget (ρ = 1
for Gaussian noise, ε = 1 for Laplace); because every noise variance scales
as 1/ρ (Gaussian) or 1/ε² (Laplace), the error at budget B is
unit_error / B or unit_error / B². `allocate` gives the measurement shares
that achieve it.

- `PerQuery`: noise added to each block directly (what per-query DP SQL
  systems do), budget split in closed form.
- `Marginals`: the identity on each needed marginal, answered by least
  squares in the residual basis, budget split by convex optimization.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
from scipy.optimize import minimize

from mechanisms.domain import Domain
from mechanisms.marginals import Clique, residual_weights, subsets
from mechanisms.matrices import Matrix
from mechanisms.measurement import GAUSSIAN
from mechanisms.workload import Block

PER_QUERY = "per-query"
MARGINALS = "marginals"

# A non-maximal clique whose optimal share falls below this fraction is dropped.
_NEGLIGIBLE_SHARE = 1e-3


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
    """Fractions of a budget minimizing Σ errors_i / share_i^k (closed form)."""
    k = budget_exponent(noise)
    weights = np.asarray(errors, dtype=float) ** (1.0 / (k + 1))
    if weights.sum() == 0:
        return [1.0 / len(errors)] * len(errors)
    return list(weights / weights.sum())


def combined_unit_error(errors: list[float], noise: str) -> float:
    """Unit error of several independent parts under the optimal split."""
    k = budget_exponent(noise)
    return float(sum(e ** (1.0 / (k + 1)) for e in errors) ** (k + 1))


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


class PerQuery:
    name = PER_QUERY

    def __init__(self, domain: Domain, noise: str):
        self.domain, self.noise = domain, noise

    def sensitivity(self, block: Block) -> float:
        return block.sensitivity(self.domain, 2 if self.noise == GAUSSIAN else 1)

    def costs(self, blocks: list[Block]) -> list[float]:
        return [
            b.weight * b.num_rows(self.domain) * noise_unit_variance(self.noise, self.sensitivity(b))
            for b in blocks
        ]

    def unit_error(self, blocks: list[Block]) -> float:
        return combined_unit_error(self.costs(blocks), self.noise)

    def allocate(self, blocks: list[Block]) -> list[Allocation]:
        fractions = split(self.costs(blocks), self.noise)
        return [
            Allocation(b.attributes(self.domain), f, None if b.is_marginal() else b, self.sensitivity(b))
            for b, f in zip(blocks, fractions)
            if b.terms
        ]


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
        cliques = list(dict.fromkeys(b.attributes(self.domain) for b in blocks if b.terms))
        if not cliques:
            return [], np.zeros(0), 0.0
        shares, error = self._solve(blocks, cliques)
        maximal = {c for c in cliques if not any(set(c) < set(d) for d in cliques)}
        keep = [c for c, s in zip(cliques, shares) if c in maximal or s >= _NEGLIGIBLE_SHARE]
        if len(keep) < len(cliques):  # blocks of dropped cliques are answered from supersets
            cliques = keep
            shares, error = self._solve(blocks, cliques)
        return cliques, shares, error

    def unit_error(self, blocks: list[Block]) -> float:
        return self._optimize(blocks)[2]

    def allocate(self, blocks: list[Block]) -> list[Allocation]:
        cliques, shares, _ = self._optimize(blocks)
        return [Allocation(c, float(s), None, 1.0) for c, s in zip(cliques, shares)]


from planner.marginal_planner_family import MarginalPlanner, ResidualPlanner  # noqa: E402 (they use the names above lazily)
from planner.range_family import RangeTrees  # noqa: E402

# Every family the planner considers, in order of preference on ties.
from planner.hdmm_family import HDMMFamily  # noqa: E402
from planner.factorization_family import FactorizationFamily  # noqa: E402

FAMILIES: list[type[Family]] = [
    PerQuery, Marginals, RangeTrees, MarginalPlanner, ResidualPlanner, HDMMFamily, FactorizationFamily,
]
