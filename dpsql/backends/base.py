"""The SQL every backend runs: one scan computing the exact marginals of a plan's cliques.

Raw rows never leave the database: each clique becomes a GROUP BY over the
binning expressions of the catalog, all cliques of one plan in a single scan
(GROUPING SETS), and only (bin indices, count) rows come back. The SQL is
written once, in DuckDB's dialect (`marginal_sql`); an engine that speaks
another dialect gets it transpiled by sqlglot (`SQLBackend.dialect`).

A table with a privacy unit is bounded in the same scan (its kind's `source_sql`):
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
from typing import Mapping, Protocol, Sequence

import numpy as np
import sqlglot

from dpsql.errors import OperationalError
from dpsql.tables.columns import CATEGORICAL, KEY, Column, StoredType, quote_identifier
from dpsql.tables.local_reports import LocalReportTable
from dpsql.tables.table import Relation, Stored, Table
from mechanisms.ldp.tally import ReportTally

Clique = tuple[str, ...]
SCAN_FAILED = (
    "the measurement failed in the database; nothing was charged (the data owner's log, logger 'dpsql.scan', "
    "has the cause)"
)
SHARED_KEY = (  # said the same whatever key it is: the owner's declaration is what failed
    "a foreign key of the catalog references a key that rows of several privacy units hold, so one person's "
    "rows are not bounded; nothing was released or charged (the owner's log, logger 'dpsql.scan', says which table)"
)
log = logging.getLogger("dpsql.scan")
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
    secret `key`: the kind's `Table.source_sql`), bins each used column (a categorical
    without `other` is grouped raw and binned per group: `_grouped_raw`) and counts
    the groups. Returns the SQL and its bin column names; the result has those
    columns, a grouping id `g` and a count `n` per row, several rows of one bin to
    be summed. The id has bit (k-1-i) set when the i-th of the k columns is not
    grouped, as GROUPING() does, spelled with one-argument GROUPING() calls, which
    every engine has. `within` (clique -> per attribute, the bins needed: `measurement.support`)
    lets the scan read only rows in the bins some clique needs (`Column.within_sql`); the
    cells outside are then counted as 0, which the measurements never read. `trusted`: `stored` holds
    what the owner validated, not what the schema guarantees (`dpsql.tables.validation`); a row that does not fit
    after all has no bin in some column, and its groups are left out of that column's marginals.
    """
    pairs = table.holds_bins
    source = table.source_sql(key, relation, stored)
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
    source = table.source_sql(key, relation, stored)
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
    source = table.source_sql(key, relation, stored, (f"{window_sql} < {int(last)}", counted))
    return (f"SELECT {keys}, COUNT(*) AS n FROM (SELECT {window_sql} AS w{bins} FROM {source}"
            f" WHERE {where_sql}) AS windowed WHERE w >= {int(first)} AND w < {int(last)} GROUP BY {keys}")


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
        (`dpsql.tables.validation`) rather than the schema's guarantee: `stored_types` here."""
        return self.stored_types(table), False

    def marginals(self, table: Table, cliques: list[Clique], key: str | None = None, within: Within = None
                  ) -> dict[Clique, np.ndarray]:
        cliques = list(dict.fromkeys(cliques))
        if not cliques:
            return {}
        self.check(table, key)
        return table.count_marginals(self, cliques, key, within)

    def scan_marginals(self, table: Table, cliques: list[Clique], key: str | None, within: Within
                       ) -> dict[Clique, np.ndarray]:
        """The row scan (`marginal_sql`) a table whose rows are counted asks for (`Table.count_marginals`)."""
        stored, trusted = self.marginal_types(table.stored_table)
        sql, names = marginal_sql(table, cliques, key, self.relation, stored, within, trusted)
        result = self.run(sql, names + ["g", "n"], f"computing marginals of {table.name!r}", key)
        return decode_marginals(table, cliques, names, result)

    def key_counts(self, table: Table, column: str, clique: tuple[str, ...], key: str | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self.check(table, key)
        names = [f"b{i}" for i in range(len(clique))]
        result = self.run(key_counts_sql(table, column, clique, key, self.relation, self.stored_types(table)),
                          ["k", *names, "n"],
                          f"counting the keys of {table.name}.{column}", key)
        shape = tuple(table.domain.size_of(a) for a in clique)
        cells = (np.ravel_multi_index(tuple(np.asarray(result[b], dtype=np.int64) for b in names), shape)
                 if clique else np.zeros(len(result["n"]), dtype=np.int64))
        return np.asarray(result["k"], dtype=object), cells, np.asarray(result["n"], dtype=np.int64)

    def window_counts(self, table: Table, group: tuple[str, ...], where_sql: str, window_sql: str, first: int,
                      last: int, key: str | None = None) -> np.ndarray:
        self.check(table, key)
        return table.count_windows(self, group, where_sql, window_sql, first, last, key)

    def scan_windows(self, table: Table, group: tuple[str, ...], where_sql: str, window_sql: str, first: int,
                     last: int, key: str | None) -> np.ndarray:
        """The row scan (`window_counts_sql`) a table whose rows are counted asks for (`Table.count_windows`)."""
        names = [f"b{i}" for i in range(len(group))]
        sql = window_counts_sql(table, group, where_sql, window_sql, first, last, key, self.relation,
                                self.stored_types(table))
        result = self.run(sql, ["w", *names, "n"], f"counting windows of {table.name!r}", key)
        shape = (last - first, *(table.columns[g].size for g in group))
        out = np.zeros(shape, dtype=np.int64)
        index = (np.asarray(result["w"], dtype=np.int64) - first,
                 *(np.asarray(result[b], dtype=np.int64) for b in names))
        np.add.at(out, index, np.asarray(result["n"], dtype=np.int64))
        return out.reshape(last - first, -1)

    def report_tally(self, table: LocalReportTable) -> ReportTally:
        what = f"tallying the reports of {table.name!r}"
        r = self.run(table.tally_sql(self.relation), ["s", "j", "n", "t"], what)
        s, j, n, t = (np.asarray(r[c]) for c in ("s", "j", "n", "t"))
        s, j, n = s.astype(np.int64), j.astype(np.int64), n.astype(np.int64)
        drawn = {int(a): int(b) for a, b in zip(s[j == -1], n[j == -1])}
        pairs = None
        if (pairs_sql := table.pairs_sql(self.relation)) is not None:
            p = self.run(pairs_sql, ["j", "k", "n"], what)
            pairs = np.stack([np.asarray(p[c], dtype=float) for c in ("j", "k", "n")], axis=1).reshape(-1, 3)
        keep = j >= 0
        return ReportTally(int(n[~keep].sum()), s[keep], j[keep], n[keep].astype(float), t[keep].astype(float), drawn,
                           pairs)

    def dropped_rows(self, table: Table, cap: int) -> int:
        self.check(table, "")
        sql = table.dropped_rows_sql(cap, self.relation, self.stored_types(table))
        result = self.run(sql, ["n"], f"counting the rows bounding drops from {table.name!r}")
        return int(result["n"][0])

    def check(self, table: Table, key: str | None) -> None:
        """Check, reading no rows, that the engine holds the table and columns the catalog declares
        (and that binding them works); its failure is about the schema, so its message is shown. Then, at
        every scan, that each foreign key the table's unit goes through references a key of one unit only
        (`Table.shared_keys_sql`): the owner's declaration, which the data must keep."""
        self._check_binding(table, key)
        for sql in table.shared_keys_sql(self.relation):
            if int(self.run(sql, ["n"], f"checking the foreign keys of {table.name!r}")["n"][0]) > 0:
                log.error("table %r: a key its foreign keys reference is held by rows of several privacy units",
                          table.name)
                raise OperationalError(SHARED_KEY)

    def _check_binding(self, table: Table, key: str | None) -> None:
        if (table.name.lower(), table.signature()) in self._checked:
            return
        sql = table.binding_sql(self, key)
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

    def scan_binding_sql(self, table: Table, key: str | None) -> str:
        """The schema check of a table whose rows are counted: its full marginal scan, to read no row."""
        return marginal_sql(table, [tuple(table.domain.attributes)], key or "-", self.relation)[0]

    def run(self, sql: str, columns: list[str], what: str, secret: str | None = None) -> dict[str, np.ndarray]:
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
