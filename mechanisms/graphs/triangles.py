"""Triangle counts of a graph sequence and their node-DP sensitivity (S004 Lemma 6.5.1, 6.5.2(2)).

A triangle {a, b, c} arrives with its last edge, in window max(t_a, t_b, t_c) (an edge arrives with
its later endpoint), and stays: `Triangles` gives f(G_t) per window, and its difference sequence
(`Statistic.differences`) counts the triangles arriving in each window. A directed sequence is counted
on its undirected graph (a reciprocal pair is one edge).

**Sensitivity under a declared bound.** G′ = G − v keeps every triangle of G but those with v, in every
window, so the change u of the difference sequence is ≥ 0 and ‖u‖₁ (and ‖u‖₂ ≤ ‖u‖₁) is the number of
triangles with v: at most C(deg v, 2) ≤ C(D, 2), one pair of v's neighbours each (Lemma 6.5.2(2) with
Lemma 6.5.1, L1367–1376), for one graph and for the whole sequence alike; attained by v joined to D
nodes that are all joined to each other. A directed graph's undirected degree is at most D_in + D_out:
C(D_in + D_out, 2) (the form of Lemma 6.5.4(3); this undirected count is not the seed's).

**No bound after projection.** Forcing the bound by the edge-addition projection (`projection`) is
stable for degrees, not for triangles: removing v can make a later edge fit where it did not, which
then blocks another, so the projected graphs of G and G − v can differ far from v. For D = 2, the
triangles {0, 1, 2} and {9, 10, 11} joined by the edge (2, 11) (nodes in id order) project to both
triangles, and, without node 0, to neither: a change of 2 > C(2, 2) = 1 (`tests/test_triangles.py`).
So `sensitivity(..., projected=True)` refuses.
"""

from __future__ import annotations

from math import comb

import numpy as np

from mechanisms.graphs.sequence import DegreeBound
from mechanisms.graphs.statistics import Sensitivity, Statistic

__all__ = ["Triangles", "triangle_windows"]


def triangle_windows(src: np.ndarray, dst: np.ndarray, windows: np.ndarray) -> np.ndarray:
    """The window each triangle arrives in, one entry per triangle: the latest of its three edges' windows.

    Edges are taken undirected: a pair given twice (both directions) is one edge, at its earlier window."""
    first: dict[tuple[int, int], int] = {}
    for a, b, w in zip(np.asarray(src).tolist(), np.asarray(dst).tolist(), np.asarray(windows).tolist()):
        pair = (a, b) if a < b else (b, a)
        first[pair] = min(w, first.get(pair, w))
    neighbours: dict[int, set[int]] = {}
    for a, b in first:
        neighbours.setdefault(a, set()).add(b)
        neighbours.setdefault(b, set()).add(a)
    found = []
    for (a, b), w in first.items():
        for c in neighbours[a] & neighbours[b]:
            if c > b:  # each triangle once: from its edge between its two smallest nodes
                found.append(max(w, first[(a, c)], first[(b, c)]))
    return np.asarray(found, dtype=np.int64)


class Triangles(Statistic):
    """The number of triangles of each G_t (module doc)."""

    name = "triangles"

    def _values(self, sequence, bound):
        windows = triangle_windows(sequence.src, sequence.dst, sequence.edge_times)
        arrivals = np.bincount(windows, minlength=sequence.horizon + 1)[1:]
        return np.cumsum(arrivals)[:, None]

    def sensitivity(self, bound: DegreeBound, horizon: int = 1, projected: bool = False) -> Sensitivity:
        if horizon < 1:
            raise ValueError("the horizon is at least one window")
        if projected:
            raise ValueError("a projected graph's triangle count has no bound in the degree bound: removing a node "
                             "can change which edges the projection keeps far from it (see the module doc); "
                             "triangles need a declared bound")
        total = comb(bound.edges, 2)
        return Sensitivity(total, float(total))

    def seed_sensitivity(self, bound: DegreeBound) -> int:
        return comb(bound.edges, 2)
