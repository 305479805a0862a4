"""Results: rows with standard errors, and how a DP query's rows are assembled.

`assemble` turns the model's answers to a compiled query's blocks into the
per-group relation (group labels, estimates, standard errors), then runs the
query's template over it in a scratch DuckDB connection that holds nothing
but that relation: projections, HAVING, ORDER BY and LIMIT see only noisy
values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cache
from statistics import NormalDist
from typing import Any

import duckdb
import numpy as np
from sqlglot import exp

from dpsql.tables.columns import NUMERIC
from dpsql.sql.compiler import RESULT_RELATION, ROW_ORDER, Aggregate, CompiledQuery
from dpsql.errors import OuterExpressionError, ProgrammingError
from dpsql.answers.moments import moment_answer
from dpsql.sql.grouping_sets import grouping_flag
from dpsql.sql.public import SANDBOX_CONFIG
from mechanisms.quantiles import difference_block, quantile_bins
from mechanisms.reconstruction.answering import AnsweringModel


@dataclass
class Result:
    """One result set: column names, rows, and the standard error of each DP value.

    `stderr` has the shape of `rows`; an entry is None where the column is not
    a bare DP aggregate (group labels, derived expressions, public queries). A statement
    that returns no rows (DDL, DML) has no columns, and `rowcount` says what it changed.
    """

    columns: list[str]
    rows: list[tuple]
    stderr: list[tuple] = field(default_factory=list)
    charged: float = 0.0
    charge_text: str = ""
    plan: str | None = None
    kind: str = "dp"  # "dp", "public", "explain" or "status"
    types: list[str] = field(default_factory=list)
    answered_by: list[str] = field(default_factory=list)  # the models the DP values come from
    dp: list[bool] = field(default_factory=list)  # per column: DP values (with or without a standard error)
    rowcount: int = -1  # a statement that returns no rows: the rows it changed (-1: not counted)
    notes: list[str] = field(default_factory=list)  # what the values are, where it is not plain (MIN/MAX)
    laplace_tails: bool = False  # the values' noise may be Laplace: intervals use its heavier tails (`ci`)

    def with_stderr_columns(self) -> "Result":
        """This result with a `<column>_stderr` column after each DP column (NULL where none is claimed)."""
        if not any(self.dp):
            return self
        columns, types, keep = [], [], []
        for i, name in enumerate(self.columns):
            columns.append(name)
            types.append(self.types[i] if i < len(self.types) else "DOUBLE")
            keep.append(i)
            if self.dp[i]:
                columns.append(f"{name}_stderr")
                types.append("DOUBLE")
                keep.append(-1 - i)
        errors = self.stderr or [(None,) * len(self.columns)] * len(self.rows)
        rows = [tuple(row[k] if k >= 0 else err[-1 - k] for k in keep) for row, err in zip(self.rows, errors)]
        stderr = [tuple(err[k] if k >= 0 else None for k in keep) for err in errors]
        return replace(self, columns=columns, rows=rows, stderr=stderr, types=types,
                       dp=[k >= 0 and self.dp[k] for k in keep])

    def ci(self, level: float = 0.95) -> list[tuple]:
        """Confidence intervals (lo, hi) per DP value, None elsewhere: normal, or where Laplace noise may enter
        (`laplace_tails`) the Laplace's (`_half_width`)."""
        if not 0 < level < 1:
            raise ProgrammingError("the confidence level must be between 0 and 1")
        z = NormalDist().inv_cdf(0.5 + level / 2)
        out = []
        for row, errs in zip(self.rows, self.stderr or [(None,) * len(self.columns)] * len(self.rows)):
            out.append(
                tuple(
                    None if e is None or v is None else (v - (h := _half_width(z, e, level, self.laplace_tails)), v + h)
                    for v, e in zip(row, errs)
                )
            )
        return out


def _half_width(z: float, se: float, level: float, laplace: bool) -> float:
    """An interval's half width: z standard errors, or where the noise may be Laplace the larger of the
    continuous Laplace's quantile (log(1/(1 − level))/√2 standard errors) and the discrete Laplace's on the
    integers of that variance (counts: its lattice makes the continuous quantile cover too little when the
    scale is a few units: 92.7% at ε = 1). Sums with other noise have lighter tails: covered more."""
    if not laplace or not se > 0 or not math.isfinite(se):
        return z * se
    continuous = math.log(1 / (1 - level)) / math.sqrt(2) * se
    v = se * se
    p = ((v + 1) - math.sqrt(2 * v + 1)) / v  # the discrete Laplace's e^(-1/b) of variance v = 2p / (1 - p)^2
    if not 0 < p < 1:
        return max(z * se, continuous)
    # P(|X| > k) = 2 p^(k+1) / (1 + p): the least whole k with at most 1 - level outside [-k, k].
    k = max(math.ceil(math.log((1 - level) * (1 + p) / 2) / math.log(p) - 1 - 1e-12), 0)
    return max(z * se, continuous, float(k))


def answered_by(query: CompiledQuery, model: AnsweringModel) -> list[str]:
    """Which models answer the query's aggregates (least squares, a graphical model, relaxed data)."""
    return list(dict.fromkeys(model.source_name(b) for agg in query.aggregates for b in agg.blocks if b.terms))


def aggregate_answers(query: CompiledQuery, model: AnsweringModel) -> list[tuple[np.ndarray, np.ndarray]]:
    """(estimate, standard error) per aggregate; AVG by the delta method on SUM/COUNT (over a hybrid table, or
    by its model's `hybrid_mean`); a quantile
    from its column's noisy CDF (`quantile_answer`); a variance from its sums (`moment_answer`)."""
    out = []
    for agg in query.aggregates:
        if agg.kind == "quantile":
            out.append(quantile_answer(agg, model, query.table.domain))
            continue
        if agg.kind in ("variance", "stddev"):
            out.append(moment_answer(agg, model))
            continue
        if agg.kind != "avg":
            est, var = model.answer(agg.blocks[0])
            out.append((est, np.sqrt(np.maximum(var, 0.0))))
            continue
        total_block, count_block = agg.blocks
        hybrid_mean = getattr(model, "hybrid_mean", None)  # a hybrid table's AVG by KVH or PWH
        averaged = hybrid_mean(total_block, count_block) if hybrid_mean is not None else None
        if averaged is not None:
            out.append((agg.center + averaged[0], averaged[1]))
            continue
        s, vs = model.answer(total_block)
        c, vc = model.answer(count_block)
        cov = model.covariance(total_block, count_block)
        with np.errstate(divide="ignore", invalid="ignore"):
            var = vs / c**2 + s**2 * vc / c**4 - 2 * s * cov / c**3  # s: the sum around agg.center
        out.append((agg.average(s, c, 1.0), np.where(c >= 1.0, np.sqrt(np.maximum(var, 0.0)), np.nan)))
    return out


def quantile_answer(agg: Aggregate, model: AnsweringModel, domain) -> tuple[np.ndarray, np.ndarray]:
    """A quantile per group and its standard error: half the width of its 95% interval (`quantile_bins`,
    from the exact variances of P̂(j) − q·N̂) mapped to values, over 1.96 (the larger side over-covered:
    87% at 68% against 71%, `benchmarks.calibration_bars`). NaN where a group's count is below 1."""
    block, column = agg.blocks[0], agg.column
    prefix, prefix_variance = model.answer(block)
    axes = [a for a in domain.attributes if a in block.group_by or a in block.mapped_rows]
    shape = [block.mapped_rows.get(a) or domain.size_of(a) for a in axes]
    position = axes.index(column.name)

    def by_group(values):
        return np.moveaxis(np.asarray(values, dtype=float).reshape(shape), position, -1).reshape(-1, shape[position])

    difference = difference_block(block, column.name, agg.quantile)
    if model.covers(difference):
        difference_variance = by_group(model.answer(difference)[1])
    else:  # measured row by row (per-query): no covariances, so Var(P̂ − qN̂) ≤ (σ_P + q·σ_N)²
        deviation = np.sqrt(np.maximum(by_group(prefix_variance), 0.0))
        difference_variance = (deviation + agg.quantile * deviation[:, -1:]) ** 2
    found = quantile_bins(by_group(prefix), difference_variance, agg.quantile, _Z95)
    bins = np.maximum(found.bin, 0)
    if column.kind == NUMERIC:
        edges = np.asarray([float(e) for e in column.edges()])
        width = edges[1:] - edges[:-1]
        position_in_bin = 0.5 if agg.discrete else found.within
        value = edges[bins] + position_in_bin * width[bins]
        low, high = edges[found.low], edges[found.high + 1]
    else:
        labels = np.asarray(column.labels()[:column.value_bins], dtype=float)
        value, low, high = labels[bins], labels[found.low], labels[found.high]
    value = np.where(found.bin < 0, np.nan, value)
    reach = (high - low) / 2
    return value, np.where(found.bin < 0, np.nan, np.maximum(reach, 0.0) / _Z95)


_Z95 = NormalDist().inv_cdf(0.975)


def assemble(query: CompiledQuery, answers: list[tuple[np.ndarray, np.ndarray]]) -> Result:
    """Build the group relation from the answers and evaluate the query's template on it."""
    relation = group_relation(query, answers)
    template = query.template.copy()
    extra = [
        exp.alias_(exp.column(f"__se_{k}"), f"__stderr_{j}", quoted=True)
        for j, k in enumerate(query.output_aggregate)
        if k is not None
    ]
    template.set("expressions", list(template.expressions) + extra)
    con = _evaluator().cursor()
    try:
        con.register(RESULT_RELATION, relation)
        cursor = con.execute(template.sql(dialect="duckdb"))
        raw = cursor.fetchall()
        types = [str(d[1]) for d in cursor.description][: len(query.output_names)]
    except duckdb.Error as e:
        raise OuterExpressionError(f"could not evaluate the query's outer expressions: {_first_line(e)}",
                                   type(e).__name__) from None
    finally:
        con.close()
    width = len(query.output_names)
    rows, stderr = [], []
    for r in raw:
        rows.append(tuple(r[:width]))
        errs = iter(r[width:])
        stderr.append(tuple(next(errs) if k is not None else None for k in query.output_aggregate))
    notes = [a.approximation for a in query.aggregates if a.approximation] + query.notes
    return Result(list(query.output_names), rows, stderr, types=types,
                  dp=[k is not None for k in query.output_aggregate], notes=notes)


def group_relation(query: CompiledQuery, answers: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
    """The per-group relation: each grouping set's rows in turn (one per combination of its keys' values,
    NULL in the keys it does not group by, `grouping_flag` 1 there), its aggregates' answers and standard
    errors (`__agg_i`, `__se_i`), and ROW_ORDER, the rows' order when the query gives none."""
    per_set = len(answers) // len(query.sets)
    parts = [_set_relation(query, keys, answers[j * per_set:(j + 1) * per_set]) for j, keys in enumerate(query.sets)]
    offsets = np.cumsum([0] + [len(p[ROW_ORDER]) for p in parts])
    for part, offset in zip(parts, offsets):
        part[ROW_ORDER] = part[ROW_ORDER] + offset
    if len(parts) == 1:
        return parts[0]
    return {name: np.concatenate([np.asarray(p[name], dtype=object) for p in parts]) if any(
        np.asarray(p[name]).dtype == object for p in parts) else np.concatenate([p[name] for p in parts])
        for name in parts[0]}


def _set_relation(query: CompiledQuery, keys: tuple[int, ...], answers) -> dict[str, Any]:
    """One grouping set's rows of the per-group relation (`group_relation`)."""
    # Block rows run over the grouped attributes in domain order; keys of one attribute
    # (through lookups) in the query's order.
    order = query.table.domain.attributes
    grouped = [query.groups[i] for i in keys]
    layout = sorted(range(len(grouped)), key=lambda i: (order.index(grouped[i].attribute), i))
    n_rows = query.set_rows(keys)
    relation: dict[str, Any] = {}
    cells = np.unravel_index(np.arange(n_rows), [len(grouped[i].labels) for i in layout]) if grouped else ()
    for k, key in enumerate(query.groups):
        relation[key.name] = np.full(n_rows, None, dtype=object)
        relation[grouping_flag(k)] = np.full(n_rows, int(k not in keys), dtype=np.int64)
    for i, groups in zip(layout, cells):
        relation[grouped[i].name] = np.asarray([grouped[i].labels[g] for g in groups], dtype=object)
    user_index = [cells[layout.index(i)] for i in range(len(grouped))]
    relation[ROW_ORDER] = (
        np.ravel_multi_index(user_index, [len(k.labels) for k in grouped])
        if user_index
        else np.zeros(n_rows, dtype=np.int64)
    )
    for i, (est, se) in enumerate(answers):
        relation[f"__agg_{i}"] = _with_nulls(est)
        relation[f"__se_{i}"] = _with_nulls(se)
    return relation


@cache
def _evaluator() -> duckdb.DuckDBPyConnection:
    """The database where outer expressions run over noisy answers: one per process (each
    evaluation on a cursor of its own), locked like the workspace (`SANDBOX_CONFIG`)."""
    return duckdb.connect(":memory:", config=SANDBOX_CONFIG)


def _with_nulls(values: np.ndarray):
    """NaN (an AVG over a group whose noisy count is below 1) becomes SQL NULL."""
    values = np.asarray(values, dtype=float)
    if not np.isnan(values).any():
        return values
    return np.asarray([None if np.isnan(v) else float(v) for v in values], dtype=object)


# What a failure of the outer expressions on charged values is called, by DuckDB's error class: never its text.
_OUTER_FAILURES = {
    "ConversionException": "a value did not fit the type it was converted to (a CAST or a typed function)",
    "OutOfRangeException": "a value was out of its type's range",
    "InvalidInputException": "a function of the outer expressions got an input it does not accept",
    "BinderException": "the outer expressions do not apply to the result's columns",
}


def describe_failure(error: Exception) -> str:
    """What kind of step failed after a charge, in words that quote no value (for `Executor.answered`)."""
    if isinstance(error, OuterExpressionError):
        what = _OUTER_FAILURES.get(error.kind, f"DuckDB raised {error.kind}")
        return f"evaluating the query's outer expressions on the noisy answers failed: {what}"
    return f"an internal step failed ({type(error).__name__})"


def _first_line(e: Exception) -> str:
    return str(e).splitlines()[0]
