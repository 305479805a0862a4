"""Edge tables: graphs whose privacy unit is a node (node DP), declared with a degree bound.

The data owner declares a table of edges and the name of the node table analysts query:

```toml
[graphs.contacts]                # a table of edges, one row per edge
source = "person_a"              # the edge's endpoints: node ids of any type
target = "person_b"
directed = false                 # default false: (a, b) and (b, a) are one edge
max_degree = 20                  # D; a directed graph declares max_out_degree and max_in_degree
degrees = "contact_degrees"      # the node table: one row per node, its `degree`
time = "since"                   # optional: when each edge arrived (continual queries)
bound = "projected"              # default; "declared": the owner guarantees the bound (below)
triangles = "contact_triangles"  # optional, with bound = "declared": the table of triangles (below)
```

Two protected tables come of it. ``contacts`` answers ``COUNT(*)``: the edges. The node
table ``contact_degrees`` has one row per node with its ``degree`` (``out_degree`` and
``in_degree`` when directed), integers from 0 to the bound, so that the degree histogram
(``GROUP BY degree``), highDeg_τ (``WHERE degree >= τ``), degree ranges, sums and means are
ordinary queries, planned and answered like any other.

Neighbouring databases differ by one node and all its edges (S004 §6.2.2). A node may have
any number of edges in the data, so the engine forces the bound by the seed's projection
(`mechanisms.graphs.projection`): self-loops, NULL endpoints and repeated edges are left
out, the nodes are ordered by id, and the edges are added in that order while neither
endpoint is full. One node then changes the edge count by at most the bound's edges (D, or
D_in + D_out) and the degree histogram by at most 1 + 2·that in L1 (`contribution`): the
sensitivities every measurement of the two tables is multiplied by. Nothing depends on the
data keeping its declared bound: a node above it loses edges, and privacy holds either way.
Only node ids that appear in an edge are nodes (an isolated node is not seen).

**Triangles** (`mechanisms.graphs.triangles`): a graph with ``bound = "declared"`` may name a third
table, one row per triangle of its (undirected) graph and no column, whose ``COUNT(*)`` is the
triangle count, one-shot or continual: one node changes it, and its whole difference sequence, by
at most the triangles it is in, C(D, 2) (S004 Lemma 6.5.2(2); C(D_in + D_out, 2) directed). The
bound is checked on every scan, as for continual queries. A projected graph has no triangle table:
removing one node can change which edges the projection keeps far from it, and the projected
triangle count by more than C(D, 2).

**Continual release** (`dpsql.releases.continual`; the seed's SENSDIFF, S004 Algorithm 5) needs a
bound that holds in every window: a projected sequence has none (S004 Lemma 6.4.2). So a
graph used by continual queries declares ``bound = "declared"``: the data owner guarantees
that no node ever has more edges than the bound (an application limit, as Def 6.2.1
assumes), and that edges arrive in time order (none is inserted into a window already
released). The engine checks the bound on every scan and refuses, with nothing released
or charged, when the data breaks it (the cause goes to the owner's log); it cannot check
the arrival order. Then G_t is the graph of the edges of windows ≤ t (edges before the
first window count in it), a node is present once it has an edge, and one node changes
the whole difference sequence of the degree histogram by at most the seed's sequence
sensitivity (`statistics`; a node absent and a node of degree 0 differ only in an uncounted
bin) and of the edge count by D. Continual queries over directed graphs are not supported:
the seed bounds each degree kind's histogram, not their joint one.

Each measurement fetches the cleaned edge list (as dense node numbers), projects it in
Python (one pass, linear in the edges) and counts; only counts leave the engine's process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import duckdb
import numpy as np

from dpsql.tables.columns import Column
from dpsql.errors import CatalogError, NotSupportedError
from mechanisms.domain import Domain
from mechanisms.graphs import DegreeBound, DegreeHistogram, EdgeCount, GraphSequence, Triangles, project, \
    triangle_windows
from mechanisms.graphs.sequence import DEGREE, IN, OUT

EDGES, NODES, TRIANGLES = "edges", "nodes", "triangles"  # the tables of a graph declaration
_KEYS = {"source", "target", "directed", "max_degree", "max_in_degree", "max_out_degree", "degrees", "time", "bound",
         "triangles"}
PROJECTED, DECLARED = "projected", "declared"  # how the degree bound holds: forced by projection, or promised
MAX_DEGREE = 10_000


@dataclass(frozen=True)
class Graph:
    """One declared graph: its edge table, endpoints, direction, degree bound and node table."""

    edges: str
    source: str
    target: str
    bound: DegreeBound
    nodes: str
    time: str | None = None  # the edge table's column of arrival times
    declared: bool = False  # the owner guarantees the bound in every window (continual queries)
    triangles: str | None = None  # the table of triangles (a declared bound only)

    @property
    def directed(self) -> bool:
        return self.bound.directed

    def degree_columns(self) -> dict[str, dict]:
        """The node table's columns, as catalog declarations: each degree from 0 to its bound."""
        if not self.directed:
            return {"degree": {"type": "integer", "min": 0, "max": self.bound.degree}}
        return {"out_degree": {"type": "integer", "min": 0, "max": self.bound.out_degree},
                "in_degree": {"type": "integer", "min": 0, "max": self.bound.in_degree}}

    def contribution(self, role: str) -> int:
        """The most one node changes the projected table `role` (EDGES: its count; NODES: its histogram, L1).

        Undirected: the seed's projected one-graph sensitivities (`statistics`). Directed, the node
        table's joint (out, in) histogram: the node itself (1), and each other node whose degrees
        the projection changes moves between two cells (2 each); those are at most Σ|Δout| + Σ|Δin|
        ≤ D_in + D_out (`projection`, property 3): 1 + 2(D_in + D_out), the undirected form."""
        if role == EDGES:
            return EdgeCount().sensitivity(self.bound, 1, projected=True).l1
        if role == TRIANGLES:
            return Triangles().sensitivity(self.bound, 1).l1
        if not self.directed:
            return DegreeHistogram(DEGREE).sensitivity(self.bound, 1, projected=True).l1
        return 1 + 2 * self.bound.edges

    def explain(self, role: str) -> str:
        """What EXPLAIN says of the graph's table `role`: the unit, the projection and the sensitivity."""
        what = {EDGES: "the edge count", TRIANGLES: "the triangle count"}.get(role, "the degree histogram (L1)")
        how = ("its degree bound is declared and checked on every scan" if role == TRIANGLES else
               "edges are projected to the declared bound in node-id order (S004)")
        return (f"node DP: the privacy unit is a node of {self.edges}; {how}, so one node changes {what} by at "
                f"most {self.contribution(role)} (the \"rows per unit\" above)")

    def stream_contribution(self, role: str, horizon: int) -> int:
        """The most one node changes the whole difference sequence over `horizon` windows (L1): the
        seed's sensitivities under a declared bound (see the module doc)."""
        if not self.declared:
            raise NotSupportedError(
                f"graph {self.edges!r} forces its bound by projection, and a projected sequence has no "
                "sensitivity independent of the number of windows (S004 Lemma 6.4.2): a continual query needs "
                "bound = \"declared\" (the owner guarantees the bound in every window)")
        if role == EDGES:
            return EdgeCount().sensitivity(self.bound, horizon).l1
        if role == TRIANGLES:
            return Triangles().sensitivity(self.bound, horizon).l1
        if self.directed:
            raise NotSupportedError("continual queries over a directed graph's degrees are not supported (the seed "
                                    "bounds each degree kind's histogram, not their joint one)")
        return DegreeHistogram(DEGREE).sensitivity(self.bound, horizon).l1

    def describe(self) -> str:
        bound = (f"in-degree ≤ {self.bound.in_degree}, out-degree ≤ {self.bound.out_degree}" if self.directed
                 else f"degree ≤ {self.bound.degree}")
        how = "guaranteed" if self.declared else "projected to"
        return (f"graph {self.edges} ({self.source} {'->' if self.directed else '--'} {self.target}), node DP, "
                f"{how} {bound}; nodes in {self.nodes}" + (f"; arriving by {self.time}" if self.time else "")
                + (f"; triangles in {self.triangles}" if self.triangles else ""))


def parse_graph(name: str, spec: Any) -> Graph:
    """A [graphs.<name>] declaration, checked."""
    where = f"graph {name!r}"
    if not isinstance(spec, dict):
        raise CatalogError(f"{where} must be a table of settings")
    unknown = sorted(set(spec) - _KEYS)
    if unknown:
        raise CatalogError(f"{where} has unknown keys {unknown}; allowed: {sorted(_KEYS)}")
    names = {}
    for key in ("source", "target", "degrees"):
        value = spec.get(key)
        if not isinstance(value, str) or not value:
            raise CatalogError(f"{where} needs {key} = \"...\" (the {_WHAT[key]})")
        names[key] = value
    if names["source"].lower() == names["target"].lower():
        raise CatalogError(f"{where}: source and target must be two columns")
    if names["degrees"].lower() == name.lower():
        raise CatalogError(f"{where}: the node table needs a name of its own")
    triangles = spec.get("triangles")
    if triangles is not None and (not isinstance(triangles, str) or not triangles or
                                  triangles.lower() in (name.lower(), names["degrees"].lower())):
        raise CatalogError(f"{where}: triangles names the table of triangles, a name of its own")
    time = spec.get("time")
    if time is not None and (not isinstance(time, str) or not time):
        raise CatalogError(f"{where}: time names the column of each edge's arrival time")
    how = spec.get("bound", PROJECTED)
    if how not in (PROJECTED, DECLARED):
        raise CatalogError(f"{where}: bound is \"{PROJECTED}\" (default: forced by projection) or \"{DECLARED}\" "
                           "(guaranteed by the data owner)")
    directed = spec.get("directed", False)
    if not isinstance(directed, bool):
        raise CatalogError(f"{where}: directed is true or false")
    keys = ("max_out_degree", "max_in_degree") if directed else ("max_degree",)
    other = [k for k in ("max_degree", "max_out_degree", "max_in_degree") if k in spec and k not in keys]
    if other:
        raise CatalogError(f"{where}: a {'directed' if directed else 'undirected'} graph declares "
                           f"{' and '.join(keys)}, not {', '.join(other)}")
    bounds = {}
    for key in keys:
        value = spec.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DEGREE:
            raise CatalogError(f"{where} needs {key}, a whole number from 1 to {MAX_DEGREE:,}")
        bounds[key] = value
    bound = (DegreeBound(out_degree=bounds["max_out_degree"], in_degree=bounds["max_in_degree"]) if directed
             else DegreeBound(bounds["max_degree"]))
    if triangles is not None and not directed and bounds["max_degree"] < 2:
        raise CatalogError(f"{where}: a graph of degree at most 1 has no triangles; drop triangles")
    if triangles is not None and how != DECLARED:
        raise CatalogError(f"{where}: a table of triangles needs bound = \"{DECLARED}\": the projection does not bound "
                           "how much one node changes the triangle count (removing it can change which edges are "
                           "kept far from it); the owner must guarantee the degree bound")
    return Graph(name, names["source"], names["target"], bound, names["degrees"], time, how == DECLARED, triangles)


_WHAT = {"source": "column of each edge's first node", "target": "column of each edge's second node",
         "degrees": "name of the node table analysts query"}


def projected_degrees(graph: Graph, src: np.ndarray, dst: np.ndarray, nodes: int) -> np.ndarray:
    """(nodes, kinds) projected degrees — (degree) or (out, in) — of the cleaned edges among nodes 0..n−1,
    numbered in id order; each edge is added in that order while neither endpoint is full (`project`)."""
    sequence = GraphSequence(np.ones(nodes, dtype=np.int64), src, dst, 1, graph.directed)
    kept = project(sequence, graph.bound)
    kinds = (OUT, IN) if graph.directed else (DEGREE,)
    return np.stack([kept.degrees(kind)[-1] for kind in kinds], axis=1) if nodes else np.zeros((0, len(kinds)), int)


def graph_marginals(graph: Graph, role: str, domain: Domain, cliques: list[tuple[str, ...]], src: np.ndarray,
                    dst: np.ndarray) -> dict[tuple[str, ...], np.ndarray]:
    """The marginals of a graph's edge table (its count) or node table (its degree histogram, over `domain`)
    after the projection, or of its table of triangles (its count; BoundBroken when the data breaks the declared
    bound), from the cleaned edges (`dpsql.tables.graph_tables.edges_sql`)."""
    nodes = int(max(src.max(initial=-1), dst.max(initial=-1))) + 1
    if role == TRIANGLES:
        check_declared(graph, src, dst)
        count = len(triangle_windows(src, dst, np.zeros(src.size, dtype=np.int64)))
        return {q: np.asarray([count]) for q in cliques}
    degrees = projected_degrees(graph, src, dst, nodes)
    if role == EDGES:
        return {q: np.asarray([int(degrees[:, 0].sum()) // (1 if graph.directed else 2)]) for q in cliques}
    names = list(domain.attributes)  # the degree columns, in `degrees`' order
    out = {}
    for q in cliques:
        shape = tuple(domain.size_of(a) for a in q)
        cells = np.ravel_multi_index(tuple(degrees[:, names.index(a)] for a in q), shape) if q else \
            np.zeros(nodes, dtype=np.int64)
        out[q] = np.bincount(cells, minlength=int(np.prod(shape, dtype=np.int64))).astype(np.int64)
    return out


def graph_window_counts(columns: Mapping[str, Column], group: tuple[str, ...], where_sql: str, first: int,
                        last: int, changes: dict[str, np.ndarray]) -> np.ndarray:
    """(windows first..last−1, cells of `group`) sums of the change rows (`edge_tables.window_changes`) meeting
    `where_sql`: the difference sequence of a graph table's counts. (Evaluated in a DuckDB of its own: the
    rows are already out of the engine, and a few per edge.)"""
    con = duckdb.connect()
    try:
        con.register("changes", changes)
        bins = "".join(f", {columns[g].bin_sql()} AS b{i}" for i, g in enumerate(group))
        result = con.execute(f"SELECT w{bins}, SUM(n) AS n FROM changes WHERE ({where_sql}) AND w >= {int(first)} "
                             f"AND w < {int(last)} GROUP BY ALL").fetchnumpy()
    finally:
        con.close()
    shape = (last - first, *(columns[g].size for g in group))
    out = np.zeros(shape, dtype=np.int64)
    index = (np.asarray(result["w"], dtype=np.int64) - first,
             *(np.asarray(result[f"b{i}"], dtype=np.int64) for i in range(len(group))))
    np.add.at(out, index, np.asarray(result["n"], dtype=np.int64))
    return out.reshape(last - first, -1)


class BoundBroken(Exception):
    """The data breaks a declared degree bound: the owner's error; nothing may be released."""


def check_declared(graph: Graph, src: np.ndarray, dst: np.ndarray) -> None:
    """Raise BoundBroken unless every node of the cleaned edges is within the declared bound."""
    if graph.directed:
        broken = np.bincount(dst).max(initial=0) > graph.bound.in_degree or \
            np.bincount(src).max(initial=0) > graph.bound.out_degree
    else:
        broken = np.bincount(np.concatenate([src, dst])).max(initial=0) > graph.bound.degree
    if broken:
        raise BoundBroken(f"a node of {graph.edges!r} has more edges than its declared bound")


def window_changes(graph: Graph, role: str, src: np.ndarray, dst: np.ndarray, windows: np.ndarray
                   ) -> dict[str, np.ndarray]:
    """Rows (`w`, the role's columns, `n`) whose sums of `n` per window and cell are the difference sequence
    of the table `role` of a graph with a declared bound: EDGES, each edge's window (no column); NODES, per
    edge end, the node leaving its degree's bin (−1, unless it had none: it arrives) and entering the next
    (+1); TRIANGLES, each triangle's window (its last edge's). Edges before the first window count in it. Raises
    BoundBroken when a degree passes the bound."""
    windows = np.maximum(np.asarray(windows, dtype=np.int64), 0)
    if graph.directed:
        check_declared(graph, src, dst)
    ends, when = np.concatenate([src, dst]), np.concatenate([windows, windows])
    order = np.lexsort((when, ends))  # each node's edge ends in window order
    ends, when = ends[order], when[order]
    first = np.r_[0, np.flatnonzero(np.diff(ends)) + 1] if ends.size else np.zeros(0, np.int64)
    degree = np.arange(ends.size) - np.repeat(first, np.diff(np.r_[first, ends.size])) + 1  # after this end
    if not graph.directed and degree.max(initial=0) > graph.bound.degree:
        raise BoundBroken(f"a node of {graph.edges!r} has more edges than its declared bound")
    if role == EDGES:
        return {"w": windows, "n": np.ones(windows.size, dtype=np.int64)}
    if role == TRIANGLES:
        arrivals = triangle_windows(src, dst, windows)
        return {"w": arrivals, "n": np.ones(arrivals.size, dtype=np.int64)}
    if graph.directed:
        raise NotSupportedError("continual queries over a directed graph's degrees are not supported")
    left = degree > 1  # the end moves its node out of bin degree − 1 (a node's first edge: it arrives)
    return {"w": np.concatenate([when, when[left]]), "degree": np.concatenate([degree, degree[left] - 1]),
            "n": np.concatenate([np.ones(degree.size, np.int64), -np.ones(int(left.sum()), np.int64)])}


__all__ = ["DECLARED", "EDGES", "NODES", "PROJECTED", "TRIANGLES", "BoundBroken", "Graph", "check_declared",
           "graph_marginals", "graph_window_counts", "parse_graph", "projected_degrees", "window_changes"]
