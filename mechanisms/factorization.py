"""The optimal linear strategy for Gaussian noise, with a certificate (factorization by convex duality).

For a workload W (R×n, row weights folded in) answered by measuring A·x with
Gaussian noise and least squares, the expected total squared error at unit
noise scale is  err(A) = ‖A‖²₁→₂ · tr(W (AᵀA)⁺ Wᵀ)  (‖A‖₁→₂ the largest column
norm, the L2 sensitivity). With K = AᵀA this is the convex program

    minimize tr(Wᵀ W K⁻¹)  subject to  K ⪰ 0,  K_jj ≤ 1 for every cell j,

whose Lagrange dual is  max over column weights d in the simplex of
f(d)² = (tr (W D Wᵀ)^½)²  — the squared nuclear norm of W D^½. Li & Miklau's
SVD bound is f at uniform d; the optimum over d is the exact optimum over
*all* linear strategies (Nikolov–Talwar–Zhang; Edmonds–Nikolov–Ullman's
factorization norm). f is concave in d, and for any d the dual gives a primal
strategy K_d, so every iterate carries a lower bound f(d)² and a feasible
error f(d)·max_j g_j (g_j the sensitivity each column would have); we run
multiplicative updates d_j ← d_j (g_j/f)^s until the two meet.

Everything happens in the r-dimensional row space of W (r = rank W ≤ min(R, n)):
the strategy is A = C·B with B a basis of r rows of W itself, so A has exactly
W's row space (the least-squares answers stay unbiased after C is rounded to a
short decimal lattice for exact discrete noise) and costs O(n r²) per step on
explicit rows. The steps read the cells through a `RowSpace`; the marginal
coordinates of `mechanisms.factorization_marginals` make them O(n·cliques²).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from mechanisms.arrays import to_numpy
from mechanisms.matrices import DecimalDense, Dense
from mechanisms.interruption import checkpoint

# Relative size below which a pivot of W's QR counts as zero (rank detection).
_RANK_TOLERANCE = 1e-9
# Entries of the integer basis and of the rounded strategy (in lattice units) stay below this, so
# every strategy entry is a decimal of at most 15 significant digits, read back exactly from its repr.
MAX_INTEGER = 10**15 - 1
# C is rounded to the fewest of DIGITS significant digits per column that cost at most
# ROUNDING_LOSS of the expected error (a coarse lattice keeps the exact noise small).
DIGITS = (3, 4, 6)
SPAN_TOLERANCE = 1e-9  # tighter than the least-squares model's own check (1e-8)
ROUNDING_LOSS = 1e-3
# Exponent of the multiplicative update d_j ← d_j (g_j/f)^step. The loop stops on the certified
# gap (best primal vs best dual), so any step is safe; larger steps converge faster until they
# overshoot, so the step halves (down to 1) whenever the dual value falls.
FIRST_STEP = 3.0


@dataclass(frozen=True)
class Factorization:
    """A strategy A = C·B on the workload's cells and its exact expected error.

    `error` is the expected total weighted squared error per unit noise
    variance per unit sensitivity² (multiply by Δ²/(2ρ)); `lower_bound` is the
    dual certificate: no linear strategy has a smaller error.
    """

    strategy: Dense
    error: float
    lower_bound: float
    rank: int
    iterations: int

    @property
    def gap(self) -> float:
        """How far above the optimum over all linear strategies, at most (0.01 = 1%)."""
        return self.error / self.lower_bound - 1.0 if self.lower_bound > 0 else 0.0


def _psd_power(m: np.ndarray, power: float) -> np.ndarray:
    """M^power for a symmetric PSD M (round-off negatives clipped to 0)."""
    vals, vecs = np.linalg.eigh((m + m.T) / 2)
    return (vecs * np.maximum(vals, 0.0) ** power) @ vecs.T


def _dual_step(weighed: np.ndarray, q: np.ndarray, space: RowSpace) -> tuple[float, np.ndarray, np.ndarray]:
    """(f(d), g, K_d) in orthonormal row-space coordinates (weighed = U D Uᵀ, q: r×r workload gram)."""
    n_half = _psd_power(weighed, 0.5)
    s = n_half @ q @ n_half
    s_half = _psd_power(s, 0.5)
    n_inv_half = np.linalg.pinv(n_half, hermitian=True)
    k = n_inv_half @ s_half @ n_inv_half
    return float(np.trace(s_half)), space.sensitivities(k), k


class RowSpace:
    """What the optimization reads of the cells: W's row space in orthonormal coordinates U (r×n, never
    needed explicitly) and a basis B = Rᵀ U of r integer rows of W. Explicit rows here
    (`ExplicitRows`); marginal coordinates in `mechanisms.factorization_marginals`."""

    cells: int  # n
    step_work: float  # operations of one dual step

    def weigh(self, d: np.ndarray) -> np.ndarray:
        """U D Uᵀ (r×r) for cell weights d."""
        raise NotImplementedError

    def sensitivities(self, k: np.ndarray) -> np.ndarray:
        """diag(Uᵀ k U): each cell's squared column norm under the strategy gram k (n values)."""
        raise NotImplementedError

    def magnitude(self, units: np.ndarray) -> float:
        """An upper bound of every partial sum of units·B (units: r×r integers)."""
        raise NotImplementedError

    def integer(self, units: np.ndarray) -> np.ndarray:
        """units·B exactly, as int64 (r×n)."""
        raise NotImplementedError

    def determines(self, c: np.ndarray) -> bool:
        """Least squares on C·B answers every row of W, to the tolerance the model checks."""
        raise NotImplementedError


class ExplicitRows(RowSpace):
    """The row space of explicit rows (basis: the rows `chosen`): O(n r²) per step."""

    def __init__(self, rows: np.ndarray, basis: np.ndarray, q_mat: np.ndarray):
        self.rows, self.basis, self.u = rows, basis, q_mat.T
        self.cells = rows.shape[1]
        self.step_work = 0.8 * self.cells * basis.shape[0] ** 2

    def weigh(self, d: np.ndarray) -> np.ndarray:
        return (self.u * d) @ self.u.T

    def sensitivities(self, k: np.ndarray) -> np.ndarray:
        return np.einsum("ij,ij->j", self.u, k @ self.u)

    def magnitude(self, units: np.ndarray) -> float:
        return float((np.abs(units) @ np.abs(self.basis)).max())

    def integer(self, units: np.ndarray) -> np.ndarray:
        return units.astype(np.int64) @ self.basis.astype(np.int64)  # exact: partial sums below 10^15

    def determines(self, c: np.ndarray) -> bool:
        a = c @ self.basis
        residual = self.rows - (self.rows @ np.linalg.pinv(a)) @ a
        return float(np.abs(residual).max()) <= SPAN_TOLERANCE * max(float(np.abs(self.rows).max()), 1.0)


def basis_rows(rows: np.ndarray) -> np.ndarray:
    """Indices of r linearly independent rows spanning the row space (pivoted QR)."""
    _, r, pivots = sla.qr(rows.T, mode="economic", pivoting=True)
    diag = np.abs(np.diag(r))
    rank = int(np.sum(diag > _RANK_TOLERANCE * diag[0])) if diag.size and diag[0] > 0 else 0
    return np.sort(pivots[:rank])


def _round_columns(c: np.ndarray, digits: int) -> tuple[np.ndarray | None, int]:
    """(integers U, E) with U/10^E ≈ c, each column of c kept to `digits` significant digits.

    Columns multiply basis rows of very different scales (a SUM's values vs a
    count's ones), so precision is relative to each column. None when the
    rounded matrix is singular.
    """
    top = np.max(np.abs(c), axis=0)
    exponents = np.maximum(0, digits - 1 - np.floor(np.log10(np.where(top > 0, top, 1.0)))).astype(int)
    e = int(exponents.max())
    units = np.rint(c * 10.0**exponents) * 10.0 ** (e - exponents)
    if np.abs(units).max() > MAX_INTEGER or np.linalg.matrix_rank(units) < units.shape[0]:
        return None, e
    return units, e


def _on_lattice(space: RowSpace, r_mat: np.ndarray, c: np.ndarray, z: np.ndarray) -> tuple[Dense, float] | None:
    """C·B with C rounded to the fewest DIGITS that keep the error, computed exactly; and its error."""
    exact = _error(space, r_mat, c, z)
    found = None
    for digits in DIGITS:
        units, exponent = _round_columns(c, digits)
        if units is None or space.magnitude(units) > MAX_INTEGER:
            continue
        found = (units, exponent, _error(space, r_mat, units / 10.0**exponent, z))
        if found[2] <= exact * (1 + ROUNDING_LOSS):
            break
    if found is None or not space.determines(found[0] / 10.0 ** found[1]):
        return None
    units, exponent, error = found
    return DecimalDense(space.integer(units), exponent), error  # entries: the doubles nearest ≤15-digit decimals


def _sensitivity2(space: RowSpace, r_mat: np.ndarray, c: np.ndarray) -> float:
    """The largest squared column norm of C·B = C Rᵀ U."""
    crt = c @ r_mat.T
    return float(np.max(space.sensitivities(crt.T @ crt)))


def _error(space: RowSpace, r_mat: np.ndarray, c: np.ndarray, z: np.ndarray) -> float:
    return _workload_error(c, z) * _sensitivity2(space, r_mat, c)


def _workload_error(c: np.ndarray, z: np.ndarray) -> float:
    """‖Z C⁻¹‖²_F: the total squared error of W = Z·B answered from C·B at unit noise and sensitivity."""
    return float(np.sum(np.linalg.solve(c.T, z.T) ** 2))


def exact_error(c: np.ndarray, basis: np.ndarray, z: np.ndarray) -> float:
    """err(C·B) for a workload W = Z·B: ‖Z C⁻¹‖²_F times the largest column norm² of C·B."""
    return _workload_error(c, z) * float(np.max(np.sum((c @ basis) ** 2, axis=0)))


def optimal_factorization(
    rows: np.ndarray, weights: np.ndarray, max_iter: int = 3000, gap_tol: float = 2e-3, max_work: float = math.inf
) -> Factorization | None:
    """The optimal strategy for the workload `rows` (R×n, exact decimals) with row weights `weights`.

    The objective is Σ_i weights_i · E(error of row i)². Iterations stop at a
    relative gap `gap_tol`, after `max_iter`, or once about `max_work` flops are
    spent (at least one step: each costs ≈ 2·n·rank²); the strategy returned is
    then the best found, its error exact and its gap honest. Returns None when
    the rows cannot be put on an exact integer lattice (non-integral entries).
    """
    rows = np.asarray(to_numpy(rows), dtype=float)
    weights = np.asarray(weights, dtype=float)
    checkpoint(4.0 * rows.size * min(rows.shape))  # the basis, its QR and the projection
    chosen = basis_rows(rows)
    if chosen.size == 0:
        return None
    basis = rows[chosen]
    if not np.array_equal(basis, np.rint(basis)) or np.abs(basis).max() > MAX_INTEGER:
        return None
    # Orthonormal coordinates of the row space: basis = Rᵀ U, U = Qᵀ.
    q_mat, r_mat = np.linalg.qr(basis.T)
    projected = (rows * np.sqrt(weights)[:, None]) @ q_mat  # W = projected · U exactly (rows lie in the span)
    return factorize(ExplicitRows(rows, basis, q_mat), r_mat, projected, max_iter, gap_tol, max_work)


def factorize(
    space: RowSpace, r_mat: np.ndarray, projected: np.ndarray, max_iter: int, gap_tol: float, max_work: float
) -> Factorization | None:
    """The optimization on a row space (basis = Rᵀ U; the weighted workload is `projected`·U)."""
    gram = projected.T @ projected
    n = space.cells
    d = np.full(n, 1.0 / n)
    best_lower, best = 0.0, (np.inf, None)
    iterations, step, previous = 0, FIRST_STEP, 0.0
    steps = int(max(1, min(max_iter, max_work / (2.5 * space.step_work + 1.0))))
    for iterations in range(1, steps + 1):
        checkpoint(space.step_work)
        f, g, k = _dual_step(space.weigh(d), gram, space)
        if f < previous:
            step = max(1.0, step / 2)
        previous = f
        best_lower = max(best_lower, f * f)
        primal = f * float(g.max())
        if primal < best[0]:
            best = (primal, k)
        if best[0] <= best_lower * (1 + gap_tol):
            break
        d = d * (np.maximum(g, 0.0) / f) ** step
        d /= d.sum()
    # A = K^½ U = K^½ R⁻ᵀ B: scale to sensitivity 1, then round C to the shortest lattice that keeps the error.
    c = sla.solve_triangular(r_mat, _psd_power(best[1], 0.5), lower=False).T
    c = c / np.sqrt(_sensitivity2(space, r_mat, c))
    z = sla.solve_triangular(r_mat, projected.T, lower=False).T  # W = Z B
    lattice = _on_lattice(space, r_mat, c, z)
    if lattice is None:
        return None
    return Factorization(lattice[0], lattice[1], best_lower, r_mat.shape[0], iterations)


__all__ = [
    "ExplicitRows", "Factorization", "MAX_INTEGER", "RowSpace", "SPAN_TOLERANCE", "basis_rows", "exact_error", "factorize",
    "optimal_factorization",
]
