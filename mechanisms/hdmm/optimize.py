"""OPT_HDMM: run the HDMM optimizers on one workload and keep the lowest expected error.

Strategy selection reads no data and spends no budget (thesis §3.8), so every
applicable operator is tried and the candidates are ranked by their exact
expected error at unit noise variance per unit of sensitivity (multiply by
2/ε² for Laplace, σ² for Gaussian):

- OPT₀ on the explicit gram, when the domain is small (`explicit_limit` cells);
- OPT⊗, block-coordinate over the axes (any total size);
- OPT₊, when the workload comes as several parts (local least squares per part);
- OPT_M, when there are at most `max_marginal_dims` attributes.

Results are deterministic for a seed (seeded restarts in every operator).
`kron_matrix` turns a Kronecker winner into an implicit `Matrix` strategy.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from math import prod
from typing import Sequence

import numpy as np

from mechanisms.hdmm.kron import KronStrategy, PlusStrategy, opt_kron, opt_plus
from mechanisms.hdmm.marginals import MarginalStrategy, opt_marginals
from mechanisms.hdmm.opt0 import Opt0Result, opt0_gaussian, opt0_laplace
from mechanisms.hdmm.workload import KronGram
from mechanisms.matrices import Dense, Identity, Kronecker, Matrix, Total

OPT0, OPT_KRON, OPT_PLUS, OPT_M = "OPT0", "OPT⊗", "OPT+", "OPT_M"
OPERATORS = (OPT0, OPT_KRON, OPT_PLUS, OPT_M)

__all__ = ["OPT0", "OPT_KRON", "OPT_PLUS", "OPT_M", "OPERATORS", "Candidate", "HDMMResult", "optimize", "kron_matrix"]


@dataclass(frozen=True, eq=False)
class Candidate:
    """One operator's strategy and its exact expected error at unit noise."""

    operator: str
    error: float
    strategy: Opt0Result | KronStrategy | PlusStrategy | MarginalStrategy
    seconds: float


@dataclass(frozen=True, eq=False)
class HDMMResult:
    """Every candidate tried, lowest error first."""

    candidates: list[Candidate] = field(default_factory=list)

    @property
    def best(self) -> Candidate:
        return self.candidates[0]


def optimize(
    gram: KronGram,
    p: int,
    parts: Sequence[KronGram] | None = None,
    operators: Sequence[str] = OPERATORS,
    restarts: int = 20,
    seed: int = 0,
    explicit_limit: int = 1024,
    max_marginal_dims: int = 15,
    allowed_marginals: np.ndarray | None = None,
    max_iter: int = 1000,
    sweeps: int = 10,
    gap_tol: float = 1e-5,
    marginal_restarts: int | None = None,
) -> HDMMResult:
    """Run the applicable operators on a workload gram (p = 1 Laplace, p = 2 Gaussian).

    `max_iter` and `gap_tol` bound each OPT₀ solve (see `opt_kron`); `restarts` caps the
    Laplace optimizers' starts, which stop earlier once they stop helping
    (`mechanisms.hdmm.restarts`); OPT_M, cheap but with many local optima under Laplace
    noise, may get its own cap.
    """
    if p not in (1, 2):
        raise ValueError("p is 1 (Laplace, L1 sensitivity) or 2 (Gaussian, L2 sensitivity)")
    found: list[Candidate] = []

    def run(operator: str, make) -> None:
        started = time.perf_counter()
        strategy = make()
        found.append(Candidate(operator, strategy.error, strategy, time.perf_counter() - started))

    kron_options = {"restarts": restarts, "seed": seed, "sweeps": sweeps, "max_iter": max_iter, "gap_tol": gap_tol}
    if OPT0 in operators and prod(gram.sizes) <= explicit_limit:
        if p == 2:
            run(OPT0, lambda: opt0_gaussian(gram.dense(), tol=gap_tol, max_iter=max_iter))
        else:
            run(OPT0, lambda: opt0_laplace(gram.dense(), restarts=restarts, seed=seed, max_iter=max_iter))
    if OPT_KRON in operators:
        run(OPT_KRON, lambda: opt_kron(gram, p, **kron_options))
    if OPT_PLUS in operators and parts is not None and len(parts) > 1:
        run(OPT_PLUS, lambda: opt_plus(parts, p, **kron_options))
    if OPT_M in operators and len(gram.sizes) <= max_marginal_dims:
        run(
            OPT_M,
            lambda: opt_marginals(
                gram.sizes, gram.marginal_weights(), p, allowed_marginals,
                restarts=restarts if marginal_restarts is None else marginal_restarts, seed=seed, max_iter=max_iter,
            ),
        )
    return HDMMResult(sorted(found, key=lambda c: c.error))


def kron_matrix(strategy: KronStrategy, axes: Sequence[int]) -> Matrix:
    """⊗ of the factors on `axes` (every other axis must be a Total factor: it is summed out)."""
    dropped = set(range(len(strategy.factors))) - set(axes)
    if not dropped <= set(strategy.summed_axes()):
        raise ValueError("only Total factors can be left out of the measured clique")
    factors: list[Matrix] = []
    for i in axes:
        n = strategy.factors[i].shape[1]
        template = strategy.templates[i]
        factors.append(Identity(n) if template == "Identity" else Total(n) if template == "Total" else Dense(strategy.factors[i]))
    if not factors:
        return Dense(np.ones((1, 1)))
    return factors[0] if len(factors) == 1 else Kronecker(factors)
