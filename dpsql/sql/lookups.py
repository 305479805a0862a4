"""Lookups: joins of a protected table with public tables, compiled as public linear maps.

In ``SELECT r.region, COUNT(*) FROM visits v JOIN zips r ON v.zip = r.zip GROUP BY
r.region`` the protected table joins a public one on a declared column whose key is
unique in the public table. Each bin of the declared column then meets at most one
public row, so every looked-up attribute is a public function of that bin: GROUP BY
it maps the column's bins onto the attribute's values (a 0/1 factor), a condition on
it is an indicator over the bins, and SUM of it weighs the bins. An INNER join keeps
the bins that find a row; a LEFT join keeps every bin, with NULL attributes where
none matches. The join compares the column's declared value (after clamping, or
`other` for undeclared categories). Only public data is read, so compiling costs
nothing; the domain of a looked-up attribute is its distinct values in the public table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from math import prod
from typing import Any, Container

import duckdb
import numpy as np
from sqlglot import exp

from dpsql.tables.table import Table
from dpsql.tables.columns import CATEGORICAL, INTEGER, NUMERIC, Column, quote_identifier
from dpsql.errors import CatalogError, NotSupportedError, ProgrammingError
from dpsql.sql.expressions import _TEST, Condition
from mechanisms.domain import Domain
from mechanisms.workload import Predicate

# A GROUP BY over looked-up attributes is a dense (groups × bins) factor: at most this many entries.
MAX_MAPPED_ENTRIES = 10_000_000


@dataclass(eq=False)
class GroupKey:
    """One GROUP BY key: result column `name`, a function of protected `attribute`'s bins.

    `labels` are the groups' values; `index` maps each bin of `attribute` to its group
    (-1: in none), None when the key is the attribute itself. `source` identifies
    what the query named (a declared column, a lookup's attribute, an expression). A key
    that is a function of several attributes has `slices` instead of `index`: (index, vectors
    over other attributes) pairs, each cell in the group the index of the one slice whose
    vectors hold there give (`dpsql.sql.grouping`).
    """

    name: str
    attribute: str
    labels: list
    index: np.ndarray | None = None
    source: tuple = field(default=())
    slices: list[tuple[np.ndarray, dict[str, np.ndarray]]] | None = None

    @property
    def mapped(self) -> bool:
        """Whether the key maps its attribute's bins onto other groups (not the attribute itself)."""
        return self.index is not None or self.slices is not None


@dataclass(frozen=True)
class SlicedMap:
    """The rows of an attribute grouped by a key of several attributes: the sum over `terms` of each
    0/1 matrix (groups × bins) times its vectors over other attributes."""

    terms: list[tuple[np.ndarray, dict[str, np.ndarray]]]

    @property
    def shape(self) -> tuple[int, int]:
        return self.terms[0][0].shape


def group_layout(keys: list[GroupKey], domain: Domain) -> tuple[tuple[str, ...], dict[str, np.ndarray | SlicedMap]]:
    """Block structure of GROUP BY `keys`: attributes grouped as themselves (domain order), and
    per attribute grouped through lookups or expressions, the 0/1 matrix mapping its bins onto its
    rows (its keys' groups combined in the keys' order; a `SlicedMap` for a key of several attributes)."""
    by_attribute: dict[str, list[GroupKey]] = {}
    for key in keys:
        by_attribute.setdefault(key.attribute, []).append(key)
    direct = tuple(
        a for a in domain.canonical(by_attribute) if len(by_attribute[a]) == 1 and not by_attribute[a][0].mapped
    )
    mapped = {}
    for attribute, group in by_attribute.items():
        if attribute in direct:
            continue
        n = domain.size_of(attribute)
        sizes = [len(k.labels) for k in group]
        if prod(sizes) * n > MAX_MAPPED_ENTRIES:
            raise NotSupportedError(
                f"grouping by {', '.join(k.source[-1] for k in group)} maps {n} values of {attribute!r} onto "
                f"{prod(sizes)} groups, too many to plan; group by fewer looked-up attributes"
            )
        sliced = [k for k in group if k.slices is not None]
        if len(sliced) > 1:
            raise NotSupportedError(f"GROUP BY {', '.join(k.source[-1] for k in sliced)}: at most one expression of "
                                    "several columns can be grouped by per column")
        terms = []
        for chosen, vectors in sliced[0].slices if sliced else [(None, {})]:
            index = [chosen if k.slices is not None else np.arange(n) if k.index is None else k.index for k in group]
            bins = np.nonzero(np.all([i >= 0 for i in index], axis=0))[0]
            matrix = np.zeros((prod(sizes), n))
            if bins.size:
                matrix[np.ravel_multi_index([i[bins] for i in index], sizes), bins] = 1.0
            terms.append((matrix, vectors))
        mapped[attribute] = SlicedMap(terms) if sliced else terms[0][0]
    return direct, mapped


def _number(v: Any) -> bool:
    return isinstance(v, (int, float, Decimal)) and not isinstance(v, bool)


class LookupColumn:
    """A looked-up public attribute, as a function of the protected join column's bins.

    It offers what the expression compiler asks of a declared `Column` (`name`, `kind`,
    `compare`, `one_of`, `not_null`, `is_null`, `bin_values`), over the join column's bins.
    """

    def __init__(self, lookup: "Lookup", attribute: str, values: list, labels: list):
        self.lookup, self.attribute = lookup, attribute
        self.name = lookup.column.name  # predicates are over the protected column's bins
        self.values = values  # per bin: the attribute's value (None: NULL or no match)
        self.labels = labels  # the attribute's domain: its distinct public values, NULL last
        present = [v for v in labels if v is not None]
        self.kind = NUMERIC if present and all(_number(v) for v in present) else CATEGORICAL
        self.source = ("lookup", lookup.alias.lower(), attribute.lower())

    @property
    def numeric(self) -> bool:
        return self.kind == NUMERIC

    @property
    def reference(self) -> str:
        return f"{self.lookup.alias}.{self.attribute}"

    def not_null(self) -> np.ndarray:
        return np.asarray([v is not None for v in self.values], dtype=float)

    def is_null(self) -> np.ndarray:
        return 1.0 - self.not_null()

    def bin_values(self) -> np.ndarray:
        if self.kind != NUMERIC:
            raise CatalogError(f"{self.reference} is not numeric: it has no values to sum")
        out = np.asarray([0.0 if v is None else float(v) for v in self.values])
        if not np.all(np.isfinite(out)):
            raise CatalogError(f"{self.reference} holds non-finite numbers; it cannot be summed")
        return out

    def compare(self, op: str, literal: Any) -> np.ndarray:
        """Indicator over the join column's bins of `attribute <op> literal` (NULL never true)."""
        if isinstance(literal, str) and self.kind == CATEGORICAL and all(
            isinstance(v, str) for v in self.labels if v is not None
        ):
            return np.asarray([v is not None and _TEST[op](v, literal) for v in self.values], dtype=float)
        if _number(literal) and self.kind == NUMERIC:
            return np.asarray([v is not None and _TEST[op](*_comparable(v, literal)) for v in self.values],
                              dtype=float)
        wanted = "a number" if self.kind == NUMERIC else "a string"
        raise ProgrammingError(f"compare the looked-up {self.reference} with {wanted} literal, not {literal!r}")

    def one_of(self, literals) -> np.ndarray:
        out = np.zeros(len(self.values))
        for literal in literals:
            out = np.maximum(out, self.compare("=", literal))
        return out

    def group_key(self, name: str) -> GroupKey:
        position = {v: i for i, v in enumerate(self.labels)}
        index = np.asarray([position.get(v, -1) for v in self.values], dtype=np.int64)
        return GroupKey(name, self.name, list(self.labels), index, self.source)


def _comparable(value: Any, literal: Any) -> tuple[Any, Any]:
    """A public value and a numeric literal, compared as SQL compares them with that value's type."""
    if isinstance(value, float):
        return value, float(literal)
    if isinstance(value, Decimal):
        return value, Decimal(repr(literal))
    return value, literal


class Lookup:
    """A public table joined to the protected table on a declared column, by a unique key."""

    def __init__(self, tables: "PublicTables", table: exp.Table, alias: str, column: Column, key: str,
                 left: bool, using: bool):
        if column.kind == NUMERIC:
            raise NotSupportedError(
                f"{column.name!r} is a binned numeric column: a join needs an integer or categorical column, "
                "each of whose bins is one value"
            )
        self.tables, self.alias, self.column, self.left, self.using = tables, alias, column, left, using
        self.ref = tables.resolve(table)
        self.key = tables.column(self.ref, key)
        kind = tables.type_of(self.ref, self.key)
        if not (_numeric_type(kind) if column.kind == INTEGER else _string_type(kind)):
            raise ProgrammingError(
                f"cannot join {column.kind} column {column.name!r} with {alias}.{self.key} of type {kind}: "
                f"the key must be {'a number' if column.kind == INTEGER else 'a string'}"
            )
        tables.require_unique(self.ref, self.key)
        keys = tables.keys(self.ref, self.key)
        self.bin_labels = column.labels()[: column.value_bins] + ([None] if column.nullable else [])
        self.matched = np.asarray([label is not None and label in keys for label in self.bin_labels], dtype=float)
        self._attributes: dict[str, LookupColumn] = {}

    def has(self, name: str) -> bool:
        return self.tables.has_column(self.ref, name)

    def condition(self) -> Condition | None:
        """What the join adds to WHERE: the bins that find a row (None for a LEFT join: it keeps every row)."""
        if self.left:
            return None
        return Condition(Predicate.on(self.column.name, self.matched), Predicate.on(self.column.name, 1.0 - self.matched))

    def attribute(self, name: str) -> LookupColumn:
        name = self.tables.column(self.ref, name)
        kind = self.tables.type_of(self.ref, name)
        if re.search(r"\[|\b(STRUCT|MAP|UNION|JSON|VARIANT)\b", kind.upper()):
            raise NotSupportedError(f"{self.alias}.{name} has type {kind}: only scalar columns of a lookup table "
                                    "(numbers, strings, dates) can be grouped, compared or summed")
        if name not in self._attributes:
            mapping = self.tables.mapping(self.ref, self.key, name)
            values = [mapping.get(label) if hit else None for label, hit in zip(self.bin_labels, self.matched)]
            labels = self.tables.distinct(self.ref, name)
            if None not in labels and any(v is None for v, hit in zip(values, self.matched) if hit or self.left):
                labels.append(None)  # a LEFT join's unmatched bins look up NULL
            self._attributes[name] = LookupColumn(self, name, values, labels)
        return self._attributes[name]


def _numeric_type(kind: str) -> bool:
    return kind.upper().split("(")[0] in {
        "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
        "UHUGEINT", "DECIMAL", "FLOAT", "DOUBLE",
    }


def _string_type(kind: str) -> bool:
    return kind.upper() == "VARCHAR"


def parse_lookups(joins: list[exp.Join], table: Table, alias: str | None, tables: "PublicTables | None"
                  ) -> list[Lookup]:
    """The public tables `joins` join to protected `table` (none without `tables`: then any join is refused)."""
    if joins and tables is None:
        raise NotSupportedError("joins involving a protected table are not supported; query one protected table")
    names = table.qualifiers(alias)
    out: list[Lookup] = []
    for join in joins:
        source = join.this
        side, kind = (join.args.get("side") or "").upper(), (join.args.get("kind") or "").upper()
        if side not in ("", "LEFT") or kind not in ("", "INNER", "OUTER") or join.args.get("method"):
            what = " ".join(p for p in (join.args.get("method"), side, kind) if p) or "this"
            raise NotSupportedError(
                f"{what} JOIN is not supported with a protected table: use [INNER] JOIN or LEFT JOIN of a "
                "public lookup table ON protected.column = lookup.key"
            )
        if not isinstance(source, exp.Table) or not isinstance(source.this, exp.Identifier):
            raise NotSupportedError("only public tables can be joined to a protected table (no subqueries or functions)")
        name = source.alias or source.name
        if name.lower() in names or any(name.lower() == lk.alias.lower() for lk in out):
            raise ProgrammingError(f"the table name or alias {name!r} is used twice; give each table its own alias")
        qualifier, column, key, using = _join_columns(join, names, name)
        declared = table.column(column) if using else table.qualified(qualifier, column, alias)
        out.append(Lookup(tables, source, name, declared, key, side == "LEFT", using))
    return out


def _join_columns(join: exp.Join, protected: set[str], lookup: str) -> tuple[str, str, str, bool]:
    """(the protected column's qualifier, the column, the public key, via USING) of `ON p.col = l.key` or
    `USING (col)`."""
    using, on = join.args.get("using"), join.args.get("on")
    if using:
        if len(using) != 1:
            raise NotSupportedError("a lookup joins on one column: USING (column)")
        name = using[0].name
        return "", name, name, True
    usage = (
        f"join a public table ON <protected>.<declared column> = {lookup}.<key> (one equality; "
        "put other conditions in WHERE)"
    )
    if not isinstance(on, exp.EQ) or not all(isinstance(s, exp.Column) for s in (on.this, on.expression)):
        raise NotSupportedError(usage)
    sides = {}
    for side in (on.this, on.expression):
        qualifier = side.table.lower()
        if qualifier in protected:
            sides["protected"] = side.name
            sides["qualifier"] = qualifier
        elif qualifier == lookup.lower():
            sides["lookup"] = side.name
    if set(sides) != {"protected", "qualifier", "lookup"}:
        raise NotSupportedError(usage + "; qualify both columns")
    return sides["qualifier"], sides["protected"], sides["lookup"], False


class PublicTables:
    """Reads public tables (never a protected one, nor a view over one) of a DuckDB connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection, protected: Container[str]):
        self.con, self.protected = con, protected
        self._columns: dict[str, dict[str, tuple[str, str]]] = {}

    def _query(self, sql: str, params: list | None = None) -> list[tuple]:
        try:
            return self.con.execute(sql, params or None).fetchall()
        except duckdb.Error as e:
            raise ProgrammingError(f"could not read the lookup table: {str(e).splitlines()[0]}") from None

    def resolve(self, table: exp.Table) -> str:
        """The SQL name of a public user table or view (system ones and protected ones refused)."""
        parts = [p for p in (table.catalog, table.db, table.name) if p]
        if table.name.lower() in self.protected:
            raise NotSupportedError(
                f"{table.name!r} is protected (or a view over a protected table): joins of two protected "
                "tables are not supported; join public lookup tables only"
            )
        schema = table.db.lower() if table.db else None
        found = self._query(
            "SELECT schema_name FROM duckdb_tables() WHERE NOT internal AND lower(table_name) = lower(?) "
            "UNION ALL SELECT schema_name FROM duckdb_views() WHERE NOT internal AND lower(view_name) = lower(?)",
            [table.name, table.name],
        )
        if not any(schema is None or s.lower() == schema for (s,) in found):
            raise ProgrammingError(f"no public table or view named {'.'.join(parts)!r} to join")
        return ".".join(quote_identifier(p) for p in parts)

    def _described(self, ref: str) -> dict[str, tuple[str, str]]:
        if ref not in self._columns:
            rows = self._query(f"DESCRIBE SELECT * FROM {ref}")
            self._columns[ref] = {r[0].lower(): (r[0], r[1]) for r in rows}
        return self._columns[ref]

    def has_column(self, ref: str, name: str) -> bool:
        return name.lower() in self._described(ref)

    def column(self, ref: str, name: str) -> str:
        found = self._described(ref).get(name.lower())
        if found is None:
            raise ProgrammingError(f"the lookup table {ref} has no column {name!r}")
        return found[0]

    def type_of(self, ref: str, name: str) -> str:
        return self._described(ref)[name.lower()][1]

    def require_unique(self, ref: str, key: str) -> None:
        (duplicated,) = self._query(
            f"SELECT COUNT(*) FROM (SELECT {quote_identifier(key)} FROM {ref} WHERE {quote_identifier(key)} "
            f"IS NOT NULL GROUP BY {quote_identifier(key)} HAVING COUNT(*) > 1)"
        )[0]
        if duplicated:
            raise NotSupportedError(
                f"the lookup key {key!r} is not unique in {ref} ({duplicated} values repeat): a join that can "
                "match several public rows per protected row is not supported"
            )

    def keys(self, ref: str, key: str) -> set:
        return {k for (k,) in self._query(f"SELECT {quote_identifier(key)} FROM {ref} WHERE {quote_identifier(key)} IS NOT NULL")}

    def mapping(self, ref: str, key: str, name: str) -> dict:
        q = quote_identifier
        return dict(self._query(f"SELECT {q(key)}, {q(name)} FROM {ref} WHERE {q(key)} IS NOT NULL"))

    def distinct(self, ref: str, name: str) -> list:
        q = quote_identifier(name)
        return [v for (v,) in self._query(f"SELECT DISTINCT {q} FROM {ref} ORDER BY {q} NULLS LAST")]
