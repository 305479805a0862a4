"""Implicit threshold workloads: every consistent query of each threshold, never materialized.

A threshold (S, f) names k distinct attributes S = (f_1..f_k) and a predicate f
of the k atoms [x_{f_j} = y_j]. Its consistent queries are all target tuples
y in X_{f_1} x ... x X_{f_k} (Avent & Korolova 2023, Def 4.2.4 and Sec 4.2.2),
so a workload of thresholds holds sum_S prod_j |X_{f_j}| queries. A query is
addressed by a global id (an int64 < 2^63); `locate` maps it to (threshold,
local id) and `targets` unravels a local id to its category tuple (C order,
the threshold's attributes in domain order). Nothing is enumerated up front.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb, prod

import numpy as np

from mechanisms.domain import Domain
from mechanisms.rap.multilinear import BooleanFunction


@dataclass(frozen=True)
class Threshold:
    """k distinct attributes (domain order) and a predicate of the atoms [x_{f_j} = y_j]."""

    attributes: tuple[str, ...]
    function: BooleanFunction

    def __post_init__(self) -> None:
        if len(set(self.attributes)) != len(self.attributes):
            raise ValueError("a threshold's attributes must be distinct")
        if self.function.k != len(self.attributes):
            raise ValueError("the predicate must have one atom per attribute")

    @classmethod
    def r_of_k(cls, attributes: tuple[str, ...], r: int) -> "Threshold":
        """At least r of the k conditions x_{f_j} = y_j hold (r = k: a k-way marginal)."""
        return cls(tuple(attributes), BooleanFunction.threshold(len(attributes), r))

    @property
    def k(self) -> int:
        return len(self.attributes)

    @property
    def r(self) -> int | None:
        """r if the predicate is the r-of-k threshold (r = k: a conjunction), else None."""
        for r in range(1, self.k + 1):
            if self.function == BooleanFunction.threshold(self.k, r):
                return r
        return None


class ThresholdWorkload:
    """All consistent queries of a list of thresholds over `domain`, addressed by global id."""

    def __init__(self, domain: Domain, thresholds: list[Threshold]):
        for t in thresholds:
            if domain.canonical(t.attributes) != t.attributes:
                raise ValueError(f"threshold attributes {t.attributes} must be in domain order")
        self.domain = domain
        self.thresholds = list(thresholds)
        self.shapes = [domain.shape(t.attributes) for t in self.thresholds]
        sizes = [prod(s) for s in self.shapes]
        if sum(sizes) >= 2**62:
            raise OverflowError("more than 2^62 consistent queries: split the workload")
        self.offsets = np.concatenate([[0], np.cumsum(np.asarray(sizes, dtype=np.int64))])

    @property
    def n_queries(self) -> int:
        """|Q| = sum over thresholds of the product of their attribute sizes."""
        return int(self.offsets[-1])

    def locate(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(threshold index, local id) of each global id."""
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.n_queries):
            raise IndexError("query id outside the workload")
        which = np.searchsorted(self.offsets, ids, side="right") - 1
        return which, ids - self.offsets[which]

    def targets(self, i: int, local: np.ndarray) -> np.ndarray:
        """The (m x k) category tuples of local ids of threshold i."""
        local = np.asarray(local, dtype=np.int64)
        return np.stack(np.unravel_index(local, self.shapes[i]), axis=1)


def random_thresholds(domain: Domain, count: int, k: int, r: int, seed: int) -> list[Threshold]:
    """`count` distinct uniformly random k-attribute sets, each an r-of-k threshold."""
    d = len(domain)
    if count > comb(d, k):
        raise ValueError(f"only {comb(d, k)} distinct {k}-attribute sets exist, asked for {count}")
    rng = np.random.default_rng(seed)
    chosen: dict[tuple[int, ...], None] = {}
    while len(chosen) < count:
        chosen.setdefault(tuple(sorted(rng.choice(d, size=k, replace=False).tolist())), None)
    return [Threshold.r_of_k(tuple(domain.attributes[i] for i in s), r) for s in chosen]
