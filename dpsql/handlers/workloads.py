"""BEGIN WORKLOAD ... END WORKLOAD: queries planned and measured jointly, one result per query.

Between BEGIN and END the session holds the open workload (`Session.workload`) and its queued
queries (`Session.queued`); SET and SHOW still run at once, other statements are queued or refused.
"""

from __future__ import annotations

from typing import Sequence

from dpsql.budget.units import checked
from dpsql.errors import NotSupportedError, ProgrammingError
from dpsql.handlers import explain
from dpsql.answers.post_processing import answers, parts_of
from dpsql.answers.result import Result
from dpsql.sql.statements import BeginWorkload, Explain, Sql, take_weight


def run(session, st, params) -> list[Result]:
    if isinstance(st, BeginWorkload):
        if session.workload is not None:
            raise ProgrammingError("a workload is already open; END WORKLOAD first")
        session.workload, session.queued = st, []
        return []
    if session.workload is None:
        raise ProgrammingError("END WORKLOAD without BEGIN WORKLOAD")
    begin, queries = session.workload, session.queued
    session.workload, session.queued = None, []
    return run_workload(session, queries, begin)


def queue(session, st, params) -> list[Result]:
    """A statement inside an open workload: a plain query joins it; anything else is refused."""
    if not isinstance(st, (Sql, Explain)):
        raise ProgrammingError("continual queries are created, emitted and shown outside a workload")
    if isinstance(st, Explain) or params:
        raise ProgrammingError("inside a workload, list plain SELECT queries without parameters")
    session.queued.append(st.sql)
    return []


def describe(session, st, params) -> None:
    return None  # a workload's results are known at END WORKLOAD


def run_workload(session, queries: list[str], begin: BeginWorkload,
                 weights: Sequence[float] | None = None) -> list[Result]:
    """Plan and measure a batch of queries jointly; one result per query.

    `weights` (one per query) multiply the weight of each query's errors in the plan,
    as a ``/*+ WEIGHT(w) */`` hint does.
    """
    s = session
    if not queries:
        raise ProgrammingError("the workload holds no query")
    if s.small_counts != "off":
        raise NotSupportedError(f"dpsql.small_counts = '{s.small_counts}' answers one count per statement, not "
                                "workloads; nothing was charged (SET dpsql.small_counts = 'off' to plan one)")
    if weights is not None and len(weights) != len(queries):
        raise ProgrammingError(f"{len(weights)} weights given for {len(queries)} queries")
    compiled = []
    for i, text in enumerate(queries, start=1):
        sql, weight = take_weight(text)
        if weights is not None:
            weight *= checked("weight", weights[i - 1], f"the weight of query {i}")
        if s.protected.reference(sql) is None:
            raise ProgrammingError(f"workload query {i} does not read a protected table: {sql[:60]!r}")
        compiled.append(s.compile(sql, label=f"q{i}", weight=weight))
        selection = compiled[-1].selection
        if selection is not None:
            why = selection.table.column(selection.column).not_released()
            raise NotSupportedError(f"workload query {i}: {why}, outside a workload")
    planned = s.sizing(begin)
    if begin.pareto:
        return [explain.pareto(s, queries, planned, weights)]
    if begin.explain:
        return [explain.plans(s, s.executor.plan(parts_of(compiled), planned, timed=True))]
    statement = "BEGIN WORKLOAD; " + "; ".join(queries) + "; END WORKLOAD"
    results = s.executor.execute(parts_of(compiled), statement, planned)
    return s.executor.answered(lambda: answers(compiled, results))
