"""Flattening: the one DP query a statement of nested row-level SELECTs means, and its DP parts.

Analysts (and BI tools) wrap queries: ``SELECT sex, COUNT(*) FROM (SELECT sex FROM people WHERE
age > 30) t GROUP BY sex``, ``WITH adults AS (SELECT * FROM people WHERE age >= 18) SELECT ...``.
These passes rewrite the sqlglot tree, in order (`PASSES`), before the compiler sees it:

1. `inline_ctes`: each reference to a common table expression becomes a subquery of its body
   (the WITH is scoped as SQL scopes it: a CTE sees the ones before it; WITH RECURSIVE over a
   protected table is refused);
2. `merge_row_level`: a subquery in FROM that only filters, projects or computes per-row columns of a
   protected table is merged into the query that reads it, innermost first (so any depth): its WHERE is
   ANDed in, and each reference to one of its columns is replaced by the column's expression. The
   result is the one DP query the statement means; whether its expressions compile is the compiler's
   business. Counting distinct rows is counting distinct units: ``SELECT g, COUNT(*) FROM (SELECT DISTINCT
   user_id, g FROM visits) GROUP BY g`` is ``SELECT g, COUNT(DISTINCT user_id) FROM visits GROUP BY g``
   (`_distinct_count`; the compiler accepts it when user_id is the privacy unit).

Then `split` says what the statement is:

- a `exp.Select` over a protected table: one DP query, compiled as usual; a subquery in it that reads no
  protected table (``WHERE region IN (SELECT region FROM regions WHERE ...)``, a scalar subquery, EXISTS) is
  public SQL: given `evaluate` (the analyst's workspace), it runs first and its values replace it as literals
  (`inline_public_subqueries`);
- a `Composite`: every SELECT that reads a protected table directly (an aggregate query: a *DP part*)
  is cut out and replaced by ``SELECT * FROM __dpsql_part_<i>``; what remains (`outer`) is
  post-processing of the parts' noisy answers, SQL that reads no protected table
  (`dpsql.answers.post_processing`). A UNION [ALL] whose every branch is a DP part has no outer SQL: its
  answer is the parts' rows, in order (`union`).

Everything here is a rewrite of the statement's text: no data is read.
"""

from __future__ import annotations

import re

from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Callable

from sqlglot import exp

from dpsql.errors import Error, NotSupportedError, ProgrammingError

_WITH = "with_" if "with_" in exp.Select.arg_types else "with"
_FROM = "from_" if "from_" in exp.Select.arg_types else "from"
_EXCEPT = "except_" if "except_" in exp.Star.arg_types else "except"
PART_PREFIX = "__dpsql_part_"
# A subquery with any of these is not row-level: it aggregates, or picks rows by their order or values.
_NOT_ROW_LEVEL = ("group", "having", "distinct", "limit", "offset", "qualify", "windows", "sample", "laterals",
                  "pivots", "connect", "prewhere")


@dataclass
class Composite:
    """A statement answered from DP parts: by `outer` SQL over them, or (`union`: "all" or "distinct")
    by their rows in order, repeated rows dropped for "distinct"."""

    parts: list[exp.Select]
    outer: exp.Query | None
    union: str | None = None


def flatten(tree: exp.Expression, protected: dict[str, str],
            evaluate: Callable[[str], list[tuple]] | None = None) -> exp.Select | Composite:
    """The DP query a statement means, or its DP parts and what is done with them (see the module
    docstring). `protected` maps the protected tables' lower-case names to their names; `evaluate` runs
    public SQL (a query reading no protected table) and returns its rows."""
    if not isinstance(tree, exp.Query):
        raise NotSupportedError(
            f"protected tables are read-only through dpsql (the data owner administers them in DuckDB); "
            f"only SELECT queries with aggregates can read them, not {tree.key.upper()}")
    try:
        for rewrite in PASSES:
            tree = rewrite(tree, protected)
        shape = split(tree, protected)
        return inline_public_subqueries(shape, protected, evaluate) if isinstance(shape, exp.Select) else shape
    except RecursionError:
        raise ProgrammingError("the query nests subqueries too deeply to compile; simplify it") from None


# --- 1. common table expressions ----------------------------------------------------------------
def inline_ctes(tree: exp.Expression, protected: dict[str, str]) -> exp.Expression:
    """Each reference to a CTE as a subquery of its body, aliased as the reference was."""
    return _inline(tree.copy(), {}, protected)


def _inline(node: exp.Expression, scope: dict[str, exp.CTE], protected: dict[str, str]) -> exp.Expression:
    with_ = node.args.get(_WITH) if isinstance(node, exp.Query) else None
    if with_ is not None and with_.args.get("recursive"):
        if any(_names_protected(c.this, protected) for c in with_.expressions):
            raise NotSupportedError("WITH RECURSIVE over a protected table is not supported; a recursive query "
                                    "can release raw rows")
    elif with_ is not None:
        scope = dict(scope)
        for cte in with_.expressions:
            scope[cte.alias_or_name.lower()] = exp.CTE(this=_inline(cte.this, scope, protected),
                                                      alias=cte.args["alias"].copy())
        node.set(_WITH, None)
    if (isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier) and not node.db
            and node.name.lower() in scope):
        cte = scope[node.name.lower()]
        alias = (node.args.get("alias") or cte.args["alias"]).copy()
        if not alias.columns and cte.args["alias"].columns:  # WITH c(x, y) AS (...): the columns' names
            alias.set("columns", [c.copy() for c in cte.args["alias"].columns])
        return exp.Subquery(this=cte.this.copy(), alias=alias)
    for key, value in list(node.args.items()):
        if isinstance(value, exp.Expression):
            node.set(key, _inline(value, scope, protected))
        elif isinstance(value, list):
            node.set(key, [_inline(v, scope, protected) if isinstance(v, exp.Expression) else v for v in value])
    return node


def _names_protected(node: exp.Expression, protected: dict[str, str]) -> bool:
    return any(t.name.lower() in protected for t in node.find_all(exp.Table))


# --- 2. row-level subqueries ---------------------------------------------------------------------
def merge_row_level(tree: exp.Expression, protected: dict[str, str]) -> exp.Expression:
    """Merge each row-level subquery over a protected table into the SELECT whose FROM it is, innermost first."""
    for select in reversed(list(tree.find_all(exp.Select))):  # find_all is breadth-first: reversed, deepest first
        while True:
            source = _from(select)
            if not isinstance(source, exp.Subquery) or not (
                    _row_level(source.this, protected) or _distinct_count(select, source, protected)):
                break
            _merge(select, source)
    return tree


def _from(select: exp.Select) -> exp.Expression | None:
    from_ = select.args.get(_FROM)
    return from_.this if from_ is not None else None


def _row_level(inner: exp.Expression, protected: dict[str, str]) -> bool:
    """Whether a subquery only filters and computes per-row columns of a protected table."""
    if not isinstance(inner, exp.Select) or any(inner.args.get(k) for k in _NOT_ROW_LEVEL):
        return False
    table = _from(inner)
    if not isinstance(table, exp.Table) or table.name.lower() not in protected:
        return False
    return not any(_in_scope(n, inner) for n in inner.find_all(exp.AggFunc, exp.Window))


def _distinct_count(outer: exp.Select, source: exp.Subquery, protected: dict[str, str]) -> bool:
    """Rewrite ``COUNT(*)`` over ``SELECT DISTINCT u[, g...]`` (the outer grouped by the g's) into
    ``COUNT(DISTINCT u)`` over the subquery without DISTINCT (which is then row-level); False, changing
    nothing, for any other shape."""
    inner = source.this
    distinct = inner.args.get("distinct") if isinstance(inner, exp.Select) else None
    if distinct is None or distinct.args.get("on") or outer.args.get("joins"):
        return False
    inner.set("distinct", None)
    row_level = _row_level(inner, protected)
    inner.set("distinct", distinct)
    counts = [n for n in outer.find_all(exp.AggFunc) if _in_scope(n, outer)]
    if not row_level or not counts or any(
            not isinstance(c, exp.Count) or isinstance(c.parent, exp.Filter)
            or not (c.this is None or isinstance(c.this, exp.Star) or (isinstance(c.this, exp.Literal)
                                                                       and not c.this.is_string))
            for c in counts):
        return False
    names = [e.alias_or_name.lower() for e in inner.expressions]
    if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
           for e in inner.expressions):
        return False
    grouped = set()
    for g in (outer.args["group"].expressions if outer.args.get("group") else []):
        if isinstance(g, exp.Literal) and not g.is_string and 1 <= int(g.name) <= len(outer.expressions):
            g = outer.expressions[int(g.name) - 1]
            g = g.this if isinstance(g, exp.Alias) else g
        if isinstance(g, exp.Column):
            grouped.add(g.name.lower())
    units = [n for n in names if n not in grouped]
    if len(units) != 1:
        return False
    for count in counts:
        count.replace(exp.Count(this=exp.Distinct(expressions=[exp.column(units[0], table=source.alias or None)])))
    inner.set("distinct", None)
    return True


def _in_scope(node: exp.Expression, select: exp.Select) -> bool:
    """Whether `node` belongs to `select` itself, not to a subquery inside it."""
    return node.find_ancestor(exp.Select) is select


def _merge(outer: exp.Select, source: exp.Subquery) -> None:
    inner: exp.Select = source.this
    alias = source.alias.lower()
    table = _from(inner)
    qualifier = table.alias_or_name
    columns, star, excluded = _outputs(inner, source)

    def substitute(node: exp.Expression) -> exp.Expression:
        # (each clause is transformed as a copy of its own: a column under a Query is a nested subquery's)
        if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star) or node.find_ancestor(exp.Query):
            return node
        if node.table and node.table.lower() != alias:
            return node  # another source's column (a joined public table)
        name = node.name.lower()
        if name in columns and name not in excluded:
            found = columns[name].copy()
            return found if isinstance(found, (exp.Column, exp.Literal)) else exp.Paren(this=found)
        if star and name not in excluded:
            return exp.column(node.name, table=qualifier, quoted=node.this.quoted) if node.table else node
        if node.table or not outer.args.get("joins"):
            raise ProgrammingError(f"column {node.sql()!r} is not a column of the subquery "
                                   f"{source.alias or '(unnamed)'}")
        return node  # unqualified: a joined public table's column

    output_names = {e.alias_or_name.lower() for e in outer.expressions}
    items = []
    for item in outer.expressions:
        replaced = item.transform(substitute)
        if isinstance(item, exp.Column) and not isinstance(item.this, exp.Star) and (
                not isinstance(replaced, exp.Column) or replaced.name != item.name):
            replaced = exp.alias_(replaced, item.name, quoted=True)
        items.append(replaced)
    outer.set("expressions", items)
    for key in ("where", "group", "having", "joins", "qualify"):
        value = outer.args.get(key)
        if isinstance(value, list):
            outer.set(key, [v.transform(substitute) for v in value])
        elif value is not None:
            outer.set(key, value.transform(substitute))
    if outer.args.get("order"):
        outer.set("order", outer.args["order"].transform(
            lambda n: n if isinstance(n, exp.Column) and not n.table and n.name.lower() in output_names
            else substitute(n)))
    outer.set(_FROM, exp.From(this=table.copy()))
    outer.set("joins", [j.copy() for j in inner.args.get("joins") or []] + list(outer.args.get("joins") or []))
    conditions = [w.this.copy() for w in (inner.args.get("where"), outer.args.get("where")) if w is not None]
    if conditions:
        outer.set("where", exp.Where(this=exp.and_(*conditions) if len(conditions) > 1 else conditions[0]))


def _outputs(inner: exp.Select, source: exp.Subquery) -> tuple[dict[str, exp.Expression], bool, set[str]]:
    """A subquery's named columns (lower-case name -> expression), whether it passes every column of its
    table through (`*`), and the columns its `* EXCLUDE (...)` leaves out."""
    columns: dict[str, exp.Expression] = {}
    star, excluded = False, set()
    renamed = [c.name for c in source.args["alias"].columns] if source.args.get("alias") else []
    for item in inner.expressions:
        target = item.this if isinstance(item, exp.Alias) else item
        if isinstance(target, exp.Star) or (isinstance(target, exp.Column) and isinstance(target.this, exp.Star)):
            star_node = target if isinstance(target, exp.Star) else target.this
            if star_node.args.get("replace") or star_node.args.get("rename") or renamed:
                raise NotSupportedError("a subquery over a protected table may select * or * EXCLUDE (...), "
                                        "not * REPLACE/RENAME or * under column aliases; name its columns")
            star = True
            excluded |= {c.name.lower() for c in star_node.args.get(_EXCEPT) or []}
            continue
        name = item.alias_or_name if isinstance(item, exp.Alias) or isinstance(item, exp.Column) else item.sql()
        columns[name.lower()] = target
    if renamed:
        if len(renamed) > len(columns):
            raise ProgrammingError(f"the subquery {source.alias!r} names {len(renamed)} columns but has "
                                   f"{len(columns)}")
        expressions = list(columns.values())
        columns = {n.lower(): e for n, e in zip(renamed, expressions)} | {
            n: e for n, e in list(columns.items())[len(renamed):]}
    return columns, star, excluded


PASSES = (inline_ctes, merge_row_level)


# --- 3. DP parts ---------------------------------------------------------------------------------
def split(tree: exp.Expression, protected: dict[str, str]) -> exp.Select | Composite:
    """The one DP query (a SELECT that reads a protected table itself), or the statement's DP parts and
    what is done with them (see the module docstring)."""
    if isinstance(tree, exp.Select) and _reads_protected(tree, protected):
        return tree
    parts: list[exp.Select] = []

    def cut(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Select) and _reads_protected(node, protected):
            parts.append(node.copy())
            return exp.select("*").from_(exp.to_table(f"{PART_PREFIX}{len(parts) - 1}"))
        return node

    outer = tree.transform(cut)
    left = sorted({t.name for t in outer.find_all(exp.Table) if t.name.lower() in protected})
    if left:
        raise NotSupportedError(f"this statement reads the protected table {left[0]!r} in a way dpsql cannot "
                                "compile; read it in a SELECT with aggregates (FROM the table itself)")
    union = _union_of_parts(outer)
    return Composite(parts, None if union else outer, union)


# A public subquery inlined into a DP query may give at most this many values.
MAX_INLINED_VALUES = 10_000


def inline_public_subqueries(select: exp.Select, protected: dict[str, str],
                             evaluate: Callable[[str], list[tuple]] | None) -> exp.Select:
    """Each subquery of a DP query that reads no protected table, run by `evaluate` and replaced by its
    values: ``x IN (SELECT ...)`` by the list, a scalar subquery by its one value, EXISTS by TRUE/FALSE.
    A subquery that reads a protected table is refused: its noisy answer would shape the query."""
    for node in list(select.find_all(exp.Select)):
        if node is select or node.parent is None or node.find_ancestor(exp.Select) is not select:
            continue  # the query itself, or inside another subquery: replaced with it
        if _names_protected(node, protected):
            raise NotSupportedError(
                "a subquery that reads a protected table, inside a DP query that reads one too, would shape the "
                "query by its noisy answer: ask the subquery on its own first, then use its answer as a literal")
        if evaluate is None:
            continue
        holder = node.parent if isinstance(node.parent, exp.Subquery) else node
        if not isinstance(holder.parent, exp.Condition):  # a table (FROM, JOIN), not a value: left as it is
            continue
        try:
            rows = evaluate(node.sql(dialect="duckdb"))
        except Error as e:
            reason = re.sub(r"^[A-Za-z ]*Error: ", "", str(e))
            raise ProgrammingError(f"the subquery {node.sql()!r} cannot run: {reason}") from None
        if rows and len(rows[0]) != 1:
            raise ProgrammingError(f"the subquery {node.sql()!r} must select one column")
        if len(rows) > MAX_INLINED_VALUES:
            raise NotSupportedError(f"the subquery {node.sql()!r} gives {len(rows)} values; at most "
                                    f"{MAX_INLINED_VALUES} are inlined into a DP query")
        values = [_literal(r[0]) for r in rows]
        context = holder.parent
        if isinstance(holder.parent, exp.Exists):
            holder.parent.replace(exp.true() if rows else exp.false())
        elif isinstance(context, exp.In) and context.args.get("query") is holder:
            context.set("query", None)
            if values:
                context.set("expressions", values)
            else:  # x IN (empty): FALSE (NOT IN: TRUE)
                context.replace(exp.false())
        else:
            if len(rows) > 1:
                raise ProgrammingError(f"the subquery {node.sql()!r} gives {len(rows)} rows where one value is "
                                       "expected")
            holder.replace(values[0] if values else exp.null())
    return select


def _literal(value) -> exp.Expression:
    """A public value as a SQL literal."""
    if value is None:
        return exp.null()
    if isinstance(value, bool):
        return exp.true() if value else exp.false()
    if isinstance(value, (int, float, Decimal)):
        return exp.Literal.number(value)
    if isinstance(value, (date, datetime)):
        kind = "TIMESTAMP" if isinstance(value, datetime) else "DATE"
        return exp.cast(exp.Literal.string(value.isoformat(sep=" ") if kind == "TIMESTAMP" else value.isoformat()),
                        kind)
    return exp.Literal.string(str(value))


def _reads_protected(select: exp.Select, protected: dict[str, str]) -> bool:
    """Whether the SELECT reads a protected table itself (in its FROM or joins, not in a subquery)."""
    sources = [_from(select), *(j.this for j in select.args.get("joins") or [])]
    return any(isinstance(s, exp.Table) and s.name.lower() in protected for s in sources)


def _union_of_parts(outer: exp.Expression) -> str | None:
    """"all" or "distinct" when `outer` is a UNION [ALL] (of one kind) of cut DP parts and nothing else."""
    if not isinstance(outer, exp.Union) or any(outer.args.get(k) for k in ("order", "limit", "offset", _WITH)):
        return None
    kind = "distinct" if outer.args.get("distinct") else "all"
    stack = [outer]
    while stack:
        node = stack.pop()
        while isinstance(node, (exp.Subquery, exp.Paren)) and not node.args.get("alias"):
            node = node.this
        if isinstance(node, exp.Union):
            if ("distinct" if node.args.get("distinct") else "all") != kind or node.args.get("by_name") or any(
                    node.args.get(k) for k in ("order", "limit", "offset")):
                return None
            stack += [node.this, node.expression]
        elif not (isinstance(node, exp.Select) and _is_part_reference(node)):
            return None
    return kind


def _is_part_reference(select: exp.Select) -> bool:
    source = _from(select)
    return (isinstance(source, exp.Table) and source.name.startswith(PART_PREFIX) and len(select.expressions) == 1
            and isinstance(select.expressions[0], exp.Star) and not select.args.get("joins")
            and not select.args.get("where"))


__all__ = ["Composite", "PART_PREFIX", "PASSES", "flatten", "inline_ctes", "inline_public_subqueries",
           "merge_row_level", "split"]
