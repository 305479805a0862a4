"""GROUP BY GROUPING SETS, ROLLUP and CUBE: one query of several groupings (marginals), and GROUPING().

A GROUP BY with grouping sets is read into the distinct expressions it names and its sets (`expand`);
the compiler groups by all of them (`flatten`) and compiles every aggregate once per set, as blocks of
one query: one plan, one charge, and the planner sees the marginals together. The result stacks the
sets' rows in order, NULL in the columns a set does not group by. GROUPING(a, b, ...) (and
GROUPING_ID) is a bit per argument, 1 where the row's set does not group by it: it reads the result
relation's `grouping_flag` columns. Which sets exist depends on the query only, never on the data.
"""

from __future__ import annotations

from itertools import product
from typing import Callable

from sqlglot import exp

from dpsql.errors import NotSupportedError, ProgrammingError

GROUPING_NODES = (exp.Grouping, exp.GroupingId)
MAX_GROUPING_SETS = 64  # CUBE of 6 columns; each set is a marginal of every aggregate


def grouping_flag(key: int) -> str:
    """The result relation's column that is 1 on the rows of the sets not grouping by key `key`."""
    return f"__grouping_{key}"


def expand(group: exp.Group | None) -> tuple[list[exp.Expression], list[list[int]]] | None:
    """(the distinct expressions named, each grouping set as their indices) of a GROUP BY with GROUPING
    SETS, ROLLUP or CUBE (also MySQL's and T-SQL's `WITH ROLLUP` / `WITH CUBE`); None for a plain one."""
    if group is None:
        return None
    items = list(group.expressions)
    for key, kind in (("rollup", exp.Rollup), ("cube", exp.Cube)):
        for node in group.args.get(key) or []:  # GROUP BY a, b WITH ROLLUP: ROLLUP(a, b)
            items = [*items, node] if node.expressions else [kind(expressions=[e.copy() for e in items])]
    items += list(group.args.get("grouping_sets") or [])
    if not any(isinstance(e, (exp.GroupingSets, exp.Rollup, exp.Cube)) for e in items):
        return None
    named: dict[str, int] = {}
    expressions: list[exp.Expression] = []

    def index(e: exp.Expression) -> int:
        if e.sql() not in named:
            named[e.sql()] = len(expressions)
            expressions.append(e)
        return named[e.sql()]

    sets: list[list[int]] = [[]]
    for item in items:  # the sets of several items are their cross product
        sets = [a + b for a, b in product(sets, _sets(item, index))]
        if len(sets) > MAX_GROUPING_SETS:
            raise NotSupportedError(
                f"the GROUP BY asks for more than {MAX_GROUPING_SETS} grouping sets; ask fewer (a CUBE of n "
                "columns is 2^n groupings)")
    return expressions, [list(dict.fromkeys(s)) for s in sets]


def _sets(item: exp.Expression, index: Callable[[exp.Expression], int]) -> list[list[int]]:
    """The grouping sets of one GROUP BY item."""
    if isinstance(item, exp.GroupingSets):
        return [s for e in item.expressions for s in _sets(e, index)]
    if isinstance(item, exp.Rollup):
        parts = [_columns(e, index) for e in item.expressions]
        return [sum(parts[:n], []) for n in range(len(parts), -1, -1)]
    if isinstance(item, exp.Cube):
        parts = [_columns(e, index) for e in item.expressions]
        chosen = product(*[(True, False)] * len(parts))
        return [sum((p for p, keep in zip(parts, mask) if keep), []) for mask in chosen]
    return [_columns(item, index)]


def _columns(item: exp.Expression, index: Callable[[exp.Expression], int]) -> list[int]:
    """One grouping set's expressions: `a`, `(a)`, `(a, b)` or `()`."""
    if isinstance(item, exp.Tuple):
        return [i for e in item.expressions for i in _columns(e, index)]
    if isinstance(item, exp.Paren):
        return _columns(item.this, index)
    return [index(item)]


def flatten(tree: exp.Select, group_by: Callable[[exp.Select], list]) -> tuple[exp.Select, tuple[tuple[int, ...], ...]]:
    """`tree` with a plain GROUP BY of every expression its grouping sets name, and each set as the indices of
    its keys among the keys `group_by` (the compiler's) finds for that plain GROUP BY; `tree` itself and no
    sets when its GROUP BY is plain."""
    expanded = expand(tree.args.get("group"))
    if expanded is None:
        return tree, ()
    expressions, sets = expanded
    flat = _grouped_by(tree, expressions)
    sources = [k.source for k in group_by(flat)]
    position = [sources.index(group_by(_grouped_by(tree, [e]))[0].source) for e in expressions]
    return flat, tuple(tuple(dict.fromkeys(position[i] for i in s)) for s in sets)


def _grouped_by(tree: exp.Select, expressions: list[exp.Expression]) -> exp.Select:
    out = tree.copy()
    out.set("group", exp.Group(expressions=[e.copy() for e in expressions]) if expressions else None)
    return out


def is_grouping(node: exp.Expression) -> bool:
    """GROUPING(...) or GROUPING_ID(...)."""
    return isinstance(node, GROUPING_NODES)


def grouping_value(node: exp.Expression, key_of: Callable[[exp.Expression], int | None]) -> exp.Expression:
    """GROUPING(a, b, ...) over the result relation: sum of 2^(n-1-j) × the flag of the j-th argument's key
    (`key_of`: its index among the GROUP BY keys, None when it is not one)."""
    args = list(node.expressions)
    if not args:
        raise ProgrammingError(f"{node.sql()!r} needs at least one GROUP BY column")
    terms = []
    for j, arg in enumerate(args):
        key = key_of(arg)
        if key is None:
            raise ProgrammingError(f"{node.sql()!r}: {arg.sql()!r} is not a GROUP BY column")
        flag = exp.column(grouping_flag(key), quoted=True)
        weight = 2 ** (len(args) - 1 - j)
        terms.append(flag if weight == 1 else exp.Mul(this=flag, expression=exp.Literal.number(weight)))
    value = terms[0]
    for term in terms[1:]:
        value = exp.Add(this=value, expression=term)
    return exp.Paren(this=value)
