"""The catalog: protected tables and the public domains of their columns.

The data owner declares every queryable column of a protected table, in TOML
or from Python. Declarations are public: the engine never reads a domain from
the private data. The column types:

- ``integer``: one bin per value from ``min`` to ``max``; values outside are
  clamped to the nearest end, non-integers are floored.
- ``numeric``: ``bins`` equal-width bins over ``[min, max)``; values outside
  are clamped into the first or last bin. Sums use bin midpoints.
- ``categorical``: the declared ``values``; with ``other = "<value>"`` any
  undeclared value is counted as that value. ``sizes = [...]`` (one per value) declares
  each value's number of rows public: COUNTs per group of it may then be released by the
  small-group mechanisms (``SET dpsql.small_counts``, `dpsql.handlers.small_counts`).
- ``boolean``: TRUE and FALSE.
- ``date`` and ``timestamp``: ``min`` to ``max`` in periods of one ``granularity``
  (`dpsql.tables.temporal`); values outside are clamped into the first or last period.
- ``key``: a string or integer key whose values nobody declared (zip codes, product
  ids, URLs). Until keys are released it can only be grouped by, and then only for
  COUNT(*): DP partition selection releases the keys whose noisy count clears a
  threshold (`dpsql.tables.key_domains`). The released keys are recorded in the ledger and
  from then on are the column's public domain (`Catalog.with_keys`): one bin per
  released key, and one for every other key (shown as NULL where it is grouped).
  Later releases over rows not counted yet append keys; its declaration, and so the
  table's signature, does not name the keys (measurements taken over fewer keys
  are read over more: `dpsql.tables.key_domains.over_current`).

- ``presence``: a column declared for its NULL-ness only, without values (usually with
  ``nullable = true``): it can be counted (``COUNT(col)``) and tested with ``IS [NOT] NULL``,
  nothing else.

``nullable = true`` adds a NULL bin (the last one). The *protected table* is
the set of rows that fit every declaration: rows with NULL in a non-nullable
column, or an undeclared categorical value without an ``other`` fallback, are
left out of every answer, uniformly (a row-local rule, so privacy holds).
Tables not in the catalog are public.

Each declaration makes a table of one *kind*, a class of its own (`dpsql.tables.kinds.KINDS`):
row-level (`row_level`), unit-bounded (`unit_bounded`), stream (`streams`), local reports
(`local_reports`), hybrid (`hybrid`); a graph makes an edge table and a node table (`graph_tables`).

A table may declare a *privacy unit* (``privacy_unit = "customer_id"``), or
reach the unit of another protected table through a foreign key
(``privacy_unit = { foreign_key = "order_id", references = "orders.id" }``),
with ``max_rows_per_unit = k``: neighbouring databases then differ by all rows
of one unit, each unit keeps at most k rows (chosen in SQL by a keyed hash),
rows without a unit are dropped, and sensitivities are multiplied by k. Tables of
one unit join along those keys (`dpsql.tables.joined`); ``[[joins]] tables = [...],
max_rows_per_unit = K`` declares how many joined rows one unit keeps in a join.

A table of *local-DP reports* (``model = "local"``, ``protocol = "oue"``, ``epsilon = 1``)
holds one report per user, randomized on the user's device about the user's cell of the
declared columns (flat index in declaration order, last column fastest): no central
budget is spent on it, and its answers come from the protocol's unbiased estimator
(`mechanisms.ldp.answering`), with the exact variance of every answer. It stores the reports'
payload columns, named as the client's payload keys: ``bit`` (``rr``), ``value`` (``grr``,
``inpps``), ``ones`` (a list of cells: ``oue``, ``sue``, ``inprr``), ``a``, ``b``, ``y``
(``olh``), ``index`` and ``bit`` (±1: ``hrr``, ``inpht``), ``level`` with ``ones`` or ``index``
and ``bit`` (``hh``, by its ``oracle``), ``level``, ``index`` and ``bit`` (``haar``), and
``marginal`` with ``ones`` (``margrr``), ``value`` (``margps``) or ``index`` and ``bit``
(``marght``). Protocol options are keys of the table: ``branching`` and ``oracle`` (``hh``),
``order`` (the marginal protocols, whose columns must each have 2 cells; a query may involve
at most ``order`` of them). ``inpem`` is not answerable (no unbiased estimator).

The *hybrid model* (BLENDER): a local table with ``opt_in = "<table>"`` names the central
protected table holding the raw rows of the users who opted in to central DP (what a data owner
with a trusted-tester cohort has: their rows, and everyone else's reports). It must declare the
same columns and its size public (``rows``: the opt-in group's size, which the blend divides
by, as the seed does). A query over the hybrid table is measured and charged over the opt-in
table like any central query, and its counts (and so SUM and AVG) are blended with the reports'
with the variance-optimal weights, assuming, as the seed does, that who opts in does not depend
on the data: the answer is a count over both groups, with error bars. With ``protocol = "grr2"``
(BLENDER as published) its columns may be key columns: their head list is the opt-in table's key
release, the clients report over it with the two-level GRR (`dpsql.tables.hybrid`).

A *graph* (``[graphs.<edge table>]``, `dpsql.tables.edge_tables`) declares a table of edges whose
privacy unit is a node, with a degree bound, and the node table of projected degrees that
analysts query beside it.

``confident_mode = true`` lets analysts ask a table for its top group only when the group's count,
with noise, reaches a threshold (Confident-GNMax, `dpsql.sql.noisy_max`): whether a row comes back,
and so what is charged, then depends on the data. Off by default.

A table may also declare its size as public (``rows = 48842``), as census-style
tables often are. It is planning input only: with it the planner costs AIM and
RAP by simulation and predicts scan times before any COUNT is released. A wrong
value can only make plans worse, never release anything.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Iterable

from dpsql.errors import CatalogError
from dpsql.tables.column_declarations import parse_column
from dpsql.tables.edge_tables import Graph, parse_graph
from dpsql.tables.graph_tables import graph_tables
from dpsql.tables.hybrid import HybridTable
from dpsql.tables.kinds import CENTRAL, SETTINGS, declared_table
from dpsql.tables.privacy_units import MAX_ROWS_PER_UNIT, Hop, PrivacyUnit
from dpsql.tables.table import Table
from dpsql.tables.unit_bounded import UnitBoundedTable


def _read_catalog_file(path: Path) -> str:
    """The text of a catalog file (UTF-8)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CatalogError(f"catalog file {str(path)!r} does not exist") from None
    except OSError as e:
        raise CatalogError(f"cannot read catalog file {str(path)!r}: {e.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CatalogError(f"catalog file {str(path)!r} is not UTF-8 text (byte {e.start + 1}); save it as "
                           "UTF-8") from None


def join_key(tables: list[str]) -> frozenset:
    """Which tables a join reads, and how often each (a self-join reads one twice)."""
    names = [t.lower() for t in tables]
    return frozenset((n, names.count(n)) for n in names)


class Catalog:
    """Protected tables by name (case-insensitive lookup)."""

    def __init__(self, tables: Iterable[Table] = ()):
        self.tables: dict[str, Table] = {}
        self.path: Path | None = None  # the file it was loaded from, if any
        self.join_bounds: dict[frozenset, int] = {}  # tables joined (`join_key`) -> the most joined rows per unit
        for t in tables:
            self.tables[t.name.lower()] = t
        self._resolve_units()

    @classmethod
    def from_dict(cls, spec: dict) -> "Catalog":
        """Build from `{"tables": {name: {"columns": {col: decl}}}}` (the TOML layout)."""
        tables = spec.get("tables", {})
        if not isinstance(tables, dict):
            raise CatalogError("the catalog needs a [tables] section")
        unknown = set(spec) - {"tables", "graphs", "joins"}
        if unknown:
            raise CatalogError(f"unknown top-level catalog keys: {sorted(unknown)}")
        graphs = spec.get("graphs", {})
        if not isinstance(graphs, dict):
            raise CatalogError("[graphs] must hold one [graphs.<edge table>] section per graph")
        out = cls()
        for name, table in tables.items():
            if name.lower() in out.tables:
                raise CatalogError(f"table {name!r} is declared twice (table names are case-insensitive)")
            if not isinstance(table, dict) or set(table) - {"columns", *SETTINGS}:
                raise CatalogError(
                    f"table {name!r}: only a [tables.{name}.columns] section, {', '.join(SETTINGS[:-1])} "
                    f"and {SETTINGS[-1]} are supported"
                )
            out._declare(name, table.get("columns", {}), {k: v for k, v in table.items() if k != "columns"})
        for name, graph in graphs.items():
            out._declare_graph(parse_graph(name, graph))
        out._resolve_units()
        joins = spec.get("joins", [])
        if not isinstance(joins, list) or not all(isinstance(j, dict) for j in joins):
            raise CatalogError("joins are declared as [[joins]] sections: tables = [...], max_rows_per_unit = K")
        for join in joins:
            if set(join) != {"tables", "max_rows_per_unit"}:
                raise CatalogError("a [[joins]] section declares tables = [\"<table>\", ...] and max_rows_per_unit")
            out.add_join_bound(join["tables"], join["max_rows_per_unit"])
        return out

    @classmethod
    def from_toml(cls, text: str) -> "Catalog":
        try:
            return cls.from_dict(tomllib.loads(text))
        except tomllib.TOMLDecodeError as e:
            raise CatalogError(f"catalog is not valid TOML: {e}") from None

    @classmethod
    def load(cls, source: "Catalog | dict | str | Path | None") -> "Catalog":
        """A catalog from a Catalog, a dict, TOML text or a path to a TOML file.

        None is the empty catalog (no protected tables: everything is public); any other
        source must declare at least one table, so a blank or mistyped file never turns
        protection off.
        """
        if source is None:
            return cls()
        if isinstance(source, Catalog):
            return source
        if isinstance(source, dict):
            catalog = cls.from_dict(source)
        elif isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and source.endswith(".toml")):
            catalog = cls.from_toml(_read_catalog_file(Path(source)))
            catalog.path = Path(source)
        elif isinstance(source, str):
            catalog = cls.from_toml(source)
        else:
            raise CatalogError(f"a catalog is a Catalog, a dict, TOML text or a .toml path, not {type(source).__name__}")
        if not catalog.tables:
            raise CatalogError(
                "the catalog declares no protected tables, so every table would be public: declare each "
                "protected table under [tables.<name>.columns] (see the README)"
            )
        return catalog

    def add_table(
        self, name: str, columns: dict[str, dict], privacy_unit: str | dict | None = None,
        max_rows_per_unit: int | None = None, rows: int | None = None, time: str | None = None,
        append_only: bool = False, model: str = "central", protocol: str | None = None,
        epsilon: float | None = None, options: dict | None = None, opt_in: str | None = None,
        confident_mode: bool = False,
    ) -> Table:
        """Declare a protected table from {column: declaration}, optionally with a privacy unit:
        a column name, or {"foreign_key": column, "references": "table.column"} naming a
        protected table declared before, whose unit becomes this table's; `rows` declares
        the table's size public; `time` and `append_only` declare a stream (continual queries);
        `model="local"` with `protocol`, `epsilon` and the protocol's `options` a table of local-DP reports
        (`opt_in`: the central table of the users who opted in, the hybrid model); `confident_mode` allows
        Confident-GNMax top-group queries."""
        previous = self.tables.get(name.lower())
        settings = {"privacy_unit": privacy_unit, "max_rows_per_unit": max_rows_per_unit, "rows": rows, "time": time,
                    "append_only": append_only, "confident_mode": confident_mode, **({"model": model, "protocol": protocol, "epsilon": epsilon,
                                                    **(options or {}), "opt_in": opt_in} if model != CENTRAL else {})}
        table = self._declare(name, columns, {k: v for k, v in settings.items() if v is not None})
        try:
            self._resolve_units()
        except CatalogError:
            if previous is None:
                del self.tables[name.lower()]
            else:
                self.tables[name.lower()] = previous
            raise
        return table

    def add_graph(self, edges: str, source: str, target: str, degrees: str, *, max_degree: int | None = None,
                  max_out_degree: int | None = None, max_in_degree: int | None = None,
                  directed: bool = False, time: str | None = None, bound: str = "projected",
                  triangles: str | None = None) -> Graph:
        """Declare a graph (`dpsql.tables.edge_tables`): edge table `edges` with endpoint columns `source` and
        `target`, a degree bound (forced by projection, or `bound="declared"`), optionally the edges'
        arrival `time`, `degrees`, the name of its node table, and `triangles`, of its table of triangles."""
        spec = {"source": source, "target": target, "degrees": degrees, "directed": directed, "bound": bound,
                **{k: v for k, v in (("max_degree", max_degree), ("max_out_degree", max_out_degree),
                                     ("max_in_degree", max_in_degree), ("time", time), ("triangles", triangles))
                   if v is not None}}
        graph = parse_graph(edges, spec)
        self._declare_graph(graph)
        return graph

    def add_join_bound(self, tables: list[str], max_rows_per_unit: int) -> None:
        """Declare the most rows one privacy unit may have in a join of `tables` (protected tables with a
        privacy unit; the same table twice for a self-join): joined rows beyond it are left out, and every
        sensitivity of the join is this bound (`dpsql.tables.joined`)."""
        if not isinstance(tables, list) or len(tables) < 2 or not all(isinstance(t, str) for t in tables):
            raise CatalogError("a join bound names two or more protected tables: tables = [\"a\", \"b\"]")
        for name in tables:
            table = self.get(name)
            if table is None or table.unit is None:
                raise CatalogError(f"join bound: {name!r} is not a protected table with a privacy unit")
        bound = max_rows_per_unit
        if isinstance(bound, bool) or not isinstance(bound, int) or not 1 <= bound <= MAX_ROWS_PER_UNIT:
            raise CatalogError(f"join bound: max_rows_per_unit is an integer from 1 to {MAX_ROWS_PER_UNIT}")
        self.join_bounds[join_key(tables)] = bound

    def join_bound(self, tables: list[str]) -> int | None:
        """The bound the owner declared for a join of `tables` (None: none declared)."""
        return self.join_bounds.get(join_key(tables))

    def _declare_graph(self, graph: Graph) -> None:
        """The graph's edge table and node table, under names no other table has."""
        for name in (graph.edges, graph.nodes, *([graph.triangles] if graph.triangles else [])):
            if name.lower() in self.tables:
                raise CatalogError(f"table {name!r} is declared twice (table names are case-insensitive)")
        columns = {c: parse_column(c, d) for c, d in graph.degree_columns().items()}
        for table in graph_tables(graph, columns):
            self.tables[table.name.lower()] = table

    def _declare(self, name: str, columns: Any, settings: dict) -> Table:
        if not isinstance(columns, dict):
            raise CatalogError(f"table {name!r}: columns must be a table of declarations")
        table = declared_table(name, {c: parse_column(c, d) for c, d in columns.items()}, settings)
        self.tables[name.lower()] = table
        return table

    def _resolve_units(self) -> None:
        """Follow every foreign key to a table with a privacy-unit column (no cycles)."""
        for table in self.tables.values():
            if not isinstance(table, UnitBoundedTable) or table.unit_link is None:
                continue
            path, current, seen = [], table, {table.name.lower()}
            while current.unit_link is not None:
                hop = current.unit_link
                target = self.get(hop.table)
                if target is None:
                    raise CatalogError(
                        f"table {current.name!r}: privacy_unit references {hop.table!r}, which is not a protected "
                        f"table of the catalog; declare it (with its own privacy unit)"
                    )
                if target.name.lower() in seen:
                    raise CatalogError(f"table {table.name!r}: the foreign keys to its privacy unit form a cycle")
                if not isinstance(target, UnitBoundedTable) or (target.unit_column is None and target.unit_link is None):
                    raise CatalogError(
                        f"table {current.name!r}: privacy_unit references {target.name!r}, which declares no privacy unit"
                    )
                seen.add(target.name.lower())
                path.append(Hop(hop.column, target.name, hop.key))
                current = target
            table.resolve(PrivacyUnit(current.unit_column, table.max_rows_per_unit, tuple(path)))
        for table in self.tables.values():
            if isinstance(table, HybridTable):
                table.check_companion(self.get(table.opt_in))

    def opt_in(self, table: HybridTable) -> Table:
        """The central table of a hybrid table's opted-in users."""
        return table.measured_as(self.get)

    def with_keys(self, released: dict[tuple[str, str], tuple[str, ...]]) -> "Catalog":
        """This catalog with the key sets released so far ({(table, column): keys}, names as declared)
        as the domains of its key columns (the catalog itself is not changed)."""
        if not released:
            return self
        out = Catalog()
        out.path, out.join_bounds = self.path, self.join_bounds
        for name, table in self.tables.items():
            source = table.opt_in.lower() if isinstance(table, HybridTable) else name  # its head list: the opt-in's keys
            mine = {c: keys for (t, c), keys in released.items() if t.lower() in (name, source) and c in table.columns}
            out.tables[name] = table.with_keys(mine)
        return out

    def get(self, name: str) -> Table | None:
        return self.tables.get(name.lower())

    def __contains__(self, name: str) -> bool:
        return name.lower() in self.tables
