"""A query that must release keys first: partition selection of a key column, then the answer over its keys.

Which query must (an unreleased key column grouped by alone, or a released one over rows no release has
counted) and how the domain grows are `dpsql.tables.key_domains`'; this module runs the release and its EXPLAIN.
"""

from __future__ import annotations

from typing import Any

from dpsql.tables.columns import KEY
from dpsql.tables.hybrid import HybridTable
from dpsql.errors import BudgetExceededError, Error, NotSupportedError
from dpsql.tables.key_domains import covered, rows_counted
from dpsql.budget.ledger_entries import KEYS
from dpsql.answers.result import Result, assemble
from dpsql.releases import keys as key_releases
from dpsql.sql.compiler import CompiledQuery, KeySelection
from mechanisms.partition_selection import count_released_with

CHECKS_KEPT = 256  # queries whose growth check a session keeps (for the catalog it was made on)


def needed(session, compiled: Any, sql: str, params, weight: float) -> KeySelection | None:
    """What partition selection a compiled query needs first: its unreleased key column's, or, grouped by a
    released key column alone over rows no release of it has counted, the selection that grows it."""
    if not isinstance(compiled, CompiledQuery):
        return None
    table = compiled.table
    if isinstance(table, HybridTable):  # its keys are its opt-in group's, discovered there
        if compiled.selection is not None:
            column = compiled.selection.column
            raise NotSupportedError(
                f"{table.name}.{column} is a head list its opt-in group discovers first (charged centrally): "
                f"SELECT {column}, COUNT(*) FROM {table.opt_in} GROUP BY {column}; the clients then report over "
                "the keys released (grr2). Nothing was charged")
        return None
    if compiled.selection is not None:
        return compiled.selection
    columns = [g for g in compiled.group_by if g in table.columns and table.column(g).kind == KEY]
    if len(compiled.groups) != 1 or not columns:
        return None
    if params:
        return _growth(session, table, columns[0], sql, params, weight)
    catalog = session.catalog  # a new catalog object whenever the ledger changed: the answers change with it
    if session.key_checks[0] is not catalog or len(session.key_checks[1]) >= CHECKS_KEPT:
        session.key_checks = (catalog, {})
    checks = session.key_checks[1]
    if (sql, weight) not in checks:
        checks[(sql, weight)] = _growth(session, table, columns[0], sql, None, weight)
    return checks[(sql, weight)]


def _growth(session, table, column: str, sql: str, params, weight: float) -> KeySelection | None:
    """The selection that grows `column` for this query, or None when its rows were counted already."""
    reopened = {k: v for k, v in session.ledger.key_sets().items()
                if (k[0].lower(), k[1]) != (table.name.lower(), column)}
    try:
        selection = session.compile(sql, params, weight=weight, catalog=session.declared.with_keys(reopened)).selection
    except Error:
        return None  # not a query that may release keys: it is answered over the keys released
    payloads = [p for _, name, p in session.ledger.records(KEYS, table.name) if name == column]
    if selection is None or covered(payloads, rows_counted(selection)):
        return None
    return selection


def _released_before(session, selection: KeySelection) -> int:
    column = session.catalog.get(selection.table.name).column(selection.column)
    return len(column.values) if column.released else 0


def release(session, selection: KeySelection, sql: str, params, weight: float) -> Result:
    """Release keys by partition selection (the query share, and `key_delta` of δ), charged, then answer the
    query over the column's keys (free). Finding no key while the column has none answers no rows (charged
    all the same)."""
    s = session
    if s.max_rmse is not None:
        raise NotSupportedError("releasing keys is sized by a budget, not by max_rmse: SET dpsql.max_rmse = 0 "
                                "first (the counts' error is then shown)")
    name, column = selection.table.name, selection.column
    had = _released_before(s, selection)
    fixed = [t.name for t in s.declared.tables.values() if isinstance(t, HybridTable)
             and t.opt_in.lower() == name.lower() and column in t.discovered()]
    if had and fixed:
        raise NotSupportedError(f"{name}.{column} is the head list of {', '.join(fixed)}, fixed once discovered: the "
                                "clients' reports index the keys released. Nothing was charged")

    def over(keys: tuple[str, ...]) -> CompiledQuery:
        return s.compile(sql, params, weight=weight, catalog=s.catalog.with_keys({(name, column): keys}))

    keys, (chosen, cost, pieces) = key_releases.release(s.executor, selection, s.catalog.get(name), s.query_share,
                                                        s.key_delta, sql, over, rows_counted(selection))
    if keys or had:
        result = s.executor.execute([s.compile(sql, params, weight=weight)], sql, s.sizing())[0]
    else:  # nothing to measure: the query's shape over no keys (no rows)
        shape = over(())
        result = assemble(shape, shape.zero_answers())
    result.charged = cost
    result.charge_text = s.executor.charge_text(cost, pieces)
    tau = chosen.threshold
    if had:
        released = (f"{len(keys)} more keys of {column} released (it had {had}; this WHERE's rows had not been "
                    "counted by a release)")
    elif keys:
        released = f"{len(keys)} keys of {column} released"
    else:
        released = f"no key of {column} cleared the threshold, so none was released (the column stays unreleased)"
    result.notes = [*result.notes, (
        f"{released} by partition selection (noisy count above τ = {tau}; δ = {s.key_delta:g} spent)"
        + (": later queries see these keys as the column's domain; counts near τ are biased upward (only "
           "those that cleared it are shown)" if keys else ""))]
    return result


def explain(session, selection: KeySelection) -> Result:
    """EXPLAIN of a query that must release keys first: the partition selection, its threshold and cost."""
    s = session
    chosen, cost, pieces = key_releases.selection(s.executor, selection, s.query_share, s.key_delta)
    sigma = float(chosen.noise.variance) ** 0.5
    at = [count_released_with(p, chosen.threshold, chosen.noise) for p in (0.05, 0.5, 0.95)]
    k = selection.table.contribution
    had = _released_before(s, selection)
    why = (f"{had} keys released; this WHERE's rows were not counted by a release, so it grows the domain"
           if had else "its keys are not declared")
    lines = [
        f"[{selection.table.name}] Key release: partition selection of {selection.column} ({why})",
        f"  each key's count (at most {k} row(s) per privacy unit, over any keys) gets discrete "
        f"{chosen.noise.kind.capitalize()} noise of std {sigma:.4g}"
        + (f" (ε={pieces[0].value:.4g} of pure DP: the same share of the budget, a lower threshold than the "
           "Gaussian's)" if pieces else "") + f"; keys whose noisy count exceeds τ = {chosen.threshold} are released",
        f"  a key with true count {at[0]} / {at[1]} / {at[2]} is released with probability 5% / 50% / 95%; a key "
        f"only one unit holds, with probability at most δ = {s.key_delta:g}",
        "  the released keys join the column's domain, and the noisy counts of all its keys answer this query "
        "(free when asked again)",
    ]
    verdict = "fits in" if _fits(s, cost, pieces) else "EXCEEDS"
    cost_text = f"ε={pieces[0].value:.4g} of pure DP" if pieces else s.amount(cost)
    lines.append(f"Total cost {cost_text} and δ = {s.key_delta:g} (of the δ = {s.ledger.events:g} set apart for key "
                 f"releases, {s.ledger.delta_spent():g} spent) for the key release; {verdict} the remaining budget "
                 f"{s.amount(s.ledger.remaining())}")
    return Result(["plan"], [(line,) for line in lines], kind="explain", plan="\n".join(lines))


def _fits(session, cost: float, pieces) -> bool:
    """Whether the ledger would accept the release now (its δ_τ and its charge)."""
    try:
        session.ledger.check_delta(cost, session.key_delta, pieces)
    except BudgetExceededError:
        return False
    return True
