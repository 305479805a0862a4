"""HDMM: the high-dimensional matrix mechanism's strategy optimizers (McKenna et al.).

- `optimize` runs every applicable operator on a workload and keeps the strategy with the
  lowest exact expected error; `kron_matrix` turns a Kronecker winner into a `Matrix`;
- `opt0` (OPT₀ for Laplace and Gaussian noise, on an explicit or implicit gram),
  `kron` (OPT⊗ and OPT₊), `marginals` (OPT_M, weighted marginals);
- `workload` (implicit workload grams), `error` (exact expected errors).
"""

from mechanisms.hdmm.optimize import (
    OPERATORS,
    OPT0,
    OPT_KRON,
    OPT_M,
    OPT_PLUS,
    Candidate,
    HDMMResult,
    kron_matrix,
    optimize,
)

__all__ = ["OPERATORS", "OPT0", "OPT_KRON", "OPT_M", "OPT_PLUS", "Candidate", "HDMMResult", "kron_matrix", "optimize"]
