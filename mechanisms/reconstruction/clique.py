"""Least squares for strategy measurements on one clique's marginal, without densifying.

Strategies such as range trees, wavelets or HDMM-optimized matrices measure
yₖ = Aₖ·x_C + noise (x_C the marginal over clique C, noise variance σₖ² per
entry). The generalized least-squares estimate is x̂ = G⁺ Σ Aₖᵀyₖ/σₖ² with
G = Σ AₖᵀAₖ/σₖ²; a query matrix W on C gets estimate W x̂ and covariance
W G⁺ Wᵀ, and W is determined by the measurements when its rows lie in the row
space of G. Repeated measurements of one matrix are first averaged with
inverse-variance weights (that is exactly GLS for them).

`CliqueLeastSquares` picks one of three exact solvers:

- **one strategy, a Kronecker product** A = w·⊗ A_g (any other Matrix counts as
  a one-factor product over the whole clique): A⁺ = w⁻¹ ⊗ A_g⁺, so a block term
  ⊗ F_g is estimated as ⊗(F_g A_g⁺) applied to ȳ one axis at a time
  (`kron_apply`), and Var = σ̄²/w² Σ_{s,t} c_s c_t ⊗_g rowdot(F_sg A_g⁺, F_tg A_g⁺)
  since (AᵀA)⁺ = A⁺A⁺ᵀ. Nothing over the clique is ever formed, so 10⁹-cell
  cliques work (`solution` materializes x̂ itself in chunks).
- **several strategies on ≤ `DENSE_LIMIT` cells**: the dense pseudo-inverse of G.
- **several strategies on larger cliques**: conjugate gradients on the implicit
  G (each strategy's `gram()`), preconditioned by the exact inverse of the
  first full-rank Kronecker strategy's gram, to a residual of `CG_TOL`;
  variances solve G z = wᵣ for the block's rows in batches.

Contract with strategy matrices (how other strategy families plug in): a
strategy, or each factor of a `Kronecker` strategy, must offer `pinv()` with
the Moore–Penrose properties of `Matrix.pinv` (structured subclasses such as
range trees return an implicit operator), `gram()` for the union solver, and
`matvec`/`transpose`. Block factors are small (one attribute) and densified.
"""

from __future__ import annotations

import hashlib
import json
from functools import cached_property
from math import prod

import numpy as np

from mechanisms.arrays import kron, pinv, to_numpy, xp
from mechanisms.domain import Domain
from mechanisms.matrices import Dense, Diagonal, Identity, Kronecker, Matrix, Ones, Weighted, to_spec
from mechanisms.measurement import Measurement
from mechanisms.work_cache import WorkCache
from mechanisms.workload import Block

DENSE_LIMIT = 4096
CG_TOL = 1e-12  # relative residual of the conjugate-gradient solves
_SPAN_TOLERANCE = 1e-8
_CHUNK_ELEMENTS = 1 << 25  # working-set size of `kron_apply` when its output is large
_CG_BATCH_ELEMENTS = 1 << 26  # cells × rows solved at once for union variances

__all__ = ["CliqueLeastSquares", "kron_apply", "DENSE_LIMIT"]


def kron_apply(mats, x, out=None):
    """(⊗ mats) x for dense factor matrices and a flat x, one axis at a time, without copies of x.

    Axes are contracted most-reducing first; when the result is about as large
    as x, the work is chunked over the first output axis so the peak memory is
    x, the result and one chunk. `out` (e.g. a memory-mapped array) receives
    the result in that case.
    """
    m = xp()
    mats = [m.asarray(a) for a in mats]
    cols = [a.shape[1] for a in mats]
    rows = [a.shape[0] for a in mats]
    x = m.asarray(x).reshape(cols)
    if len(mats) == 1:
        return mats[0] @ x
    if out is None and (prod(rows) * 4 < x.size or prod(rows) <= _CHUNK_ELEMENTS):
        return _contract(mats, x, list(range(len(mats)))).reshape(-1)
    out = m.empty(prod(rows)) if out is None else out
    view = out.reshape(rows[0], -1)
    flat = x.reshape(cols[0], -1)
    step = max(1, _CHUNK_ELEMENTS // max(flat.shape[1], view.shape[1]))
    rest = [None] + mats[1:]  # axis 0 is applied chunk by chunk
    for start in range(0, rows[0], step):
        head = (mats[0][start : start + step] @ flat).reshape(-1, *cols[1:])
        view[start : start + step] = _contract(rest, head, list(range(1, len(mats)))).reshape(head.shape[0], -1)
    return out


def _contract(mats, t, axes):
    """Apply mats[a] along axis a of t for a in `axes`, most-reducing first (matmul on (pre, n, post) views)."""
    for a in sorted(axes, key=lambda a: mats[a].shape[0] / mats[a].shape[1]):
        shape, mat = t.shape, mats[a]
        pre, post = prod(shape[:a]), prod(shape[a + 1 :])
        if post == 1:  # last axis: one GEMM on the (pre, n) view
            t = t.reshape(pre, shape[a]) @ mat.T
        elif pre == 1:
            t = mat @ t.reshape(shape[a], post)
        else:
            t = xp().matmul(mat, t.reshape(pre, shape[a], post))
        t = t.reshape(*shape[:a], mat.shape[0], *shape[a + 1 :])
    return t


def _dense(f: Matrix):
    return xp().asarray(f.dense(), dtype=float)


def _largest(a) -> float:
    """max |a| (0 for an empty array), in either array module."""
    return float(xp().abs(a).max()) if a.size else 0.0


def _times(g, a: Matrix):
    """g @ A for dense rows g, through A's transpose (no dense A)."""
    return xp().asarray(a.transpose().matvec(g.T)).T


def _kron_vectors(vectors):
    out = xp().ones(1)
    for v in vectors:
        out = kron(out, v)
    return out


def _kron_matrices(mats):
    """⊗ mats; the empty product (a factor over no attributes) is the 1×1 identity."""
    out = xp().ones((1, 1))
    for a in mats:
        out = kron(out, a)
    return out


def _digest(a: Matrix) -> str:
    """Identifies a strategy matrix by content, cheaply for the structured kinds."""
    h = hashlib.sha256(f"{type(a).__name__}{a.shape}".encode())
    if isinstance(a, Weighted):
        h.update(repr(a.weight).encode() + _digest(a.base).encode())
    elif isinstance(a, Kronecker):
        for f in a.factors:
            h.update(_digest(f).encode())
    elif isinstance(a, Dense):
        h.update(np.ascontiguousarray(to_numpy(a.array)).tobytes())
    elif isinstance(a, Diagonal):
        h.update(np.ascontiguousarray(to_numpy(a.values)).tobytes())
    elif not isinstance(a, (Identity, Ones)):
        h.update(json.dumps(to_spec(a), sort_keys=True).encode())
    return h.hexdigest()


# Pseudo-inverses of explicit factors by content, across models of this process (planning costs a strategy's
# error and answering then solves with the same strategy; an SVD costs milliseconds, seconds for a strategy on a
# large union clique: 128 MiB keeps one of 69 × 161,051, the optimal factorization of taxi's range dashboard).
_PINVS = WorkCache(64, max_bytes=128 << 20, size=lambda p: 8 * p.shape[0] * p.shape[1])


def _pinv(factor: Matrix) -> Matrix:
    """`factor.pinv()`, kept by content for explicit (dense) factors."""
    if not isinstance(factor, Dense):
        return factor.pinv()
    return _PINVS.get((xp().__name__, _digest(factor)), factor.pinv)


class _Aligned:
    """A strategy as weight · ⊗ factors, each factor spanning consecutive clique attributes."""

    def __init__(self, strategy: Matrix, sizes: tuple[int, ...]):
        weight, base = 1.0, strategy
        if isinstance(base, Weighted):
            weight, base = base.weight, base.base
        factors = base.factors if isinstance(base, Kronecker) else [base]
        groups, start = [], 0
        for f in factors:
            end, cells = start, 1
            while end < len(sizes) and (end == start or cells < f.shape[1]):
                cells *= sizes[end]
                end += 1
            if cells != f.shape[1]:
                break
            groups.append((start, end))
            start = end
        if start != len(sizes) or len(groups) != len(factors):  # not attribute-aligned: one factor
            weight, factors, groups = 1.0, [strategy], [(0, len(sizes))]
        self.weight, self.factors, self.groups = weight, list(factors), groups

    def block_factors(self, per_attribute: list[Matrix]):
        """Dense block factors merged per strategy group (Kronecker within a group)."""
        return [_kron_matrices([_dense(per_attribute[a]) for a in range(lo, hi)]) for lo, hi in self.groups]


class _KroneckerSolver:
    """GLS from (repeated measurements of) one Kronecker strategy: Cov(x̂) = scale · ⊗ A_g⁺A_g⁺ᵀ."""

    def __init__(self, strategy: Matrix, sizes: tuple[int, ...], values, variance: float):
        self.aligned = _Aligned(strategy, sizes)
        self.pinvs = [_pinv(f) for f in self.aligned.factors]
        self.values = values
        self.scale = variance / self.aligned.weight**2

    def _applied(self, per_attribute):
        """(F_g, F_g A_g⁺) per strategy group for one block term."""
        factors = self.aligned.block_factors(per_attribute)
        return factors, [_times(f, p) for f, p in zip(factors, self.pinvs)]

    def covers(self, terms) -> bool:
        m = xp()
        parts = [(c, *self._applied(f)) for c, f in terms]
        projected = [[_times(g, a) for g, a in zip(gs, self.aligned.factors)] for _, _, gs in parts]
        if all(
            _largest(fp - f) <= _SPAN_TOLERANCE * max(_largest(f), 1.0)
            for (_, fs, _), fps in zip(parts, projected)
            for f, fp in zip(fs, fps)
        ):
            return True
        # Terms outside the row space may still cancel: test ‖W(I − Π)‖² = tr WWᵀ − tr WΠWᵀ ≈ 0.
        full = kept = 0.0
        for (c1, f1, _), p1 in zip(parts, projected):
            for c2, f2, _ in parts:
                full += c1 * c2 * prod(float(m.sum(a * b)) for a, b in zip(f1, f2))
                kept += c1 * c2 * prod(float(m.sum(a * b)) for a, b in zip(p1, f2))
        return full - kept <= 1e-9 * max(full, 1e-300)

    def estimate(self, terms):
        total = 0.0
        for c, per_attribute in terms:
            total = total + c * kron_apply(self._applied(per_attribute)[1], self.values)
        return total / self.aligned.weight

    def cross(self, first, second):
        g1 = [(c, self._applied(f)[1]) for c, f in first]
        g2 = [(c, self._applied(f)[1]) for c, f in second]
        out = 0.0
        for c1, a1 in g1:
            for c2, a2 in g2:
                out = out + c1 * c2 * _kron_vectors([(a * b).sum(axis=1) for a, b in zip(a1, a2)])
        return self.scale * out

    def solution(self, out=None):
        """x̂ = A⁺ȳ over the whole clique (chunked; peak memory ≈ ȳ + x̂ + one chunk)."""
        x = kron_apply([_dense(p) for p in self.pinvs], self.values, out)
        x /= self.aligned.weight
        return x


class _UnionSolver:
    """GLS from several different strategies: dense pinv when small, else preconditioned CG."""

    def __init__(self, parts: list[tuple[Matrix, object, float]], sizes: tuple[int, ...]):
        m = xp()
        self.parts, self.sizes = parts, sizes
        self.cells = prod(sizes)
        self.rhs = sum(m.asarray(a.transpose().matvec(y)) / var for a, y, var in parts)
        self.gram_pinv = self.preconditioner = None
        if self.cells <= DENSE_LIMIT:
            gram = sum(_dense(a).T @ _dense(a) / var for a, _, var in parts)
            self.gram_pinv = pinv(gram, hermitian=True)
            self.projector = self.gram_pinv @ gram
            self.x = self.gram_pinv @ self.rhs
            return
        for solver in self.components:
            if all(_full_column_rank(f, p) for f, p in zip(solver.aligned.factors, solver.pinvs)):
                self.preconditioner = ([_dense(p) @ _dense(p).T for p in solver.pinvs], solver.scale)
                break
        self.x = self._solve(self.rhs[:, None])[:, 0]

    @cached_property
    def components(self) -> list[_KroneckerSolver]:
        """Each strategy's own solver (for the preconditioner and the sufficient span test)."""
        return [_KroneckerSolver(a, self.sizes, y, var) for a, y, var in self.parts]

    @property
    def full_rank(self) -> bool:
        """G is invertible (some strategy alone has full column rank): every block is determined."""
        return self.preconditioner is not None

    def _gram(self, z):
        return sum(xp().asarray(a.gram().matvec(z)) / var for a, _, var in self.parts)

    def _precondition(self, r):
        if self.preconditioner is None:
            return r
        mats, scale = self.preconditioner
        return scale * xp().stack([kron_apply(mats, r[:, j]) for j in range(r.shape[1])], axis=1)

    def _solve(self, b):
        """Preconditioned CG for G Z = B, all columns at once (consistent systems; G PSD)."""
        m = xp()
        z = m.zeros_like(b)
        r = b.copy()
        s = self._precondition(r)
        p = s.copy()
        rs = m.sum(r * s, axis=0)
        target = CG_TOL * m.sqrt(m.sum(b * b, axis=0))
        for _ in range(10 * self.cells + 100):
            if bool(m.all(m.sqrt(m.sum(r * r, axis=0)) <= target)):
                break
            gp = self._gram(p)
            curvature = m.sum(p * gp, axis=0)
            alpha = m.where(curvature > 0, rs / m.where(curvature > 0, curvature, 1.0), 0.0)
            z += alpha * p
            r -= alpha * gp
            s = self._precondition(r)
            rs_new = m.sum(r * s, axis=0)
            p = s + m.where(rs > 0, rs_new / m.where(rs > 0, rs, 1.0), 0.0) * p
            rs = rs_new
        return z

    def covers(self, matrix: Matrix, terms) -> bool:
        """Exact for small cliques and invertible G; otherwise sufficient (a strategy alone covers it).

        A block one strategy determines alone is determined by all of them together, so that
        test is also accepted for small cliques, where the projector is subject to rounding.
        """
        if self.gram_pinv is not None:
            w = _dense(matrix)
            if _largest(w @ self.projector - w) <= _SPAN_TOLERANCE * max(_largest(w), 1.0):
                return True
        elif self.full_rank:
            return True
        return all(any(c.covers([t]) for c in self.components) for t in terms)

    def solve_rows(self, matrix: Matrix):
        """G⁺Wᵀ (cells × rows) for a block matrix W, in batches of rows."""
        m = xp()
        rows = matrix.shape[0]
        if self.gram_pinv is not None:
            return self.gram_pinv @ _dense(matrix).T
        step = max(1, _CG_BATCH_ELEMENTS // self.cells)
        out = []
        for start in range(0, rows, step):
            unit = m.eye(rows)[:, start : start + step]
            out.append(self._solve(m.asarray(matrix.transpose().matvec(unit))))
        return m.concatenate(out, axis=1)


def _full_column_rank(f: Matrix, pinv: Matrix) -> bool:
    n = f.shape[1]
    return bool(xp().allclose(_dense(pinv) @ _dense(f), xp().eye(n), atol=1e-8))


class CliqueLeastSquares:
    """GLS over strategy measurements that share one clique (see the module docstring)."""

    def __init__(self, domain: Domain, clique: tuple[str, ...], measurements: list[Measurement]):
        self.domain, self.clique = domain, clique
        sizes = domain.shape(clique)
        merged: dict[str, list[Measurement]] = {}
        for m in measurements:
            merged.setdefault(_digest(m.strategy), []).append(m)
        parts = []
        for group in merged.values():
            precision = sum(1.0 / m.variance for m in group)
            if not all(m.values.size for m in group):  # planning: only the variances matter
                values = xp().zeros(group[0].strategy.shape[0])
            elif len(group) == 1:  # no copy: a 10⁹-cell measurement is used in place
                values = xp().asarray(group[0].values, dtype=float)
            else:
                values = sum(xp().asarray(m.values, dtype=float) / m.variance for m in group) / precision
            parts.append((group[0].strategy, values, 1.0 / precision))
        if len(parts) == 1:
            strategy, values, variance = parts[0]
            self._kron, self._union = _KroneckerSolver(strategy, sizes, values, variance), None
        else:
            self._kron, self._union = None, _UnionSolver(parts, sizes)

    def _terms(self, block: Block):
        """[(coef, per-attribute factors over this clique)] for the block's Kronecker terms."""
        return [(t.coef, block.term_factors(t, self.domain, self.clique)) for t in block.terms]

    def _matrix(self, block: Block) -> Matrix:
        return block.matrix(self.domain, self.clique)

    def covers(self, block: Block) -> bool:
        if not set(block.attributes(self.domain)) <= set(self.clique):
            return False
        if self._kron is not None:
            return self._kron.covers(self._terms(block))
        return self._union.covers(self._matrix(block), self._terms(block))

    def estimate(self, block: Block) -> np.ndarray:
        if self._kron is not None:
            return to_numpy(self._kron.estimate(self._terms(block)))
        return to_numpy(self._matrix(block).matvec(self._union.x))

    def variance(self, block: Block) -> np.ndarray:
        return self.covariance(block, block)

    def covariance(self, first: Block, second: Block) -> np.ndarray:
        if self._kron is not None:
            return to_numpy(self._kron.cross(self._terms(first), self._terms(second)))
        solved = self._union.solve_rows(self._matrix(first))  # cells × rows
        w2 = xp().asarray(self._matrix(second).transpose().matvec(xp().eye(second.num_rows(self.domain))))
        return to_numpy(xp().sum(w2 * solved, axis=0))

    def solution(self, out=None) -> np.ndarray:
        """The least-squares estimate x̂ of the whole clique marginal (large: mind the memory).

        For a Kronecker strategy `out` may be a preallocated (e.g. memory-mapped) array.
        """
        if self._kron is not None:
            return to_numpy(self._kron.solution(out))
        return to_numpy(self._union.x)
