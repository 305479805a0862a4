"""A query: plain SQL on public tables (the analyst's workspace), or a DP query on a protected table.

A DP query is compiled (`Session.compile`), takes the key-release detour where it must
(`dpsql.handlers.key_release`), then is planned, measured, charged and answered by the executor; under
`SET dpsql.small_counts` it is a small-group count (`dpsql.handlers.small_counts`) or refused.
"""

from __future__ import annotations

from typing import Any, Sequence

from sqlglot import exp

from dpsql.handlers import key_release, noisy_max, small_counts
from dpsql.answers.post_processing import CompositeQuery, answers, dry_run, parts_of
from dpsql.answers.result import Result, assemble
from dpsql.sql.compiler import parse_statement
from dpsql.sql.statements import Sql, take_weight, without_parameters


def run(session, st: Sql, params) -> list[Result]:
    return [query(session, st.sql, params)]


def query(session, sql: str, params: Sequence[Any] | dict | None = None) -> Result:
    """One statement: a DP query on a protected table, or plain SQL on public tables."""
    s = session
    sql, weight = take_weight(sql)
    if s.protected.reference(sql) is None:
        with s.ledger.suspended():  # public SQL may run long: other processes need not wait for it
            return s.workspace.run(sql, params)
    compiled = s.compile(sql, params, weight=weight)
    if s.small_counts != "off":
        return small_counts.answer(s, compiled, sql, params)
    if getattr(compiled, "noisy_max", None) is not None:
        return noisy_max.answer(s, compiled, sql, params)
    selection = key_release.needed(s, compiled, sql, params, weight)
    if selection is not None:
        return key_release.release(s, selection, sql, params, weight)
    results = s.executor.execute(parts_of([compiled]), sql, s.sizing())
    return s.executor.answered(lambda: answers([compiled], results))[0]


def describe(session, st: Sql, params) -> Result | None:
    """The columns a query returns, without running it; None where they are known only once it runs (public
    SQL other than a query, or with parameters; a DP query whose parameters were not given)."""
    s = session
    sql, weight = take_weight(st.sql)
    if s.protected.reference(sql) is None:
        return None if params else s.workspace.describe_query(sql)
    if not params:
        tree = parse_statement(sql, s.dialect)
        sql = without_parameters(tree, s.dialect) if tree.find(exp.Placeholder) else sql
        if sql is None:
            return None
    compiled = s.compile(sql, params, weight=weight)
    if s.small_counts != "off":
        return small_counts.describe(s, compiled)
    if isinstance(compiled, CompositeQuery):
        shape = dry_run(compiled.outer, compiled.parts)
        shape.rows, shape.stderr = [], []
        return (shape.with_stderr_columns() if s.stderr_columns else shape) if shape.columns else None
    if compiled.noisy_max is not None:
        return noisy_max.describe(compiled)
    if compiled.selection is not None:  # the columns it will have once the keys are released
        selection = compiled.selection
        over = s.catalog.with_keys({(selection.table.name, selection.column): ()})
        compiled = s.compile(sql, params, weight=weight, catalog=over)
    shape = assemble(compiled, compiled.zero_answers())
    shape.rows, shape.stderr = [], []
    return shape.with_stderr_columns() if s.stderr_columns else shape
