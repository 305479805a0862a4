"""Graph statistics of a sequence, their difference sequences, and node-DP sensitivities.

S004 §6.2.4 (L1243–1247) and §6.5: the edge count, the number of nodes of degree ≥ τ
(highDeg), the degree histogram, and k-star counts — with out-/in-degree versions for
directed graphs (triangles, C(D,2) by Lemma 6.5.2(2): `triangles`). Each is released
through its difference sequence Δ_t = f(G_t) − f(G_{t−1}), f(G_0) = 0 (Algorithm 5,
L1279–1289): T rows of `bins` values, whose prefix sums are f(G_t).

Sensitivity. `sensitivity(bound, horizon)` bounds, over node neighbours G, G′ = G − v of
the declared domain, the change u = Δ(G) − Δ(G′) of the *whole* sequence in the seed's
generalised L1 (L1257) and in L2; `horizon = 1` is one graph (a one-shot release). Only v
and the ≤ N nodes whose counted degree includes an edge with v change (N =
`DegreeBound.neighbours`: D, or D_in for out-degrees); for such a w,
deg_G(w, t) = deg_G′(w, t) + [t ≥ e_w], e_w the window of its edge with v, and every
degree is ≤ B (`DegreeBound.own`). By the triangle inequality ‖u‖ ≤ v's own term + N
neighbours' terms; each class below bounds both terms and says where the bound is
attained (`tests/test_graphs.py` builds those sequences). L2 bounds use the sums P and M
of u's positive and negative entries: ‖u‖₂² ≤ P² + M². The proofs use only that nodes and
edges never leave and that degrees stay within the bound, not when an edge arrives.

Projected graphs (`projected=True`, one graph only): `projection` proves that removing v
changes the other nodes' projected degrees by at most `DegreeBound.edges` in total
(Σ|Δdeg|, and in + out for directed graphs), so N is replaced by that number — a node whose
degree moves by j crosses τ at most once, moves between two bins, and changes C(d, k) by
≤ j·C(B−1, k−1). No horizon-free bound exists for a projected sequence (Lemma 6.4.2).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from math import comb, sqrt

import numpy as np

from mechanisms.graphs.sequence import DEGREE, IN, OUT, DegreeBound, GraphSequence

__all__ = ["DegreeHistogram", "EdgeCount", "HighDegree", "KStars", "Sensitivity", "Statistic"]


@dataclass(frozen=True)
class Sensitivity:
    """The largest change one node makes: generalised L1 (integer) and L2."""

    l1: int
    l2: float


class Statistic(ABC):
    """A statistic f of a graph, evaluated on every G_t of a sequence."""

    name: str

    def bins(self, bound: DegreeBound) -> int:
        return 1

    def values(self, sequence: GraphSequence, bound: DegreeBound) -> np.ndarray:
        """(horizon, bins) integers: f(G_1), …, f(G_T); raises if the sequence breaks `bound`."""
        bound.check(sequence)
        return self._values(sequence, bound)

    def differences(self, sequence: GraphSequence, bound: DegreeBound) -> np.ndarray:
        """(horizon, bins): the difference sequence Δ_t = f(G_t) − f(G_{t−1}) (Algorithm 5)."""
        return np.diff(self.values(sequence, bound), axis=0, prepend=0)

    @abstractmethod
    def _values(self, sequence: GraphSequence, bound: DegreeBound) -> np.ndarray: ...

    @abstractmethod
    def sensitivity(self, bound: DegreeBound, horizon: int = 1, projected: bool = False) -> Sensitivity:
        """The change one node makes: to f(G) (`horizon` 1), or to the whole difference sequence."""

    @abstractmethod
    def seed_sensitivity(self, bound: DegreeBound) -> int:
        """The seed's stated L1 sensitivity of the difference sequence (Table 6.1, Lemmas 6.5.2/6.5.4)."""


def _check(horizon: int, projected: bool) -> None:
    if horizon < 1:
        raise ValueError("the horizon is at least one window")
    if projected and horizon > 1:
        raise ValueError("a projected sequence has no horizon-free sensitivity (S004 Lemma 6.4.2, L1317): "
                         "release each projected graph with its one-graph sensitivity and compose")


class EdgeCount(Statistic):
    """|E_t|. Each edge of v arrives in one window and stays, so u ≥ 0 with ‖u‖₁ = deg v ≤
    `DegreeBound.edges` (D: Lemma 6.5.2(1); D_in + D_out: Lemma 6.5.4(1), L1371–1386), the same
    for one graph, and L2 = L1; attained by v arriving last with that many edges. A projected
    graph loses between 0 and deg_G̃(v) edges (`projection`)."""

    name = "edges"

    def _values(self, sequence, bound):
        return np.cumsum(np.bincount(sequence.edge_times, minlength=sequence.horizon + 1)[1:])[:, None]

    def sensitivity(self, bound, horizon=1, projected=False):
        _check(horizon, projected)
        return Sensitivity(bound.edges, float(bound.edges))

    def seed_sensitivity(self, bound):
        return bound.edges


class DegreeStatistic(Statistic):
    """A sum over the nodes present of a function of their degree of one `kind`."""

    def __init__(self, kind: str = DEGREE):
        if kind not in (DEGREE, OUT, IN):
            raise ValueError(f"unknown degree kind {kind!r}")
        self.kind = kind

    def _prefix(self) -> str:
        return "" if self.kind == DEGREE else f"{self.kind}_"

    def _values(self, sequence, bound):
        degrees = sequence.degrees(self.kind)
        return self._count(degrees, sequence.present, bound.own(self.kind))

    @abstractmethod
    def _count(self, degrees: np.ndarray, present: np.ndarray, own: int) -> np.ndarray: ...

    def sensitivity(self, bound, horizon=1, projected=False):
        _check(horizon, projected)
        own = bound.own(self.kind)
        changed = bound.edges if projected else bound.neighbours(self.kind)
        return self._one_graph(own, changed) if horizon == 1 else self._sequence(own, changed)

    @abstractmethod
    def _one_graph(self, own: int, changed: int) -> Sensitivity: ...

    @abstractmethod
    def _sequence(self, own: int, changed: int) -> Sensitivity: ...


class HighDegree(DegreeStatistic):
    """highDeg_τ: the nodes of degree ≥ τ (S004 §6.4.1.1; highOutDeg_τ with `OUT`, §6.4.2.1).

    One graph: v, and each neighbour crossing τ once: ≤ 1 + N (τ ≥ 1). Whole sequence: v adds
    +1 once, the window its degree reaches τ; a neighbour's indicator turns on at a_w in G and
    at b_w ≥ a_w in G′ (if ever): +1 and −1, so L1 ≤ 1 + 2N (Lemma 6.4.1, L1309; 6.4.4,
    L1335), P ≤ 1 + N, M ≤ N. At τ = B a neighbour never reaches τ in G′ (its degree there is
    ≤ B − 1): ≤ 1 + N. τ = 0 counts the nodes (v alone: 1); τ > B counts none.
    Attained for 1 ≤ τ < B: v and its N neighbours arrive in window 1, each neighbour with
    τ − 1 other edges, and each gains one more edge in window 2.
    """

    def __init__(self, tau: int, kind: str = DEGREE):
        super().__init__(kind)
        if tau < 0:
            raise ValueError("τ must be ≥ 0")
        self.tau = tau
        self.name = f"high_{self._prefix()}degree(tau={tau})"

    def _count(self, degrees, present, own):
        return ((degrees >= self.tau) & present).sum(axis=1)[:, None]

    def _weights(self, own: int) -> tuple[int, int, int]:
        """(v's term, a neighbour's term for one graph, a neighbour's term for the sequence)."""
        if self.tau > own:
            return 0, 0, 0
        if self.tau == 0:
            return 1, 0, 0
        return 1, 1, 1 if self.tau == own else 2

    def _one_graph(self, own, changed):
        mine, each, _ = self._weights(own)
        return Sensitivity(mine + changed * each, float(mine + changed * each))

    def _sequence(self, own, changed):
        mine, _, each = self._weights(own)
        falls = changed if each == 2 else 0
        return Sensitivity(mine + changed * each, sqrt((mine + changed * min(each, 1)) ** 2 + falls ** 2))

    def seed_sensitivity(self, bound):
        return 2 * bound.neighbours(self.kind) + 1


class DegreeHistogram(DegreeStatistic):
    """hist: the number of nodes of each degree d = 0..B (S004 §6.4.1.2; histOut with `OUT`).

    Bin 0 is kept (the bins sum to |V_t|); the seed's histogram is over d ≥ 1 (L1257), and
    dropping a bin only lowers every bound below.
    One graph: v leaves its bin, each neighbour moves to the next: L1 ≤ 1 + 2N, P ≤ 1 + N, M ≤ N.
    Whole sequence: write x's term of Δ_t as e_{deg_t x} − e_{deg_{t−1} x} (0 before it arrives).
    v: +1 on arrival, then 2 in each window its degree grows, at most B of them: ≤ 1 + 2B. A
    neighbour w with b = deg_G′(w, e_w): at e_w the two terms differ by e_{b+1} − e_b (2,
    whatever came before); later, in a window where deg_G′ w moves a → a′, by
    e_{a′+1} − e_{a+1} − e_{a′} + e_a (≤ 4), and that happens in ≤ B − 1 − b windows since
    deg_G′ w ≤ B − 1: ≤ 4B − 2. So L1 ≤ 1 + 2B + N(4B − 2): 4D² + 1 undirected, below
    Lemma 6.4.3's 4D² + 2D + 1 (L1325), and 4D_inD_out + 2D_out − 2D_in + 1 for out-degrees,
    below Lemma 6.4.5's 4D_outD_in + 2D_out + 1 (L1341): the lemmas count 4B per neighbour,
    but the edge with v is one of its ≤ B degree steps. Attained: v arrives alone; one
    neighbour per window joins it with no other edge, then gains B − 1 edges in B − 1 later
    windows. L2: the bins of u_t sum to the change of |V_t|, [t = v.time], so P − M = 1 and
    P + M ≤ L1; also ‖u‖₂² ≤ ‖u‖∞‖u‖₁ with every entry ≤ 1 + 2N.
    """

    def __init__(self, kind: str = DEGREE):
        super().__init__(kind)
        self.name = f"{self._prefix()}degree_histogram"

    def bins(self, bound):
        return bound.own(self.kind) + 1

    def _count(self, degrees, present, own):
        return np.stack([np.bincount(d[p], minlength=own + 1) for d, p in zip(degrees, present)])

    def _one_graph(self, own, changed):
        return Sensitivity(1 + 2 * changed, sqrt((1 + changed) ** 2 + changed**2))

    def _sequence(self, own, changed):
        l1 = 1 + 2 * own + changed * (4 * own - 2) if own else 1
        return Sensitivity(l1, min(sqrt((l1 * l1 + 1) / 2), sqrt(l1 * (1 + 2 * changed))))

    def seed_sensitivity(self, bound):
        own, others = bound.own(self.kind), bound.neighbours(self.kind)
        return 4 * own * others + 2 * own + 1


class KStars(DegreeStatistic):
    """k-stars: Σ_x C(deg x, k) — a centre and k of its edges (S004 §6.5; out-/in-k-stars, Table 6.3).

    The k-stars of G′ are those of G without v; each arrives in the window of its last edge
    and stays, so u ≥ 0 (L2 ≤ L1) and ‖u‖₁ is the number of k-stars with v:
    C(deg v, k) + Σ_w C(deg w − 1, k − 1) ≤ C(B, k) + N·C(B − 1, k − 1) (Lemma 6.5.1/6.5.2(3);
    6.5.3/6.5.4(4–5), L1367–1390), for one graph too; attained by v arriving last, joined to N
    nodes of degree B − 1.
    """

    def __init__(self, k: int, kind: str = DEGREE):
        super().__init__(kind)
        if k < 1:
            raise ValueError("k must be ≥ 1")
        self.k = k
        self.name = f"{self._prefix()}{k}_stars"

    def _count(self, degrees, present, own):
        table = np.array([comb(d, self.k) for d in range(own + 1)], dtype=np.int64)
        return (table[degrees] * present).sum(axis=1)[:, None]

    def _one_graph(self, own, changed):
        total = comb(own, self.k) + changed * comb(max(own - 1, 0), self.k - 1)
        return Sensitivity(total, float(total))

    _sequence = _one_graph

    def seed_sensitivity(self, bound):
        own, others = bound.own(self.kind), bound.neighbours(self.kind)
        return others * comb(max(own - 1, 0), self.k - 1) + comb(own, self.k)
