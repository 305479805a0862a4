"""The workload IR: blocks of Kronecker-product linear queries over a Domain.

A `Block` is the set of rows produced by one aggregate of one query. It is a
weighted sum of `Term`s; a term maps some attributes to 1-D query matrices and
leaves the others as `Total` (summed over). Group-by attributes carry square
factors (Identity, or Diagonal when a predicate or SUM values restrict them),
so every term of a block has the same rows: one per combination of group
values, in domain order.

`Predicate` is the algebra the compiler uses to turn WHERE/FILTER/CASE logic
into such terms: a signed sum of products of per-attribute indicator vectors
(AND multiplies, NOT is 1 - p, OR is p + q - pq).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from math import prod
from typing import Mapping

import numpy as np

from mechanisms.arrays import to_numpy
from mechanisms.domain import Domain
from mechanisms.matrices import Dense, Diagonal, Identity, Kronecker, Matrix, Sum, Total, Weighted

# Beyond this many product terms a predicate is refused rather than expanded.
MAX_PREDICATE_TERMS = 256


@dataclass(frozen=True)
class Predicate:
    """A signed sum of products of per-attribute vectors: sum_k c_k prod_a v_{k,a}[x_a]."""

    terms: tuple[tuple[float, tuple[tuple[str, tuple[float, ...]], ...]], ...]

    @staticmethod
    def constant(value: float) -> "Predicate":
        return Predicate(((float(value), ()),) if value else ())

    @staticmethod
    def on(attribute: str, vector) -> "Predicate":
        """The per-cell function vector[x_attribute]."""
        return Predicate(((1.0, ((attribute, tuple(float(v) for v in vector)),)),))

    def factors(self) -> list[tuple[float, dict[str, np.ndarray]]]:
        return [(c, {a: np.asarray(v) for a, v in fs}) for c, fs in self.terms]

    @staticmethod
    def _from(items: list[tuple[float, dict[str, np.ndarray]]]) -> "Predicate":
        merged: dict[tuple, float] = {}
        for c, fs in items:
            key = tuple(sorted((a, tuple(float(x) for x in v)) for a, v in fs.items()))
            if any(not any(v) for _, v in key):
                continue  # a factor that is zero everywhere kills the term
            merged[key] = merged.get(key, 0.0) + c
        terms = tuple((c, k) for k, c in merged.items() if c != 0.0)
        if len(terms) > MAX_PREDICATE_TERMS:
            raise OverflowError(
                f"predicate expands to {len(terms)} product terms (limit {MAX_PREDICATE_TERMS})"
            )
        return Predicate(terms)

    def __mul__(self, other: "Predicate") -> "Predicate":
        out = []
        for c1, f1 in self.factors():
            for c2, f2 in other.factors():
                fs = dict(f1)
                for a, v in f2.items():
                    fs[a] = fs[a] * v if a in fs else v
                out.append((c1 * c2, fs))
        return Predicate._from(out)

    def __add__(self, other: "Predicate") -> "Predicate":
        return Predicate._from(self.factors() + other.factors())

    def scale(self, c: float) -> "Predicate":
        return Predicate._from([(c * k, f) for k, f in self.factors()])

    def __sub__(self, other: "Predicate") -> "Predicate":
        return self + other.scale(-1.0)

    def negate(self) -> "Predicate":
        """Logical NOT of an indicator: 1 - p."""
        return Predicate.constant(1.0) - self

    def or_(self, other: "Predicate") -> "Predicate":
        return self + other - self * other

    def attributes(self) -> set[str]:
        return {a for _, fs in self.terms for a, _ in fs}

    def dense(self, attributes: tuple[str, ...], domain: Domain) -> np.ndarray:
        """The function's value on every cell of `attributes` (which must hold all it reads), one axis each."""
        out = np.zeros([domain.size_of(a) for a in attributes])
        for coef, factors in self.factors():
            term = np.asarray(coef, dtype=float)
            for axis, attribute in enumerate(attributes):
                if attribute in factors:
                    shape = [1] * len(attributes)
                    shape[axis] = -1
                    term = term * factors[attribute].reshape(shape)
            out = out + term
        return out


@dataclass(frozen=True)
class Term:
    """coef * (Kronecker product of `factors`), attributes not named being Total."""

    coef: float
    factors: Mapping[str, Matrix]


@dataclass
class Block:
    """The rows of one aggregate: a weighted sum of Kronecker terms over a clique.

    `group_by` are the attributes whose values index the rows; `weight` is the
    importance of this block in the planner's objective. `mapped_rows` names
    attributes outside `group_by` whose factor in every term maps their values
    onto several rows (a public lookup: GROUP BY a looked-up attribute), with
    that number of rows; rows are ordered by attribute in domain order.
    """

    name: str
    group_by: tuple[str, ...]
    terms: list[Term]
    weight: float = 1.0
    mapped_rows: Mapping[str, int] = field(default_factory=dict)
    _fingerprint: dict = field(default_factory=dict, repr=False, compare=False)
    _sensitivity: dict = field(default_factory=dict, repr=False, compare=False)

    def attributes(self, domain: Domain) -> tuple[str, ...]:
        """The clique: every attribute a term touches, plus the group-by ones, in domain order."""
        used = set(self.group_by) | set(self.mapped_rows)
        for t in self.terms:
            used.update(t.factors)
        return domain.canonical(used)

    def num_rows(self, domain: Domain) -> int:
        return prod(domain.size_of(a) for a in self.group_by) * prod(self.mapped_rows.values())

    def term_factors(self, term: Term, domain: Domain, clique: tuple[str, ...]) -> list[Matrix]:
        """One factor per clique attribute (defaults: Identity for group-by, Total otherwise)."""
        out = []
        for a in clique:
            n = domain.size_of(a)
            if a in self.mapped_rows and a not in term.factors:
                raise ValueError(f"block {self.name!r}: a term lacks the mapping factor of {a!r}")
            default = Identity(n) if a in self.group_by else Total(n)
            out.append(term.factors.get(a, default))
        return out

    def matrix(self, domain: Domain, clique: tuple[str, ...] | None = None) -> Matrix:
        """The block as a matrix over the marginal of `clique` (its own clique by default)."""
        clique = clique or self.attributes(domain)
        parts = [
            Weighted(Kronecker(self.term_factors(t, domain, clique)), t.coef) for t in self.terms
        ]
        if not parts:
            rows = self.num_rows(domain)
            return Weighted(Dense(np.zeros((rows, domain.size(clique)))), 0.0)
        return parts[0] if len(parts) == 1 else Sum(parts)

    def is_marginal(self) -> bool:
        """True when the block is exactly the marginal over its group-by attributes."""
        return (
            len(self.terms) == 1
            and self.terms[0].coef == 1.0
            and all(isinstance(f, Identity) for f in self.terms[0].factors.values())
        )

    def sensitivity(self, domain: Domain, p: int) -> float:
        """Largest column Lp norm of the block's matrix: its Lp sensitivity per individual."""
        if (domain, p) not in self._sensitivity:
            self._sensitivity[domain, p] = self.matrix(domain).sensitivity(p) if self.terms else 0.0
        return self._sensitivity[domain, p]

    def fingerprint(self, domain: Domain) -> str:
        """A digest identifying the linear queries of this block (same rows, same matrix)."""
        if domain not in self._fingerprint:
            clique = self.attributes(domain)
            terms = []
            for t in self.terms:
                th = hashlib.sha256(repr(t.coef).encode())
                for a, f in zip(clique, self.term_factors(t, domain, clique)):
                    th.update(a.encode())
                    th.update(_factor_digest(f))
                terms.append(th.hexdigest())
            shape = (clique, self.group_by, sorted(self.mapped_rows.items())) if self.mapped_rows else (clique, self.group_by)
            h = hashlib.sha256(repr(shape).encode())
            for digest in sorted(terms):  # the sum does not depend on the order of its terms
                h.update(digest.encode())
            self._fingerprint[domain] = h.hexdigest()
        return self._fingerprint[domain]


def _factor_digest(f: Matrix) -> bytes:
    if isinstance(f, Identity):
        return f"I{f.shape[0]}".encode()
    if isinstance(f, Diagonal):
        return b"D" + np.ascontiguousarray(to_numpy(f.values), dtype=float).tobytes()
    return b"M" + np.ascontiguousarray(to_numpy(f.dense()), dtype=float).tobytes()


@dataclass
class Workload:
    """A Domain plus the blocks to answer."""

    domain: Domain
    blocks: list[Block]

    def cliques(self) -> list[tuple[str, ...]]:
        """Distinct block cliques, in first-seen order."""
        seen: dict[tuple[str, ...], None] = {}
        for b in self.blocks:
            seen.setdefault(b.attributes(self.domain), None)
        return list(seen)
