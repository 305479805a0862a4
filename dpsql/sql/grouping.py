"""GROUP BY an expression of declared columns: its distinct values on the declared domain are the groups.

`GROUP BY age / 10`, `GROUP BY CASE WHEN age < 30 THEN 'young' ELSE 'old' END` or
`GROUP BY DATE_TRUNC('month', day)` is evaluated by DuckDB on every bin of the column it reads
(`dpsql.sql.evaluation`); each bin then belongs to the group of its result, so the key is a public
map of the column's bins onto groups (a `GroupKey` with an `index`, as a looked-up attribute is),
which the planner sees as a dense factor (a monthly series of a date column is a range workload).
An expression of several columns (`CASE WHEN sex = 'F' AND age < 30 THEN ...`) maps one of them
(the carrier) onto the groups, differently on each slice of the others: a sum of such maps, each
times indicator vectors over the other columns (`GroupKey.slices`).
"""

from __future__ import annotations

import numpy as np
from sqlglot import exp

from dpsql.errors import NotSupportedError
from dpsql.sql.evaluation import to_predicate
from dpsql.sql.lookups import GroupKey
from mechanisms.workload import MAX_PREDICATE_TERMS


def expression_key(node: exp.Expression, name: str, compiler) -> GroupKey:
    """The GROUP BY key of `node`, an expression of one declared column (or a constant), named `name`."""
    evaluated = compiler.evaluated(node)
    if not evaluated.is_scalar:
        raise NotSupportedError(f"GROUP BY {node.sql()!r}: its values are of type {evaluated.sql_type}; group by a "
                                "scalar expression")
    labels = evaluated.labels()
    distinct = _sorted({v for v in labels if v is not None})
    groups = distinct + ([None] if any(v is None for v in labels) else [])
    position = {v: i for i, v in enumerate(groups)}
    source = ("expression", node.sql())
    if len(evaluated.attributes) > 1:
        index = np.asarray([position[v] for v in labels], dtype=np.int64).reshape(evaluated.present.shape)
        attribute, slices = _slices(index, evaluated.attributes)
        return GroupKey(name, attribute, groups, None, source, slices)
    if evaluated.attributes:
        attribute = evaluated.attributes[0]
        index = np.asarray([position[v] for v in labels], dtype=np.int64)
    else:  # a constant: one group holding every row, mapped from any attribute
        attribute = compiler.table.domain.attributes[0]
        index = np.full(compiler.table.domain.size_of(attribute), position[labels[0]], dtype=np.int64)
    return GroupKey(name, attribute, groups, index, source)


def _slices(index: np.ndarray, attributes: tuple[str, ...]) -> tuple[str, list]:
    """A group index over several attributes' cells as (carrier attribute, slices): along the attribute with
    the fewest distinct index vectors, each distinct vector with the indicator, over the other attributes,
    of where it is the index (a sum of products of vectors: `to_predicate`)."""
    best = None
    for axis in range(len(attributes)):
        rows = np.moveaxis(index, axis, -1).reshape(-1, index.shape[axis])
        distinct, inverse = np.unique(rows, axis=0, return_inverse=True)
        if best is None or len(distinct) < len(best[1]):
            best = (axis, distinct, inverse.reshape(-1))
    axis, distinct, inverse = best
    others = attributes[:axis] + attributes[axis + 1:]
    shape = index.shape[:axis] + index.shape[axis + 1:]
    slices = []
    for j, vector in enumerate(distinct):
        for coef, factors in to_predicate((inverse == j).reshape(shape).astype(float), others).factors():
            first = next(iter(factors))
            slices.append((vector, {**factors, first: coef * factors[first]}))
    if len(slices) > MAX_PREDICATE_TERMS:
        raise NotSupportedError(f"grouping by this expression takes {len(slices)} product terms (limit "
                                f"{MAX_PREDICATE_TERMS}); group by fewer or coarser columns")
    return attributes[axis], slices


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
