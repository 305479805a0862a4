"""The analyst's page: their budget and charges, and their SQL's answers as tables and charts.

A statement runs on the analyst's dpsql session (`Session.execute`), as a PostgreSQL client's does:
the same privacy boundary, the same ledger in their name, the charge recorded before the answer
exists here. An answer's DP columns are drawn as bars with their 95% intervals; EXPLAIN's plan
with its expected error against the budget (the plan's and each family's, planned again at other
budgets: data-free, nothing spent); EXPLAIN PARETO's ε–error front as lines.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timezone

import duckdb
from markupsafe import Markup

from dpsql import errors
from dpsql.interfaces.console import charts
from dpsql.interfaces.dbapi import Connection
from dpsql.interfaces.formatting import LEVEL, cell_texts, dp_columns, stderr_name
from dpsql.handlers import explain
from dpsql.answers.result import Result
from dpsql.sql.statements import Explain, classify, split_statements
from planner.pareto import FRONT_COLUMNS

log = logging.getLogger("dpsql.interfaces.console")

CHARTED_ROWS = 200  # answers with more rows are shown as tables only
CHARTED_COLUMNS = 4  # DP columns drawn per answer
SHOWN_ROWS = 1000


@dataclass
class Answer:
    """One statement's result as the page shows it."""

    columns: list[str]
    rows: list[list[str]]
    right: list[bool]
    kind: str
    notes: list[str] = field(default_factory=list)
    charge: str = ""
    plan: str | None = None
    charts: list[Markup] = field(default_factory=list)
    hidden: int = 0  # rows not shown


@dataclass
class Budget:
    total: str
    spent: str
    remaining: str
    query_share: str
    charges: list[tuple]
    chart: Markup | None


def budget(connection: Connection, name: str) -> Budget:
    """The analyst's own budget and their own charges (never another analyst's)."""
    session = connection.session
    status = session.budget()
    mine = [c for c in session.ledger.charges() if c.who == name]
    rows = [(c.seq, c.at.strftime("%Y-%m-%d %H:%M:%S"), c.table or "", float(f"{c.epsilon(session.amount):.6g}"),
             " ".join(c.statement.split())) for c in mine]
    chart = None
    if mine:
        running, points = 0.0, []
        for c in mine:
            running += c.cost
            points.append((c.at.replace(tzinfo=timezone.utc).timestamp(), session.amount(running).epsilon))
        chart = charts.lines({name: points}, "your charges over time", "charged at (UTC)", "ε spent (charges)",
                             x_kind="time", steps=True, levels={name: status.total.epsilon})
    return Budget(str(status.total), str(status.spent), str(status.remaining),
                  str(session.amount(session.query_share)), rows, chart)


def run(connection: Connection, sql: str) -> tuple[list[Answer], str | None]:
    """Run the analyst's SQL: the answers (those before an error too), and the error's message, if any."""
    session = connection.session
    try:
        results = session.execute(sql)
        error = None
    except errors.Error as e:
        results, error = list(getattr(e, "partial_results", []) or []), str(e) or type(e).__name__
    except duckdb.Error as e:
        results, error = [], (str(e).splitlines() or [type(e).__name__])[0]
    answers = [_answer(r) for r in results]
    if error is None and len(answers) == 1 and answers[0].plan is not None:
        _plan_chart(connection, sql, answers[0])
    return answers, error


def _answer(result: Result) -> Answer:
    shown = result.rows[:SHOWN_ROWS]
    columns, right = cell_texts(result, shown) if result.columns else ([], [])
    answer = Answer(list(result.columns), [list(row) for row in zip(*columns)] if columns else [], right, result.kind,
                    list(result.notes), result.charge_text, hidden=len(result.rows) - len(shown))
    if result.kind == "explain" and result.columns == ["plan"]:
        answer.plan = "\n".join(str(row[0]) for row in result.rows)
        answer.columns, answer.rows = [], []
    elif result.kind == "explain" and tuple(result.columns[1:]) == FRONT_COLUMNS:
        answer.charts.extend(_front_charts(result))
    elif result.kind == "dp" and 0 < len(result.rows) <= CHARTED_ROWS:
        answer.charts.extend(_answer_charts(result))
    return answer


def _answer_charts(result: Result) -> list[Markup]:
    """Per DP column (the first few), a bar per row with its 95% interval, labelled by the row's other values."""
    flags = dp_columns(result)
    names = result.columns
    errors_of = {j for j in range(1, len(names)) if flags[j - 1] and names[j] == stderr_name(names[j - 1])}
    labels_from = [j for j, dp in enumerate(flags) if not dp and j not in errors_of]  # (SET dpsql.stderr = on)
    intervals = result.ci(LEVEL)
    labels = [" · ".join("NULL" if row[j] is None else str(row[j]) for j in labels_from) or f"row {i + 1}"
              for i, row in enumerate(result.rows)]
    drawn = []
    for j in [j for j, dp in enumerate(flags) if dp][:CHARTED_COLUMNS]:
        values = [_number(row[j]) for row in result.rows]
        if all(v is None for v in values):
            continue
        drawn.append(charts.bars(labels, values, [iv[j] for iv in intervals], f"{result.columns[j]} "
                                 f"({LEVEL:.0%} intervals)", result.columns[j]))
    return drawn


def _front_charts(result: Result) -> list[Markup]:
    """EXPLAIN PARETO: per table, each strategy's (ε, expected RMSE) points as a line (log-log)."""
    drawn = []
    tables = list(dict.fromkeys(row[0] for row in result.rows))
    for table in tables:
        series: dict[str, list[tuple[float, float]]] = {}
        for name, epsilon, _, rmse, strategy, _, source in result.rows:
            if name == table and _number(rmse) is not None and _number(epsilon) is not None:
                label = strategy if source == "exact" else f"{strategy} (simulated)"
                series.setdefault(label, []).append((float(epsilon), float(rmse)))
        if series:
            drawn.append(charts.lines({k: sorted(v) for k, v in series.items()}, f"ε–error front of {table}", "ε",
                                      "expected RMSE", x_kind="log", y_kind="log"))
    return drawn


def _plan_chart(connection: Connection, sql: str, answer: Answer) -> None:
    """EXPLAIN of a DP query: its expected error against the budget, the plan's and each family's."""
    statements = split_statements(sql)
    statement = classify(statements[0]) if len(statements) == 1 else None
    if not isinstance(statement, Explain) or statement.pareto:
        return
    session = connection.session
    try:
        found, cost, unit = explain.curves(session, statement.sql)
    except errors.Error as e:
        answer.notes.append(f"no chart: {e}")
        return
    if session.budget_unit.noise == "gaussian":  # drawn in ε, as the budget is shown
        found = {k: [(session.amount(b).epsilon, rmse) for b, rmse in v] for k, v in found.items()}
        cost, unit = session.amount(cost).epsilon, "ε"
    answer.charts.append(charts.lines(found, "expected error against the budget", f"budget ({unit})",
                                      "expected RMSE per row (units of sensitivity)", x_kind="log", y_kind="log",
                                      marks=[cost]))


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            value = float(value)
        except (TypeError, ValueError):
            return None
    return float(value)
