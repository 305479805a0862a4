"""Boolean predicates over k atoms and their multilinear extensions (RAP's surrogate queries).

An atom is a 0/1 per-record condition on one attribute (x_f = y for the one-hot
coordinate of y, or x_f in a set). A predicate f: {0,1}^k -> {0,1} of k atoms
has a unique multilinear polynomial agreeing with it on the cube,

    f(z) = sum_S g_S prod_{j in S} z_j,        g = Moebius transform of f's truth table,

which is the "inclusion-exclusion" form of the r-of-k threshold
(g_S = (-1)^{|S|-r} C(|S|-1, |S|-r) for |S| >= r, 0 otherwise) and the product
query prod_j z_j for a conjunction. Evaluated on relaxed (fractional) atoms,
z_j = <x_f, v_j>, it is the probability that f holds when each atom is an
independent Bernoulli(z_j): exactly the expectation of f under a product
distribution, so on a mixture of product distributions (RAP's D') it answers
the statistical query exactly, and on one-hot records it is f itself.

The same polynomial can be written in the complemented atoms w_j = 1 - z_j
("negation trick"): f(z) = sum_S h_S prod_{j in S} (1 - z_j) with h the
Moebius transform of S -> f(complement of S). `expansion` picks whichever basis
has fewer terms (1-of-k has 2^k - 1 terms in z but 2 in 1 - z).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

# Truth tables are enumerated (2^k entries); beyond this many atoms a predicate is refused.
MAX_ATOMS = 12


@dataclass(frozen=True)
class BooleanFunction:
    """f: {0,1}^k -> {0,1} by its truth table; bit j of an index is the value of atom j."""

    k: int
    table: tuple[int, ...]

    def __post_init__(self) -> None:
        if not 0 <= self.k <= MAX_ATOMS:
            raise ValueError(f"a predicate may combine at most {MAX_ATOMS} atoms, got {self.k}")
        if len(self.table) != 1 << self.k or any(v not in (0, 1) for v in self.table):
            raise ValueError("the truth table must hold 2^k entries in {0, 1}")

    @classmethod
    def of(cls, k: int, rule: Callable[[int], bool]) -> "BooleanFunction":
        """The predicate whose value on the atom bitmask `mask` is rule(mask)."""
        if not 0 <= k <= MAX_ATOMS:
            raise ValueError(f"a predicate may combine at most {MAX_ATOMS} atoms, got {k}")
        return cls(k, tuple(int(bool(rule(mask))) for mask in range(1 << k)))

    @classmethod
    def threshold(cls, k: int, r: int) -> "BooleanFunction":
        """At least r of the k atoms hold (r = k: conjunction, r = 1: disjunction)."""
        if not 1 <= r <= k:
            raise ValueError(f"an r-of-k threshold needs 1 <= r <= k, got r={r}, k={k}")
        return cls.of(k, lambda mask: mask.bit_count() >= r)

    def complemented(self) -> "BooleanFunction":
        """S -> f(complement of S): f read on the negated atoms."""
        full = (1 << self.k) - 1
        return BooleanFunction(self.k, tuple(self.table[mask ^ full] for mask in range(1 << self.k)))

    def moebius(self) -> dict[int, int]:
        """The nonzero integer coefficients g_S (S as a bitmask) of f = sum_S g_S prod_{j in S} z_j."""
        g = list(self.table)
        for j in range(self.k):
            bit = 1 << j
            for mask in range(1 << self.k):
                if mask & bit:
                    g[mask] -= g[mask ^ bit]
        return {mask: c for mask, c in enumerate(g) if c}

    def expansion(self) -> tuple[bool, dict[int, int]]:
        """(negated, coefficients): the shorter of the expansions in z and in 1 - z."""
        plain, negated = self.moebius(), self.complemented().moebius()
        return (True, negated) if len(negated) < len(plain) else (False, plain)
