"""The optimal-factorization family: the best linear strategy for each component, with a certificate.

Blocks are split into connected components (like HDMM); each component's
queries are written out as explicit rows over the union clique and handed to
`mechanisms.factorization.optimal_factorization`, which returns a strategy
within a fraction of a percent of the optimum over *all* linear strategies
(the dual lower bound proves it). Components share the budget in closed form.

Gaussian noise only (the duality is for L2 sensitivity). The explicit rows
cost O(rows × cells) memory and the optimization O(cells × rank²) per step,
so components beyond `MAX_CELLS` cells or `MAX_RANK` independent queries get
math.inf (HDMM, range trees and marginals cover those), and the optimization
stops after `PLANNING_WORK` flops with the best strategy found (its gap to the
optimum is still certified and shown).
"""

from __future__ import annotations

import math
import numpy as np

from mechanisms.domain import Domain
from mechanisms.interruption import checkpoint
from mechanisms.factorization import Factorization, optimal_factorization
from mechanisms.marginals import Clique
from mechanisms.measurement import GAUSSIAN
from mechanisms.work_cache import WorkCache
from mechanisms.workload import Block
from planner.components import connected_components
from planner.families.base import Allocation, combined_unit_error, noise_unit_variance, split


FACTORIZATION = "optimal factorization"

MAX_CELLS = 16384  # cells of a component's clique
MAX_RANK = 512  # independent queries (rows) of a component
MAX_ENTRIES = 1 << 25  # rows × cells of the explicit workload
PLANNING_WORK = 4e10  # flops of dual steps per component (seconds at planning time); the gap says how close


class FactorizationFamily:
    """The optimal linear strategy per connected component (planner family protocol; see `planner.families.Family`)."""

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
        solved = []
        for component in connected_components(blocks, self.domain):
            key = tuple(sorted((b.fingerprint(self.domain), b.weight) for b in component))
            if key not in self._solved:
                self._solved[key] = _SOLVED.get(self._declared(component), lambda: self._optimize(component))
            if self._solved[key] is None:
                return None
            solved.append(self._solved[key])
        return solved

    def _declared(self, blocks: list[Block]) -> tuple:
        """What `_optimize` reads: the blocks' queries (in order) and their clique's sizes."""
        clique = self.domain.canonical({a for b in blocks for a in b.attributes(self.domain)})
        return clique, self.domain.shape(clique), tuple((b.fingerprint(self.domain), b.weight) for b in blocks)

    def _optimize(self, blocks: list[Block]) -> tuple[Clique, Factorization] | None:
        clique = self.domain.canonical({a for b in blocks for a in b.attributes(self.domain)})
        cells = self.domain.size(clique)
        rows = sum(b.num_rows(self.domain) for b in blocks)
        if cells > MAX_CELLS or min(rows, cells) > MAX_RANK or rows * cells > MAX_ENTRIES:
            return None
        checkpoint(10.0 * rows * cells)  # the explicit workload
        matrix = np.vstack([b.matrix(self.domain, clique).dense() for b in blocks])
        weights = np.concatenate([np.full(b.num_rows(self.domain), b.weight) for b in blocks])
        found = optimal_factorization(matrix, weights, max_work=PLANNING_WORK)
        return None if found is None else (clique, found)


def _strategy_bytes(solved: tuple[Clique, Factorization] | None) -> int:
    return 0 if solved is None else 16 * solved[1].strategy.shape[0] * solved[1].strategy.shape[1]


# Solutions kept across planning calls of this process, by `_declared` (public declarations only).
_SOLVED = WorkCache(64, max_bytes=128 << 20, size=_strategy_bytes)


def _label(f: Factorization) -> str:
    return f"optimal factorization (rank {f.rank}, ≤ {max(f.gap, 0.0):.1%} above the best linear strategy)"


__all__ = ["FACTORIZATION", "FactorizationFamily"]
