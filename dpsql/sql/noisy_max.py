"""Queries answered by report-noisy-max (`mechanisms.noisy_max`): the most frequent value of a column.

Two spellings ask for it:

- ``SELECT MODE(x) FROM t [WHERE ...]`` (also ``MODE() WITHIN GROUP (ORDER BY x)``): the most frequent
  non-NULL value of x;
- ``SELECT x FROM t [WHERE ...] GROUP BY x [HAVING COUNT(*) >= T] ORDER BY COUNT(*) DESC LIMIT 1``: the
  top group (NULL is a group when x is nullable). With the HAVING, it is Confident-GNMax: the top group
  if the largest count, with noise of its own, reaches T, else no row (the table's owner must allow it:
  ``confident_mode = true``).

`noisy_max_form` recognises them and gives the query they pick from, ``SELECT x, COUNT(*) ... GROUP BY x``
with the statement's FROM, joins and WHERE, which the compiler compiles as usual (so every rule of a
COUNT per group holds); the compiled query carries the `NoisyMaxQuery`, and
`dpsql.handlers.noisy_max` answers it. The candidates are x's declared values (a released key
column's released keys; the bin of the keys not released is not a value, so never a candidate). A
top-1 query of any other shape (COUNT(*) selected too, another HAVING) is an ordinary GROUP BY: its
noisy histogram, ordered. MODE anywhere else is refused here, saying how to ask it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from dpsql.errors import NotSupportedError
from dpsql.sql.expressions import literal_value


@dataclass(frozen=True)
class NoisyMaxQuery:
    """What a noisy-max query asks: the result column's `output` name, whether NULL is a candidate
    (`nulls`: the GROUP BY spelling), and Confident-GNMax's `threshold` (None: GNMax)."""

    output: str
    nulls: bool
    threshold: int | None = None

    def describe(self, column: str) -> str:
        what = f"MODE({column})" if not self.nulls else f"the top group of {column}"
        return what if self.threshold is None else f"{what} if its count reaches {self.threshold}"


_USAGE = ("SELECT MODE(x) FROM t [WHERE ...], or SELECT x FROM t [WHERE ...] GROUP BY x ORDER BY COUNT(*) DESC "
          "LIMIT 1")


def noisy_max_form(tree: exp.Expression) -> tuple[exp.Select, NoisyMaxQuery] | None:
    """(the counts query, what is asked) when `tree` is a noisy-max query; None when it is not one.
    Raises NotSupportedError for MODE used any other way."""
    if not isinstance(tree, exp.Select):
        return None
    modes = [n for n in tree.walk() if isinstance(n, exp.Mode)]
    if modes:
        return _mode(tree, modes)
    return _top_group(tree)


def _mode(tree: exp.Select, modes: list[exp.Mode]) -> tuple[exp.Select, NoisyMaxQuery]:
    items = tree.expressions
    item = items[0] if len(items) == 1 else None
    inner = item.this if isinstance(item, exp.Alias) else item
    if isinstance(inner, exp.Mode) and inner.this is None:
        inner = None  # MODE() alone: only WITHIN GROUP gives it a column
    if isinstance(inner, exp.WithinGroup) and isinstance(inner.this, exp.Mode) and inner.this.this is None:
        order = inner.expression.expressions if isinstance(inner.expression, exp.Order) else []
        column = order[0].this if len(order) == 1 else None
    elif isinstance(inner, exp.Mode):
        column = inner.this
    else:
        column = None
    if column is None or len(modes) != 1 or any(tree.args.get(k) for k in ("group", "having", "order", "limit",
                                                                            "offset", "distinct")):
        raise NotSupportedError(f"MODE is answered by report-noisy-max in a query of its own: {_USAGE} (no other "
                                "select items, GROUP BY, HAVING, ORDER BY or LIMIT)")
    if not isinstance(column, exp.Column) or isinstance(column.this, exp.Star):
        raise NotSupportedError(f"MODE takes one declared column of the table, not {column.sql()!r}")
    name = item.alias if isinstance(item, exp.Alias) else "mode"
    return _counts(tree, column), NoisyMaxQuery(name, nulls=False)


def _top_group(tree: exp.Select) -> tuple[exp.Select, NoisyMaxQuery] | None:
    """`SELECT x ... GROUP BY x [HAVING COUNT(*) >= T] ORDER BY COUNT(*) DESC LIMIT 1`, or None."""
    group, order, limit = tree.args.get("group"), tree.args.get("order"), tree.args.get("limit")
    if group is None or order is None or limit is None or tree.args.get("offset") or len(tree.expressions) != 1:
        return None
    if len(group.expressions) != 1 or any(group.args.get(k) for k in ("grouping_sets", "cube", "rollup", "all")):
        return None
    item = tree.expressions[0]
    column = item.this if isinstance(item, exp.Alias) else item
    key = group.expressions[0]
    if not isinstance(column, exp.Column) or isinstance(column.this, exp.Star):
        return None
    same = (isinstance(key, exp.Literal) and not key.is_string and key.name == "1") or \
        (isinstance(key, exp.Column) and key.name.lower() in {column.name.lower(), item.alias_or_name.lower()})
    if not same or _literal(limit.expression) != 1 or len(order.expressions) != 1:
        return None
    ordered = order.expressions[0]
    if not ordered.args.get("desc") or not _counts_rows(ordered.this):
        return None
    threshold = None
    if tree.args.get("having") is not None:
        threshold = _threshold(tree.args["having"].this)
        if threshold is None:
            return None
    return _counts(tree, column), NoisyMaxQuery(item.alias_or_name, nulls=True, threshold=threshold)


def _counts_rows(node: exp.Expression) -> bool:
    """COUNT(*) or COUNT(<number>)."""
    return isinstance(node, exp.Count) and (node.this is None or isinstance(node.this, exp.Star) or (
        isinstance(node.this, exp.Literal) and not node.this.is_string))


def _threshold(condition: exp.Expression) -> int | None:
    """T of HAVING COUNT(*) >= T (or > T − 1, T <= COUNT(*), T − 1 < COUNT(*)), a whole number; else None."""
    flipped = {exp.LTE: exp.GTE, exp.LT: exp.GT}
    kind, count, value = type(condition), condition.this, condition.expression
    if kind in flipped:
        kind, count, value = flipped[kind], value, count
    if kind not in (exp.GTE, exp.GT) or not _counts_rows(count):
        return None
    number = _literal(value)
    if number is None:
        return None
    return number + (kind is exp.GT)


def _literal(node: exp.Expression | None) -> int | None:
    """A whole-number literal's value, else None."""
    try:
        value = literal_value(node) if isinstance(node, (exp.Literal, exp.Neg)) else None
    except Exception:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        return None
    return int(value)


def _counts(tree: exp.Select, column: exp.Column) -> exp.Select:
    """`SELECT column, COUNT(*) FROM ... WHERE ... GROUP BY column`: the counts the pick is made from."""
    counts = tree.copy()
    for key in ("having", "order", "limit", "offset"):
        counts.set(key, None)
    counts.set("expressions", [column.copy(), exp.Count(this=exp.Star())])
    counts.set("group", exp.Group(expressions=[column.copy()]))
    return counts


__all__ = ["NoisyMaxQuery", "noisy_max_form"]
