"""Graph tables: a declared graph's edge table and node table (node DP, `dpsql.tables.edge_tables`).

Their counts are not a GROUP BY over rows: each measurement fetches the cleaned edge list as dense
node numbers (`edges_sql`), projects it to the degree bound in Python and counts (the edge table:
its edge count; the node table: its degree histogram). One node changes them by the projection's
node-DP sensitivity (`contribution`); a continual query over a graph with a declared bound uses the
seed's sequence sensitivity, and a window in which the data breaks the owner's bound releases nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from dpsql.errors import OperationalError
from dpsql.tables.columns import quote_identifier
from dpsql.tables.edge_tables import EDGES, NODES, TRIANGLES, BoundBroken, Graph, graph_marginals, \
    graph_window_counts, window_changes
from dpsql.tables.table import Relation, Table

BOUND_BROKEN = (  # said the same whatever node broke it: the owner's promise is what failed
    "the graph breaks the degree bound its data owner declared; nothing was released or charged (the owner's "
    "log, logger 'dpsql.scan', says so)"
)
log = logging.getLogger("dpsql.scan")


def edges_sql(graph: Graph, relation: Relation = quote_identifier, window_sql: str | None = None) -> str:
    """The cleaned edges of a graph's edge table as dense node numbers `s`, `t` (0..n−1, in id order), and
    with `window_sql` (over the edge table's time column) each edge's window `w`, its earliest: NULL
    endpoints (and times) and self-loops left out, repeats (and, undirected, reversals) kept once — each
    rule looks at one edge, so removing a node removes only its own edges (`dpsql.tables.edge_tables`)."""
    a, b = quote_identifier(graph.source), quote_identifier(graph.target)
    ends = (f"CASE WHEN {a} < {b} THEN {a} ELSE {b} END AS s, CASE WHEN {a} < {b} THEN {b} ELSE {a} END AS t"
            if not graph.directed else f"{a} AS s, {b} AS t")
    timed = f" AND {quote_identifier(graph.time)} IS NOT NULL" if window_sql else ""
    return (f"WITH r AS (SELECT {ends}, {window_sql or 0} AS w FROM {relation(graph.edges)} "
            f"WHERE {a} IS NOT NULL AND {b} IS NOT NULL AND {a} <> {b}{timed}), "
            "e AS (SELECT s, t, MIN(w) AS w FROM r GROUP BY s, t), "
            "n AS (SELECT x, ROW_NUMBER() OVER (ORDER BY x) - 1 AS i FROM (SELECT s AS x FROM e UNION "
            "SELECT t AS x FROM e) AS u) "
            "SELECT ns.i AS s, nt.i AS t, e.w AS w FROM e JOIN n AS ns ON e.s = ns.x JOIN n AS nt ON e.t = nt.x")


@dataclass
class GraphTable(Table):
    """One of a graph's two tables; `role` says which (EDGES or NODES)."""

    scanned_by_rows = False
    owner_promises_bound = True  # a continual query checks the declared bound before it charges
    role = ""

    graph: Graph | None = None

    @property
    def contribution(self) -> int:
        """What one node changes in the projected graph's table."""
        return self.graph.contribution(self.role)

    def stream_contribution(self, horizon: int) -> int:
        """The seed's sequence sensitivity under a declared bound (`Graph.stream_contribution`)."""
        return self.graph.stream_contribution(self.role, horizon)

    def signature_note(self) -> str:
        timed = f"; append-only by {self.time_column}" if self.time_column else ""
        return f"{timed}; {self.role} of {self.graph.describe()}"

    def explain_note(self) -> str:
        return self.graph.explain(self.role)

    def check_stream(self, time_column: str) -> None:
        if self.time_column is None or self.time_column.lower() != time_column.lower():
            super().check_stream(time_column)

    def binding_sql(self, backend, key: str | None) -> str:
        return edges_sql(self.graph, backend.relation)

    def count_marginals(self, backend, cliques: list[tuple[str, ...]], key: str | None, within) -> dict:
        edges = backend.run(edges_sql(self.graph, backend.relation), ["s", "t", "w"],
                            f"reading the edges of {self.graph.edges!r}")
        try:
            return graph_marginals(self.graph, self.role, self.domain, cliques,
                                   np.asarray(edges["s"], dtype=np.int64), np.asarray(edges["t"], dtype=np.int64))
        except BoundBroken as e:
            log.error("%s: the data breaks the catalog's declared degree bound", e)
            raise OperationalError(BOUND_BROKEN) from None

    def count_windows(self, backend, group: tuple[str, ...], where_sql: str, window_sql: str, first: int,
                      last: int, key: str | None):
        edges = backend.run(edges_sql(self.graph, backend.relation, window_sql), ["s", "t", "w"],
                            f"reading the edges of {self.graph.edges!r}")
        try:
            changes = window_changes(self.graph, self.role, *(np.asarray(edges[c], dtype=np.int64)
                                                              for c in ("s", "t", "w")))
        except BoundBroken as e:
            log.error("%s: the data breaks the catalog's declared degree bound", e)
            raise OperationalError(BOUND_BROKEN) from None
        return graph_window_counts(self.columns, group, where_sql, first, last, changes)


@dataclass
class GraphEdgeTable(GraphTable):
    """A graph's edge table: its endpoints are not queryable columns; COUNT(*) counts the projected edges."""

    kind = "graph edges"
    role = EDGES
    needs_columns = False

    def stand_in_columns(self) -> list[tuple[str, str, bool]]:
        """Its endpoints (which no query may read)."""
        return [(self.graph.source, "VARCHAR", False), (self.graph.target, "VARCHAR", False)]

    def stand_in_note(self) -> str:
        return f"node id (an edge's end): COUNT(*) counts the edges; query the degrees in {self.graph.nodes}"


@dataclass
class GraphNodeTable(GraphTable):
    """A graph's node table: one row per node, its projected degree(s) the declared columns."""

    kind = "graph nodes"
    role = NODES


@dataclass
class GraphTriangleTable(GraphTable):
    """A graph's table of triangles (a declared bound only): COUNT(*) counts them."""

    kind = "graph triangles"
    role = TRIANGLES
    needs_columns = False

    def stand_in_columns(self) -> list[tuple[str, str, bool]]:
        """A triangle's three nodes (which no query may read)."""
        return [(f"node_{i}", "VARCHAR", False) for i in (1, 2, 3)]

    def stand_in_note(self) -> str:
        return "node id (a triangle's node): COUNT(*) counts the triangles"


def graph_tables(graph: Graph, nodes_columns: dict) -> list[GraphTable]:
    """The graph's edge table, node table (`nodes_columns`: its degree columns, declared) and, if it names
    one, its table of triangles."""
    tables = [GraphEdgeTable(graph.edges, {}, time_column=graph.time, graph=graph),
              GraphNodeTable(graph.nodes, nodes_columns, time_column=graph.time, graph=graph)]
    if graph.triangles:
        tables.append(GraphTriangleTable(graph.triangles, {}, time_column=graph.time, graph=graph))
    return tables
