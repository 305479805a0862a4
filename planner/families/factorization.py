"""The optimal-factorization family: the best linear strategy over the workload's attributes, with a certificate.

The whole workload is optimized over the union of its attributes when that
fits — one strategy answering every block: where blocks read disjoint
attributes it beats optimizing each connected component apart (taxi's range
dashboard: expected RMSE 17.99 against 20.35) — else each connected component
apart, the components sharing the budget in closed form. Each group gets a
strategy within a fraction of a percent of the optimum over *all* linear
strategies (the dual lower bound proves it): computed in marginal coordinates
(`mechanisms.factorization_marginals`, a step costs O(cells × cliques² +
marginal cells × rank² + rank³)) when its cliques have fewer marginal cells than
it has cells, else on its explicit rows (`mechanisms.factorization`, O(cells ×
rank²) a step).

Gaussian noise only (the duality is for L2 sensitivity). The strategy is written
out on the cells (rank × cells), so groups beyond `MAX_CELLS` cells,
`MAX_MARGINAL` marginal cells (`MAX_EXPLICIT` cells on explicit rows),
`MAX_RANK` independent queries or `PINV_DENSE_LIMIT` strategy entries (least
squares densifies its pseudo-inverse) get math.inf
(HDMM, range trees and marginals cover those), and the optimization stops after
`PLANNING_WORK` operations with the best strategy found (its gap to the optimum
is still certified and shown).
"""

from __future__ import annotations

import math

import numpy as np

from mechanisms.domain import Domain
from mechanisms.factorization import Factorization, optimal_factorization
from mechanisms.factorization_marginals import marginal_cliques, marginal_factorization
from mechanisms.interruption import checkpoint
from mechanisms.marginals import Clique
from mechanisms.matrices import PINV_DENSE_LIMIT
from mechanisms.measurement import GAUSSIAN
from mechanisms.work_cache import WorkCache
from mechanisms.workload import Block
from planner.components import connected_components
from planner.families.base import Allocation, combined_unit_error, noise_unit_variance, split


FACTORIZATION = "optimal factorization"

MAX_CELLS = 1 << 18  # cells of a group's union clique
MAX_MARGINAL = 1024  # cells of its (largest) marginals, summed: the coordinates of the marginal path
MAX_EXPLICIT = 16384  # cells of a group optimized on explicit rows instead (fewer cells than marginal cells)
MAX_RANK = 512  # independent queries (rows) of a group
MAX_ENTRIES = 1 << 25  # rows × cells of the explicit rows (the strategy: rank × cells, at most PINV_DENSE_LIMIT)
PLANNING_WORK = 4e10  # operations of dual steps per group (seconds at planning time); the gap says how close


class FactorizationFamily:
    """The optimal linear strategy on the workload's union clique, or per connected component (planner family
    protocol; see `planner.families.Family`)."""

    name = FACTORIZATION
    shares_across_groups = True  # one strategy on a component's clique answers every group inside it

    def __init__(self, domain: Domain, noise: str):
        self.domain, self.noise = domain, noise
        self.unit_variance = noise_unit_variance(noise, 1.0)
        self._solved: dict[tuple, tuple[Clique, Factorization] | None] = {}

    def unit_error(self, blocks: list[Block]) -> float:
        solved = self._solutions(blocks)
        if solved is None:
            return math.inf
        return combined_unit_error([self.unit_variance * f.error for _, f in solved], self.noise)

    def allocate(self, blocks: list[Block]) -> list[Allocation]:
        solved = self._solutions(blocks) or []
        shares = split([f.error for _, f in solved], self.noise) if solved else []
        return [
            Allocation(clique, share, None, f.strategy.sensitivity(2), f.strategy, _label(f))
            for (clique, f), share in zip(solved, shares)
        ]

    def _solutions(self, blocks: list[Block]) -> list[tuple[Clique, Factorization]] | None:
        if self.noise != GAUSSIAN:
            return None
        live = [b for b in blocks if b.terms]
        whole = self._solved_for(live) if self._path(live) else None
        if whole is not None:
            return [whole]
        solved = []
        for component in connected_components(blocks, self.domain):
            solution = self._solved_for(component)
            if solution is None:
                return None
            solved.append(solution)
        return solved

    def _solved_for(self, blocks: list[Block]) -> tuple[Clique, Factorization] | None:
        key = tuple(sorted((b.fingerprint(self.domain), b.weight) for b in blocks))
        if key not in self._solved:
            self._solved[key] = _SOLVED.get(self._declared(blocks), lambda: self._optimize(blocks))
        return self._solved[key]

    def _declared(self, blocks: list[Block]) -> tuple:
        """What `_optimize` reads: the blocks' queries (in order) and their clique's sizes."""
        clique = self.domain.canonical({a for b in blocks for a in b.attributes(self.domain)})
        return clique, self.domain.shape(clique), tuple((b.fingerprint(self.domain), b.weight) for b in blocks)

    def _path(self, blocks: list[Block]) -> str | None:
        """How one strategy over the blocks' union clique is optimized: in marginal coordinates, on explicit
        rows (a single clique of few cells: no fewer coordinates), or not at all (None: past the limits)."""
        if not blocks:
            return None
        clique = self.domain.canonical({a for b in blocks for a in b.attributes(self.domain)})
        cells = self.domain.size(clique)
        marginal = sum(self.domain.size(c) for c in marginal_cliques(self.domain, blocks))
        rows = sum(b.num_rows(self.domain) for b in blocks)
        rank = min(rows, marginal)
        if cells > MAX_CELLS or rank > MAX_RANK:
            return None
        if marginal <= MAX_MARGINAL and marginal < cells:
            return "marginals"
        return "explicit" if cells <= MAX_EXPLICIT and rows * cells <= MAX_ENTRIES else None

    def _optimize(self, blocks: list[Block]) -> tuple[Clique, Factorization] | None:
        path = self._path(blocks)
        if path == "marginals":
            # Least squares needs the strategy's dense pseudo-inverse: past its limit, no strategy.
            return marginal_factorization(self.domain, blocks, max_work=PLANNING_WORK, max_entries=PINV_DENSE_LIMIT)
        if path is None:
            return None
        clique = self.domain.canonical({a for b in blocks for a in b.attributes(self.domain)})
        rows = sum(b.num_rows(self.domain) for b in blocks)
        checkpoint(10.0 * rows * self.domain.size(clique))  # the explicit workload
        matrix = np.vstack([b.matrix(self.domain, clique).dense() for b in blocks])
        weights = np.concatenate([np.full(b.num_rows(self.domain), b.weight) for b in blocks])
        found = optimal_factorization(matrix, weights, max_work=PLANNING_WORK)
        return None if found is None else (clique, found)


def _strategy_bytes(solved: tuple[Clique, Factorization] | None) -> int:
    return 0 if solved is None else 16 * solved[1].strategy.shape[0] * solved[1].strategy.shape[1]


# Solutions kept across planning calls of this process, by `_declared` (public declarations only).
_SOLVED = WorkCache(64, max_bytes=256 << 20, size=_strategy_bytes)


def _label(f: Factorization) -> str:
    return f"optimal factorization (rank {f.rank}, ≤ {max(f.gap, 0.0):.1%} above the best linear strategy)"


__all__ = ["FACTORIZATION", "FactorizationFamily"]
