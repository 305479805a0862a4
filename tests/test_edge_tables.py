"""Edge tables: node-DP edge counts and degree statistics in SQL, the bound forced by projection.

The audit removes each node of random graphs with hubs (degrees far above the bound) and
checks, through the backend's SQL path, that the projected edge count and degree histogram
move by at most the sensitivities every measurement of the two tables is calibrated to.
"""

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.backends import DuckDBBackend
from dpsql.tables.catalog import Catalog, CatalogError
from dpsql.tables.edge_tables import EDGES, NODES
from dpsql.errors import NotSupportedError, ProgrammingError
from mechanisms.graphs import DegreeBound, GraphSequence, project

UNDIRECTED = """
[graphs.contacts]
source = "a"
target = "b"
max_degree = 4
degrees = "contact_degrees"
"""
DIRECTED = """
[graphs.follows]
source = "a"
target = "b"
directed = true
max_out_degree = 3
max_in_degree = 2
degrees = "follower_counts"
"""


def _graph(seed, nodes=40, edges=160, hubs=2):
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, nodes, edges), rng.integers(0, nodes, edges)
    a[: edges // 4] = rng.integers(0, hubs, edges // 4)  # hubs: far above any bound
    return a, b


def _table(con, name, a, b):
    con.register("source", {"a": a, "b": b})
    con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM source")
    con.unregister("source")


def _marginals(catalog, name, a, b):
    con = duckdb.connect()
    graph = next(t.graph for t in catalog.tables.values() if t.graph is not None)
    _table(con, graph.edges, a, b)
    table = catalog.get(name)
    return DuckDBBackend(con).marginals(table, [tuple(table.domain.attributes)])[tuple(table.domain.attributes)]


@pytest.mark.parametrize("declaration", [UNDIRECTED, DIRECTED])
@pytest.mark.parametrize("seed", [0, 1])
def test_removing_any_node_moves_the_projected_tables_by_at_most_their_sensitivity(declaration, seed):
    catalog = Catalog.from_toml(declaration)
    edges, nodes = (t for role in (EDGES, NODES) for t in catalog.tables.values() if t.role == role)
    a, b = _graph(seed)
    full = {t.name: _marginals(catalog, t.name, a, b) for t in (edges, nodes)}
    worst = {EDGES: 0, NODES: 0}
    for v in np.unique(np.concatenate([a, b])):
        keep = (a != v) & (b != v)
        for t in (edges, nodes):
            moved = int(np.abs(full[t.name] - _marginals(catalog, t.name, a[keep], b[keep])).sum())
            assert moved <= t.contribution, (t.name, v)
            worst[t.role] = max(worst[t.role], moved)
    assert worst[EDGES] >= 2 and worst[NODES] >= 3  # the audit exercises the bound, not a trivial case


def test_answers_are_the_projected_graph_s_statistics(tmp_path):
    a, b = _graph(3, nodes=300, edges=2000)
    con = duckdb.connect()
    _table(con, "contacts", a.astype(str), b.astype(str))  # ids of any type: strings here
    conn = dpsql.connect(con=con, catalog=UNDIRECTED, epsilon=2000.0, delta=1e-9, seed=1)
    cur = conn.cursor()
    cur.execute("SET dpsql.query_epsilon = 400")
    pairs = np.unique(np.sort(np.stack([a.astype(str), b.astype(str)], 1), 1), axis=0)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    ids = np.unique(pairs)
    index = np.searchsorted(ids, pairs)
    kept = project(GraphSequence(np.ones(len(ids), int), index[:, 0], index[:, 1], 1), DegreeBound(4))
    degrees = kept.degrees("degree")[-1]
    cur.execute("SELECT COUNT(*) FROM contacts")
    assert cur.fetchone()[0] == pytest.approx(kept.src.size, abs=15)
    cur.execute("SELECT degree, COUNT(*) FROM contact_degrees GROUP BY degree ORDER BY degree")
    histogram = np.bincount(degrees, minlength=5)
    assert np.allclose([n for _, n in cur.fetchall()], histogram, atol=25)
    cur.execute("SELECT COUNT(*) FROM contact_degrees WHERE degree >= 3")  # highDeg_3: free now
    assert cur.result.charged == 0 and cur.fetchone()[0] == pytest.approx((degrees >= 3).sum(), abs=40)
    cur.execute("SELECT SUM(degree * (degree - 1) / 2) FROM contact_degrees")  # 2-stars: free, from the histogram
    assert cur.result.charged == 0
    assert cur.fetchone()[0] == pytest.approx((degrees * (degrees - 1) // 2).sum(), abs=150)
    cur.execute("EXPLAIN SELECT COUNT(*) FROM contacts")
    assert "node DP" in "\n".join(r[0] for r in cur.fetchall())


def test_the_edge_table_answers_only_its_count(tmp_path):
    a, b = _graph(0)
    con = duckdb.connect()
    _table(con, "contacts", a, b)
    conn = dpsql.connect(con=con, catalog=UNDIRECTED, epsilon=1.0, delta=1e-9, seed=1)
    cur = conn.cursor()
    for sql in ("SELECT a, COUNT(*) FROM contacts GROUP BY a", "SELECT * FROM contacts",
                "SELECT COUNT(*) FROM contacts WHERE b = 3", "SELECT * FROM contact_degrees",
                "CREATE TABLE contact_degrees AS SELECT 1 AS degree", "CREATE VIEW v AS SELECT * FROM contacts",
                "DROP TABLE contacts", "SELECT COUNT(*) FROM contacts c JOIN contact_degrees d ON c.a = d.degree",
                "SELECT COUNT(*) FROM (SELECT * FROM contacts WHERE b = 3)"):
        with pytest.raises((ProgrammingError, NotSupportedError)):
            cur.execute(sql)
    assert conn.session.ledger.spent() == 0


@pytest.mark.parametrize("body, message", [
    ('source = "a"\ntarget = "b"\ndegrees = "d"', "needs max_degree"),
    ('source = "a"\ntarget = "b"\ndegrees = "d"\ndirected = true\nmax_degree = 3', "declares max_out_degree"),
    ('source = "a"\ntarget = "a"\ndegrees = "d"\nmax_degree = 3', "two columns"),
    ('source = "a"\ntarget = "b"\ndegrees = "g"\nmax_degree = 3', "name of its own"),
    ('source = "a"\ntarget = "b"\nmax_degree = 3', "needs degrees"),
    ('source = "a"\ntarget = "b"\ndegrees = "d"\nmax_degree = 0', "from 1"),
    ('source = "a"\ntarget = "b"\ndegrees = "t"\nmax_degree = 3', "declared twice"),
    ('source = "a"\ntarget = "b"\ndegrees = "d"\nmax_degree = 3\nweight = "w"', "unknown keys"),
])
def test_bad_graph_declarations_are_refused(body, message):
    with pytest.raises(CatalogError, match=message):
        Catalog.from_toml(f'[tables.t.columns]\nx = {{ type = "integer", min = 0, max = 1 }}\n[graphs.g]\n{body}')


def test_a_graph_from_python():
    catalog = Catalog.from_toml('[tables.t.columns]\nx = { type = "integer", min = 0, max = 1 }')
    graph = catalog.add_graph("follows", "a", "b", "follower_counts", max_out_degree=3, max_in_degree=2,
                              directed=True)
    assert catalog.get("follows").contribution == 5 and catalog.get("follower_counts").contribution == 11
    assert list(catalog.get("follower_counts").domain.attributes) == ["out_degree", "in_degree"]
    assert graph.directed


# --- continual release over a declared bound --------------------------------------------------------------

STREAM = """
[graphs.contacts]
source = "a"
target = "b"
max_degree = 3
degrees = "contact_degrees"
time = "at"
bound = "declared"
"""


def _bounded_stream(seed, nodes=30, edges=120, bound=3, windows=6):
    """Random edges with arrival windows, kept greedily in window order while both ends are under the bound."""
    rng = np.random.default_rng(seed)
    a, b, w = rng.integers(0, nodes, edges), rng.integers(0, nodes, edges), rng.integers(0, windows, edges)
    degree, seen, kept = np.zeros(nodes, int), set(), []
    for e in np.argsort(w, kind="stable"):
        pair = (min(a[e], b[e]), max(a[e], b[e]))
        if a[e] != b[e] and pair not in seen and degree[a[e]] < bound and degree[b[e]] < bound:
            degree[a[e]] += 1
            degree[b[e]] += 1
            seen.add(pair)
            kept.append(e)
    return a[kept], b[kept], w[kept]


def _windows(catalog, name, a, b, w, windows=6):
    con = duckdb.connect()
    start = np.datetime64("2025-01-06T00:00:00")
    con.register("source", {"a": a, "b": b, "at": start + w * np.timedelta64(7, "D") + np.timedelta64(1, "h")})
    con.execute("CREATE TABLE contacts AS SELECT * FROM source")
    table = catalog.get(name)
    group = tuple(table.domain.attributes)
    window_sql = "CAST(FLOOR((EPOCH(CAST(\"at\" AS TIMESTAMP)) - 1736121600.0) / 604800) AS BIGINT)"
    return DuckDBBackend(con).window_counts(table, group, "TRUE", window_sql, 0, windows)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_removing_any_node_moves_the_difference_sequences_by_at_most_the_seed_s_bound(seed):
    catalog = Catalog.from_toml(STREAM)
    a, b, w = _bounded_stream(seed)
    for name in ("contacts", "contact_degrees"):
        full = _windows(catalog, name, a, b, w)
        if name == "contact_degrees":  # the running totals are the degree histogram of each G_t
            final = np.bincount(np.bincount(np.concatenate([a, b]))[np.unique(np.concatenate([a, b]))], minlength=4)
            assert full.sum(axis=0).tolist() == final.tolist()
        bound = catalog.get(name).stream_contribution(6)
        worst = 0
        for v in np.unique(np.concatenate([a, b])):
            keep = (a != v) & (b != v)
            worst = max(worst, int(np.abs(full - _windows(catalog, name, a[keep], b[keep], w[keep])).sum()))
        assert 2 <= worst <= bound, (name, worst, bound)


def test_continual_degree_histogram_and_edge_count_in_sql():
    a, b, w = _bounded_stream(5, nodes=200, edges=700)
    con = duckdb.connect()
    start = np.datetime64("2025-01-06T00:00:00")
    con.register("source", {"a": a, "b": b, "at": start + w * np.timedelta64(7, "D") + np.timedelta64(1, "h")})
    con.execute("CREATE TABLE contacts AS SELECT * FROM source")
    conn = dpsql.connect(con=con, catalog=STREAM, epsilon=5000.0, delta=1e-9, seed=2)
    cur = conn.cursor()
    cur.execute("CREATE CONTINUAL QUERY hist AS SELECT degree, COUNT(*) FROM contact_degrees GROUP BY degree "
                "EMIT EVERY INTERVAL '7 days' ON at FROM '2025-01-06' FOR 6 RELEASES WITH (epsilon = 2000)")
    cur.execute("CREATE CONTINUAL QUERY edges AS SELECT COUNT(*) FROM contacts "
                "EMIT EVERY INTERVAL '7 days' ON at FROM '2025-01-06' FOR 6 RELEASES WITH (epsilon = 2000)")
    for _ in range(6):
        cur.execute("EMIT hist")
        histogram = cur.fetchall()
        cur.execute("EMIT edges")
        count = cur.fetchall()
    degrees = np.bincount(np.concatenate([a, b]))
    truth = np.bincount(degrees[degrees > 0], minlength=4)
    assert np.allclose([row[5] for row in histogram], truth, atol=6)  # running totals: the final histogram
    assert count[-1][4] == pytest.approx(len(a), abs=6)


def test_a_broken_declared_bound_refuses_and_spends_nothing():
    con = duckdb.connect()
    con.execute("CREATE TABLE contacts AS SELECT 0 AS a, i AS b, TIMESTAMP '2025-01-06 01:00' AS at "
                "FROM range(1, 4) t(i)")  # node 0 has 3 edges: the declared bound
    conn = dpsql.connect(con=con, catalog=STREAM, epsilon=1.0, delta=1e-9, seed=2)
    cur = conn.cursor()
    create = ("CREATE CONTINUAL QUERY {} AS SELECT degree, COUNT(*) FROM contact_degrees GROUP BY degree "
              "EMIT EVERY INTERVAL '7 days' ON at FROM '2025-01-06' FOR 4 RELEASES")
    cur.execute(create.format("hist"))
    con.execute("INSERT INTO contacts VALUES (0, 4, TIMESTAMP '2025-01-06 02:00'), (0, 5, TIMESTAMP '2025-01-06 "
                "03:00')")  # now 5: the owner's promise is broken after the horizon was charged
    spent = conn.session.ledger.spent()
    with pytest.raises(dpsql.OperationalError, match="breaks the degree bound"):
        cur.execute("EMIT hist")
    assert conn.session.ledger.spent() == spent
    with pytest.raises(dpsql.OperationalError, match="breaks the degree bound"):  # broken already: no charge
        cur.execute(create.format("again"))
    assert conn.session.ledger.spent() == spent
    cur.execute("SELECT COUNT(*) FROM contacts")  # one-shot answers project, whatever the data
    assert cur.result.charged > 0


def test_a_projected_graph_refuses_continual_queries():
    a, b = _graph(0)
    con = duckdb.connect()
    _table(con, "contacts", a, b)
    con.execute("ALTER TABLE contacts ADD COLUMN \"at\" TIMESTAMP DEFAULT TIMESTAMP '2025-01-06 01:00'")
    conn = dpsql.connect(con=con, catalog=UNDIRECTED.replace('max_degree', 'time = "at"\nmax_degree'), epsilon=1.0,
                         delta=1e-9)
    with pytest.raises(NotSupportedError, match="Lemma 6.4.2"):
        conn.cursor().execute("CREATE CONTINUAL QUERY e AS SELECT COUNT(*) FROM contacts EMIT EVERY INTERVAL "
                              "'7 days' ON at FROM '2025-01-06' FOR 4 RELEASES")
    assert conn.session.ledger.spent() == 0


def test_the_shell_describes_an_edge_table_by_its_endpoints():
    from dpsql.interfaces.shell.schema import describe_tables

    con = duckdb.connect()
    _table(con, "contacts", *_graph(0))
    tables = {t.name: t for t in describe_tables(dpsql.connect(con=con, catalog=UNDIRECTED, epsilon=1.0, delta=1e-9))}
    assert [c.name for c in tables["contacts"].columns] == ["a", "b"]
    assert "contact_degrees" in tables["contacts"].columns[0].description
    assert [c.name for c in tables["contact_degrees"].columns] == ["degree"]
