"""BLENDER's client randomizer (seeds/000, Algorithm 2.4 `LocalReport`): two-level GRR over a head list.

The head list is public (discovered by the opt-in group, Algorithm 2.2): queries 0 .. k − 1, the
last of them ⋆ (every query not in the list), and for query i its URLs 0 .. urls[i] − 1, the last
⋆ (every URL of i not in the list). A user's record ⟨q, u⟩ (already mapped to ⋆ where it is not
in the list, lines 9–14) is the flat index offset(q) + u. With probability 1 − t the report is a
uniformly random other query q' with a uniformly random URL of q' (lines 15–19); otherwise q is
kept and, with probability 1 − t_q, its URL is replaced by a uniformly random other URL of q
(lines 20–23). t and t_q are line 4 and 6's

    t = (e^{ε_Q} + (δ_Q/2)(k − 1)) / (e^{ε_Q} + k − 1),  ε_Q = f ε, δ_Q = f δ, and ε_U, δ_U the rest,

(one record per client, m_C = 1), rounded down to a dyadic t/2⁵³ as every truth probability in
this package is. Where every query has the one URL ⋆ (a head list of queries only), the URL level
reveals nothing and the query level gets all of ε and δ. Lemma 2.2.4: (ε, δ)-LDP; with δ = 0 the
likelihood ratio bound e^ε holds exactly (`probability`).
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import ClassVar

from .base import Protocol, _check_size, below, bernoulli


def _truth(epsilon: float, delta: float, k: int) -> Fraction:
    """Line 4/6: the probability of keeping the true item among k, rounded down (1 where k = 1)."""
    if k == 1:
        return Fraction(1)
    return below((math.exp(epsilon) + delta / 2 * (k - 1)) / (math.exp(epsilon) + k - 1))


@dataclasses.dataclass(frozen=True)
class TwoLevelGRR(Protocol):
    """`grr2`: a record ⟨query, URL⟩ of the head list `urls` (URLs per query, ⋆ last at both levels)."""

    name: ClassVar[str] = "grr2"
    urls: tuple = (1,)
    query_share: float = 0.85  # f_C: the fraction of ε (and δ) spent on the query
    delta: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "urls", tuple(self.urls))
        if not self.urls:
            raise ValueError("urls must list the URLs of each query of the head list (at least ⋆)")
        for size in self.urls:
            _check_size("each query's URL count", size, 1)
        if not (isinstance(self.query_share, (int, float)) and 0 < self.query_share <= 1):
            raise ValueError(f"query_share must be in (0, 1], not {self.query_share!r}")
        if not (isinstance(self.delta, (int, float)) and 0 <= self.delta < 1):
            raise ValueError(f"delta must be in [0, 1), not {self.delta!r}")

    @property
    def values(self) -> int:
        return sum(self.urls)

    @property
    def queries(self) -> int:
        """k, the head list's queries (⋆ included)."""
        return len(self.urls)

    @property
    def query_budget(self) -> tuple[float, float]:
        """(ε_Q, δ_Q): all of ε and δ when no query has a URL besides ⋆."""
        share = 1.0 if max(self.urls) == 1 else self.query_share
        return share * self.epsilon, share * self.delta

    @property
    def truth(self) -> Fraction:
        """t: the probability of reporting the true query."""
        epsilon, delta = self.query_budget
        return _truth(epsilon, delta, self.queries)

    def url_truth(self, query: int) -> Fraction:
        """t_q: given the true query is kept, the probability of reporting its true URL."""
        epsilon, delta = self.query_budget
        return _truth(self.epsilon - epsilon, self.delta - delta, self.urls[query])

    def offset(self, query: int) -> int:
        """The flat index of the query's first URL."""
        return sum(self.urls[:query])

    def record(self, value: int) -> tuple[int, int]:
        """(query, URL) of a flat record index."""
        for query, size in enumerate(self.urls):
            if value < size:
                return query, value
            value -= size
        raise ValueError("record index out of the head list")

    def randomize(self, value, rng):
        query, url = self.record(value)
        if not bernoulli(self.truth, rng):
            other = rng.randrange(self.queries - 1)
            other += other >= query
            return {"value": self.offset(other) + rng.randrange(self.urls[other])}
        if self.urls[query] > 1 and not bernoulli(self.url_truth(query), rng):
            other = rng.randrange(self.urls[query] - 1)
            url = other + (other >= url)
        return {"value": self.offset(query) + url}

    def probability(self, payload, value):
        query, url = self.record(value)
        reported, reported_url = self.record(payload["value"])
        t = self.truth
        if reported != query:
            return (1 - t) / (self.queries - 1) / self.urls[reported]
        if self.urls[query] == 1:
            return t
        t_q = self.url_truth(query)
        return t * (t_q if reported_url == url else (1 - t_q) / (self.urls[query] - 1))
