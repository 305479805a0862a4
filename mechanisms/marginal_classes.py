"""All k-way marginals over attributes grouped by size: the residual table by size class, in closed form.

A workload of every k-way marginal (k in `ways`, weight c_k) over a set of attributes is unchanged by
permuting attributes of equal size. Its residuals S fall into classes by their type t (t_i attributes
of the i-th size n_i, of which there are N_i), and all Π_i C(N_i, t_i) residuals of a type share

    p_S = Π_i ((n_i − 1)/n_i)^{t_i},   m_S = Π_i (n_i − 1)^{t_i},
    A_S = m_S Σ_u c_{|t|+|u|} Π_i C(N_i − t_i, u_i) / n_i^{u_i}

(the marginals Q ⊇ S grouped by the type u of Q \\ S, |t| + |u| in `ways`). `all_k_way` builds the
`ResidualTable` with a row per class (a representative residual and its count) and a marginal row per
type of marginal: C(r + K, K) rows for r distinct sizes and K the widest way, whatever the number of
attributes — all ≤3-way marginals of 1,000 attributes of one size are 4 residual classes, not 167M
rows. The closed-form plans (`sum_variance_plan`, `max_variance_plan`) run on it unchanged and give
every residual of a class what the row-by-row table (`ResidualTable.from_codes`) gives it, up to the
order of floating-point sums: by symmetry the max-variance iterates stay equal within classes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import product
from typing import Sequence

import numpy as np
from scipy import sparse

from mechanisms.domain import Domain
from mechanisms.interruption import checkpoint
from mechanisms.residual import ResidualTable


@dataclass
class ResidualClasses(ResidualTable):
    """A `ResidualTable` whose rows are classes of residuals (and of marginals) by their attributes' sizes.

    `types` and `marginal_types` give each row's number of attributes of each size `class_sizes[i]`
    (`class_counts[i]` attributes have that size); `per_cell` and `per_cell_dual` are per class."""

    types: np.ndarray | None = None
    marginal_types: np.ndarray | None = None
    class_sizes: np.ndarray | None = None
    class_counts: np.ndarray | None = None

    @cached_property
    def per_cell(self) -> sparse.csr_matrix:
        """Marginal classes × residual classes: Σ over one marginal's subsets of the class of
        c_Q·p_S/n(Q\\S)² (its weighted per-cell variance per unit of the class' v_S)."""
        return self._incidence(dual=False)

    @cached_property
    def per_cell_dual(self) -> sparse.csr_matrix:
        """Marginal classes × residual classes: Σ over the marginals of the class containing one residual
        of the class of c_Q·p_S/n(Q\\S)² (max-variance's Aᵀλ with λ per marginal, equal within a class)."""
        return self._incidence(dual=True)

    def _incidence(self, dual: bool) -> sparse.csr_matrix:
        at = {tuple(t): j for j, t in enumerate(self.types.tolist())}
        sizes, counts = self.class_sizes.astype(float), self.class_counts.astype(float)
        rows, columns, values = [], [], []
        for q, u in enumerate(self.marginal_types.tolist()):
            checkpoint(float(2 ** sum(u)))
            for t in product(*(range(x + 1) for x in u)):
                j = at.get(t)
                if j is None:  # a residual the table dropped (no dimension)
                    continue
                rest = float(np.prod(sizes ** (np.asarray(u) - t)))
                many = _choose(counts - t, np.asarray(u) - t) if dual else _choose(np.asarray(u, float), t)
                rows.append(q)
                columns.append(j)
                values.append(float(np.prod(many)) * self.marginal_weights[q] * self.cost[j] / rest**2)
        return sparse.csr_matrix((values, (rows, columns)), shape=(len(self.marginal_types), len(self.types)))


def all_k_way(domain: Domain, ways: Sequence[int], weights: Sequence[float] | None = None,
              attributes: Sequence[str] | None = None) -> ResidualClasses:
    """The residual table of every k-way marginal (k in `ways`, weighted `weights[i]` for `ways[i]`, 1 by
    default) over `attributes` (all of the domain's by default), a row per class of residuals."""
    attributes = domain.canonical(domain.attributes if attributes is None else attributes)
    ways = [int(k) for k in ways]
    weights = [1.0] * len(ways) if weights is None else [float(w) for w in weights]
    if len(weights) != len(ways) or len(set(ways)) != len(ways) or any(k < 0 for k in ways):
        raise ValueError("ways must be distinct non-negative widths, with one weight each")
    if any(w <= 0 for w in weights):
        raise ValueError("marginal weights must be positive")
    index = {a: i for i, a in enumerate(domain.attributes)}
    by_size: dict[int, list[int]] = {}
    for a in attributes:
        by_size.setdefault(domain.sizes[index[a]], []).append(index[a])
    sizes = np.asarray(sorted(by_size), dtype=np.int64)
    members = [by_size[n] for n in sizes.tolist()]
    counts = np.asarray([len(m) for m in members], dtype=np.int64)
    widest = max(ways, default=0)
    width = np.zeros(widest + 1)  # c_w: the weight of the marginals of w attributes
    width[ways] = weights
    marginal_types = _types(counts, widest)
    marginal_types = marginal_types[width[marginal_types.sum(axis=1)] > 0]
    types = _types(counts, widest if len(marginal_types) else -1)
    if len(marginal_types):  # only subsets of some marginal
        types = types[types.sum(axis=1) <= marginal_types.sum(axis=1).max()]
    checkpoint(float(len(types) * len(sizes) * (widest + 1) ** 2))
    n = sizes.astype(float)
    # e_j: Σ over the sets R of j attributes outside S of 1/n(R), by type (a product of polynomials in z)
    outside = np.zeros((len(types), widest + 1))
    outside[:, 0] = 1.0
    for i in range(len(sizes)):
        factor = np.stack([_choose(counts[i] - types[:, i], np.full(len(types), u)) / n[i] ** u
                           for u in range(widest + 1)], axis=1)
        outside = np.stack([sum(outside[:, a] * factor[:, j - a] for a in range(j + 1))
                            for j in range(widest + 1)], axis=1)
    size_of = types.sum(axis=1)
    taken = np.concatenate([width, np.zeros(widest + 1)])[size_of[:, None] + np.arange(widest + 1)]
    dim = np.prod((n - 1.0) ** types, axis=1)
    weight = dim * (outside * taken).sum(axis=1)  # A_S = m_S Σ_j c_{|S|+j} e_j
    cost = np.prod(((n - 1.0) / n) ** types, axis=1)
    keep = (weight > 0) & (dim > 0)
    types, weight, cost, dim = types[keep], weight[keep], cost[keep], dim[keep]
    residual_count = np.prod(_choose(counts.astype(float), types), axis=1)
    marginal_count = np.prod(_choose(counts.astype(float), marginal_types), axis=1)
    cells = np.prod(n ** marginal_types, axis=1)
    return ResidualClasses(
        domain, _representatives(types, members, widest), weight, cost, dim,
        _representatives(marginal_types, members, widest), width[marginal_types.sum(axis=1)], cells,
        residual_count, marginal_count, types, marginal_types, sizes, counts)


def _types(counts: np.ndarray, most: int) -> np.ndarray:
    """Every t with t_i ≤ counts[i] and Σ t ≤ most, by Σ t (then in lexicographic order)."""
    out: list[tuple[int, ...]] = [()] if most >= 0 else []
    for cap in counts.tolist():
        out = [t + (x,) for t in out for x in range(min(cap, most - sum(t)) + 1)]
    out.sort(key=lambda t: (sum(t), t))
    return np.asarray(out, dtype=np.int64).reshape(len(out), len(counts))


def _choose(n: np.ndarray, k: np.ndarray) -> np.ndarray:
    """C(n, k) elementwise in floats (exact while the values stay below 2^53); 0 where k > n."""
    n, k = np.broadcast_arrays(np.asarray(n, dtype=float), np.asarray(k, dtype=float))
    out = np.ones(n.shape)
    for j in range(1, int(k.max(initial=0)) + 1):
        out = np.where(k >= j, out * (n - j + 1) / j, out)
    return np.where(k <= n, out, 0.0)


def _representatives(types: np.ndarray, members: list[list[int]], width: int) -> np.ndarray:
    """A clique of each type (the first t_i attributes of each size), ascending, −1 padded to `width`."""
    out = np.full((len(types), width), -1, dtype=np.int64)
    for r, t in enumerate(types.tolist()):
        ids = sorted(i for m, x in zip(members, t) for i in m[:x])
        out[r, :len(ids)] = ids
    return out


__all__ = ["ResidualClasses", "all_k_way"]
