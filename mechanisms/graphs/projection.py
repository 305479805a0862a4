"""Degree-bounding projection by edge addition in arrival order (S004 L1313, after Day–Li–Lyu [35]).

The seed's description (L1313): given a bound D̃ and an ordering of the nodes, keep every
node; take the edges in the order the node ordering induces, and add an edge if and only
if that does not push either endpoint's degree above D̃. Here the nodes are ordered by
arrival (window, then id) and an edge by (its later endpoint, its earlier endpoint) — so
edges are taken in arrival order, the "easy adaptation to the online setting" of L1315.
A directed edge s → d is kept iff out(s) < D̃_out and in(d) < D̃_in.

Three properties (tested in `tests/test_graphs.py`):

1. Online. An edge's fate depends only on edges before it, so the projection of G_t is the
   projection of G_T restricted to windows ≤ t: one pass projects the whole sequence, and a
   window once released never changes.
2. Identity on bounded sequences. If G already meets the bound, each edge finds both
   endpoints below it (their projected degrees count only other edges of theirs), so
   nothing is dropped.
3. Stability for one graph. Let G′ = G − v and project both in the same order. Write
   δ(x) = deg_G̃(x) − deg_G̃′(x) for x ≠ v and Φ = Σ_{x≠v} |δ(x)|, and follow the two runs
   edge by edge. An edge at v exists in G only; kept, it raises one δ by 1: Φ grows by ≤ 1,
   at most deg_G̃(v) ≤ D̃ times. An edge (a, b) away from v is in both runs; if both keep or
   both drop it nothing changes; if only G keeps it, G′ found an endpoint, say a, full
   while G did not, so δ(a) < 0 and keeping raises δ(a) and δ(b) by 1: |δ(a)| falls by 1,
   |δ(b)| rises by ≤ 1, Φ does not grow (symmetrically if only G′ keeps it). Hence, at
   every point of the order, Φ ≤ deg_G̃(v) ≤ D̃. For directed graphs the same walk on
   Σ|δ_out| + Σ|δ_in| gives ≤ in_G̃(v) + out_G̃(v) ≤ D̃_in + D̃_out (a disagreement clears the
   deficit at one end and may open one at the other end, in the other kind).
   So f(G̃) moves by at most the one-graph sensitivities of `statistics` with N replaced by
   D̃ (or D̃_in + D̃_out): edges by deg_G̃(v) (|E| − |E′| = (deg_G̃ v + Σδ)/2 ∈ [0, deg_G̃ v]),
   highDeg by 1 + Φ, the histogram by 1 + 2Φ, k-stars by C(B̃, k) + Φ·C(B̃−1, k−1) —
   `Statistic.sensitivity(bound, 1, projected=True)`.

What it does not give: a horizon-free bound on the projected *difference sequence*. The
deficit Φ can move along a path at every window (keep, drop, keep, … down a chain of
later arrivals), so the projected statistics of G and G′ can disagree anew at each window:
S004 Lemma 6.4.2 (L1317) shows ≥ D̃·T for highDeg, and a chain of arrivals does it for the
edge count at D̃ = 1 (the test). A continual release of projected statistics must pay per
window (composition: COMPOSE-PROJECTION, §6.6.1.1), which is why SENSDIFF needs the
declared bound of Def 6.2.1 instead.
"""

from __future__ import annotations

import numpy as np

from mechanisms.graphs.sequence import DegreeBound, GraphSequence

__all__ = ["project"]


def project(sequence: GraphSequence, bound: DegreeBound) -> GraphSequence:
    """The sequence with the edges the projection keeps (all nodes kept); it meets `bound`."""
    if sequence.directed != bound.directed:
        raise ValueError("the bound and the sequence disagree on being directed")
    rank = np.empty(sequence.nodes, dtype=np.int64)
    rank[np.lexsort((np.arange(sequence.nodes), sequence.times))] = np.arange(sequence.nodes)
    later = np.maximum(rank[sequence.src], rank[sequence.dst])
    earlier = np.minimum(rank[sequence.src], rank[sequence.dst])
    if bound.directed:  # out-degrees at the source end, in-degrees at the destination end
        at_src, at_dst = [0] * sequence.nodes, [0] * sequence.nodes
        cap_src, cap_dst = bound.out_degree, bound.in_degree
    else:  # one degree count for both ends
        at_src = at_dst = [0] * sequence.nodes
        cap_src = cap_dst = bound.degree
    order = np.lexsort((earlier, later))
    kept = []
    for e, s, d in zip(order.tolist(), sequence.src[order].tolist(), sequence.dst[order].tolist()):
        if at_src[s] < cap_src and at_dst[d] < cap_dst:  # plain lists: this loop is the projection's cost
            kept.append(e)
            at_src[s] += 1
            at_dst[d] += 1
    keep = np.zeros(sequence.src.size, dtype=bool)
    keep[kept] = True
    return GraphSequence(sequence.times, sequence.src[keep], sequence.dst[keep], sequence.horizon,
                         sequence.directed)
