"""The SQL every backend runs: one scan computing the exact marginals of a plan's cliques.

Raw rows never leave the database: each clique becomes a GROUP BY over the
binning expressions of the catalog, all cliques of one plan in a single scan
(GROUPING SETS), and only (bin indices, count) rows come back. The SQL is
written once, in DuckDB's dialect (`marginal_sql`); an engine that speaks
another dialect gets it transpiled by sqlglot (`SQLBackend.dialect`).

A table with a privacy unit is bounded in the same scan (`bounded_source`):
rows without a unit are dropped and each unit keeps at most k rows, ranked by
ROW_NUMBER() over a SHA-256 of the ledger's secret key and the row's bins.

Only dpsql's SQL runs on a backend's connection. Before the first scan of a table,
a query that reads no rows checks that the database holds what the catalog
declares (its failure names what is missing: schema, not data). A scan that then
fails says one fixed thing (`SCAN_FAILED`), whatever the cause, and the cause goes
to the data owner's log (logger ``dpsql.scan``): no message can depend on the data.
"""

from __future__ import annotations

import logging
from typing import Callable, Mapping, Protocol, Sequence

import numpy as np
import sqlglot

from dpsql.catalog import Table
from dpsql.columns import CATEGORICAL, KEY, Column, StoredType, quote_identifier, quote_string
from dpsql.edge_tables import BoundBroken, Graph, graph_marginals, graph_window_counts, window_changes
from dpsql.errors import OperationalError, ProgrammingError
from mechanisms.ldp.answering import payload_of
from mechanisms.ldp.client import HASH_PRIME
from mechanisms.ldp.tally import Payload, ReportTally

Clique = tuple[str, ...]
_UNIT, _RANK, _FIRST = "__dpsql_unit", "__dpsql_rank", "__dpsql_first"
SCAN_FAILED = (
    "the measurement failed in the database; nothing was charged (the data owner's log, logger 'dpsql.scan', "
    "has the cause)"
)
BOUND_BROKEN = (  # said the same whatever node broke it: the owner's promise is what failed
    "the graph breaks the degree bound its data owner declared; nothing was released or charged (the owner's "
    "log, logger 'dpsql.scan', says so)"
)
log = logging.getLogger("dpsql.scan")
Relation = Callable[[str], str]  # a table name -> the SQL naming it in the engine
Stored = Mapping[str, StoredType] | None  # declared column -> its stored type (`Table.fits_sql`)
Within = Mapping[Clique, Sequence[np.ndarray]] | None  # clique -> the bins it needs, per attribute


class Backend(Protocol):
    def marginals(self, table: Table, cliques: list[Clique], key: str | None = None, within: Within = None
                  ) -> dict[Clique, np.ndarray]:
        """Exact integer counts of each clique's marginal, flattened in clique order.

        `key` is the ledger's secret bounding key, needed for a table with a privacy unit. With
        `within` (clique -> per attribute, the bins its measurements read), cells outside a clique's
        box may be counted as 0.
        """

    def dropped_rows(self, table: Table, cap: int) -> int:
        """Σ over privacy units of min(rows beyond the bound, cap): what bounding drops, capped."""

    def key_counts(self, table: Table, column: str, clique: tuple[str, ...], key: str | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Exact counts of the bounded rows per key of key column `column` and cell of `clique`:
        (keys as strings, flat cell indices in clique order, counts); rows with a NULL key are left out."""

    def window_counts(self, table: Table, group: tuple[str, ...], where_sql: str, window_sql: str, first: int,
                      last: int, key: str | None = None) -> np.ndarray:
        """Exact counts of the bounded rows meeting `where_sql` per window (`window_sql`, from `first` to
        `last` − 1) and cell of `group` (flat, last column fastest): an array of windows × cells."""

    def report_tally(self, table: Table) -> ReportTally:
        """A local table's reports, tallied per (stratum, item) as its protocol's payload says (`mechanisms.ldp.tally`)."""

    def interrupt(self) -> None:
        """Stop a running scan (called from another thread); may do nothing."""

    def progress(self) -> float:
        """How far a running scan has got, in percent (-1: unknown)."""


def unit_rows_sql(table: Table, relation: Relation = quote_identifier, stored: Stored = None) -> str:
    """The rows that fit the catalog, with their privacy unit as column `__dpsql_unit`.

    A linked table reaches its unit by joining along its foreign keys; a row whose key
    finds no row gets no unit, and one whose key finds several counts once per match.
    """
    unit = table.unit
    rows = f"SELECT * FROM {relation(table.name)} WHERE {table.fits_sql(stored)}"
    if not unit.path:
        return f"SELECT *, {quote_identifier(unit.column)} AS {_UNIT} FROM ({rows}) AS t"
    joins, previous = [], "t"
    for i, hop in enumerate(unit.path, start=1):
        joins.append(
            f"JOIN {relation(hop.table)} AS p{i} ON {previous}.{quote_identifier(hop.column)} "
            f"= p{i}.{quote_identifier(hop.key)}"
        )
        previous = f"p{i}"
    return f"SELECT t.*, {previous}.{quote_identifier(unit.column)} AS {_UNIT} FROM ({rows}) AS t {' '.join(joins)}"


def bounded_source(table: Table, key: str | None, relation: Relation = quote_identifier,
                   stream: tuple[str, str] | None = None, stored: Stored = None) -> str:
    """FROM-clause SQL of the rows a measurement counts.

    Without a privacy unit: the rows that fit the catalog. With one: of those, the rows
    with a unit, at most k per unit: an append-only table's first k by time (a row that
    arrives later never evicts one already counted; ties by their bins), other tables' by
    SHA-256 of (secret key, unit, the bins of every declared column, a key column's raw key:
    `Column.rank_sql`). Rows of a unit with equal bins are interchangeable in every
    marginal, so the kept histogram is the same on every scan and engine. The choice
    depends on the unit's own rows only, so one unit changes any histogram by at most k rows.

    `stream` = (prefix, active), for an append-only table: only rows meeting `prefix` (a time
    prefix: no later row can rank before them) are ranked, and only units with a row meeting
    `active` (the rows the scan counts) — the same ranks as over the whole table, for those rows.
    `stored`: the engine's column types; checks they make true for every row are left out (`Table.fits_sql`).
    """
    if table.unit is None:
        return f"{relation(table.name)} WHERE {table.fits_sql(stored)}"
    if not key:
        raise ProgrammingError(f"measuring {table.name!r} needs the ledger's bounding key (it has a privacy unit)")
    parts = [quote_string(key), f"CAST({_UNIT} AS VARCHAR)"]
    parts += [f"CAST({c.rank_sql()} AS VARCHAR)" for c in table.columns.values()]
    order = f"SHA256(CONCAT_WS('|', {', '.join(parts)}))"
    if table.append_only:  # a stream: the first k rows by time (a row arriving later never evicts one counted),
        # ties by their bins; the unit chooses its rows' times anyway, so no secret order is needed
        order = ", ".join([quote_identifier(table.time_column), *parts[2:]])
    rows, within = unit_rows_sql(table, relation, stored), ""
    if stream is not None:
        if not table.append_only:
            raise ProgrammingError(f"table {table.name!r} is not append-only: it is bounded over all its rows")
        prefix, active = stream
        within = (f" AND {prefix} AND {_UNIT} IN (SELECT {_UNIT} FROM ({rows}) AS a WHERE {_UNIT} IS NOT NULL "
                  f"AND {active})")
    ranked = (
        f"SELECT *, ROW_NUMBER() OVER (PARTITION BY {_UNIT} ORDER BY {order}) "
        f"AS {_RANK} FROM ({rows}) AS u WHERE {_UNIT} IS NOT NULL{within}"
    )
    return f"(SELECT * FROM ({ranked}) AS r WHERE {_RANK} <= {table.unit.bound}) AS bounded"


def unit_pairs_source(table: Table, key: str | None, relation: Relation = quote_identifier,
                      stored: Stored = None) -> str:
    """FROM-clause SQL of a `Table.distinct_units` table: the distinct (unit, bins) pairs of its base
    table's rows that fit the catalog, have a unit and meet its condition; each column holds its bin.

    A unit counts once per cell whatever its rows, so its rows are not bounded (bounding them before the
    condition lost the units whose kept rows all failed it). Each unit keeps at most k of its cells
    (`Table.contribution`): an append-only table's first k by their first row's time, others' by
    SHA-256 of (secret key, unit, bins). Without a GROUP BY a unit has one pair: nothing is dropped."""
    base = table.units_of
    columns = list(table.columns.values())
    bins = "".join(f", {c.bin_sql()} AS {quote_identifier(c.name)}" for c in columns)
    rows = f"({unit_rows_sql(base, relation, stored)}) AS u WHERE {_UNIT} IS NOT NULL AND ({table.units_where})"
    if not columns:
        return f"(SELECT DISTINCT {_UNIT} FROM {rows}) AS pairs"
    if not key:
        raise ProgrammingError(f"measuring {table.name!r} needs the ledger's bounding key (it has a privacy unit)")
    names = [quote_identifier(c.name) for c in columns]
    cells = [f"CAST({n} AS VARCHAR)" for n in names]
    if base.append_only:  # a cell is placed by its first row: a later row never evicts a cell counted
        pairs = (f"SELECT {_UNIT}{bins}, MIN({quote_identifier(base.time_column)}) AS {_FIRST} FROM {rows} "
                 f"GROUP BY {', '.join(str(i) for i in range(1, len(columns) + 2))}")
        order = ", ".join([_FIRST, *names])
    else:
        pairs = f"SELECT DISTINCT {_UNIT}{bins} FROM {rows}"
        order = f"SHA256(CONCAT_WS('|', {quote_string(key)}, CAST({_UNIT} AS VARCHAR), {', '.join(cells)}))"
    ranked = f"SELECT *, ROW_NUMBER() OVER (PARTITION BY {_UNIT} ORDER BY {order}) AS {_RANK} FROM ({pairs}) AS d"
    return f"(SELECT {_UNIT}, {', '.join(names)} FROM ({ranked}) AS r WHERE {_RANK} <= {table.contribution}) AS pairs"


def dropped_rows_sql(table: Table, cap: int, relation: Relation = quote_identifier, stored: Stored = None) -> str:
    """One row, column `n`: Σ over units of min(rows − k, cap) for units with more than k rows."""
    k = table.unit.bound
    per_unit = (
        f"SELECT {_UNIT}, COUNT(*) AS unit_rows FROM ({unit_rows_sql(table, relation, stored)}) AS u "
        f"WHERE {_UNIT} IS NOT NULL GROUP BY {_UNIT}"
    )
    return (
        f"SELECT CAST(COALESCE(SUM(LEAST(unit_rows - {k}, {int(cap)})), 0) AS BIGINT) AS n "
        f"FROM ({per_unit}) AS c WHERE unit_rows > {k}"
    )


def _grouped_raw(column: Column) -> bool:
    """Whether to group by the column's raw value and bin the groups afterwards.

    Rows of a categorical without `other` hold only declared values (or NULL), so
    grouping the raw strings gives at most `size` groups, one per bin, and the string
    CASE runs on those groups instead of on every row; a key column's long CASE over its
    released keys likewise runs once per distinct key. Other columns are binned per
    row (cheap arithmetic; their raw values are unbounded).
    """
    return (column.kind == CATEGORICAL and column.other is None) or column.kind == KEY


def marginal_sql(
    table: Table, cliques: list[Clique], key: str | None = None, relation: Relation = quote_identifier,
    stored: Stored = None, within: Within = None, trusted: bool = False,
) -> tuple[str, list[str]]:
    """One scan of the protected table computing every clique's marginal (DuckDB SQL).

    The scan keeps the rows that fit the catalog (bounded per privacy unit with the
    secret `key`: `bounded_source`), bins each used column (a categorical
    without `other` is grouped raw and binned per group: `_grouped_raw`) and counts
    the groups. Returns the SQL and its bin column names; the result has those
    columns, a grouping id `g` and a count `n` per row, several rows of one bin to
    be summed. The id has bit (k-1-i) set when the i-th of the k columns is not
    grouped, as GROUPING() does, spelled with one-argument GROUPING() calls, which
    every engine has. `within` (clique -> per attribute, the bins needed: `measurement.support`)
    lets the scan read only rows in the bins some clique needs (`Column.within_sql`); the
    cells outside are then counted as 0, which the measurements never read. `trusted`: `stored` holds
    what the owner validated, not what the schema guarantees (`dpsql.validation`); a row that does not fit
    after all has no bin in some column, and its groups are left out of that column's marginals.
    """
    pairs = table.units_of is not None
    source = (unit_pairs_source(table, key, relation, stored) if pairs
              else bounded_source(table, key, relation, stored=stored))
    used = [table.columns[c] for c in table.columns if any(c in q for q in cliques)]
    if not used:
        return f"SELECT 0 AS g, COUNT(*) AS n FROM {source}", []
    keys = [f"k{i}" for i in range(len(used))]
    names = [f"b{i}" for i in range(len(used))]
    raw = {c.name for c in used if pairs or _grouped_raw(c)}  # pairs hold bins already
    integral = {name for name, t in (stored or {}).items() if t.integral}
    scan = ", ".join(f"{quote_identifier(c.name) if c.name in raw else c.bin_sql(integral=c.name in integral)} AS {k}"
                     for c, k in zip(used, keys))
    if len(cliques) == 1:  # a plain GROUP BY is cheaper than a single grouping set
        group, grouping = ", ".join(keys), "0"
    else:
        index = {c.name: k for c, k in zip(used, keys)}
        group = "GROUPING SETS (" + ", ".join("(" + ", ".join(index[a] for a in q) + ")" for q in cliques) + ")"
        grouping = " + ".join(f"GROUPING({k}) * {1 << (len(keys) - 1 - i)}" for i, k in enumerate(keys))
    needed = "" if pairs else _needed_rows(used, cliques, within, integral)
    if needed:  # a filter on the (bounded) rows: the engine pushes it down to the table's scan
        source = f"(SELECT * FROM {source}) AS s WHERE {needed}"
    counted = (
        f"SELECT {', '.join(keys)}, {grouping} AS g, COUNT(*) AS n "
        f"FROM (SELECT {scan} FROM {source}) GROUP BY {group}"
    )
    binned = ", ".join(f"{c.bin_sql(k) if c.name in raw and not pairs else k} AS {b}" for c, k, b in zip(used, keys, names))
    sql = f"SELECT {binned}, g, n FROM ({counted})"
    if trusted:  # a column's bin is NULL only where the column is not grouped, or a row did not fit
        binned_only = " AND ".join(f"({b} IS NOT NULL OR g & {1 << (len(names) - 1 - i)} <> 0)"
                                   for i, b in enumerate(names))
        sql = f"SELECT * FROM ({sql}) WHERE {binned_only}"
    return sql, names


def _needed_rows(used: list[Column], cliques: list[Clique], within: Within, integral: set[str]) -> str:
    """The condition selecting the rows some clique's needed bins hold ("": every row). A clique without
    an attribute needs every value of it."""
    if not within:
        return ""
    parts = []
    for column in used:
        bins = np.zeros(column.size, dtype=bool)
        for q in cliques:
            box = within.get(q)
            bins |= box[q.index(column.name)] if box is not None and column.name in q else True
        if (part := column.within_sql(bins, column.name in integral)) is not None:
            parts.append(part)
    return " AND ".join(parts)


def key_counts_sql(table: Table, column: str, clique: tuple[str, ...], key: str | None = None,
                   relation: Relation = quote_identifier, stored: Stored = None) -> str:
    """Counts of the bounded rows per (key, bins of `clique`), as columns `k` (VARCHAR), `b0`… and `n`."""
    source = bounded_source(table, key, relation, stored=stored)
    bins = [f"{table.columns[a].bin_sql()} AS b{i}" for i, a in enumerate(clique)]
    keys = ["k", *(f"b{i}" for i in range(len(clique)))]
    return (f"SELECT {', '.join(keys)}, COUNT(*) AS n FROM (SELECT CAST({quote_identifier(column)} AS VARCHAR) AS k"
            f"{''.join(', ' + b for b in bins)} FROM {source}) AS keyed WHERE k IS NOT NULL GROUP BY {', '.join(keys)}")


def window_counts_sql(table: Table, group: tuple[str, ...], where_sql: str, window_sql: str, first: int, last: int,
                      key: str | None = None, relation: Relation = quote_identifier, stored: Stored = None
                      ) -> str:
    """Counts of the bounded rows meeting `where_sql` per (window `w`, bins `b0`…) for windows [first, last)."""
    bins = "".join(f", {table.columns[g].bin_sql()} AS b{i}" for i, g in enumerate(group))
    keys = ", ".join(["w", *(f"b{i}" for i in range(len(group)))])
    counted = f"{window_sql} >= {int(first)} AND {window_sql} < {int(last)}"
    stream = (f"{window_sql} < {int(last)}", counted) if table.append_only and table.unit is not None else None
    source = bounded_source(table, key, relation, stream, stored)
    return (f"SELECT {keys}, COUNT(*) AS n FROM (SELECT {window_sql} AS w{bins} FROM {source}"
            f" WHERE {where_sql}) AS windowed WHERE w >= {int(first)} AND w < {int(last)} GROUP BY {keys}")


def _report_items(table: Table, payload: Payload) -> str:
    """The SQL of the cells (or indices) each report supports, one row each (UNNEST for a list)."""
    if payload.hashed:  # local hashing: the cells j with ((a·j + b) mod P) mod g = y
        g, cells = table.client.range, table.domain.size()
        return (f"UNNEST(list_filter(range({cells}), lambda x: ((CAST(\"a\" AS BIGINT) * x + \"b\") % {HASH_PRIME}) % {g} "
                "= \"y\"))")
    return f"UNNEST({quote_identifier(payload.items)})" if payload.items else quote_identifier(payload.item)


def report_tally_sql(table: Table, relation: Relation = quote_identifier) -> str:
    """Per (stratum `s`, item `j`) of a local table's reports: how many support the item (`n`) and the sum of their
    signs (`t`); rows with j = −1 count each stratum's reports (`mechanisms.ldp.tally`)."""
    payload = payload_of(table.client)
    source = relation(table.name)
    stratum = f"COALESCE(CAST({quote_identifier(payload.stratum)} AS BIGINT), -2)" if payload.stratum else "0"
    sign = f"COALESCE(CAST({quote_identifier(payload.sign)} AS DOUBLE), 0)" if payload.sign else "0.0"
    return (f"SELECT s, CAST(j AS BIGINT) AS j, COUNT(*) AS n, SUM(t) AS t FROM (SELECT {stratum} AS s, "
            f"{_report_items(table, payload)} AS j, {sign} AS t FROM {source}) AS r WHERE j IS NOT NULL GROUP BY s, j "
            f"UNION ALL SELECT {stratum} AS s, -1 AS j, COUNT(*) AS n, 0.0 AS t FROM {source} GROUP BY 1")


def report_pairs_sql(table: Table, relation: Relation = quote_identifier) -> str:
    """Per pair of cells (`j`, `k`): how many reports support both (local hashing's co-support, `n`)."""
    items = _report_items(table, payload_of(table.client))[len("UNNEST("):-1]
    return (f"SELECT CAST(j AS BIGINT) AS j, CAST(k AS BIGINT) AS k, COUNT(*) AS n FROM (SELECT j, UNNEST(l) AS k FROM "
            f"(SELECT UNNEST(l) AS j, l FROM (SELECT {items} AS l FROM {relation(table.name)}) AS r) AS p) AS q "
            "GROUP BY j, k")


def graph_edges_sql(graph: Graph, relation: Relation = quote_identifier, window_sql: str | None = None) -> str:
    """The cleaned edges of a graph's edge table as dense node numbers `s`, `t` (0..n−1, in id order), and
    with `window_sql` (over the edge table's time column) each edge's window `w`, its earliest: NULL
    endpoints (and times) and self-loops left out, repeats (and, undirected, reversals) kept once — each
    rule looks at one edge, so removing a node removes only its own edges (`dpsql.edge_tables`)."""
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


def decode_marginals(
    table: Table, cliques: list[Clique], names: list[str], result: dict[str, np.ndarray]
) -> dict[Clique, np.ndarray]:
    """Flattened count vectors (clique order) from the columns of `marginal_sql`'s result."""
    used = [c for c in table.columns if any(c in q for q in cliques)]
    grouping = np.asarray(result["g"], dtype=np.int64)
    counts = np.asarray(result["n"], dtype=np.int64)
    out = {}
    for q in cliques:
        mask = sum(1 << (len(names) - 1 - used.index(a)) for a in q)
        rows = grouping == ((1 << len(names)) - 1 - mask)
        shape = tuple(table.domain.size_of(a) for a in q)  # clique order, as given
        vec = np.zeros(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
        if q:
            idx = tuple(np.asarray(result[names[used.index(a)]], dtype=np.int64)[rows] for a in q)
            np.add.at(vec, np.ravel_multi_index(idx, shape), counts[rows])
        else:
            vec[0] = counts[rows].sum()
        out[q] = vec
    return out


class SQLBackend:
    """A backend that runs `marginal_sql`, transpiled from DuckDB to `dialect`.

    A subclass names its engine, its sqlglot `dialect`, the exception types by which
    the engine refuses or fails a query (`errors`), and implements `fetch`; it may
    name tables its own way (`relation`).
    """

    engine = "DuckDB"
    dialect = "duckdb"
    errors: tuple[type[Exception], ...] = ()

    def __init__(self) -> None:
        self._checked: set[tuple[str, str]] = set()

    def relation(self, name: str) -> str:
        """The SQL naming table `name` in the engine."""
        return quote_identifier(name)

    def stored_types(self, table: Table) -> dict[str, StoredType]:
        """What the engine's schema says of the table's declared columns (`StoredType`), read at each
        scan, from no row: checks their types make true are left out. Nothing where the engine does not say."""
        return {}

    def marginal_types(self, table: Table) -> tuple[dict[str, StoredType], bool]:
        """The column types a marginal scan may rely on, and whether they are the owner's validation
        (`dpsql.validation`) rather than the schema's guarantee: `stored_types` here."""
        return self.stored_types(table), False

    def marginals(self, table: Table, cliques: list[Clique], key: str | None = None, within: Within = None
                  ) -> dict[Clique, np.ndarray]:
        cliques = list(dict.fromkeys(cliques))
        if not cliques:
            return {}
        self.check(table, key)
        if table.graph is not None:
            edges = self._run(graph_edges_sql(table.graph, self.relation), ["s", "t", "w"],
                              f"reading the edges of {table.graph.edges!r}")
            try:
                return graph_marginals(table.graph, table.role, table.domain, cliques,
                                       np.asarray(edges["s"], dtype=np.int64), np.asarray(edges["t"], dtype=np.int64))
            except BoundBroken as e:
                log.error("%s: the data breaks the catalog's declared degree bound", e)
                raise OperationalError(BOUND_BROKEN) from None
        stored, trusted = self.marginal_types(table.units_of or table)
        sql, names = marginal_sql(table, cliques, key, self.relation, stored, within, trusted)
        result = self._run(sql, names + ["g", "n"], f"computing marginals of {table.name!r}", key)
        return decode_marginals(table, cliques, names, result)

    def key_counts(self, table: Table, column: str, clique: tuple[str, ...], key: str | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self.check(table, key)
        names = [f"b{i}" for i in range(len(clique))]
        result = self._run(key_counts_sql(table, column, clique, key, self.relation, self.stored_types(table)),
                           ["k", *names, "n"],
                           f"counting the keys of {table.name}.{column}", key)
        shape = tuple(table.domain.size_of(a) for a in clique)
        cells = (np.ravel_multi_index(tuple(np.asarray(result[b], dtype=np.int64) for b in names), shape)
                 if clique else np.zeros(len(result["n"]), dtype=np.int64))
        return np.asarray(result["k"], dtype=object), cells, np.asarray(result["n"], dtype=np.int64)

    def window_counts(self, table: Table, group: tuple[str, ...], where_sql: str, window_sql: str, first: int,
                      last: int, key: str | None = None) -> np.ndarray:
        self.check(table, key)
        if table.graph is not None:
            edges = self._run(graph_edges_sql(table.graph, self.relation, window_sql), ["s", "t", "w"],
                              f"reading the edges of {table.graph.edges!r}")
            try:
                changes = window_changes(table.graph, table.role, *(np.asarray(edges[c], dtype=np.int64)
                                                                    for c in ("s", "t", "w")))
            except BoundBroken as e:
                log.error("%s: the data breaks the catalog's declared degree bound", e)
                raise OperationalError(BOUND_BROKEN) from None
            return graph_window_counts(table.columns, group, where_sql, first, last, changes)
        names = [f"b{i}" for i in range(len(group))]
        sql = window_counts_sql(table, group, where_sql, window_sql, first, last, key, self.relation,
                                self.stored_types(table))
        result = self._run(sql, ["w", *names, "n"], f"counting windows of {table.name!r}", key)
        shape = (last - first, *(table.columns[g].size for g in group))
        out = np.zeros(shape, dtype=np.int64)
        index = (np.asarray(result["w"], dtype=np.int64) - first,
                 *(np.asarray(result[b], dtype=np.int64) for b in names))
        np.add.at(out, index, np.asarray(result["n"], dtype=np.int64))
        return out.reshape(last - first, -1)

    def report_tally(self, table: Table) -> ReportTally:
        what = f"tallying the reports of {table.name!r}"
        r = self._run(report_tally_sql(table, self.relation), ["s", "j", "n", "t"], what)
        s, j, n, t = (np.asarray(r[c]) for c in ("s", "j", "n", "t"))
        s, j, n = s.astype(np.int64), j.astype(np.int64), n.astype(np.int64)
        drawn = {int(a): int(b) for a, b in zip(s[j == -1], n[j == -1])}
        pairs = None
        if payload_of(table.client).hashed:
            p = self._run(report_pairs_sql(table, self.relation), ["j", "k", "n"], what)
            pairs = np.stack([np.asarray(p[c], dtype=float) for c in ("j", "k", "n")], axis=1).reshape(-1, 3)
        keep = j >= 0
        return ReportTally(int(n[~keep].sum()), s[keep], j[keep], n[keep].astype(float), t[keep].astype(float), drawn,
                           pairs)

    def dropped_rows(self, table: Table, cap: int) -> int:
        self.check(table, "")
        sql = dropped_rows_sql(table, cap, self.relation, self.stored_types(table))
        result = self._run(sql, ["n"], f"counting the rows bounding drops from {table.name!r}")
        return int(result["n"][0])

    def check(self, table: Table, key: str | None) -> None:
        """Check, reading no rows, that the engine holds the table and columns the catalog declares
        (and that binding them works); its failure is about the schema, so its message is shown."""
        if (table.name.lower(), table.signature()) in self._checked:
            return
        sql = graph_edges_sql(table.graph, self.relation) if table.graph is not None else \
            marginal_sql(table, [tuple(table.domain.attributes)], key or "-", self.relation)[0]
        if self.dialect != "duckdb":
            sql = sqlglot.transpile(sql, read="duckdb", write=self.dialect)[0]
        try:
            self.fetch(f"SELECT * FROM ({sql}) AS checked LIMIT 0", [])
        except self.errors as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            log.error("the catalog's table %r does not bind on %s: %s", table.name, self.engine, e)
            raise OperationalError(
                f"the database does not hold table {table.name!r} as the catalog declares it ({first}); the data "
                "owner must fix the catalog or the database; nothing was charged") from None
        self._checked.add((table.name.lower(), table.signature()))

    def _run(self, sql: str, columns: list[str], what: str, secret: str | None = None) -> dict[str, np.ndarray]:
        """`fetch` in the engine's dialect. Any failure (nothing is charged yet) raises the one
        message `SCAN_FAILED`; its cause is logged for the data owner, the secret key blotted out."""
        if self.dialect != "duckdb":
            sql = sqlglot.transpile(sql, read="duckdb", write=self.dialect)[0]
        try:
            return self.fetch(sql, columns)
        except self.errors as e:
            cause = str(e).replace(secret, "<key>") if secret else str(e)
            log.error("%s on %s failed: %s: %s", what, self.engine, type(e).__name__, cause)
            raise OperationalError(SCAN_FAILED) from None

    def interrupt(self) -> None:
        """Stop the running scan, where the engine can."""

    def progress(self) -> float:
        """How far the running scan has got, in percent (-1: unknown)."""
        return -1.0

    def fetch(self, sql: str, columns: list[str]) -> dict[str, np.ndarray]:
        """Run `sql` in the engine; each named result column as an integer array (NULL: any value), a text
        column as an array of strings."""
        raise NotImplementedError
