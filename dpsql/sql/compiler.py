"""SQL over one protected table -> workload blocks + a template for the result.

The compiler accepts one SELECT with COUNT/SUM/AVG aggregates (with FILTER and
CASE) and quantiles of a declared column (MEDIAN, QUANTILE, PERCENTILE_CONT/DISC, and
MIN/MAX as extreme quantiles), a WHERE of comparisons with literals, GROUP BY declared columns, and
HAVING/ORDER BY/LIMIT/OFFSET, which are applied to the noisy answers. Given the
session's public tables, joins with public lookup tables compile to public maps
of a declared column (`dpsql.sql.lookups`). Every
aggregate becomes a `Block` (AVG becomes a SUM block and a COUNT block; a quantile the
block of its column's prefix counts). The
rest of the statement becomes a *template*: the same SELECT rewritten to read
the noisy per-group answers from a small relation, so DuckDB evaluates the
projections, HAVING, ORDER BY and LIMIT on noisy values only.

A COUNT(*) grouped by a key column whose keys are not released yet compiles to a
`KeySelection` instead (`CompiledQuery.selection`): the executor releases the keys by
partition selection, and the query is then compiled again over them.

MODE(x) and `GROUP BY x ORDER BY COUNT(*) DESC LIMIT 1` compile as the counts per value of x that
report-noisy-max picks from, with a `NoisyMaxQuery` (`CompiledQuery.noisy_max`, `dpsql.sql.noisy_max`).

Everything else is refused with a ProgrammingError that names the construct.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import sqlglot
from sqlglot.dialects.dialect import Dialect
from sqlglot import exp
from sqlglot.errors import ParseError

from dpsql.tables.catalog import Catalog
from dpsql.tables.table import Table
from dpsql.tables.columns import KEY
from dpsql.errors import NotSupportedError, ProgrammingError
from dpsql.sql.aggregates import (ANONYMOUS_AGGREGATES, MOMENT_NODES, QUANTILE_NODES, REFUSED_AGGREGATES,
                                  Aggregate, compile_aggregate, is_aggregate_node)
from dpsql.sql.expressions import ALWAYS, Condition, ExpressionCompiler, condition_sql, literal_value
from dpsql.sql.grouping import expression_key, group_label
from dpsql.sql.grouping_sets import GROUPING_NODES, flatten, grouping_value, is_grouping
from dpsql.sql.lookups import GroupKey, PublicTables, group_layout, parse_lookups
from dpsql.sql.protected_joins import protected_join
from dpsql.sql.noisy_max import NoisyMaxQuery, noisy_max_form
from mechanisms.workload import Block

RESULT_RELATION = "dp_result"
ROW_ORDER = "__row"


@dataclass(frozen=True)
class KeySelection:
    """COUNT(*) per key of an unreleased key column, over the rows meeting `where` (a 0/1 indicator over
    the cells of `clique`, declared columns): what partition selection measures."""

    table: Table
    column: str
    clique: tuple[str, ...]
    where: np.ndarray  # flat over the clique's cells (clique order); a scalar 1 for no WHERE

    def passes(self, cells: np.ndarray) -> np.ndarray:
        """Whether each cell (flat index over the clique) meets the WHERE."""
        where = self.where.reshape(-1)
        return where[cells] != 0 if self.clique else np.full(len(cells), where[0] != 0)


@dataclass
class CompiledQuery:
    """The blocks of one DP query and how to build its result from their answers (or, for a query that must
    first release keys, the `selection` and no blocks)."""

    sql: str
    table: Table
    groups: list[GroupKey]  # in the user's GROUP BY order
    aggregates: list[Aggregate]
    template: exp.Select  # reads RESULT_RELATION
    output_names: list[str]
    output_aggregate: list[int | None]  # per output column: index of a bare aggregate
    selection: KeySelection | None = None
    notes: list[str] = field(default_factory=list)  # how the compiler read the query, for `Result.notes`
    grouping_sets: tuple[tuple[int, ...], ...] = ()  # GROUPING SETS/ROLLUP/CUBE: each set's keys (indices in groups)
    noisy_max: NoisyMaxQuery | None = None  # answered by report-noisy-max over its one COUNT per group
    blocks: list[Block] = field(init=False)

    def __post_init__(self) -> None:
        self.blocks = [b for a in self.aggregates for b in a.blocks]

    @property
    def sets(self) -> tuple[tuple[int, ...], ...]:
        """The grouping sets (one: every key, for a plain GROUP BY); `aggregates` holds each set's in turn."""
        return self.grouping_sets or (tuple(range(len(self.groups))),)

    def set_rows(self, keys: tuple[int, ...]) -> int:
        """Rows of one grouping set: one per combination of its keys' values."""
        return int(np.prod([len(self.groups[i].labels) for i in keys], dtype=np.int64))

    def zero_answers(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """A zero (estimate, standard error) per aggregate, of its rows: to try the template before measuring."""
        per_set = len(self.aggregates) // len(self.sets)
        return [(np.zeros(self.set_rows(keys)),) * 2 for keys in self.sets for _ in range(per_set)]

    @property
    def group_by(self) -> tuple[str, ...]:
        """The group columns of the per-group relation (declared columns by name), in GROUP BY order."""
        return tuple(k.name for k in self.groups)

    @property
    def rows(self) -> int:
        """Rows of the per-group relation: one per combination of group values, in each grouping set."""
        return sum(self.set_rows(keys) for keys in self.sets)


def parse_statement(sql: str, dialect: str, tokens: list | None = None) -> exp.Expression:
    """The one statement of `sql` (parsed from `tokens` when the caller has already tokenized it)."""
    try:
        if tokens is None:
            statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
        else:
            statements = [s for s in Dialect.get_or_raise(dialect).parser().parse(tokens, sql) if s is not None]
    except ParseError as e:
        raise ProgrammingError(f"could not parse the SQL: {_first_line(e)}") from None
    except Exception as e:  # sqlglot raises a few other errors on odd input
        raise ProgrammingError(f"could not parse the SQL: {e}") from None
    if len(statements) != 1:
        raise ProgrammingError(f"expected one statement, found {len(statements)}")
    return statements[0]


def _first_line(e: Exception) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def referenced_tables(tree: exp.Expression) -> list[str]:
    return [t.name for t in tree.find_all(exp.Table) if t.name]


def compile_query(
    sql: str, catalog: Catalog, dialect: str = "duckdb", label: str = "", tables: PublicTables | None = None
) -> CompiledQuery:
    """Compile one SELECT over a protected table (joined to public lookup tables read from
    `tables`, if given). Raises ProgrammingError on anything else."""
    tree = parse_statement(sql, dialect)
    return compile_tree(tree, sql, catalog, label, tables)


def compile_tree(
    tree: exp.Expression, sql: str, catalog: Catalog, label: str = "", tables: PublicTables | None = None
) -> CompiledQuery:
    try:
        return _compile_select(tree, sql, catalog, label, tables)
    except OverflowError as e:  # Predicate expansion past MAX_PREDICATE_TERMS
        raise NotSupportedError(
            f"the query's conditions are too complex to compile ({e}); split it into simpler "
            "queries or use fewer OR/NOT branches across different columns"
        ) from None


def _compile_select(tree: exp.Expression, sql: str, catalog: Catalog, label: str, tables) -> CompiledQuery:
    noisy_max = noisy_max_form(tree)
    if noisy_max is not None:
        compiled = _compile_select(noisy_max[0], sql, catalog, label, tables)
        if compiled.selection is not None:
            column = compiled.selection.table.column(compiled.selection.column)
            raise NotSupportedError(f"{column.not_released()}; report-noisy-max picks among released keys")
        compiled.noisy_max = noisy_max[1]
        return compiled
    if not isinstance(tree, exp.Select):
        raise NotSupportedError(
            f"only SELECT queries can read a protected table (got {tree.key.upper()}); "
            "protected tables are read-only through dpsql"
        )
    if tree.args.get("with") or tree.args.get("with_"):
        # Checked before the FROM table is resolved, which may name the CTE itself.
        raise NotSupportedError("WITH (common table expressions) over a protected table is not supported")
    table, alias = _single_table(tree, catalog)
    _refuse_constructs(tree)
    joined, public = protected_join(tree, catalog, table, alias)
    if joined is not None:
        table, alias = joined, None
    lookups = parse_lookups(public, table, alias, tables)
    compiler = ExpressionCompiler(table, alias, lookups)
    where = compiler.condition(tree.args["where"].this) if tree.args.get("where") else ALWAYS
    for lookup in lookups:
        joined = lookup.condition()
        if joined is not None:  # an INNER join keeps the rows whose value finds a public row
            where = where.and_(joined)
    select_items = list(tree.expressions)
    if tree.args.get("group") and not any(is_aggregate_node(n) for n in tree.walk()):
        raise ProgrammingError(
            "GROUP BY without an aggregate would list the groups that occur in the data, which depends on "
            "individuals; add COUNT(*) (and HAVING COUNT(*) > n to keep only groups with enough rows)")
    tree, sets = flatten(tree, lambda t: _group_by(t, select_items, compiler))
    selection = _key_selection(tree, select_items, compiler, where, lookups)
    if selection is not None and sets:
        raise NotSupportedError(f"{table.column(selection.column).not_released()}; then group it by grouping sets")
    if selection is not None:
        return CompiledQuery(sql, table, [], [], tree, [], [], selection)
    units = _distinct_units(tree, select_items, compiler, where, lookups)
    if units is not None and sets:
        raise NotSupportedError("COUNT(DISTINCT <privacy unit>) with GROUPING SETS, ROLLUP or CUBE is not supported; "
                                "ask one query per grouping")
    if units is not None:  # COUNT(DISTINCT unit) is COUNT(*) of the table of distinct (unit, group) pairs
        table, compiler, where = units, ExpressionCompiler(units, alias or compiler.table.name, []), ALWAYS
    groups = _group_by(tree, select_items, compiler)
    set_keys = sets or (tuple(range(len(groups))),)
    layouts = [group_layout([groups[i] for i in keys], table.domain) for keys in set_keys]
    prefixes = [f"{label}: " if label else ""] if not sets else [
        f"{label + ': ' if label else ''}({', '.join(groups[i].name for i in keys)}) #{j + 1} "
        for j, keys in enumerate(set_keys)]
    per_set: list[list[Aggregate]] = [[] for _ in set_keys]  # each aggregate compiled for every grouping set
    index_of: dict[str, int] = {}

    def aggregate_index(node: exp.Expression) -> int:
        key = node.sql()
        if key not in index_of:
            index_of[key] = len(per_set[0])
            for found, layout, prefix in zip(per_set, layouts, prefixes):
                found.append(compile_aggregate(node, compiler, where, layout, table, prefix))
        return index_of[key]

    def group_index(node: exp.Expression) -> int | None:
        source = _source(compiler.resolve(node)) if isinstance(node, exp.Column) else None
        return next((i for i, k in enumerate(groups) if k.source == source), None)

    template = tree.copy()
    template.set("where", None)
    template.set("group", None)
    template.set("from_" if "from_" in template.args else "from", None)
    template.set("joins", None)

    def rewrite(node: exp.Expression) -> exp.Expression:
        if is_grouping(node):
            return grouping_value(node, group_index)
        if is_aggregate_node(node):
            return exp.column(f"__agg_{aggregate_index(node)}")
        if (label := group_label(node, groups)) is not None:  # a GROUP BY expression
            return label
        if isinstance(node, exp.Column):
            return _rewrite_column(node, compiler, groups, output_aliases)
        return node

    output_aliases = {e.alias for e in select_items if isinstance(e, exp.Alias)}
    names, bare = [], []
    new_items = []
    for item in select_items:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            raise ProgrammingError(
                "SELECT * would release raw rows of a protected table; select aggregates "
                "(COUNT, SUM, AVG) and GROUP BY columns"
            )
        inner = item.this if isinstance(item, exp.Alias) else item
        names.append(item.alias if isinstance(item, exp.Alias) else (
            item.name if isinstance(item, exp.Column) else item.sql()))
        new_item = item.transform(rewrite, copy=True)
        bare.append(aggregate_index(inner) if is_aggregate_node(inner) else None)
        if not isinstance(new_item, exp.Alias):
            new_item = exp.alias_(new_item, names[-1], quoted=True)
        new_items.append(new_item)
    template.set("expressions", new_items)
    if tree.args.get("having"):
        template.set("having", None)
        template.set("where", exp.Where(this=tree.args["having"].this.transform(rewrite, copy=True)))
    if tree.args.get("order"):
        for ordered in tree.args["order"].expressions:
            key = ordered.this
            # An ordinal past the select list would silently bind to the standard-error
            # columns that result.assemble appends to the template.
            if isinstance(key, exp.Literal) and not key.is_string and not 1 <= int(literal_value(key)) <= len(select_items):
                raise ProgrammingError(f"ORDER BY {key.sql()} refers to no select item")
        template.set("order", tree.args["order"].transform(rewrite, copy=True))
    else:
        template.set("order", exp.Order(expressions=[exp.Ordered(this=exp.column(ROW_ORDER))]))
    template.set("from_" if "from_" in tree.args else "from", exp.From(this=exp.to_table(RESULT_RELATION)))
    aggregates = [a for found in per_set for a in found]
    if not aggregates and not groups:
        raise ProgrammingError(
            "selecting columns of a protected table without aggregates would release raw rows; "
            "use COUNT, SUM or AVG (with GROUP BY for per-value answers)"
        )
    return CompiledQuery(sql, table, groups, aggregates, template, names, bare, notes=compiler.notes,
                         grouping_sets=sets)


def _source(resolved) -> tuple:
    """What a resolved column reference names: a declared column or a lookup's attribute."""
    return getattr(resolved, "source", ("column", resolved.name))


def _rewrite_column(node: exp.Column, compiler: ExpressionCompiler, groups: list[GroupKey], aliases) -> exp.Expression:
    if not node.table and node.name in aliases:
        return node  # an output alias (ORDER BY n, HAVING n > 5)
    source = _source(compiler.resolve(node))
    key = next((k for k in groups if k.source == source), None)
    if key is None:
        raise ProgrammingError(
            f"column {node.sql()!r} is used outside an aggregate but is not in GROUP BY: raw "
            "values of a protected table cannot be selected; aggregate it or group by it"
        )
    return exp.column(key.name, quoted=True)


def _single_table(tree: exp.Select, catalog: Catalog) -> tuple[Table, str | None]:
    from_ = tree.args.get("from_") or tree.args.get("from")
    if from_ is None:
        raise ProgrammingError("a DP query needs FROM <protected table>")
    source = from_.this
    if not isinstance(source, exp.Table) or not source.name:
        raise NotSupportedError("subqueries and table functions in FROM are not supported; query a protected table directly")
    table = catalog.get(source.name)
    if table is None and tree.args.get("joins"):
        raise NotSupportedError(
            "joins with a protected table must read it first: FROM <protected table> [LEFT] JOIN <public table> ON ..."
        )
    if table is None:
        raise ProgrammingError(f"table {source.name!r} is not a protected table in the catalog")
    if source.args.get("sample"):
        raise NotSupportedError("TABLESAMPLE is not supported over a protected table; query the whole table")
    return table, source.alias or None


def _refuse_constructs(tree: exp.Select) -> None:
    if tree.args.get("with") or tree.args.get("with_"):
        raise NotSupportedError("WITH (common table expressions) over a protected table is not supported")
    if tree.args.get("distinct"):
        raise NotSupportedError("SELECT DISTINCT releases raw values; use GROUP BY with COUNT(*)")
    for key in ("qualify", "sample", "laterals", "pivots", "windows", "connect", "prewhere"):
        if tree.args.get(key):
            raise NotSupportedError(f"{key.upper()} is not supported over a protected table")
    for node in tree.walk():
        if isinstance(node, exp.Window):
            raise NotSupportedError("window functions are not supported over a protected table; use GROUP BY")
        if isinstance(node, (exp.Subquery, exp.Union, exp.Intersect, exp.Except)) or (
            isinstance(node, exp.Select) and node is not tree
        ):
            raise NotSupportedError("subqueries are not supported over a protected table; run them separately")
        if isinstance(node, exp.AggFunc) and type(node).__name__ in REFUSED_AGGREGATES:
            raise NotSupportedError(f"{type(node).__name__.upper()} is not supported: {REFUSED_AGGREGATES[type(node).__name__]}")
        if isinstance(node, exp.AggFunc) and not isinstance(node, (exp.Count, exp.Sum, exp.Avg, *GROUPING_NODES,
                                                                   *QUANTILE_NODES, *MOMENT_NODES)):
            raise NotSupportedError(
                f"aggregate {node.sql()!r} is not supported; use COUNT, SUM, AVG, a quantile (MEDIAN, QUANTILE, "
                "PERCENTILE_CONT) or a variance (VAR_POP, VAR_SAMP, STDDEV_POP, STDDEV_SAMP)"
            )
        if isinstance(node, exp.Anonymous) and node.name.lower() in {"min", "max", "median", "mode", "quantile"}:
            raise NotSupportedError(f"{node.name.upper()} is not supported over a protected table")
        if isinstance(node, exp.Anonymous) and node.name.lower() in ANONYMOUS_AGGREGATES:
            raise NotSupportedError(
                f"aggregate {node.name.upper()} is not supported over a protected table; use COUNT, SUM or AVG"
            )


def _group_by(tree: exp.Select, items: list[exp.Expression], compiler: ExpressionCompiler) -> list[GroupKey]:
    group = tree.args.get("group")
    if group is None:
        return []
    for key in ("grouping_sets", "cube", "rollup"):
        if group.args.get(key):
            raise NotSupportedError(f"GROUP BY {key.upper().replace('_', ' ')} is not supported; run one query per grouping")
    for g in group.expressions:
        if isinstance(g, (exp.GroupingSets, exp.Rollup, exp.Cube)):
            name = {exp.GroupingSets: "GROUPING SETS", exp.Rollup: "ROLLUP", exp.Cube: "CUBE"}[type(g)]
            raise NotSupportedError(f"GROUP BY {name} is not supported; run one query per grouping")
    if group.args.get("all"):
        raise NotSupportedError("GROUP BY ALL is not supported; list the columns")
    out: list[GroupKey] = []
    aliases = {e.alias: e.this for e in items if isinstance(e, exp.Alias)}
    for g in group.expressions:
        target = g
        if isinstance(g, exp.Literal) and not g.is_string:
            value = literal_value(g)
            if value != int(value):
                raise ProgrammingError(f"GROUP BY {g.sql()}: a position must be a whole number")
            k = int(value)
            if not 1 <= k <= len(items):
                raise ProgrammingError(f"GROUP BY {k} refers to no select item")
            target = items[k - 1].this if isinstance(items[k - 1], exp.Alias) else items[k - 1]
        elif isinstance(g, exp.Column) and not g.table and g.name in aliases and g.name not in compiler.table.columns:
            target = aliases[g.name]
        if not isinstance(target, exp.Column):
            if all(k.source != ("expression", target.sql()) for k in out):
                out.append(expression_key(target, f"__group_{len(out)}", compiler))
            continue
        column = compiler.resolve(target)
        if all(k.source != _source(column) for k in out):
            if hasattr(column, "group_key"):
                key = column.group_key(f"__lookup_{len(out)}")
            elif column.kind == KEY:  # one group per released key; the other keys are in none
                released = len(column.values)
                key = GroupKey(column.name, column.name, list(column.values),
                               np.r_[np.arange(released), -1], _source(column))
            else:
                key = GroupKey(column.name, column.name, column.labels(), None, _source(column))
            out.append(key)
    return out


def _key_selection(tree: exp.Select, items: list[exp.Expression], compiler: ExpressionCompiler, where: Condition,
                   lookups) -> KeySelection | None:
    """The partition selection a query asks for, if it groups by a key column whose keys are not released:
    COUNT(*) (or COUNT of a constant) per key, nothing else, over the rows its WHERE keeps."""
    unreleased = {c.name.lower(): c for c in compiler.table.columns.values() if c.is_open}
    keys = _group_by(tree, items, compiler) if unreleased else []  # GROUP BY url, GROUP BY 1, GROUP BY an alias
    column = next((unreleased[k.attribute.lower()] for k in keys if k.attribute.lower() in unreleased), None)
    if column is None:
        return None
    if len(keys) != 1 or lookups:
        raise NotSupportedError(f"{column.not_released()}; until then it can only be grouped by alone, without joins")
    for item in items:
        inner = item.this if isinstance(item, exp.Alias) else item
        if isinstance(inner, exp.Column) and compiler.resolve(inner) is column:
            continue
        count = inner.this if isinstance(inner, exp.Count) else None
        if not isinstance(inner, exp.Count) or not (count is None or isinstance(count, exp.Star) or
                                                     (isinstance(count, exp.Literal) and not count.is_string)):
            raise NotSupportedError(f"{column.not_released()}; until then a query grouped by it can select only "
                                    f"the key and COUNT(*), not {inner.sql()!r}")
    table = compiler.table
    clique = table.domain.canonical(where.true.attributes())
    indicator = np.asarray(where.true.dense(clique, table.domain)).reshape(-1)  # no clique: the constant 0 or 1
    if not np.all((indicator == 0) | (indicator == 1)):
        raise NotSupportedError("the WHERE of a key release must keep or drop whole rows (no weights)")
    return KeySelection(table, column.name, clique, indicator)


def _distinct_units(tree: exp.Select, items: list[exp.Expression], compiler: ExpressionCompiler, where: Condition,
                    lookups) -> Table | None:
    """The `Table.distinct_units` table a COUNT(DISTINCT <privacy unit>) query counts, if it is one.

    Every aggregate of such a query must be that count (its rows are pairs, not the table's rows)."""
    counts = [n for n in tree.find_all(exp.Count) if isinstance(n.this, exp.Distinct)]
    if not counts:
        return None
    table = compiler.table
    for node in counts:
        _check_distinct_unit(node, table)
    if any(not (isinstance(a, exp.Count) and isinstance(a.this, exp.Distinct)) for a in tree.find_all(exp.AggFunc)) \
            or any(isinstance(f.this, exp.Count) for f in tree.find_all(exp.Filter)) or lookups:
        raise NotSupportedError(
            f"COUNT(DISTINCT {table.unit.column}) counts privacy units, not rows: ask it in a query of its own "
            "(no other aggregates, FILTER or joins)")
    keys = _group_by(tree, items, compiler)
    if any(k.mapped for k in keys):
        raise NotSupportedError(f"COUNT(DISTINCT {table.unit.column}) groups by declared columns, not expressions")
    return table.distinct_units(tuple(k.attribute for k in keys), condition_sql(table, where))


@dataclass(frozen=True)
class CellCounts:
    """COUNT(*) per cell of `group` (declared columns, GROUP BY order; cells flat, last varying fastest)
    over the rows meeting `where_sql`: what a continual query measures each window."""

    table: Table
    group: tuple[str, ...]
    where_sql: str
    count_name: str

    def labels(self) -> list[tuple]:
        """Each cell's group values, in cell order."""
        return [tuple(row) for row in np.array(np.meshgrid(
            *[np.asarray(self.table.columns[g].labels(), dtype=object) for g in self.group], indexing="ij"),
            dtype=object).reshape(len(self.group), -1).T] if self.group else [()]

    @property
    def cells(self) -> int:
        return math.prod(self.table.columns[g].size for g in self.group)


def compile_cell_counts(tree: exp.Expression, catalog: Catalog) -> CellCounts:
    """`SELECT g…, COUNT(*) FROM t [WHERE …] GROUP BY g…` over declared columns, as a `CellCounts`."""
    if not isinstance(tree, exp.Select):
        raise NotSupportedError("a continual query is a SELECT")
    table, alias = _single_table(tree, catalog)
    _refuse_constructs(tree)
    if tree.args.get("joins") or any(tree.args.get(k) for k in ("having", "order", "limit", "offset")):
        raise NotSupportedError("a continual query counts rows per group: no joins, HAVING, ORDER BY or LIMIT")
    compiler = ExpressionCompiler(table, alias, [])
    where = compiler.condition(tree.args["where"].this) if tree.args.get("where") else ALWAYS
    groups = _group_by(tree, list(tree.expressions), compiler)
    if any(k.mapped for k in groups):
        raise NotSupportedError("a continual query groups by declared integer, numeric or categorical columns")
    counts = []
    for item in tree.expressions:
        inner = item.this if isinstance(item, exp.Alias) else item
        if isinstance(inner, exp.Column) and any(k.source == _source(compiler.resolve(inner)) for k in groups):
            continue
        if not (isinstance(inner, exp.Count) and (inner.this is None or isinstance(inner.this, exp.Star))):
            raise NotSupportedError(f"a continual query selects its GROUP BY columns and COUNT(*), not {inner.sql()!r}")
        counts.append(item.alias if isinstance(item, exp.Alias) else "count")
    if len(counts) != 1:
        raise NotSupportedError("a continual query selects one COUNT(*)")
    return CellCounts(table, tuple(k.attribute for k in groups), condition_sql(table, where), counts[0])


def _check_distinct_unit(node: exp.Count, table: Table) -> None:
    """Refuse COUNT(DISTINCT x) unless x is the table's own privacy-unit column, saying why."""
    args = node.this.expressions
    unit = table.unit
    if unit is None:
        raise NotSupportedError(
            f"{node.sql()!r}: a count of distinct values has unbounded sensitivity (one person can add many values); "
            f"each row of {table.name!r} is its own privacy unit, so COUNT(*) counts them")
    column = args[0] if len(args) == 1 and isinstance(args[0], exp.Column) else None
    if column is None or column.name.lower() != unit.column.lower():
        raise NotSupportedError(
            f"{node.sql()!r}: a count of distinct values has unbounded sensitivity (one person can add many values); "
            f"only COUNT(DISTINCT {unit.column}), the number of privacy units, is supported")
    if unit.path:
        raise NotSupportedError(
            f"{node.sql()!r}: {table.name!r} reaches its privacy unit through a foreign key; count units on the "
            f"table that holds {unit.column}")

