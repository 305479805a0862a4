"""Fitting a graphical model to noisy linear measurements: loss, total, mirror descent.

Measurements y_j = Q_j μ_{r_j} + noise (variance σ_j² per entry) on clique
marginals μ_r define the Gaussian negative log-likelihood

    L(μ) = Σ_j ‖Q_j μ_{r_j} − y_j‖² / (2 σ_j²),

a convex function of the model's clique marginals (in counts: μ = N·p_θ); a
Laplace measurement contributes its L1 loss ‖Q_j μ − y_j‖₁/b_j instead (`laplace_loss`).
Q_j is the identity for a marginal, a strategy matrix (range trees, wavelets,
HDMM's Kronecker products and sums of them, residual strategies), or a block's
matrix for a block measured directly (`LinearMeasurement.of`). Per clique the
loss is kept as the quadratic ½ μᵀ(P + G)μ − bᵀμ + c: G = Σ QᵀQ/σ² is a sum of
Kronecker products of small per-attribute grams (`gram_terms`), so one
evaluation applies each distinct strategy's gram once, a small matrix per axis,
never Q itself; a strategy that does not factor so goes through Q·μ and Qᵀ·r.

Entropic mirror descent over the marginal polytope is the update
θ ← θ − α ∇_μ L(μ_θ) on the log-potentials (McKenna's thesis, Algorithm 2),
with an Armijo line search on α: a step is accepted when the loss falls by at
least half the decrease its linearization predicts, the next step starts 2×
larger, a rejected one is halved. A model warm-started from the previous fit
(AIM refits after every new measurement) starts near the optimum; a fit stops
once the step size has met the curvature and an iteration improves the loss by
less than `tol` relative. Stopping early keeps the fit near the maximum-entropy
model it grew from, which regularizes noisy marginals with many near-empty
cells: AIM's error on adult_hd is lower at tol = 3e-4 than with the loss
minimized to convergence (benchmarks/results/aim_adult.md). Strategy
measurements make the loss ill-conditioned (a prefix strategy's gram spans
eigenvalues n² apart), where mirror descent crawls: `accelerated_descent`
(Tseng's accelerated method in the same geometry, with backtracking and
adaptive restarts) reaches in 100–300 iterations the loss mirror descent
reaches in 1000–3000 (tests/test_pgm_linear.py, benchmarks/pgm_linear.py).

The total N is estimated from the measurements when not given: every
measurement whose row space contains the all-ones vector gives the unbiased
estimate vᵀy of N (Qᵀv = 1) with variance σ²‖v‖²; they are combined with
inverse-variance weights. For a Kronecker product v = ⊗v_k is solved factor by
factor.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np
from scipy.sparse.linalg import LinearOperator, lsqr

from mechanisms.arrays import to_numpy, xp
from mechanisms.domain import Domain
from mechanisms.matrices import Identity, Kronecker, Matrix, Sum, VStack, Weighted
from mechanisms.measurement import GAUSSIAN, LAPLACE, Measurement
from mechanisms.workload import Block
from mechanisms.pgm.inference import calibrate, sum_to
from mechanisms.pgm.junction_tree import Clique, JunctionTree
from mechanisms.pgm.laplace_loss import SMOOTHING, absolute_curvature, absolute_term
from mechanisms.interruption import checkpoint

_LINE_SEARCH_HALVINGS = 30
_CALIBRATION_WORK = 250.0  # operations per clique-table cell of one iteration (calibration, loss, step)


@dataclass(frozen=True)
class LinearMeasurement:
    """Noisy answers y = Q·μ_clique + noise; `query` None means the marginal itself (Q = I)."""

    clique: Clique
    values: np.ndarray
    variance: float
    query: Matrix | None = None
    noise: str = GAUSSIAN  # LAPLACE: the fit uses the L1 loss (`mechanisms.pgm.laplace_loss`)

    @classmethod
    def of(
        cls, m: Measurement, domain: Domain | None = None, blocks: Mapping[str, Block] | None = None
    ) -> "LinearMeasurement":
        """The measurement as y = Q·μ_clique + noise.

        A block measured directly (`m.key`, its fingerprint) carries no matrix: its
        query is the block's matrix over the clique, found in `blocks` (fingerprint ->
        Block) with the `domain`; without them it is refused.
        """
        if m.key is not None:
            block = None if blocks is None else blocks.get(m.key)
            if block is None or domain is None:
                raise ValueError(
                    f"measurement on {m.clique} answers one block directly and carries no query "
                    "matrix; pass the block (blocks={fingerprint: Block}) and the domain to fit it"
                )
            query = block.matrix(domain, domain.canonical(m.clique))
        else:
            query = m.strategy
        return cls(tuple(m.clique), np.asarray(m.values, dtype=float), float(m.variance), query, m.noise)


# --- strategy matrices as sums of Kronecker products -------------------------------------
# Factors of at most this many entries are densified (one attribute's, or a small clique's).
_DENSE_FACTOR = 1 << 22


def kronecker_terms(query: Matrix) -> list[tuple[float, list[Matrix]]] | None:
    """Q = Σ_s c_s ⊗_k F_sk with the same column split (F_sk.shape[1]) in every term, or None.

    Any matrix that is not a (weighted) Kronecker product or a sum of them is one
    factor over the whole clique.
    """
    if isinstance(query, Weighted):
        inner = kronecker_terms(query.base)
        return None if inner is None else [(query.weight * c, fs) for c, fs in inner]
    if isinstance(query, Kronecker):
        coef, factors = 1.0, []
        for f in query.factors:
            inner = kronecker_terms(f)  # a weighted or nested Kronecker factor folds in
            if inner is None or len(inner) != 1:
                return None
            coef *= inner[0][0]
            factors += inner[0][1]
        return [(coef, factors)]
    if isinstance(query, Sum):
        out: list[tuple[float, list[Matrix]]] = []
        for t in query.terms:
            inner = kronecker_terms(t)
            if inner is None:
                return None
            out += inner
        if len({tuple(f.shape[1] for f in fs) for _, fs in out}) > 1:
            return None
        return out
    return [(1.0, [query])]


def _dense_of(f: Matrix) -> np.ndarray | None:
    if f.shape[0] * f.shape[1] > _DENSE_FACTOR:
        return None
    return np.asarray(to_numpy(f.dense()), dtype=float)


def _gram_of(f: Matrix, g: Matrix | None = None) -> np.ndarray | None:
    """F_sᵀF_t as a dense array (None: the identity); F.gram() when both are the same factor."""
    if g is None or g is f:
        if isinstance(f, Identity):
            return None
        if f.shape[1] ** 2 > _DENSE_FACTOR:
            raise _TooLarge
        return np.asarray(to_numpy(f.gram().dense()), dtype=float)
    a, b = _dense_of(f), _dense_of(g)
    if a is None or b is None or f.shape[1] * g.shape[1] > _DENSE_FACTOR:
        raise _TooLarge
    return a.T @ b


class _TooLarge(Exception):
    """A factor too large to densify: the measurement keeps its matrix-vector form."""


def _row_blocks(query: Matrix) -> list[Matrix]:
    """The row blocks of a VStack (QᵀQ = Σ_i Q_iᵀQ_i), else the query itself."""
    if isinstance(query, VStack):
        return [b for block in query.blocks for b in _row_blocks(block)]
    return [query]


def gram_terms(query: Matrix) -> list[tuple[float, tuple[int, ...], list]] | None:
    """QᵀQ = Σ_k g_k ⊗ H_k as (g_k, column split, dense H_kj or None for the identity), or None.

    None when some part is not a sum of Kronecker products with small factors; then
    the loss applies Q and Qᵀ instead.
    """
    out = []
    try:
        for block in _row_blocks(query):
            terms = kronecker_terms(block)
            if terms is None:
                return None
            split = tuple(f.shape[1] for f in terms[0][1])
            for s, (cs, fs) in enumerate(terms):
                for t, (ct, ft) in enumerate(terms):
                    grams = [_gram_of(a) if s == t else _gram_of(a, b) for a, b in zip(fs, ft)]
                    out.append((cs * ct, split, grams))
    except _TooLarge:
        return None
    return out


def _apply_kronecker(split: tuple[int, ...], factors: Sequence, x):
    """(⊗ factors) x for square dense factors (None: identity) on x of size Π split, same shape back."""
    m = xp()
    t = x.reshape(split)
    for axis, h in enumerate(factors):
        if h is not None:
            t = m.moveaxis(m.tensordot(h, t, axes=([1], [axis])), 0, axis)
    return t.reshape(x.shape)


def _norm2(h) -> float:
    """The spectral norm of a small dense matrix (eigenvalues when symmetric)."""
    h = np.asarray(to_numpy(h))
    if h.shape[0] == h.shape[1] and np.array_equal(h, h.T):
        return float(np.abs(np.linalg.eigvalsh(h)).max(initial=0.0))
    return float(np.linalg.norm(h, 2))


def _ones_preimage(query: Matrix, cells: int) -> np.ndarray | None:
    """v with Qᵀv = 1 (so vᵀy estimates the total), or None when 1 is not in Q's row space.

    v is the least-norm solution (the lowest-variance estimate vᵀy). For a
    Kronecker product ⊗F_k it is ⊗ v_k with F_kᵀv_k = 1 (1 = ⊗1 is in the row space
    of ⊗F_k exactly when each 1 is in F_k's), found factor by factor; other
    matrices go through LSQR on the implicit operator.
    """
    terms = kronecker_terms(query)
    if terms is not None and len(terms) == 1 and terms[0][0] != 0:
        coef, factors = terms[0]
        dense = [_dense_of(f) for f in factors]
        if all(d is not None for d in dense):
            v = np.ones(1) / coef
            for d in dense:
                vk = np.linalg.lstsq(d.T, np.ones(d.shape[1]), rcond=None)[0]
                if np.abs(d.T @ vk - 1.0).max() > 1e-6:
                    return None
                v = np.kron(v, vk)
            return v
    op = LinearOperator(
        query.shape,
        matvec=lambda x: to_numpy(query.matvec(np.ravel(x))),
        rmatvec=lambda y: to_numpy(query.rmatvec(np.ravel(y))),
        dtype=float,
    )
    v = lsqr(op.T, np.ones(cells), atol=1e-12, btol=1e-12, iter_lim=min(10 * cells, 5000))[0]
    if np.abs(op.rmatvec(v) - 1.0).max() > 1e-6:
        return None
    return v


def estimate_total(domain: Domain, measurements: Sequence[LinearMeasurement]) -> float | None:
    """Inverse-variance weighted estimate of the number of rows (at least 1), or None."""
    estimates, precisions = [], []
    for m in measurements:
        cells = domain.size(m.clique)
        if m.query is None:
            estimates.append(float(np.sum(m.values)))
            precisions.append(1.0 / (m.variance * cells))
            continue
        v = _ones_preimage(m.query, cells)
        if v is not None:
            estimates.append(float(v @ m.values))
            precisions.append(1.0 / (m.variance * float(v @ v)))
    if not estimates:
        return None
    return max(1.0, float(np.dot(estimates, precisions) / np.sum(precisions)))


def _spectral_norm2(query: Matrix, cells: int) -> float:
    """‖Q‖₂² (largest eigenvalue of QᵀQ), by power iteration on the implicit operator."""
    x = np.random.default_rng(0).standard_normal(cells)
    value = 0.0
    for _ in range(50):
        y = to_numpy(query.rmatvec(query.matvec(x)))
        norm = float(np.linalg.norm(y))
        if norm == 0.0:
            return 0.0
        if abs(norm - value) <= 1e-6 * norm:
            break
        value, x = norm, y / norm
    return norm


@dataclass
class _Group:
    """The measurements of one clique, attached to the tree clique that contains it.

    The loss on the clique is ½ μᵀ(P·I + G)μ − bᵀμ + c plus the matrix-vector
    terms of `general`, with P = Σ 1/σ² over identity measurements, G = Σ QᵀQ/σ²
    over strategy measurements (Kronecker grams `grams`), b = Σ Qᵀy/σ² and
    c = Σ ‖y‖²/(2σ²) over both.
    """

    clique: Clique
    holder: int
    precision: float = 0.0  # P
    weighted: object = None  # b
    constant: float = 0.0  # c
    grams: list = field(default_factory=list)  # (g, split, factors): G = Σ g ⊗ factors
    general: list[LinearMeasurement] = field(default_factory=list)  # applied through Q and Qᵀ
    absolute: list[LinearMeasurement] = field(default_factory=list)  # Laplace noise: the L1 loss


def _merge_grams(terms: list) -> list:
    """Terms with the same factors (repeated measurements of one strategy) combined into one."""
    merged: dict[tuple, list] = {}
    for g, split, factors in terms:
        key = (split,) + tuple(
            None if f is None else (f.shape, hashlib.sha1(np.ascontiguousarray(f).tobytes()).hexdigest())
            for f in factors
        )
        if key in merged:
            merged[key][0] += g
        else:
            merged[key] = [g, split, factors]
    return [(g, split, factors) for g, split, factors in merged.values() if g != 0.0]


class MarginalLoss:
    """L(μ) = Σ_j ‖Q_j μ_{r_j} − y_j‖² / (2σ_j²) and its gradient on the tree's clique tables.

    Measurements of one clique are merged exactly into the quadratic
    ½ μᵀ(P + G)μ − bᵀμ + c (see `_Group`): identity ones into (P, b, c), strategy
    ones whose matrix is a sum of Kronecker products of small factors into the
    Kronecker terms of G = Σ QᵀQ/σ² (so an evaluation applies each distinct
    strategy's gram once, one small factor per axis), anything else through
    Q·μ and Qᵀ·residual. The loss costs one pass per measured clique.
    """

    def __init__(self, tree: JunctionTree, measurements: Sequence[LinearMeasurement], smoothing: float = SMOOTHING):
        m = xp()
        self.tree, self.smoothing = tree, smoothing
        groups: dict[Clique, _Group] = {}
        for meas in measurements:
            clique = tree.domain.canonical(meas.clique)
            if clique not in groups:
                holder = tree.containing(clique)
                if holder is None:
                    raise ValueError(f"clique {clique} is not inside any clique of the junction tree")
                groups[clique] = _Group(clique, holder, weighted=m.zeros(tree.domain.shape(clique)))
            g = groups[clique]
            values = np.asarray(meas.values, dtype=float)
            if meas.noise == LAPLACE:
                g.absolute.append(meas)
                continue
            grams = None if meas.query is None else gram_terms(meas.query)
            if meas.query is None:
                y = m.asarray(values).reshape(tree.domain.shape(clique))
                g.precision += 1.0 / meas.variance
                g.weighted = g.weighted + y / meas.variance
            elif grams is not None:
                rhs = m.asarray(meas.query.rmatvec(m.asarray(values))) / meas.variance
                g.weighted = g.weighted + rhs.reshape(tree.domain.shape(clique))
                for coef, split, factors in grams:
                    if all(f is None for f in factors):
                        g.precision += coef / meas.variance
                    else:
                        g.grams.append((coef / meas.variance, split, factors))
            else:
                g.general.append(meas)
                continue
            g.constant += float(np.dot(values, values)) / (2.0 * meas.variance)
        for g in groups.values():  # merged on the host, then moved to the array module's device
            g.grams = [(c, split, [None if f is None else m.asarray(f) for f in fs]) for c, split, fs in _merge_grams(g.grams)]
        self.scale = sum(g.constant for g in groups.values())  # the loss at μ = 0 (sets its rounding)
        # Larger cliques first; each marginal is summed from the smallest measured superset seen.
        self.groups = sorted(groups.values(), key=lambda g: -tree.domain.size(g.clique))
        self.sources: list[int] = []
        for k, g in enumerate(self.groups):
            supersets = [j for j in range(k) if set(g.clique) <= set(self.groups[j].clique)]
            self.sources.append(min(supersets, key=lambda j: tree.domain.size(self.groups[j].clique), default=-1))

    def lipschitz(self) -> float:
        """An upper bound on the curvature of L along any tree clique (sets the first step)."""
        domain, per_clique = self.tree.domain, [0.0] * len(self.tree.cliques)
        for g in self.groups:
            spread = domain.size(self.tree.cliques[g.holder]) / domain.size(g.clique)
            norm2 = g.precision + sum(
                abs(coef) * float(np.prod([1.0 if f is None else _norm2(f) for f in factors]))
                for coef, _, factors in g.grams
            )
            norm2 += sum(_spectral_norm2(q.query, domain.size(g.clique)) / q.variance for q in g.general) + sum(
                absolute_curvature(1.0 if q.query is None else _spectral_norm2(q.query, domain.size(g.clique)),
                                   q.variance, self.smoothing) for q in g.absolute)
            per_clique[g.holder] += norm2 * spread
        return max(per_clique) or 1.0

    def __call__(self, marginals: Sequence, total: float) -> tuple[float, list, list]:
        """(loss, μ_r and ∇_{μ_r} L per measured clique) at clique marginals `marginals` × `total`."""
        m = xp()
        loss, counts, grads = 0.0, [], []
        for g, source in zip(self.groups, self.sources):
            if source < 0:
                mu = total * sum_to(marginals[g.holder], self.tree.cliques[g.holder], g.clique)
            else:
                mu = sum_to(counts[source], self.groups[source].clique, g.clique)
            curved = g.precision * mu
            for coef, split, factors in g.grams:
                curved = curved + coef * _apply_kronecker(split, factors, mu)
            grad = curved - g.weighted
            loss += float((0.5 * curved - g.weighted).ravel() @ mu.ravel()) + g.constant
            flat = mu.ravel()
            for q in g.general:
                residual = q.query.matvec(flat) - m.asarray(q.values)
                loss += float(residual @ residual) / (2.0 * q.variance)
                grad = grad + (q.query.rmatvec(residual) / q.variance).reshape(mu.shape)
            for value, slope in (absolute_term(q.query, q.values, q.variance, flat, self.smoothing) for q in g.absolute):
                loss, grad = loss + value, grad + slope.reshape(mu.shape)
            counts.append(mu)
            grads.append(grad)
        return loss, counts, grads

    def direction(self, grads: Sequence) -> list:
        """∇L as tables on the tree's cliques (None where zero).

        Each measured clique's gradient is first folded into its smallest measured
        superset (small tables), so only the outermost ones are broadcast over a
        tree clique: adding a function of x_r to any clique containing r changes
        p_θ the same way.
        """
        tree = self.tree
        pushed = list(grads)
        out: list = [None] * len(tree.cliques)
        for k in reversed(range(len(self.groups))):  # smallest cliques first
            g, source = self.groups[k], self.sources[k]
            into = self.groups[source].clique if source >= 0 else tree.cliques[g.holder]
            table = pushed[k].reshape(_broadcast(tree.domain, g.clique, into))
            if source >= 0:
                pushed[source] = pushed[source] + table
            else:
                out[g.holder] = table if out[g.holder] is None else out[g.holder] + table
        return out


def _broadcast(domain: Domain, sub: Sequence[str], clique: Sequence[str]) -> tuple[int, ...]:
    return tuple(domain.size_of(a) if a in sub else 1 for a in clique)


@dataclass
class Fit:
    """Result of mirror descent: log-potentials, normalized clique marginals, log Z, loss."""

    potentials: list
    marginals: list
    log_partition: float
    loss: float
    step: float
    iterations: int


@dataclass
class _Point:
    """Log-potentials with their calibrated marginals, loss and gradient."""

    theta: list
    marginals: list
    log_z: float
    value: float
    counts: list
    grads: list
    direction: list


def mirror_descent(
    tree: JunctionTree,
    loss: MarginalLoss,
    total: float,
    potentials: Sequence,
    *,
    step: float | None = None,
    max_iters: int = 1000,
    tol: float = 1e-6,
    callback: Callable[[int, float], None] | None = None,
) -> Fit:
    """Minimize loss(total·μ_θ) over θ by entropic mirror descent with an Armijo line search.

    Stops after `max_iters` iterations, or once the step size has met the
    curvature (some step was rejected) and an iteration improves the loss by
    less than `tol` relative.
    """
    m = xp()

    def evaluate(theta: list) -> _Point:
        marginals, log_z = calibrate(tree, theta)
        value, counts, grads = loss(marginals, total)
        return _Point(theta, marginals, log_z, value, counts, grads, loss.direction(grads))

    current = evaluate([m.asarray(p, dtype=float) for p in potentials])
    alpha = step if step is not None else 1.0 / (total * loss.lipschitz())
    settled = False
    it = 0
    for it in range(1, max_iters + 1):
        checkpoint(_CALIBRATION_WORK * tree.size)
        for _ in range(_LINE_SEARCH_HALVINGS):
            trial = evaluate([t if d is None else t - alpha * d for t, d in zip(current.theta, current.direction)])
            predicted = sum(float(m.vdot(g, a - b)) for g, a, b in zip(current.grads, current.counts, trial.counts))
            if trial.value <= current.value and current.value - trial.value >= 0.5 * predicted:
                break
            alpha *= 0.5
            settled = True
        else:  # no step decreases the loss measurably: at the optimum to machine precision
            break
        improvement = current.value - trial.value
        current = trial
        alpha *= 2.0
        if callback is not None:
            callback(it, current.value)
        if settled and improvement <= tol * abs(current.value):
            break
    return Fit(current.theta, current.marginals, current.log_z, current.value, alpha, it)


_RELAX = 0.75  # L shrinks by this after an accepted accelerated step (doubles after a rejected one)
_TINY = 1e-300  # floor for log μ in closed-form potentials (probabilities below it underflow anyway)


def potentials_from_marginals(tree: JunctionTree, marginals: Sequence) -> list:
    """θ_C = log μ_C − log μ_{S(C)}: the tree model whose clique marginals are the given consistent ones."""
    m = xp()
    out = []
    for i, clique in enumerate(tree.cliques):
        log_mu = m.log(m.maximum(marginals[i], _TINY))
        p, sep = tree.parent[i], tree.separators[i]
        if p >= 0 and sep:
            below = sum_to(marginals[i], clique, sep)
            shape = [tree.domain.size_of(a) if a in sep else 1 for a in clique]
            log_mu = log_mu - m.log(m.maximum(below, _TINY)).reshape(shape)
        out.append(log_mu)
    return out


def _vdot(a, b) -> float:
    """Σ a·b with broadcasting (b may be a table broadcast over some axes of a)."""
    return float((a * b).sum())


def accelerated_descent(
    tree: JunctionTree,
    loss: MarginalLoss,
    total: float,
    potentials: Sequence,
    *,
    step: float | None = None,
    max_iters: int = 1000,
    tol: float = 1e-6,
    callback: Callable[[int, float], None] | None = None,
) -> Fit:
    """Minimize loss(total·μ) over the marginal polytope by accelerated entropic mirror descent.

    Tseng's accelerated gradient method with the joint distribution's KL
    divergence as the Bregman distance (1-strongly convex in ‖·‖₁ by Pinsker), and
    backtracking on the smoothness constant L (×2 on a rejected step, ×0.75 after an accepted one; McKenna's thesis §4.4 proposes
    accelerated estimators for the same loss). Each iteration mixes marginals
    y = (1−τ)x + τz, takes a mirror step from the model z with the gradient at y
    (θ_z ← θ_z − a·N·∇L(y), one belief propagation) and mixes x ← (1−τ)x + τz;
    L doubles until f(x) ≤ f(y) + ⟨∇f(y), x − y⟩ + KL(z′‖z)/(A + a) (the
    L-smoothness bound with ‖x − y‖₁² ≤ 2τ²·KL). f(x_k) − f* ≤ KL(p*‖p_0)/A_k with A_k growing like k²/L, against k/L
    for plain mirror descent. A step that would raise f(x) is not taken and
    restarts the momentum from x (O'Donoghue and Candès' adaptive restart), so the
    loss of x never increases. The iterate x is a mixture, so it is held as
    consistent clique marginals; the returned model is the tree model with
    exactly those marginals (`potentials_from_marginals`), with the same loss.
    Stops after `max_iters` iterations or once the loss improved by less than
    `tol` relative per iteration over the last 10.
    """
    m = xp()
    theta = [m.asarray(p, dtype=float) for p in potentials]
    z, log_z = calibrate(tree, theta)
    x = list(z)
    fx = loss(x, total)[0]
    alpha = step if step is not None else 1.0 / (total * loss.lipschitz())
    lip = 1.0 / (alpha * total)  # MD's step α on ∇_μ is a = α/N on ∇_p = N·∇_μ, and a = 1/L
    big_a = 0.0
    slack = 1e-12 * (loss.scale + abs(fx))  # rounding of a loss computed as ½μᵀGμ − bᵀμ + c
    history = [fx]
    it = restarts = 0
    for it in range(1, max_iters + 1):
        checkpoint(_CALIBRATION_WORK * tree.size)
        for _ in range(2 * _LINE_SEARCH_HALVINGS):
            a = (1.0 + math.sqrt(1.0 + 4.0 * lip * big_a)) / (2.0 * lip)
            tau = a / (big_a + a)
            y = [(1.0 - tau) * xc + tau * zc for xc, zc in zip(x, z)]
            fy, counts_y, grads_y = loss(y, total)
            direction = loss.direction(grads_y)
            shift = [None if d is None else -(a * total) * d for d in direction]
            theta_new = [t if s is None else t + s for t, s in zip(theta, shift)]
            z_new, log_z_new = calibrate(tree, theta_new)
            x_new = [(1.0 - tau) * xc + tau * zc for xc, zc in zip(x, z_new)]
            f_new, counts_x, _ = loss(x_new, total)
            linear = sum(float(m.vdot(g, b - c)) for g, b, c in zip(grads_y, counts_x, counts_y))
            kl = sum(_vdot(zc, s) for zc, s in zip(z_new, shift) if s is not None) - log_z_new + log_z
            if f_new <= fy + linear + max(kl, 0.0) / (big_a + a) + slack:
                break
            lip *= 2.0
        else:  # no step satisfies the bound: at the optimum to machine precision
            break
        lip *= _RELAX
        if f_new > fx:  # momentum overshot: restart from x (adaptive restart), the step not taken
            theta, z, log_z, big_a = potentials_from_marginals(tree, x), x, 0.0, 0.0
            restarts += 1
            if restarts > max(10, it // 2):  # restarting at every step: at the optimum to rounding
                break
            continue
        x, z, theta, log_z, fx = x_new, z_new, theta_new, log_z_new, f_new
        big_a += a
        history.append(fx)
        if callback is not None:
            callback(it, fx)
        if len(history) > 10 and history[-11] - fx <= 10 * tol * abs(fx):
            break
    return Fit(potentials_from_marginals(tree, x), x, 0.0, fx, 1.0 / (lip * total), it)
