"""GROUP BY an expression of declared columns: its distinct values on the declared domain are the groups.

`GROUP BY age / 10`, `GROUP BY CASE WHEN age < 30 THEN 'young' ELSE 'old' END` or
`GROUP BY DATE_TRUNC('month', day)` is evaluated by DuckDB on every bin of the column it reads
(`dpsql.sql.evaluation`); each bin then belongs to the group of its result, so the key is a public
map of the column's bins onto groups (a `GroupKey` with an `index`, as a looked-up attribute is),
which the planner sees as a dense factor (a monthly series of a date column is a range workload).
"""

from __future__ import annotations

import numpy as np
from sqlglot import exp

from dpsql.errors import NotSupportedError
from dpsql.sql.lookups import GroupKey


def expression_key(node: exp.Expression, name: str, compiler) -> GroupKey:
    """The GROUP BY key of `node`, an expression of one declared column (or a constant), named `name`."""
    evaluated = compiler.evaluated(node)
    if len(evaluated.attributes) > 1:
        raise NotSupportedError(
            f"GROUP BY {node.sql()!r} reads several columns ({', '.join(evaluated.attributes)}): grouping by an "
            "expression of several columns is not supported yet; group by those columns (or by an expression of "
            "each) and combine the groups' answers"
        )
    labels = evaluated.labels()
    distinct = _sorted({v for v in labels if v is not None})
    groups = distinct + ([None] if any(v is None for v in labels) else [])
    position = {v: i for i, v in enumerate(groups)}
    if evaluated.attributes:
        attribute = evaluated.attributes[0]
        index = np.asarray([position[v] for v in labels], dtype=np.int64)
    else:  # a constant: one group holding every row, mapped from any attribute
        attribute = compiler.table.domain.attributes[0]
        index = np.full(compiler.table.domain.size_of(attribute), position[labels[0]], dtype=np.int64)
    return GroupKey(name, attribute, groups, index, ("expression", node.sql()))


def group_label(node: exp.Expression, keys: list[GroupKey]) -> exp.Column | None:
    """The result relation's column holding `node`'s group, if `node` is a GROUP BY expression."""
    key = next((k for k in keys if k.source == ("expression", node.sql())), None)
    return None if key is None else exp.column(key.name, quoted=True)


def _sorted(values: set) -> list:
    """Group labels in their order (the result has one SQL type, so one Python type but for NaN)."""
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=repr)


__all__ = ["expression_key", "group_label"]
