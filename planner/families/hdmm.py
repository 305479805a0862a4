"""The HDMM family: workload-optimized strategies for each group of connected blocks.

The blocks handed to the family are split into components linked by shared
attributes; each component's queries become one workload gram over the union
of its attributes (`KronGram.from_blocks`, block weights included), and the
HDMM operators compete on it (`mechanisms.hdmm`):

- OPT⊗ — one Kronecker strategy on the component's clique (OPT₀ on the
  flattened clique when it is small), answered by `CliqueLeastSquares`;
- OPT₊ — one Kronecker strategy per distinct block clique, closed-form budget
  split; its error is computed by the very model that will answer (a block
  covered by several measurements pools them), so it is exact, not the
  thesis' local-least-squares upper bound;
- OPT_M — weighted marginals, released as identity marginals with
  per-marginal budget shares and answered by the residual least squares.

`unit_error` is the exact expected total weighted squared error at ρ = 1
(Gaussian) or ε = 1 (Laplace) of the strategy that `allocate` releases —
optimized factors are rounded to short decimals first (a coarse measurement
lattice) and their error recomputed. Components share the budget in closed
form. Optimization uses planning-sized effort, is deterministic (seeded), and
is cached per set of blocks, and across planning calls of the process by the
blocks' declarations (`mechanisms.work_cache`); components with attributes too large to optimize
quickly get math.inf (range trees and marginals cover those).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, TypeVar

import numpy as np

from mechanisms.domain import Domain
from mechanisms.hdmm import OPT0, OPT_KRON, OPT_M, OPT_PLUS, kron_matrix, optimize
from mechanisms.hdmm.error import explicit_error
from mechanisms.accounting import budget_split
from mechanisms.hdmm.kron import KronStrategy, opt_kron, round_factor, rounded
from mechanisms.hdmm.workload import KronGram
from mechanisms.marginals import Clique
from mechanisms.matrices import Dense, Matrix
from mechanisms.measurement import GAUSSIAN, Measurement
from mechanisms.reconstruction import LeastSquaresModel
from mechanisms.work_cache import WorkCache
from mechanisms.workload import Block
from planner.components import connected_components
from planner.families.base import Allocation, budget_exponent, noise_unit_variance


HDMM = "hdmm"

# Planning-time limits: beyond them a component is not optimized (unit error ∞).
MAX_AXIS = 256  # attribute size for p-Identity / convex factors
MAX_PLAIN_AXIS = 1024  # attribute size when the queries use it only through I and 11ᵀ
MAX_CELLS = 1 << 22  # cells of a measured clique (the backend materializes its marginal)
MAX_MARGINAL_DIMS = 12  # OPT_M: 2^d weights
EXPLICIT_LIMIT = 128  # OPT₀ on the flattened clique up to this many cells
EFFORT = {"restarts": 1, "seed": 0, "max_iter": 100, "sweeps": 3, "gap_tol": 1e-4}
MARGINAL_RESTARTS = 6
# Optimized factors are released with the fewest of DECIMALS decimals that cost at most
# ROUNDING_LOSS of the expected error.
DECIMALS = (3, 4, 6)
ROUNDING_LOSS = 1e-3

T = TypeVar("T")


@dataclass(frozen=True)
class _Measure:
    clique: Clique
    fraction: float
    strategy: Matrix | None  # None: the identity marginal
    label: str


@dataclass(frozen=True)
class _Solution:
    error: float  # exact, at unit budget
    operator: str
    measures: list[_Measure]


class HDMMFamily:
    """HDMM strategies per connected component (planner family protocol; see `planner.families.Family`)."""

    name = HDMM
    shares_across_groups = True  # one strategy on a component's clique answers every group inside it

    def __init__(self, domain: Domain, noise: str):
        self.domain, self.noise = domain, noise
        self.p = 2 if noise == GAUSSIAN else 1
        self.exponent = budget_exponent(noise)
        self.unit_variance = noise_unit_variance(noise, 1.0)
        self._solved: dict[tuple, _Solution | None] = {}
        self._kron: dict[tuple, tuple[Clique, KronStrategy]] = {}

    # --- planner protocol -------------------------------------------------------
    def unit_error(self, blocks: list[Block]) -> float:
        solved = self._solutions(blocks)
        if solved is None:
            return math.inf
        return budget_split([s.error for s in solved], self.exponent)[1] if solved else 0.0

    def allocate(self, blocks: list[Block]) -> list[Allocation]:
        solved = self._solutions(blocks) or []
        shares = budget_split([s.error for s in solved], self.exponent)[0] if solved else []
        out = []
        for solution, share in zip(solved, shares):
            for m in solution.measures:
                sensitivity = 1.0 if m.strategy is None else m.strategy.sensitivity(self.p)
                out.append(Allocation(m.clique, share * m.fraction, None, sensitivity, m.strategy, m.label))
        return out

    # --- components ------------------------------------------------------------
    def _key(self, blocks: list[Block]) -> tuple:
        return tuple(sorted((b.fingerprint(self.domain), b.weight) for b in blocks))

    def _declared(self, blocks: list[Block]) -> tuple:
        """What an optimization of `blocks` reads: their queries (in order) and their clique's sizes."""
        clique = self._clique(blocks)
        return clique, self.domain.shape(clique), tuple((b.fingerprint(self.domain), b.weight) for b in blocks)

    def _clique(self, blocks: list[Block]) -> Clique:
        return self.domain.canonical({a for b in blocks for a in b.attributes(self.domain)})

    def _solutions(self, blocks: list[Block]) -> list[_Solution] | None:
        solved = []
        for component in connected_components(blocks, self.domain):
            key = self._key(component)
            if key not in self._solved:
                self._solved[key] = self._optimize(component)
            solved.append(self._solved[key])
        return None if any(s is None for s in solved) else solved

    # --- optimization -------------------------------------------------------------
    def _feasible(self, clique: Clique, gram: KronGram) -> bool:
        if self.domain.size(clique) > MAX_CELLS:
            return False
        for axis, n in enumerate(gram.sizes):
            kind = gram.axis_kind(axis)
            if kind != "total" and n > (MAX_AXIS if kind == "general" else MAX_PLAIN_AXIS):
                return False
        return True

    def _optimize(self, blocks: list[Block]) -> _Solution | None:
        clique = self._clique(blocks)
        if max(self.domain.shape(clique), default=0) > MAX_PLAIN_AXIS:
            return None
        gram = KronGram.from_blocks(blocks, self.domain, clique)
        if not self._feasible(clique, gram):
            return None
        _, whole = self._kron_strategy(blocks)
        options = [_Solution(self.unit_variance * whole.error, OPT_KRON, [_kron_measure(whole, clique, 1.0)])]
        by_clique: dict[Clique, list[Block]] = {}
        for b in blocks:
            by_clique.setdefault(b.attributes(self.domain), []).append(b)
        if len(by_clique) > 1:  # OPT₊: one Kronecker strategy per block clique
            parts = [self._kron_strategy(bs) for bs in by_clique.values()]
            shares = budget_split([k.error for _, k in parts], self.exponent)[0]
            measures = [_kron_measure(k, own, share) for (own, k), share in zip(parts, shares)]
            options.append(_Solution(self._model_error(blocks, measures), OPT_PLUS, measures))
        allowed = None
        if len(clique) <= MAX_MARGINAL_DIMS:
            allowed = np.asarray([self.domain.size(s) <= MAX_CELLS for s in _subsets(clique)])
        result = _OPTIMIZED.get((self.p, *self._declared(blocks)), lambda: optimize(
            gram, self.p, operators=(OPT0, OPT_M),
            explicit_limit=EXPLICIT_LIMIT if len(clique) > 1 else 0,  # one attribute: OPT₀ is OPT⊗
            max_marginal_dims=MAX_MARGINAL_DIMS, allowed_marginals=allowed, marginal_restarts=MARGINAL_RESTARTS,
            **EFFORT,
        ))
        for candidate in result.candidates:
            if candidate.operator == OPT0:
                v, explicit = gram.dense(), candidate.strategy

                def shortened(decimals: int) -> tuple[np.ndarray, float]:
                    q = round_factor(explicit.strategy, decimals, self.p)
                    return q, explicit_error(v, q, self.p)

                q, error = _shortest(candidate.error, shortened)
                label = f"HDMM OPT₀ {explicit.template} on the flattened clique"
                options.append(_Solution(self.unit_variance * error, OPT0, [_Measure(clique, 1.0, Dense(q), label)]))
            else:
                measures = [
                    _Measure(tuple(clique[i] for i in axes), share, None, "HDMM OPT_M weighted marginal")
                    for axes, share in candidate.strategy.budget_shares(self.p)
                ]
                options.append(_Solution(self.unit_variance * candidate.error, OPT_M, measures))
        best = min(options, key=lambda s: s.error)
        return best if math.isfinite(best.error) else None

    def _kron_strategy(self, blocks: list[Block]) -> tuple[Clique, KronStrategy]:
        """OPT⊗ of blocks over their own clique, rounded; cached (OPT₊ parts recur as the planner regroups)."""
        key = self._key(blocks)
        if key not in self._kron:
            self._kron[key] = _KRON.get((self.p, *self._declared(blocks)), lambda: self._optimize_kron(blocks))
        return self._kron[key]

    def _optimize_kron(self, blocks: list[Block]) -> tuple[Clique, KronStrategy]:
        clique = self._clique(blocks)
        gram = KronGram.from_blocks(blocks, self.domain, clique)
        optimal = opt_kron(gram, self.p, **EFFORT)

        def shortened(decimals: int) -> tuple[KronStrategy, float]:
            strategy = rounded(optimal, gram, self.p, decimals)
            return strategy, strategy.error

        strategy, _ = _shortest(optimal.error, shortened)
        return clique, strategy

    def _model_error(self, blocks: list[Block], measures: list[_Measure]) -> float:
        """Σ_b weight·Σ_rows Var of the model that will answer, at unit budget."""
        model = LeastSquaresModel(self.domain)
        for m in measures:
            if m.fraction <= 0:  # no budget, no information (a split may leave a clique nothing)
                continue
            sensitivity = 1.0 if m.strategy is None else m.strategy.sensitivity(self.p)
            variance = self.unit_variance * sensitivity**2 / m.fraction**self.exponent
            model.add(Measurement(m.clique, self.noise, m.fraction, variance, np.empty(0), None, m.strategy))
        if not all(model.covers(b) for b in blocks):
            return math.inf
        return float(sum(b.weight * model.variance(b).sum() for b in blocks))


# Optimizations kept across planning calls of this process, by (p, `_declared`): public declarations only.
_KRON = WorkCache(128)
_OPTIMIZED = WorkCache(64)


def _shortest(exact: float, make: Callable[[int], tuple[T, float]]) -> tuple[T, float]:
    """make(decimals) for the fewest DECIMALS within ROUNDING_LOSS of `exact` (else the most)."""
    for decimals in DECIMALS:
        thing, error = make(decimals)
        if error <= exact * (1 + ROUNDING_LOSS):
            break
    return thing, error


def _kron_measure(strategy: KronStrategy, clique: Clique, fraction: float) -> _Measure:
    """The Kronecker strategy over `clique` as one measurement."""
    axes = list(range(len(clique)))
    label = " ⊗ ".join({"Identity": "I"}.get(strategy.templates[i], strategy.templates[i]) for i in axes)
    return _Measure(clique, fraction, kron_matrix(strategy, axes), f"HDMM OPT⊗ {label or 'Total'}")


def _subsets(clique: Clique) -> list[tuple[str, ...]]:
    """Every subset of the clique, indexed as `mechanisms.hdmm.marginals` bitmasks (first attribute = top bit)."""
    d = len(clique)
    return [tuple(clique[i] for i in range(d) if mask >> (d - 1 - i) & 1) for mask in range(1 << d)]


__all__ = ["HDMM", "HDMMFamily"]
