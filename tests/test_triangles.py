"""Triangle counts under node DP (S004 Lemma 6.5.2(2); `mechanisms.graphs.triangles`, `dpsql.tables.edge_tables`).

The counts against networkx; the sensitivity against exhaustive node removal on random bounded graph
sequences (one graph and the whole difference sequence) and the graph that attains it; the projection's
counterexample (why triangles need a declared bound); and the table of triangles in SQL: its audit
through the backend's path (every node removed), one-shot and continual answers, and its refusals.
"""

from math import comb

import duckdb
import networkx as nx
import numpy as np
import pytest

import dpsql
from dpsql.tables.catalog import Catalog, CatalogError
from mechanisms.graphs import DegreeBound, GraphSequence, Triangles, project
from tests.test_edge_tables import STREAM, _bounded_stream, _windows
from tests.test_graphs import DIRECTED, UNDIRECTED, bounded_sequences, snapshot

BOUNDS = UNDIRECTED + DIRECTED


@pytest.mark.parametrize("bound", [DegreeBound(4), DegreeBound(in_degree=2, out_degree=3)], ids=str)
def test_triangle_counts_match_networkx(bound):
    for sequence in bounded_sequences(bound, 12, seed=3):
        values = Triangles().values(sequence, bound)
        for t in range(1, sequence.horizon + 1):
            graph = nx.Graph(snapshot(sequence, t).to_undirected())
            assert values[t - 1, 0] == sum(nx.triangles(graph).values()) // 3


@pytest.mark.parametrize("bound", BOUNDS + [DegreeBound(4)], ids=str)
def test_removing_any_node_moves_triangles_by_at_most_c_d_2(bound):
    """Every node of random bounded sequences removed in turn: the change of the whole difference sequence is
    ≥ 0 and at most C(D, 2) in L1 (C(D_in + D_out, 2) directed), and so is the change of each graph."""
    statistic, worst = Triangles(), 0
    stated = statistic.sensitivity(bound, 5)
    assert stated.l1 == statistic.sensitivity(bound, 1).l1 == statistic.seed_sensitivity(bound) == comb(bound.edges, 2)
    for sequence in bounded_sequences(bound, 40):
        differences = statistic.differences(sequence, bound)
        for node in range(sequence.nodes):
            u = (differences - statistic.differences(sequence.without(node), bound)).ravel()
            assert u.min() >= 0 and u.sum() <= stated.l1 and np.sqrt((u.astype(float) ** 2).sum()) <= stated.l2
            worst = max(worst, int(u.sum()))
    assert worst >= min(1, stated.l1)  # exercised (a graph of degree ≤ 1 has no triangle)


@pytest.mark.parametrize("d", [2, 3, 5])
def test_a_node_joined_to_a_clique_attains_the_bound(d):
    """v (node d) arrives last, joined to d nodes that are all joined to each other: C(d, 2) triangles leave with it."""
    pairs = [(a, b) for a in range(d) for b in range(a + 1, d)] + [(a, d) for a in range(d)]
    bound = DegreeBound(d)
    sequence = GraphSequence([1] * d + [2], [a for a, _ in pairs], [b for _, b in pairs], 2)
    u = Triangles().differences(sequence, bound) - Triangles().differences(sequence.without(d), bound)
    assert u.sum() == comb(d, 2) == Triangles().sensitivity(bound, 2).l1


def test_the_projection_does_not_bound_triangles():
    """D = 2: triangles {0, 1, 2} and {9, 10, 11} joined by (2, 11). Projected in id order both stay (node 2 is full
    when (2, 11) comes); without node 0, (2, 11) is kept first and blocks (10, 11): no triangle is left."""
    pairs = [(0, 1), (0, 2), (1, 2), (2, 11), (9, 10), (9, 11), (10, 11)]
    bound = DegreeBound(2)
    graph = GraphSequence([1] * 12, [a for a, _ in pairs], [b for _, b in pairs], 1)
    with_node, without = (Triangles().values(project(g, bound), bound)[-1, 0] for g in (graph, graph.without(0)))
    assert (with_node, without) == (2, 0) and with_node - without > comb(2, 2)
    with pytest.raises(ValueError, match="triangles need a declared bound"):
        Triangles().sensitivity(bound, 1, projected=True)


# --- SQL: the table of triangles --------------------------------------------------------------------------

TRIANGLES = STREAM + 'triangles = "contact_triangles"\n'  # max_degree = 3: C(3, 2) = 3


def test_removing_any_node_moves_the_triangle_table_by_at_most_its_contribution():
    """Through the backend's SQL path, the difference sequence over 6 windows of a random bounded stream with a
    4-clique planted (each of its nodes is in C(3, 2) triangles: the bound, attained)."""
    catalog = Catalog.from_toml(TRIANGLES)
    table = catalog.get("contact_triangles")
    assert table.contribution == table.stream_contribution(6) == 3
    a, b, w = _bounded_stream(0, nodes=12, edges=100)
    clique = [(100 + i, 100 + j) for i in range(4) for j in range(i + 1, 4)]
    a, b = np.r_[a, [p for p, _ in clique]], np.r_[b, [q for _, q in clique]]
    w = np.r_[w, [0, 1, 2, 3, 4, 5]]
    full = _windows(catalog, "contact_triangles", a, b, w)
    truth = nx.Graph(list(zip(a.tolist(), b.tolist())))
    assert full.sum() == sum(nx.triangles(truth).values()) // 3 > 0
    worst = 0
    for v in np.unique(np.concatenate([a, b])):
        keep = (a != v) & (b != v)
        u = full - _windows(catalog, "contact_triangles", a[keep], b[keep], w[keep])
        assert u.min() >= 0 and u.sum() <= 3
        worst = max(worst, int(u.sum()))
    assert worst == 3


def _connect(a, b, w, catalog=TRIANGLES, **kwargs):
    con = duckdb.connect()
    start = np.datetime64("2025-01-06T00:00:00")
    con.register("source", {"a": a, "b": b, "at": start + w * np.timedelta64(7, "D") + np.timedelta64(1, "h")})
    con.execute("CREATE TABLE contacts AS SELECT * FROM source")
    return con, dpsql.connect(con=con, catalog=catalog, **{"epsilon": 5000.0, "delta": 1e-9, "seed": 2, **kwargs})


def test_triangles_one_shot_and_continual_in_sql():
    a, b, w = _bounded_stream(5, nodes=60, edges=400)
    truth = sum(nx.triangles(nx.Graph(list(zip(a.tolist(), b.tolist())))).values()) // 3
    _, conn = _connect(a, b, w)
    cur = conn.cursor()
    plan = "\n".join(r[0] for r in cur.execute("EXPLAIN SELECT COUNT(*) FROM contact_triangles").fetchall())
    assert "the triangle count by at most 3" in plan and "declared and checked" in plan
    # The continual query first: its Gaussian charge beside a large Laplace one would not fit (the pure
    # filter takes pure histories only; beside a Gaussian a Laplace of ε counts ε²/2 of ρ).
    cur.execute("CREATE CONTINUAL QUERY tri AS SELECT COUNT(*) FROM contact_triangles "
                "EMIT EVERY INTERVAL '7 days' ON at FROM '2025-01-06' FOR 6 RELEASES WITH (epsilon = 2000)")
    totals = [cur.execute("EMIT tri").fetchall()[0][4] for _ in range(6)]
    assert totals[-1] == pytest.approx(truth, abs=3)
    cur.execute("SET dpsql.query_epsilon = 2000")
    [(count,)] = cur.execute("SELECT COUNT(*) FROM contact_triangles").fetchall()
    assert count == pytest.approx(truth, abs=1)


def test_a_broken_bound_refuses_triangles_and_spends_nothing():
    a, b, w = np.array([0, 0, 0, 0, 1]), np.array([1, 2, 3, 4, 2]), np.zeros(5, dtype=np.int64)  # node 0: 4 > 3
    _, conn = _connect(a, b, w, epsilon=1.0)
    with pytest.raises(dpsql.OperationalError, match="breaks the degree bound"):
        conn.cursor().execute("SELECT COUNT(*) FROM contact_triangles")
    assert conn.session.ledger.spent() == 0


@pytest.mark.parametrize("body, message", [
    (TRIANGLES.replace('bound = "declared"\n', ""), 'needs bound = "declared"'),
    (TRIANGLES.replace("max_degree = 3", "max_degree = 1"), "has no triangles"),
    (TRIANGLES.replace('"contact_triangles"', '"contact_degrees"'), "a name of its own"),
])
def test_bad_triangle_declarations_are_refused(body, message):
    with pytest.raises(CatalogError, match=message):
        Catalog.from_toml(body)


def test_the_shell_describes_the_triangle_table_by_its_nodes():
    from dpsql.interfaces.shell.schema import describe_tables

    a, b, w = _bounded_stream(1)
    _, conn = _connect(a, b, w, epsilon=1.0)
    tables = {t.name: t for t in describe_tables(conn)}
    assert [c.name for c in tables["contact_triangles"].columns] == ["node_1", "node_2", "node_3"]
    assert "counts the triangles" in tables["contact_triangles"].columns[0].description
    with pytest.raises(dpsql.ProgrammingError):  # its stand-in holds no row, and raw rows are never read
        conn.cursor().execute("SELECT node_1 FROM contact_triangles")
