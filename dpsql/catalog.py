"""The catalog: protected tables and the public domains of their columns.

The data owner declares every queryable column of a protected table, in TOML
or from Python. Declarations are public: the engine never reads a domain from
the private data. The column types:

- ``integer``: one bin per value from ``min`` to ``max``; values outside are
  clamped to the nearest end, non-integers are floored.
- ``numeric``: ``bins`` equal-width bins over ``[min, max)``; values outside
  are clamped into the first or last bin. Sums use bin midpoints.
- ``categorical``: the declared ``values``; with ``other = "<value>"`` any
  undeclared value is counted as that value.
- ``boolean``: TRUE and FALSE.
- ``date`` and ``timestamp``: ``min`` to ``max`` in periods of one ``granularity``
  (`dpsql.temporal`); values outside are clamped into the first or last period.
- ``key``: a string or integer key whose values nobody declared (zip codes, product
  ids, URLs). Until keys are released it can only be grouped by, and then only for
  COUNT(*): DP partition selection releases the keys whose noisy count clears a
  threshold (`dpsql.key_domains`). The released keys are recorded in the ledger and
  from then on are the column's public domain (`Catalog.with_keys`): one bin per
  released key, and one for every other key (shown as NULL where it is grouped).
  Later releases over rows not counted yet append keys; its declaration, and so the
  table's signature, does not name the keys (measurements taken over fewer keys
  are read over more: `dpsql.key_domains.over_current`).

- ``presence``: a column declared for its NULL-ness only, without values (usually with
  ``nullable = true``): it can be counted (``COUNT(col)``) and tested with ``IS [NOT] NULL``,
  nothing else.

``nullable = true`` adds a NULL bin (the last one). The *protected table* is
the set of rows that fit every declaration: rows with NULL in a non-nullable
column, or an undeclared categorical value without an ``other`` fallback, are
left out of every answer, uniformly (a row-local rule, so privacy holds).
Tables not in the catalog are public.

A table may declare a *privacy unit* (``privacy_unit = "customer_id"``), or
reach the unit of another protected table through a foreign key
(``privacy_unit = { foreign_key = "order_id", references = "orders.id" }``),
with ``max_rows_per_unit = k``: neighbouring databases then differ by all rows
of one unit, each unit keeps at most k rows (chosen in SQL by a keyed hash),
rows without a unit are dropped, and sensitivities are multiplied by k.

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
on the data: the answer is a count over both groups, with error bars.

A *graph* (``[graphs.<edge table>]``, `dpsql.edge_tables`) declares a table of edges whose
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

import hashlib
import math
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from dpsql.column_declarations import parse_column
from dpsql.columns import KEY, Column, StoredType
from dpsql.edge_tables import EDGES, NODES, TRIANGLES, Graph, parse_graph
from dpsql.errors import CatalogError
from mechanisms.domain import Domain
from mechanisms.ldp.answering import LOCAL_PROTOCOLS as ANSWERABLE, client_protocol
from mechanisms.ldp.client import Protocol

CENTRAL, LOCAL = "central", "local"  # who randomizes a table's rows: dpsql (central DP) or each user's device
LOCAL_PROTOCOLS = tuple(ANSWERABLE)  # the protocols a local table's reports may use (`mechanisms.ldp.answering`)
LOCAL_KEYS = ("model", "protocol", "epsilon", "branching", "oracle", "order", "opt_in")  # a local table's settings


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


MAX_ROWS_PER_UNIT = 1_000_000


@dataclass(frozen=True)
class Hop:
    """One foreign-key step: `column` of the current table equals `key` of protected `table`."""

    column: str
    table: str
    key: str


@dataclass(frozen=True)
class PrivacyUnit:
    """A table's privacy unit: `column` of the last hop's table (of the table itself without
    hops), and `bound`, the most rows one unit may contribute to this table."""

    column: str
    bound: int
    path: tuple[Hop, ...] = ()

    def describe(self) -> str:
        hops = "".join(f"{h.column} -> {h.table}.{h.key}, " for h in self.path)
        return f"privacy unit {hops}{self.column}, at most {self.bound} rows per unit"


def parse_unit(table: str, unit: Any) -> tuple[str | None, Hop | None]:
    """Validate a `privacy_unit` declaration: (unit column, foreign-key hop), one of them None."""
    if unit is None:
        return None, None
    if isinstance(unit, str):
        if not unit:
            raise CatalogError(f"table {table!r}: privacy_unit must name a column")
        return unit, None
    if not isinstance(unit, dict) or set(unit) != {"foreign_key", "references"}:
        raise CatalogError(
            f"table {table!r}: privacy_unit is a column name, or "
            '{ foreign_key = "<column>", references = "<protected table>.<column>" }'
        )
    column, target = unit["foreign_key"], unit["references"]
    parts = target.split(".") if isinstance(target, str) else []
    if not isinstance(column, str) or not column or len(parts) != 2 or not all(parts):
        raise CatalogError(
            f"table {table!r}: privacy_unit's foreign_key must name a column and references must read "
            f"'<protected table>.<column>'"
        )
    return None, Hop(column, parts[0], parts[1])


@dataclass
class Table:
    """A protected table: its declared columns, in declaration order, and its privacy unit.

    `unit_column` (the unit is a column of this table) or `unit_link` (a foreign key to
    another protected table, whose unit is this table's) with `max_rows_per_unit`; a
    linked table's `unit` is resolved by its `Catalog`.
    """

    name: str
    columns: dict[str, Column]
    unit_column: str | None = None
    unit_link: Hop | None = None
    max_rows_per_unit: int | None = None
    public_rows: int | None = None  # the size, declared public by the data owner (planning input only)
    # A table of distinct (unit, cell) pairs of `units_of`'s rows meeting `units_where` (`distinct_units`).
    units_of: "Table | None" = None
    units_where: str = "TRUE"
    time_column: str | None = None  # a stream: the time each row belongs to (continual queries)
    append_only: bool = False  # rows are only ever added: a unit keeps its first k rows by time
    model: str = CENTRAL  # LOCAL: the rows are reports randomized on the users' devices
    protocol: str | None = None  # a local table's frequency oracle (LOCAL_PROTOCOLS)
    local_epsilon: float | None = None  # ... and the ε each report was randomized with
    protocol_options: dict = field(default_factory=dict)  # ... and its other parameters (branching, oracle, order)
    opt_in: str | None = None  # the hybrid model: the central table of the users who opted in (`Catalog.opt_in`)
    graph: Graph | None = None  # a graph's edge table or node table (`role`): node DP, `dpsql.edge_tables`
    role: str | None = None  # EDGES, NODES or TRIANGLES
    confident_mode: bool = False  # the owner allows Confident-GNMax (`dpsql.sql.noisy_max`)
    domain: Domain = field(init=False)
    _unit: PrivacyUnit | None = field(init=False, default=None, repr=False)
    _client: Protocol | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.columns and self.units_of is None and self.role not in (EDGES, TRIANGLES):
            raise CatalogError(f"table {self.name!r} declares no columns")
        if self.unit_column is not None and self.unit_link is not None:
            raise CatalogError(f"table {self.name!r}: declare the privacy unit as a column or a foreign key, not both")
        bound = self.max_rows_per_unit
        if self.unit_column is None and self.unit_link is None:
            if bound is not None:
                raise CatalogError(f"table {self.name!r}: max_rows_per_unit needs a privacy_unit to bound")
        elif isinstance(bound, bool) or not isinstance(bound, int) or not 1 <= bound <= MAX_ROWS_PER_UNIT:
            raise CatalogError(
                f"table {self.name!r}: a privacy unit needs max_rows_per_unit, an integer from 1 to "
                f"{MAX_ROWS_PER_UNIT} (the most rows one unit may contribute)"
            )
        rows = self.public_rows
        if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 1):
            raise CatalogError(f"table {self.name!r}: rows (its public size) must be a positive integer")
        self._check_model()
        if not isinstance(self.confident_mode, bool):
            raise CatalogError(f"table {self.name!r}: confident_mode is true or false")
        if self.time_column is not None and (not isinstance(self.time_column, str) or not self.time_column):
            raise CatalogError(f"table {self.name!r}: time must name the column holding each row's time")
        if not isinstance(self.append_only, bool) or (self.append_only and self.time_column is None):
            raise CatalogError(f"table {self.name!r}: append_only is true or false, and needs time = \"<column>\"")
        if self.unit_column is not None:
            self._unit = PrivacyUnit(self.unit_column, self.max_rows_per_unit)
        lowered = [c.lower() for c in self.columns]
        if len(set(lowered)) != len(lowered):
            # SQL (and DuckDB) identifiers are case-insensitive: these would name one column.
            clash = sorted(c for c in self.columns if lowered.count(c.lower()) > 1)
            raise CatalogError(f"table {self.name!r}: column names differ only in case: {clash}")
        known = [c for c in self.columns.values() if not c.is_open]  # a key column joins once released
        self.domain = Domain(tuple(c.name for c in known), tuple(c.size for c in known))

    def column(self, name: str) -> Column:
        found = self.columns.get(name) or next(
            (c for c in self.columns.values() if c.name.lower() == name.lower()), None
        )
        if found is None:
            raise CatalogError(
                f"column {name!r} is not declared for protected table {self.name!r}; "
                f"declared columns: {', '.join(self.columns)}"
            )
        return found

    def _check_model(self) -> None:
        if self.model == CENTRAL:
            if self.protocol is not None or self.local_epsilon is not None or self.protocol_options or self.opt_in:
                raise CatalogError(f"table {self.name!r}: protocol and epsilon declare a local table (model = \"local\")")
            return
        if self.model != LOCAL:
            raise CatalogError(f"table {self.name!r}: model is \"central\" (default) or \"local\", not {self.model!r}")
        if self.protocol not in LOCAL_PROTOCOLS:
            raise CatalogError(f"table {self.name!r}: a local table needs protocol, one of {', '.join(LOCAL_PROTOCOLS)}")
        epsilon = self.local_epsilon
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not 0 < epsilon < 100:
            raise CatalogError(f"table {self.name!r}: a local table needs epsilon, the ε of its reports (0 to 100)")
        if self.unit_column or self.unit_link or self.time_column or any(c.kind == KEY for c in self.columns.values()):
            raise CatalogError(f"table {self.name!r}: a local table has one report per user: no privacy unit, time "
                               "or key columns")
        if self.opt_in is not None and (not isinstance(self.opt_in, str) or not self.opt_in):
            raise CatalogError(f"table {self.name!r}: opt_in names the central table of the users who opted in")
        try:
            self._client = client_protocol(self.protocol, float(epsilon), Domain(
                tuple(self.columns), tuple(c.size for c in self.columns.values())), self.protocol_options)
        except (ValueError, TypeError) as e:
            raise CatalogError(f"table {self.name!r}: {e}") from None

    @property
    def client(self) -> Protocol:
        """A local table's client protocol (the randomizer its reports were made with)."""
        return self._client

    @property
    def is_local(self) -> bool:
        """Whether the rows are local-DP reports (answered by the protocol's estimator, nothing charged)."""
        return self.model == LOCAL

    def with_keys(self, released: dict[str, tuple[str, ...]]) -> "Table":
        """This table with the released key sets ({column: keys}) as its key columns' domains."""
        if not released:
            return self
        columns = {n: c.with_keys(released[n]) if n in released else c for n, c in self.columns.items()}
        table = replace(self, columns=columns)
        table._unit = self._unit
        return table

    def key_counts(self) -> tuple[tuple[str, int], ...]:
        """(column, keys released) of each key column: the key domain this table's measurements are over."""
        return tuple((n, len(c.values) if c.released else 0) for n, c in self.columns.items() if c.kind == KEY)

    def stand_in_columns(self) -> list[tuple[str, str, bool]]:
        """(name, SQL type, nullable) of the columns clients are shown: the declared ones (an edge
        table: its endpoints, which no query may read)."""
        if self.role == EDGES:
            return [(self.graph.source, "VARCHAR", False), (self.graph.target, "VARCHAR", False)]
        if self.role == TRIANGLES:  # a triangle's nodes
            return [(f"node_{i}", "VARCHAR", False) for i in (1, 2, 3)]
        return [(c.name, c.sql_type, c.nullable) for c in self.columns.values()]

    def fits_sql(self, stored: Mapping[str, StoredType] | None = None) -> str:
        """WHERE condition selecting the rows of the protected table; with the engine's `stored` column
        types, only what they do not guarantee (`Column.fits_sql`)."""
        stored = stored or {}
        parts = [c.fits_sql(stored.get(name)) for name, c in self.columns.items()]
        return " AND ".join(p for p in parts if p) or "TRUE"

    @property
    def unit(self) -> PrivacyUnit | None:
        """The privacy unit (None: one row is the unit)."""
        if self.unit_link is not None and self._unit is None:
            raise CatalogError(f"table {self.name!r}: its foreign key to a privacy unit was not resolved by a catalog")
        return self._unit

    @property
    def contribution(self) -> int:
        """The most rows one privacy unit contributes: every sensitivity is multiplied by it."""
        if self.units_of is not None:  # one pair per cell of a unit, at most k cells kept
            return min(self.units_of.contribution, math.prod(c.size for c in self.columns.values()))
        if self.graph is not None:  # what one node changes in the projected graph's table
            return self.graph.contribution(self.role)
        return 1 if self.unit is None else self.unit.bound

    def stream_contribution(self, horizon: int) -> int:
        """The most one privacy unit changes a continual query's data (its windows' counts) over `horizon`
        windows: k rows of a stream, or a graph's sequence sensitivity (`dpsql.edge_tables`)."""
        return self.contribution if self.graph is None else self.graph.stream_contribution(self.role, horizon)

    def signature(self) -> str:
        """Identifies the declaration: measurements are only reused under the same one."""
        if self.units_of is not None:
            return (f"{self.units_of.signature()}; distinct units by {list(self.columns)} where {self.units_where}, "
                    "at most k cells per unit")
        columns = repr([(c.name, c.declaration()) for c in self.columns.values()])
        if self.append_only:  # bounding keeps each unit's first rows by time
            columns += f"; append-only by {self.time_column}"
        if self.is_local:
            options = "".join(f" {k}={v}" for k, v in sorted(self.protocol_options.items()))
            columns += f"; local reports, {self.protocol}{options} at ε={self.local_epsilon:g}"
            columns += f"; opt-in users in {self.opt_in}" if self.opt_in else ""
        if self.graph is not None:
            columns += f"; {self.role} of {self.graph.describe()}"
        return columns if self.unit is None else f"{columns}; {self.unit.describe()}"

    def distinct_units(self, group: tuple[str, ...], where_sql: str) -> "Table":
        """The table of distinct (privacy unit, cell of `group`) pairs among the rows meeting `where_sql`
        (SQL over this table's columns): COUNT(*) over it by `group` is COUNT(DISTINCT unit).

        Its counts are linear (its marginals are counts of pairs). A unit counts once per cell whatever
        its rows, so its rows are not bounded; it keeps at most k of its cells (`backends.base.unit_pairs_source`),
        so it adds at most min(k, cells) pairs: its `contribution`. Without a GROUP BY that is 1, and the
        count is every unit with a row meeting the condition."""
        if self.unit is None or self.unit.path:
            raise CatalogError(f"table {self.name!r} has no privacy unit column of its own to count")
        digest = hashlib.sha256(f"{group}|{where_sql}".encode()).hexdigest()[:8]
        return Table(f"{self.name}:distinct {self.unit.column}:{digest}", {g: self.columns[g] for g in group}, units_of=self,
                     units_where=where_sql)


class Catalog:
    """Protected tables by name (case-insensitive lookup)."""

    def __init__(self, tables: Iterable[Table] = ()):
        self.tables: dict[str, Table] = {}
        self.path: Path | None = None  # the file it was loaded from, if any
        for t in tables:
            self.tables[t.name.lower()] = t
        self._resolve_units()

    @classmethod
    def from_dict(cls, spec: dict) -> "Catalog":
        """Build from `{"tables": {name: {"columns": {col: decl}}}}` (the TOML layout)."""
        tables = spec.get("tables", {})
        if not isinstance(tables, dict):
            raise CatalogError("the catalog needs a [tables] section")
        unknown = set(spec) - {"tables", "graphs"}
        if unknown:
            raise CatalogError(f"unknown top-level catalog keys: {sorted(unknown)}")
        graphs = spec.get("graphs", {})
        if not isinstance(graphs, dict):
            raise CatalogError("[graphs] must hold one [graphs.<edge table>] section per graph")
        out = cls()
        for name, table in tables.items():
            if name.lower() in out.tables:
                raise CatalogError(f"table {name!r} is declared twice (table names are case-insensitive)")
            if not isinstance(table, dict) or set(table) - {"columns", "privacy_unit", "max_rows_per_unit", "rows",
                                                           "time", "append_only", "confident_mode",
                                                           *LOCAL_KEYS}:
                raise CatalogError(
                    f"table {name!r}: only a [tables.{name}.columns] section, privacy_unit, "
                    f"max_rows_per_unit, rows, time, append_only, confident_mode, model, protocol, epsilon, "
                    "branching, oracle, order and opt_in are supported"
                )
            out._declare(name, table.get("columns", {}), table.get("privacy_unit"), table.get("max_rows_per_unit"),
                         table.get("rows"), table.get("time"), table.get("append_only", False),
                         {k: table[k] for k in LOCAL_KEYS if k in table}, table.get("confident_mode", False))
        for name, graph in graphs.items():
            out._declare_graph(parse_graph(name, graph))
        out._resolve_units()
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
        local = {"model": model, "protocol": protocol, "epsilon": epsilon, **(options or {}),
                 **({"opt_in": opt_in} if opt_in else {})} if model != CENTRAL else {}
        table = self._declare(name, columns, privacy_unit, max_rows_per_unit, rows, time, append_only, local,
                              confident_mode)
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
        """Declare a graph (`dpsql.edge_tables`): edge table `edges` with endpoint columns `source` and
        `target`, a degree bound (forced by projection, or `bound="declared"`), optionally the edges'
        arrival `time`, `degrees`, the name of its node table, and `triangles`, of its table of triangles."""
        spec = {"source": source, "target": target, "degrees": degrees, "directed": directed, "bound": bound,
                **{k: v for k, v in (("max_degree", max_degree), ("max_out_degree", max_out_degree),
                                     ("max_in_degree", max_in_degree), ("time", time), ("triangles", triangles))
                   if v is not None}}
        graph = parse_graph(edges, spec)
        self._declare_graph(graph)
        return graph

    def _declare_graph(self, graph: Graph) -> None:
        """The graph's edge table and node table, under names no other table has."""
        for name in (graph.edges, graph.nodes, *([graph.triangles] if graph.triangles else [])):
            if name.lower() in self.tables:
                raise CatalogError(f"table {name!r} is declared twice (table names are case-insensitive)")
        stream = {"time_column": graph.time, "append_only": graph.time is not None}  # continual queries
        self.tables[graph.edges.lower()] = Table(graph.edges, {}, graph=graph, role=EDGES, **stream)
        columns = {c: parse_column(c, d) for c, d in graph.degree_columns().items()}
        self.tables[graph.nodes.lower()] = Table(graph.nodes, columns, graph=graph, role=NODES, **stream)
        if graph.triangles:
            self.tables[graph.triangles.lower()] = Table(graph.triangles, {}, graph=graph, role=TRIANGLES, **stream)

    def _declare(self, name: str, columns: Any, privacy_unit: Any, max_rows_per_unit: Any, rows: Any = None,
                 time: Any = None, append_only: Any = False, local: dict | None = None,
                 confident_mode: Any = False) -> Table:
        if not isinstance(columns, dict):
            raise CatalogError(f"table {name!r}: columns must be a table of declarations")
        unit_column, unit_link = parse_unit(name, privacy_unit)
        local = local or {}
        table = Table(name, {c: parse_column(c, d) for c, d in columns.items()}, unit_column, unit_link,
                      max_rows_per_unit, rows, time_column=time, append_only=append_only,
                      model=local.get("model", CENTRAL), protocol=local.get("protocol"),
                      local_epsilon=local.get("epsilon"), opt_in=local.get("opt_in"),
                      protocol_options={k: local[k] for k in ("branching", "oracle", "order") if k in local},
                      confident_mode=confident_mode)
        self.tables[name.lower()] = table
        return table

    def _resolve_units(self) -> None:
        """Follow every foreign key to a table with a privacy-unit column (no cycles)."""
        for table in self.tables.values():
            if table.unit_link is None:
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
                if target.unit_column is None and target.unit_link is None:
                    raise CatalogError(
                        f"table {current.name!r}: privacy_unit references {target.name!r}, which declares no privacy unit"
                    )
                seen.add(target.name.lower())
                path.append(Hop(hop.column, target.name, hop.key))
                current = target
            table._unit = PrivacyUnit(current.unit_column, table.max_rows_per_unit, tuple(path))
        self._check_opt_ins()

    def _check_opt_ins(self) -> None:
        """A hybrid table's opt-in companion: a central table of the same columns, of public size (`rows`)."""
        for table in self.tables.values():
            if not table.is_local or table.opt_in is None:
                continue
            companion = self.get(table.opt_in)
            if companion is None or companion.is_local:
                raise CatalogError(f"table {table.name!r}: opt_in names {table.opt_in!r}, which must be a central "
                                   "protected table of the catalog (the opted-in users' own rows)")
            ours = [(c.name, c.declaration()) for c in table.columns.values()]
            if [(c.name, c.declaration()) for c in companion.columns.values()] != ours:
                raise CatalogError(f"table {table.name!r}: its opt-in table {companion.name!r} must declare the same "
                                   "columns, in the same order")
            if companion.public_rows is None:
                raise CatalogError(f"table {table.name!r}: its opt-in table {companion.name!r} must declare its size "
                                   "public (rows = ...): the blend divides by the opt-in group's size, as BLENDER does")

    def opt_in(self, table: Table) -> Table:
        """The central table of a hybrid table's opted-in users."""
        return self.tables[table.opt_in.lower()]

    def with_keys(self, released: dict[tuple[str, str], tuple[str, ...]]) -> "Catalog":
        """This catalog with the key sets released so far ({(table, column): keys}, names as declared)
        as the domains of its key columns (the catalog itself is not changed)."""
        if not released:
            return self
        out = Catalog()
        out.path = self.path
        for name, table in self.tables.items():
            mine = {c: keys for (t, c), keys in released.items() if t.lower() == name and c in table.columns}
            out.tables[name] = table.with_keys(mine)
        return out

    def get(self, name: str) -> Table | None:
        return self.tables.get(name.lower())

    def __contains__(self, name: str) -> bool:
        return name.lower() in self.tables
