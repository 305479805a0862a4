"""Explicit surrogate queries for the relaxed projection: polynomials in linear atoms.

Every query RAP fits is a sum of product terms over *atoms*, an atom being a
linear function <x_a, v> of one attribute block of a relaxed row:

- a consistent query of an r-of-k threshold: the multilinear expansion of the
  predicate (inclusion-exclusion, or its negated form on the atoms 1 - x_{f,y},
  which on the simplex is <x_f, 1 - e_y>), one atom per threshold attribute;
- a row of a workload `Block`: each Kronecker term is a product of its factors'
  rows (e_v for a GROUP BY value, a predicate's indicator vector otherwise).

Queries with the same term pattern form a `QueryGroup`; the answer of a query on
D' is the mean over rows of its polynomial. Values and gradients are written out
by hand (products, and leave-one-out products for the gradient) on the array
module, so the same code runs on NumPy or CuPy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mechanisms.arrays import to_numpy, xp
from mechanisms.matrices import Diagonal, Identity, Ones
from mechanisms.rap.encoding import OneHot
from mechanisms.rap.evaluation import positions
from mechanisms.rap.workloads import Threshold
from mechanisms.workload import Block

Terms = tuple[tuple[float, tuple[int, ...]], ...]


@dataclass
class QueryGroup:
    """Queries sharing one polynomial: sum_t coef_t prod_{s in slots_t} atom[query, s]."""

    terms: Terms
    atoms: np.ndarray  # (queries x slots) ids into the QuerySet's atom table
    index: np.ndarray  # position of each query in the QuerySet's answer vector
    _scatter: tuple | None = field(default=None, repr=False)

    def scatter_plan(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(slot order, segment starts, atom ids) to sum gradient slots (slot-major) by atom."""
        if self._scatter is None:
            flat = self.atoms.T.ravel()
            order = np.argsort(flat, kind="stable")
            ids, starts = np.unique(flat[order], return_index=True)
            self._scatter = (order, starts, ids)
        return self._scatter


@dataclass
class QuerySet:
    """A batch of surrogate queries over deduplicated atoms; queries with equal terms share a group."""

    encoding: OneHot
    atom_attribute: list[str] = field(default_factory=list)
    atom_vector: list[np.ndarray] = field(default_factory=list)
    groups: dict[Terms, QueryGroup] = field(default_factory=dict)
    size: int = 0
    _ids: dict = field(default_factory=dict, repr=False)
    _layout: list | None = field(default=None, repr=False)

    # --- building -----------------------------------------------------------------
    def atom(self, attribute: str, vector: np.ndarray) -> int:
        vector = np.asarray(vector, dtype=float)
        key = (attribute, vector.tobytes())
        if key not in self._ids:
            self._ids[key] = len(self.atom_attribute)
            self.atom_attribute.append(attribute)
            self.atom_vector.append(vector)
            self._layout = None
        return self._ids[key]

    def add_group(self, terms: Terms, atoms: np.ndarray) -> np.ndarray:
        """Append queries with this pattern; returns their positions in the answer vector."""
        atoms = np.asarray(atoms, dtype=np.int64).reshape(len(atoms), -1)
        index = np.arange(self.size, self.size + len(atoms))
        self.size += len(atoms)
        old = self.groups.get(terms)
        if old is None:
            self.groups[terms] = QueryGroup(terms, atoms, index)
        else:
            self.groups[terms] = QueryGroup(terms, np.concatenate([old.atoms, atoms]), np.concatenate([old.index, index]))
        return index

    def add_threshold(self, threshold: Threshold, targets: np.ndarray) -> np.ndarray:
        """Consistent queries of a threshold (targets: m x k category tuples)."""
        negated, coefficients = threshold.function.expansion()
        terms = tuple((float(c), positions(mask, threshold.k)) for mask, c in coefficients.items())
        atoms = np.empty(np.shape(targets), dtype=np.int64)
        for j, a in enumerate(threshold.attributes):
            size = self.encoding.domain.size_of(a)
            for y in np.unique(targets[:, j]):
                v = np.zeros(size)
                v[y] = 1.0
                atoms[targets[:, j] == y, j] = self.atom(a, 1.0 - v if negated else v)
        return self.add_group(terms, atoms)

    def add_block(self, block: Block, rows: np.ndarray) -> np.ndarray:
        """Rows of a workload block (row ids in GROUP BY value order)."""
        domain = self.encoding.domain
        group = block.group_by
        rows = np.asarray(rows, dtype=np.int64)
        values = np.stack(np.unravel_index(rows, domain.shape(group)), axis=1) if group else np.zeros((len(rows), 0), dtype=np.int64)
        terms, columns = [], []
        for term in block.terms:
            slots = []
            for a in domain.canonical(set(term.factors) | set(group)):
                f = term.factors.get(a, Identity(domain.size_of(a)))
                if isinstance(f, Ones):
                    continue  # a total is 1 on every simplex row
                if a in group:
                    scale = np.asarray(to_numpy(f.values), dtype=float) if isinstance(f, Diagonal) else np.ones(f.shape[0])
                    eye = np.eye(domain.size_of(a))
                    columns.append([self.atom(a, scale[v] * eye[v]) for v in values[:, group.index(a)]])
                else:
                    columns.append([self.atom(a, np.asarray(to_numpy(f.dense()), dtype=float).ravel())] * len(rows))
                slots.append(len(columns) - 1)
            terms.append((float(term.coef), tuple(slots)))
        atoms = np.asarray(columns, dtype=np.int64).T if columns else np.zeros((len(rows), 0), dtype=np.int64)
        return self.add_group(tuple(terms), atoms)

    # --- evaluation -------------------------------------------------------------
    @property
    def attributes(self) -> tuple[str, ...]:
        return self.encoding.domain.canonical(self.atom_attribute)

    def _atom_layout(self, dtype) -> list:
        """Per attribute: (column block, atom ids, stacked vectors t x u) in the array module."""
        if self._layout is None or self._layout[0][2].dtype != dtype:
            x = xp()
            self._layout = []
            for a in self.attributes:
                ids = np.asarray([i for i, b in enumerate(self.atom_attribute) if b == a])
                vectors = np.stack([self.atom_vector[i] for i in ids], axis=1)
                self._layout.append((self.encoding.block(a), x.asarray(ids), x.asarray(vectors, dtype=dtype)))
        return self._layout

    def _atoms(self, relaxed):
        """Atom values, atom-major: Z (number of atoms x n') on the relaxed data."""
        z = xp().empty((len(self.atom_attribute), relaxed.shape[0]), dtype=relaxed.dtype)
        for cols, ids, vectors in self._atom_layout(relaxed.dtype):
            z[ids] = vectors.T @ relaxed[:, cols].T
        return z

    def answers(self, relaxed):
        """Normalized answers of every query on the relaxed data (array module)."""
        x = xp()
        z = self._atoms(relaxed)
        out = x.zeros(self.size, dtype=relaxed.dtype)
        for g in self.groups.values():
            out[x.asarray(g.index)] = _polynomial(g.terms, z[x.asarray(g.atoms.T)]).mean(axis=-1)
        return out

    def loss_and_gradient(self, relaxed, targets, weights):
        """Weighted mean squared error (1/m) sum_i w_i (q̂_i - ã_i)^2 and its gradient in D'."""
        x = xp()
        n_rows = relaxed.shape[0]
        z = self._atoms(relaxed)
        dz = x.zeros_like(z)
        loss = 0.0
        for g in self.groups.values():
            index = x.asarray(g.index)
            slots = z[x.asarray(g.atoms.T)]  # s x m_g x n'
            residual = _polynomial(g.terms, slots).mean(axis=-1) - targets[index]
            loss += float((weights[index] * residual**2).sum())
            scale = (2.0 / (self.size * n_rows)) * weights[index] * residual
            _scatter_rows(dz, g.scatter_plan(), _polynomial_gradient(g.terms, slots) * scale[None, :, None])
        grad = x.zeros_like(relaxed)
        for cols, ids, vectors in self._atom_layout(relaxed.dtype):
            grad[:, cols] = (vectors @ dz[ids]).T
        return loss / max(self.size, 1), grad


def _polynomial(terms: Terms, slots):
    """sum_t c_t prod_{s in t} slots[s] (slots: s x ...)."""
    out = xp().zeros(slots.shape[1:], dtype=slots.dtype)
    for c, which in terms:
        p = c
        for s in which:
            p = p * slots[s]
        out += p
    return out


def _polynomial_gradient(terms: Terms, slots):
    """d/d slots[s] of the polynomial: sum over terms holding s of c_t times the other factors."""
    x = xp()
    out = x.zeros_like(slots)
    for c, which in terms:
        # leave-one-out products from prefix and suffix products
        prefix = [None] * (len(which) + 1)
        suffix = [None] * (len(which) + 1)
        for i, s in enumerate(which):
            prefix[i + 1] = slots[s] if prefix[i] is None else prefix[i] * slots[s]
        for i in range(len(which) - 1, -1, -1):
            s = which[i]
            suffix[i] = slots[s] if suffix[i + 1] is None else suffix[i + 1] * slots[s]
        for i, s in enumerate(which):
            left, right = prefix[i], suffix[i + 1]
            others = left if right is None else (right if left is None else left * right)
            out[s] += c if others is None else c * others
    return out


def _scatter_rows(dz, plan: tuple[np.ndarray, np.ndarray, np.ndarray], dslots) -> None:
    """dz[atoms[q, s]] += dslots[s, q] for every (q, s), repeated atoms summed (atom-major rows)."""
    x = xp()
    order, starts, ids = plan
    rows = dslots.reshape(-1, dslots.shape[-1])[x.asarray(order)]
    if x is np:
        sums = np.add.reduceat(rows, starts, axis=0)
    else:  # CuPy has no reduceat: differences of a float64 running sum
        run = x.cumsum(rows.astype(x.float64), axis=0)
        ends = x.asarray(np.append(starts[1:], rows.shape[0]) - 1)
        sums = run[ends] - x.concatenate([x.zeros((1, run.shape[1])), run[ends[:-1]]], axis=0)
    dz[x.asarray(ids)] += sums.astype(dz.dtype)
