"""Node-DP graph statistics (issue 20, item 4): statistics against networkx, the sensitivity
bounds against exhaustive node removal on random bounded sequences (and the sequences that
attain them), the projection's bound, online consistency, one-graph stability and its
instability over a sequence (S004 Lemma 6.4.2), the generators' parameters, and the
release through `mechanisms.continual`.
"""

from __future__ import annotations

from math import comb

import networkx as nx
import numpy as np
import pytest

from mechanisms.continual import CAUSAL, identity
from mechanisms.graphs import (
    DEGREE,
    IN,
    OUT,
    DegreeBound,
    DegreeHistogram,
    EdgeCount,
    GraphSequence,
    HighDegree,
    KStars,
    emit,
    node_release,
    project,
    synthetic_one,
    synthetic_two,
)
from mechanisms.measurement import GAUSSIAN, LAPLACE
from mechanisms.noise import RandomSource

UNDIRECTED = [DegreeBound(1), DegreeBound(2), DegreeBound(3)]
DIRECTED = [DegreeBound(in_degree=1, out_degree=2), DegreeBound(in_degree=2, out_degree=1),
            DegreeBound(in_degree=2, out_degree=2)]


def statistics(bound: DegreeBound) -> list:
    kinds = (OUT, IN) if bound.directed else (DEGREE,)
    out = [EdgeCount()]
    for kind in kinds:
        own = bound.own(kind)
        out += [HighDegree(tau, kind) for tau in range(own + 2)]
        out += [DegreeHistogram(kind)] + [KStars(k, kind) for k in (1, 2, 3)]
    return out


def random_sequence(rng, nodes: int, horizon: int, density: float, directed: bool) -> GraphSequence:
    pairs = [(a, b) for a in range(nodes) for b in range(nodes) if (a != b if directed else a < b)]
    chosen = [p for p in pairs if rng.random() < density]
    src, dst = (np.array([p[i] for p in chosen], dtype=np.int64) for i in (0, 1))
    return GraphSequence(rng.integers(1, horizon + 1, nodes), src, dst, horizon, directed)


def bounded_sequences(bound: DegreeBound, count: int, seed: int = 0):
    """Random sequences in the declared domain: projections of random graphs (dense and sparse)."""
    rng = np.random.default_rng(seed)
    for i in range(count):
        yield project(random_sequence(rng, 9, 5, (0.15, 0.3, 0.6)[i % 3], bound.directed), bound)


def snapshot(sequence: GraphSequence, t: int) -> nx.Graph:
    graph = nx.DiGraph() if sequence.directed else nx.Graph()
    graph.add_nodes_from(np.flatnonzero(sequence.times <= t).tolist())
    keep = sequence.edge_times <= t
    graph.add_edges_from(zip(sequence.src[keep].tolist(), sequence.dst[keep].tolist()))
    return graph


def networkx_value(statistic, graph: nx.Graph, own: int) -> np.ndarray:
    if isinstance(statistic, EdgeCount):
        return np.array([graph.number_of_edges()])
    degree = {DEGREE: graph.degree, OUT: getattr(graph, "out_degree", None),
              IN: getattr(graph, "in_degree", None)}[statistic.kind]
    degrees = [d for _, d in degree]
    if isinstance(statistic, HighDegree):
        return np.array([sum(d >= statistic.tau for d in degrees)])
    if isinstance(statistic, KStars):
        return np.array([sum(comb(d, statistic.k) for d in degrees)])
    if statistic.kind == DEGREE:
        found = nx.degree_histogram(graph)
    else:
        found = np.bincount(np.asarray(degrees, dtype=np.int64), minlength=1).tolist()
    return np.pad(found, (0, own + 1 - len(found)))


@pytest.mark.parametrize("bound", [DegreeBound(3), DegreeBound(in_degree=2, out_degree=3)], ids=str)
def test_statistics_match_networkx(bound):
    for sequence in bounded_sequences(bound, 12, seed=1):
        for statistic in statistics(bound):
            values = statistic.values(sequence, bound)
            own = bound.own(getattr(statistic, "kind", OUT if bound.directed else DEGREE))
            for t in range(1, sequence.horizon + 1):
                np.testing.assert_array_equal(values[t - 1], networkx_value(statistic, snapshot(sequence, t), own))
            np.testing.assert_array_equal(np.cumsum(statistic.differences(sequence, bound), axis=0), values)


def test_coarser_windows_are_every_kth_graph():
    sequence, bound = next(bounded_sequences(DegreeBound(3), 1)), DegreeBound(3)
    sequence = GraphSequence(sequence.times * 2, sequence.src, sequence.dst, 10)
    for every in (2, 5):
        coarse = sequence.coarsened(every)
        assert coarse.horizon == 10 // every
        for statistic in statistics(bound):
            np.testing.assert_array_equal(statistic.values(coarse, bound),
                                          statistic.values(sequence, bound)[every - 1 :: every])


def test_a_broken_bound_is_refused():
    sequence = GraphSequence([1, 1, 1], [0, 0], [1, 2], 1)
    with pytest.raises(ValueError, match="declared bound"):
        EdgeCount().values(sequence, DegreeBound(1))


def _change(statistic, sequence, neighbour, bound, horizon, values=None):
    """u for the whole difference sequence (horizon > 1), or the worst single graph's change."""
    values = statistic.values(sequence, bound) if values is None else values
    gaps = values - statistic.values(neighbour, bound)
    if horizon > 1:
        return np.diff(gaps, axis=0, prepend=0).ravel()
    return gaps[np.argmax(np.abs(gaps).sum(axis=1))]


@pytest.mark.parametrize("bound", UNDIRECTED + DIRECTED, ids=str)
def test_sensitivity_is_never_exceeded(bound):
    """Every node of random bounded sequences removed in turn: ‖u‖₁, ‖u‖₂ within the stated bounds."""
    found = {}
    for sequence in bounded_sequences(bound, 50):
        values = {statistic: statistic.values(sequence, bound) for statistic in statistics(bound)}
        for node in range(sequence.nodes):
            neighbour = sequence.without(node)
            for statistic, mine in values.items():
                for horizon in (1, sequence.horizon):
                    u = _change(statistic, sequence, neighbour, bound, horizon, mine)
                    stated = statistic.sensitivity(bound, horizon)
                    assert np.abs(u).sum() <= stated.l1, (statistic.name, horizon)
                    assert np.sqrt((u.astype(float) ** 2).sum()) <= stated.l2 + 1e-9, (statistic.name, horizon)
                    key = (statistic.name, horizon > 1)
                    found[key] = max(found.get(key, 0), int(np.abs(u).sum()))
    for statistic in statistics(bound):  # the seed's stated bounds hold too, and ours are never above them
        assert statistic.sensitivity(bound, 2).l1 <= statistic.seed_sensitivity(bound)
        assert found[(statistic.name, True)] <= statistic.seed_sensitivity(bound)


class Builder:
    """A sequence built node by node; `link(a, b)` adds an edge counted in a's degree of `kind`."""

    def __init__(self, kind: str):
        self.kind, self.times, self.src, self.dst = kind, [], [], []

    def node(self, window: int) -> int:
        self.times.append(window)
        return len(self.times) - 1

    def link(self, a: int, b: int) -> None:
        a, b = (b, a) if self.kind == IN else (a, b)
        self.src.append(a)
        self.dst.append(b)

    def sequence(self) -> GraphSequence:
        return GraphSequence(self.times, self.src, self.dst, max(self.times), self.kind != DEGREE)


def high_degree_case(bound, kind, tau):
    """v and its N neighbours in window 1, each neighbour at degree τ; each gains an edge in window 2 (τ < B)."""
    build, own = Builder(kind), bound.own(kind)
    v = build.node(1)
    for _ in range(own if bound.directed else 0):
        build.link(v, build.node(1))
    for _ in range(bound.neighbours(kind)):
        w = build.node(1)
        build.link(w, v)
        for _ in range(tau - 1):
            build.link(w, build.node(1))
        if tau < own:
            build.link(w, build.node(2))
    build.node(2)
    return build.sequence()


def histogram_case(bound, kind):
    """v alone; its own edges one a window (directed); then one neighbour a window; then each
    neighbour's B − 1 other edges, one a window."""
    build, own = Builder(kind), bound.own(kind)
    v = build.node(1)
    for _ in range(own if bound.directed else 0):
        build.link(v, build.node(max(build.times) + 1))
    joined = []
    for _ in range(bound.neighbours(kind)):
        joined.append(build.node(max(build.times) + 1))
        build.link(joined[-1], v)
    for w in joined:
        for _ in range(own - 1):
            build.link(w, build.node(max(build.times) + 1))
    return build.sequence()


def star_case(bound, kind):
    """v arrives last with B edges of its own (directed) and N neighbours of degree B − 1."""
    build, own = Builder(kind), bound.own(kind)
    neighbours = [build.node(1) for _ in range(bound.neighbours(kind))]
    for w in neighbours:
        for _ in range(own - 1):
            build.link(w, build.node(1))
    v = build.node(2)
    for w in neighbours:
        build.link(w, v)
    for _ in range(own if bound.directed else 0):
        build.link(v, build.node(2))
    return build.sequence(), v


@pytest.mark.parametrize("bound", UNDIRECTED + DIRECTED, ids=str)
def test_bounds_are_attained(bound):
    for kind in (OUT, IN) if bound.directed else (DEGREE,):
        own = bound.own(kind)
        cases = [(HighDegree(tau, kind), high_degree_case(bound, kind, tau), 0) for tau in range(1, own + 1)]
        cases.append((DegreeHistogram(kind), histogram_case(bound, kind), 0))
        star, v = star_case(bound, kind)
        cases += [(KStars(k, kind), star, v) for k in (1, 2, 3)] + [(EdgeCount(), star, v)]
        for statistic, sequence, node in cases:
            u = _change(statistic, sequence, sequence.without(node), bound, sequence.horizon)
            stated = statistic.sensitivity(bound, 2)
            # undirected histograms: v's step 1 → 2 coincides with a neighbour's first step and
            # they cancel in bin 1, so the construction reaches 4D² − 1 (D ≥ 2; [V] found 15 at D = 2)
            short = 2 if isinstance(statistic, DegreeHistogram) and not bound.directed and own >= 2 else 0
            assert np.abs(u).sum() == stated.l1 - short, (statistic.name, kind)
            if not isinstance(statistic, DegreeHistogram):
                assert np.sqrt((u.astype(float) ** 2).sum()) == pytest.approx(stated.l2), statistic.name


def test_the_sensitivity_table():
    """S004 Table 6.1 and Lemmas 6.5.2/6.5.4 at D = 5 and (D_in, D_out) = (5, 5); ours beside them."""
    d, dd = DegreeBound(5), DegreeBound(in_degree=5, out_degree=5)
    assert [s.seed_sensitivity(d) for s in (EdgeCount(), HighDegree(2), DegreeHistogram(), KStars(2))] == \
        [5, 11, 111, 5 * 4 + 10]
    assert [s.sensitivity(d, 20).l1 for s in (EdgeCount(), HighDegree(2), DegreeHistogram(), KStars(2))] == \
        [5, 11, 101, 30]
    assert [s.seed_sensitivity(dd) for s in (EdgeCount(), HighDegree(2, OUT), DegreeHistogram(OUT))] == [10, 11, 111]
    assert [s.sensitivity(dd, 20).l1 for s in (EdgeCount(), HighDegree(2, OUT), DegreeHistogram(OUT))] == [10, 11, 101]
    assert [s.sensitivity(d, 1).l1 for s in (EdgeCount(), HighDegree(2), DegreeHistogram(), KStars(2))] == \
        [5, 6, 11, 30]


# ---------------------------------------------------------------------------
# The projection


def prefix(sequence: GraphSequence, t: int) -> GraphSequence:
    """G_1..G_t alone (nodes renumbered in order)."""
    kept = np.flatnonzero(sequence.times <= t)
    label = np.full(sequence.nodes, -1)
    label[kept] = np.arange(kept.size)
    edges = sequence.edge_times <= t
    return GraphSequence(sequence.times[kept], label[sequence.src[edges]], label[sequence.dst[edges]], t,
                         sequence.directed)


def edge_set(sequence: GraphSequence) -> set:
    return set(zip(sequence.src.tolist(), sequence.dst.tolist()))


@pytest.mark.parametrize("bound", UNDIRECTED + DIRECTED, ids=str)
def test_projection_bounds_degrees_online_and_keeps_bounded_graphs(bound):
    rng = np.random.default_rng(2)
    for _ in range(40):
        sequence = random_sequence(rng, 10, 5, 0.5, bound.directed)
        projected = project(sequence, bound)
        bound.check(projected)  # the bound holds in every G̃_t
        assert edge_set(projected) <= edge_set(sequence)
        for t in range(1, sequence.horizon + 1):  # the projection of G_t is the prefix of G_T's
            assert edge_set(prefix(projected, t)) == edge_set(project(prefix(sequence, t), bound))
        assert edge_set(project(projected, bound)) == edge_set(projected)  # identity on bounded graphs


@pytest.mark.parametrize("bound", UNDIRECTED + DIRECTED, ids=str)
def test_projection_is_stable_for_one_graph(bound):
    """Φ = Σ_{x≠v} |Δdeg| ≤ v's projected degree at every window, and each projected G̃_t's
    statistics move by at most the one-graph sensitivity with N = `bound.edges`."""
    rng = np.random.default_rng(3)
    kinds = (OUT, IN) if bound.directed else (DEGREE,)
    for _ in range(25):
        sequence = random_sequence(rng, 9, 4, 0.6, bound.directed)
        projected = project(sequence, bound)
        for node in range(sequence.nodes):
            other = project(sequence.without(node), bound)
            rest = np.delete(np.arange(sequence.nodes), node)
            phi = sum(np.abs(projected.degrees(k)[:, rest] - other.degrees(k)).sum(axis=1) for k in kinds)
            own = sum(projected.degrees(k)[:, node] for k in kinds)
            assert np.all(phi <= own) and np.all(own <= bound.edges)
            for statistic in statistics(bound):
                gaps = statistic.values(projected, bound) - statistic.values(other, bound)
                stated = statistic.sensitivity(bound, 1, projected=True)
                assert np.abs(gaps).sum(axis=1).max() <= stated.l1, statistic.name
                assert np.sqrt((gaps.astype(float) ** 2).sum(axis=1)).max() <= stated.l2 + 1e-9, statistic.name


@pytest.mark.parametrize("horizon", [4, 9, 16])
def test_projection_is_unstable_over_a_sequence(horizon):
    """S004 Lemma 6.4.2's phenomenon for the edge count at D̃ = 1: v–a in window 1, then a chain
    a–b, b–c, … one node a window. With v the projection keeps v–a, b–c, d–e, …; without v it
    keeps a–b, c–d, …: the projected counts differ by 1, 0, 1, 0, …, so the difference
    sequence changes by T in L1 (one graph: 1)."""
    times = [1, 1] + list(range(2, horizon + 1))
    chain = np.arange(1, horizon + 1)
    sequence = GraphSequence(times, np.r_[0, chain[:-1]], np.r_[1, chain[1:]], horizon)
    bound, edges = DegreeBound(1), EdgeCount()
    projected, without = project(sequence, bound), project(sequence.without(0), bound)
    u = edges.differences(projected, bound) - edges.differences(without, bound)
    assert np.abs(u).sum() == horizon
    assert edges.sensitivity(bound, 1, projected=True).l1 == 1
    with pytest.raises(ValueError, match="Lemma 6.4.2"):
        edges.sensitivity(bound, horizon, projected=True)


# ---------------------------------------------------------------------------
# The generators and the release


def test_synthetic_one_matches_the_seed_description():
    """S004 L1447–1451: m_0 = 500 initial nodes, 70 a year for 20 years, isolated with P = 0.5, k = 1."""
    graph = synthetic_one(0)
    assert graph.directed and graph.horizon == 20 and graph.nodes == 500 + 70 * 20
    assert np.bincount(graph.times)[1] == 500 + 70 and np.all(np.bincount(graph.times)[2:] == 70)
    assert abs(graph.src.size - 0.5 * 70 * 20) <= 3 * np.sqrt(0.25 * 70 * 20)  # Binomial(1400, 0.5)
    assert graph.degrees(IN)[-1].max() == 1  # k = 1: one infector (Table 6.4: max in-degree 1)
    assert np.all(graph.times[graph.src] <= graph.times[graph.dst]) and np.all(graph.src < graph.dst)
    average = 2 * graph.src.size / graph.nodes
    assert 0.68 <= average <= 0.80  # Table 6.4: 2·665/1990 = 0.67; the text's parameters give 0.74 ± 0.03
    assert np.array_equal(synthetic_one(0).src, graph.src)


def test_synthetic_two_matches_the_seed_description():
    """S004 L1453–1455: SIR (P_r = 0.1, P_i = 0.18) on BA(10,000, k = 2); n_0 = 500 (Table 6.4)."""
    graph = synthetic_two(0)
    assert graph.directed and graph.horizon == 20
    assert graph.nodes - graph.src.size == 500  # all but the initial infected have one infector
    assert graph.degrees(IN)[-1].max() == 1
    assert np.all(graph.times[graph.src] <= graph.times[graph.dst])
    assert graph.undirected().degrees(DEGREE)[-1].max() <= 10  # Table 6.4: 6; the seed's D = 10
    assert 1.0 <= 2 * graph.src.size / graph.nodes <= 1.5  # Table 6.4: 2·588/1088 = 1.08


@pytest.mark.parametrize("noise", [LAPLACE, GAUSSIAN])
def test_release_through_continual(noise):
    """SENSDIFF and the chosen strategy through `ContinualRelease`: the noise is calibrated to the
    statistic's sensitivity, and the causal answers are the f(G_t) plus that noise."""
    graph = synthetic_one(1).undirected()
    bound = DegreeBound(10)
    statistic = DegreeHistogram()
    differences = statistic.differences(graph, bound)
    for strategy in (identity(graph.horizon), None):
        release = node_release(statistic, bound, graph.horizon, noise, 1.0, strategy, rng=RandomSource(5))
        assert release.bound == statistic.sensitivity(bound, graph.horizon).l1 == 4 * 10 * 10 + 1
        for _ in range(graph.horizon):
            report = emit(release, differences)
        assert report.running.shape == (1, bound.degree + 1)
        errors = release.answers(CAUSAL).running - np.cumsum(differences, axis=0)
        stderr = np.sqrt(release.answers(CAUSAL).running_variance)
        assert np.all(np.abs(errors) <= 6 * stderr)
    one_shot = node_release(HighDegree(2), bound, 1, noise, 1.0, projected=True, rng=RandomSource(6))
    assert one_shot.bound == HighDegree(2).sensitivity(bound, 1, projected=True).l1 == 11
    projected = project(graph, bound)
    emit(one_shot, HighDegree(2).values(projected, bound)[-1:])
