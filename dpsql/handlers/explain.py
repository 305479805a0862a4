"""EXPLAIN and EXPLAIN PARETO: the plan, its cost and the ε–error front, without reading data or spending."""

from __future__ import annotations

from typing import Sequence

from dpsql.budget.units import Sizing, checked
from dpsql.errors import NotSupportedError, ProgrammingError
from dpsql.handlers import key_release, noisy_max, small_counts
from dpsql.budget.noise_charges import charge_of, charge_words, fits
from dpsql.answers.post_processing import CompositeQuery, parts_of
from dpsql.answers.result import Result
from dpsql.sql.statements import BeginWorkload, EndWorkload, Explain, classify, split_statements, take_weight
from mechanisms.workload import Workload
from planner.chart import draw_chart, draw_front, error_curves
from planner.pareto import ADAPTIVE_SECONDS, FRONT_COLUMNS, pareto_front
from planner.planning_limit import PlanningLimit

FRONT_TYPES = ["VARCHAR", "DOUBLE", "DOUBLE", "DOUBLE", "VARCHAR", "VARCHAR", "VARCHAR"]


def run(session, st: Explain, params) -> list[Result]:
    return [pareto(session, [st.sql], session.sizing()) if st.pareto else explain(session, st.sql)]


def describe(session, st: Explain, params) -> Result:
    if st.pareto:
        return Result(["table", *FRONT_COLUMNS], [], kind="explain", types=FRONT_TYPES)
    return Result(["plan"], [], kind="explain", types=["VARCHAR"])


def explain(session, sql: str) -> Result:
    """The plan for a query (or EXPLAIN of a public query), without reading data or spending."""
    s = session
    sql, weight = take_weight(sql)
    if s.protected.reference(sql) is None:
        return s.workspace.run(sql, explain=True)
    compiled = s.compile(sql, weight=weight)
    if s.small_counts != "off":
        return small_counts.explain(s, compiled)
    if getattr(compiled, "noisy_max", None) is not None:
        return noisy_max.explain(s, compiled)
    selection = key_release.needed(s, compiled, sql, None, weight)
    if selection is not None:
        return key_release.explain(s, selection)
    if isinstance(compiled, CompositeQuery):
        return plans(s, s.executor.plan(compiled.parts, s.sizing(), timed=True))
    if compiled.table.answered_by_reports:  # (a hybrid table is planned on its opt-in part)
        text = compiled.table.explain_text()
        return Result(["plan"], [(text,)], kind="explain", plan=text)
    return plans(s, s.executor.plan([compiled], s.sizing(), timed=True))


def plans(session, planned: dict) -> Result:
    """EXPLAIN's result: each table's plan, then the total cost against what remains."""
    text = "\n".join(f"[{name}] " + plan.explain() + ("\n  " + table.explain_note() if table.explain_note() else "")
                     for name, (table, plan) in planned.items())
    charges = [charge_of(plan, session.budget_unit.noise) for _, plan in planned.values()]
    cost, pieces = sum(c for c, _ in charges), tuple(p for _, ps in charges for p in ps or ())
    remaining = session.ledger.remaining()
    verdict = "fits in" if fits(session.ledger, cost, pieces) else "EXCEEDS"
    text += f"\nTotal cost {charge_words(cost, pieces, session.amount).removeprefix('charged ')}; " \
            f"{verdict} the remaining budget {session.amount(remaining)}"
    return Result(["plan"], [(line,) for line in text.splitlines()], kind="explain", plan=text)


def pareto(session, queries: list[str], sizing: Sizing, weights: Sequence[float] | None = None,
           chart: str | None = None) -> Result:
    """EXPLAIN PARETO: per table, the (ε, expected RMSE) front of the planner's choice and each family (AIM and
    RAP simulated on public stand-in data where the table's size is public or released); reads no data, spends
    nothing. `chart` also draws it (PNG or SVG)."""
    s = session
    compiled = []
    for i, text in enumerate(queries, start=1):
        sql, weight = take_weight(text)
        weight *= 1.0 if weights is None else checked("weight", weights[i - 1], f"the weight of query {i}")
        compiled += parts_of([s.compile(sql, label=f"q{i}" if len(queries) > 1 else "", weight=weight)])
        if compiled[-1].selection is not None or compiled[-1].table.holds_reports:
            raise NotSupportedError("EXPLAIN PARETO plans measurements: not a key release or local-DP reports")
    rows, notes = [], []
    for name, (table, blocks, free) in s.executor.uncovered(compiled, sizing).items():
        if not blocks:  # the front of measuring them again, on top of what was measured (free now)
            notes.append(f"{name}: every query is answered from earlier measurements (free); the front is "
                         "of measuring them again on top of those")
            blocks = list({b.fingerprint(table.domain): b for b in free}.values())
        front = pareto_front(Workload(table.domain, blocks), None, s.budget_unit.noise, s.budget_unit.delta,
                             s.executor.model(table).measurements, table.contribution, sizing.objective,
                             s.executor.rows(table), limit=PlanningLimit(ADAPTIVE_SECONDS, s.cancelled))
        rows += [(name, *row) for row in front.table()]
        notes += [f"{name}: {note}" for note in front.notes]
        if chart is not None:
            notes.append(f"chart written to {draw_front(front, chart)}")
    return Result(["table", *FRONT_COLUMNS], rows, kind="explain", notes=notes, types=FRONT_TYPES)


def chart(session, script: str, path: str) -> str:
    """Draw expected error vs budget for a query's (or a workload's) plan and its runners-up."""
    found, cost, unit = curves(session, script)
    return str(draw_chart(found, cost, unit, path))


def curves(session, script: str) -> tuple[dict[str, list[tuple[float, float]]], float, str]:
    """Expected error vs budget of a query's (or a workload's) plan and each family: ({strategy: [(budget,
    RMSE)]}, the plan's cost, the budget's unit); reads no data, spends nothing."""
    s = session
    statements = [classify(t) for t in split_statements(script)]
    sizing = s.sizing(statements[0] if statements and isinstance(statements[0], BeginWorkload) else None)
    queries = [take_weight(st.sql) for st in statements if not isinstance(st, (BeginWorkload, EndWorkload))]
    compiled = parts_of([s.compile(sql, label=f"q{i}", weight=w) for i, (sql, w) in enumerate(queries, start=1)])
    planned = s.executor.plan(compiled, sizing)
    pending = s.executor.uncovered(compiled, sizing)
    for name, (table, plan) in planned.items():
        blocks = pending[name][1]
        if blocks:
            return error_curves(Workload(table.domain, blocks), plan.cost, s.budget_unit.noise, s.budget_unit.delta,
                                s.executor.model(table).measurements, sizing.objective,
                                contribution=table.contribution), plan.cost, s.budget_unit.unit
    raise ProgrammingError("nothing to chart: every query is answered from earlier measurements")
