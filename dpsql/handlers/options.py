"""SET dpsql.<option> and SHOW dpsql.<option>: the connection's settings and its budget."""

from __future__ import annotations

from dpsql.budget.units import checked
from dpsql.errors import ProgrammingError
from dpsql.answers.result import Result
from dpsql.sql.statements import SetOption, ShowOption


def run(session, st: SetOption | ShowOption, params) -> list[Result]:
    if isinstance(st, ShowOption):
        return [show(session, st.name)]
    set_option(session, st.name, st.value)
    value = ("on" if st.value else "off") if isinstance(st.value, bool) else st.value
    return [Result(["setting", "value"], [(f"dpsql.{st.name}", value)], kind="status")]


def describe(session, st: SetOption | ShowOption, params) -> Result:
    if isinstance(st, SetOption):
        return Result(["setting", "value"], [], kind="status", types=["VARCHAR", "VARCHAR"])
    shown = show(session, st.name)
    return Result(shown.columns, [], kind="status", types=shown.types)


def set_option(session, name: str, value: float | str) -> None:
    """One of the connection's settings (`dpsql.sql.statements` checked its name and value's form)."""
    s = session
    if name == "query_epsilon":
        s.query_share = s.share(value, None)
    elif name == "query_rho":
        s.query_share = s.share(None, value)
    elif name == "max_rmse":
        s.max_rmse = checked("max_rmse", value, "dpsql.max_rmse") if value else None
    elif name == "planning_seconds":
        s.executor.planning_seconds = checked("planning_seconds", value, "dpsql.planning_seconds") if value else 0.0
    elif name == "stderr":
        s.stderr_columns = bool(value)
    elif name == "estimator":
        s.executor.estimator = str(value)
    elif name == "small_counts":
        s.small_counts = str(value)
    elif name == "hybrid_mean":
        s.executor.hybrid_mean = str(value)
    elif name == "key_delta":
        if s.analyst:
            raise ProgrammingError("dpsql.key_delta is the data owner's setting: the profile's [budget] "
                                   "key_delta fixes it")
        set_key_delta(s, value)
    else:
        s.objective = str(value)


def set_key_delta(session, value: float) -> None:
    """The δ one release of keys spends: above 0 and at most the δ the ledger set apart for key releases."""
    events = session.ledger.events
    if not 0 < value <= events:
        raise ProgrammingError(f"dpsql.key_delta must be above 0 and at most the δ the ledger set apart for key "
                               f"releases ({events:g}), got {value:g}")
    session.key_delta = value


def show(session, name: str) -> Result:
    """`SHOW dpsql.<name>`: the budget (total, spent, remaining, the last charge) or a setting."""
    s = session
    if name == "budget":
        status = s.budget()
        rows = [(label, a.epsilon, a.delta, a.rho) for label, a in (
            ("total", status.total), ("spent", status.spent), ("remaining", status.remaining),
            ("last_charge", s.amount(s.last_charge)))]
        if s.ledger.events:  # δ set apart for key releases: the total above is what the rest of δ affords
            rows.append(("key_releases_spent", None, s.ledger.delta_spent(), None))
            rows.append(("key_releases_total", None, s.ledger.events, None))
        return Result(["budget", "epsilon", "delta", "rho"], rows, kind="status",
                      types=["VARCHAR", "DOUBLE", "DOUBLE", "DOUBLE"])
    values = {"query_epsilon": s.amount(s.query_share).epsilon, "query_rho": s.amount(s.query_share).rho,
              "max_rmse": s.max_rmse or 0.0, "objective": s.objective,
              "planning_seconds": "auto" if s.executor.planning_seconds is None else s.executor.planning_seconds,
              "stderr": "on" if s.stderr_columns else "off", "key_delta": s.key_delta,
              "estimator": s.executor.estimator, "small_counts": s.small_counts,
              "hybrid_mean": s.executor.hybrid_mean}
    return Result([f"dpsql.{name}"], [(values[name],)], kind="status")
