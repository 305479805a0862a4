"""Splitting SQL scripts into statements and recognising dpsql's own statements.

Besides SQL, a script may contain:

- ``BEGIN WORKLOAD [WITH (option = value, ...)];`` ... ``END WORKLOAD;`` — the
  queries in between are planned and measured jointly. Options: ``epsilon`` (with
  ``delta`` for the conversion) or ``rho`` (the budget), ``max_rmse`` (instead of a
  budget: the least budget giving every query that RMSE, in units of its
  sensitivity) and ``objective`` (``total`` or ``max``);
- ``EXPLAIN <query>`` and ``EXPLAIN BEGIN WORKLOAD ...`` — show the plan, spend nothing;
  ``EXPLAIN PARETO <query>`` (or ``EXPLAIN PARETO BEGIN WORKLOAD ...``) — the front of
  (ε, expected RMSE) of the planner's choice and each strategy family (AIM/RAP simulated on
  public stand-in data where the table's size is known), spending nothing;
- ``SET dpsql.<setting> = value`` — ``query_epsilon`` / ``query_rho`` (what a new
  query spends), ``max_rmse`` (size new queries by accuracy instead; 0 turns it
  off), ``objective``, ``planning_seconds`` (the planning budget, in seconds of reference work; 0: none),
  ``stderr`` (``on``: each DP column is followed by a ``<column>_stderr`` column),
  ``key_delta`` (the δ a release of keys by partition selection spends) and ``estimator``
  (``least_squares``, ``pgm``: a graphical model over all measurements, non-negative; ``auto``:
  the graphical model's answer where least squares' intervals hold it, else least squares),
  ``small_counts`` (``fair`` or ``geometric``: COUNTs per group of a categorical column with declared
  ``sizes`` are released by the LDP thesis' small-group mechanisms; ``off``, the default) and
  ``hybrid_mean`` (AVG over a hybrid table: ``blend``, the blended SUM over the blended COUNT; ``kvh`` or
  ``pwh``, the seed's hybrid mean estimators, `mechanisms.ldp.hybrid_answers`);
- ``SHOW dpsql.budget`` — total, spent and remaining budget (ε, δ and ρ) and the last
  statement's charge; ``SHOW dpsql.<setting>`` — a setting's value;
- ``CREATE CONTINUAL QUERY name AS SELECT … EMIT EVERY INTERVAL '7 days' ON time_column
  FROM '2025-01-06' FOR 52 RELEASES [WITH (epsilon = E [, delta = D]) | WITH (rho = R)]`` —
  a continual query over an append-only table, charged once for all its releases;
  ``EMIT name`` releases its next window; ``SHOW CONTINUAL name`` shows every window so far;
- a hint ``/*+ WEIGHT(w) */`` in a query gives its errors weight w in the plan.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from sqlglot import exp

from dpsql.budget.units import checked
from dpsql.errors import ProgrammingError


def split_statements(script: str) -> list[str]:
    """Split on semicolons outside quotes and comments; drop empty statements."""
    out, buf = [], []
    i, n = 0, len(script)
    quote: str | None = None
    while i < n:
        ch = script[i]
        if quote:
            buf.append(ch)
            if ch == quote:
                if i + 1 < n and script[i + 1] == quote:  # doubled quote escapes itself
                    buf.append(script[i + 1])
                    i += 1
                else:
                    quote = None
        elif ch in ("'", '"'):
            quote = ch
            buf.append(ch)
        elif script.startswith("--", i):
            end = script.find("\n", i)
            i = n if end < 0 else end
            continue
        elif script.startswith("/*+", i):  # an optimizer hint: kept for the planner
            end = script.find("*/", i + 3)
            end = n if end < 0 else end + 2
            buf.append(script[i:end])
            i = end
            continue
        elif script.startswith("/*", i):
            end = script.find("*/", i + 2)
            i = n if end < 0 else end + 2
            buf.append(" ")
            continue
        elif ch == ";":
            out.append("".join(buf).strip())
            buf = []
        else:
            buf.append(ch)
        i += 1
    if quote:
        raise ProgrammingError(f"unterminated {quote} quote in the SQL")
    out.append("".join(buf).strip())
    return [s for s in out if s]


@dataclass(frozen=True)
class BeginWorkload:
    explain: bool
    epsilon: float | None = None
    delta: float | None = None
    rho: float | None = None
    max_rmse: float | None = None
    objective: str | None = None
    pareto: bool = False


@dataclass(frozen=True)
class EndWorkload:
    pass


@dataclass(frozen=True)
class SetOption:
    name: str
    value: float | str


@dataclass(frozen=True)
class ShowOption:
    name: str


@dataclass(frozen=True)
class Explain:
    sql: str
    pareto: bool = False


@dataclass(frozen=True)
class Sql:
    sql: str


@dataclass(frozen=True)
class CreateContinual:
    name: str
    sql: str  # the SELECT
    interval: str
    time_column: str
    start: str
    releases: int
    epsilon: float | None = None
    delta: float | None = None
    rho: float | None = None


@dataclass(frozen=True)
class Emit:
    name: str


@dataclass(frozen=True)
class ShowContinual:
    name: str


Statement = BeginWorkload | EndWorkload | SetOption | ShowOption | Explain | CreateContinual | Emit | ShowContinual | Sql

_BEGIN = re.compile(r"^(EXPLAIN\s+(PARETO\s+)?)?BEGIN\s+WORKLOAD\b\s*(.*)$", re.I | re.S)
_PARETO = re.compile(r"^PARETO\s+(.*)$", re.I | re.S)
_WITH = re.compile(r"^WITH\s*\((.*)\)\s*$", re.I | re.S)
_END = re.compile(r"^END\s+WORKLOAD\s*$", re.I)
_SET = re.compile(r"^SET\s+(?:SESSION\s+)?dpsql\.(\w+)\s*(?:=|TO)\s*(.+?)\s*$", re.I | re.S)
_SHOW = re.compile(r"^SHOW\s+dpsql\.(\w+)\s*$", re.I)
_EXPLAIN = re.compile(r"^EXPLAIN\s+(.*)$", re.I | re.S)
_CONTINUAL = re.compile(
    r"^CREATE\s+CONTINUAL\s+QUERY\s+(\w+)\s+AS\s+(SELECT\b.*?)\s+EMIT\s+EVERY\s+INTERVAL\s+'([^']*)'\s+ON\s+(\w+)\s+"
    r"FROM\s+'([^']*)'\s+FOR\s+(\d+)\s+RELEASES?\s*(?:WITH\s*\((.*)\))?\s*$", re.I | re.S)
_CONTINUAL_START = re.compile(r"^CREATE\s+CONTINUAL\b", re.I)
_EMIT = re.compile(r"^EMIT\s+(\w+)\s*$", re.I)
_SHOW_CONTINUAL = re.compile(r"^SHOW\s+CONTINUAL\s+(\w+)\s*$", re.I)
_OPTIONS = {"query_epsilon", "query_rho", "max_rmse", "objective", "planning_seconds", "stderr", "key_delta",
            "estimator", "small_counts", "hybrid_mean"}
ESTIMATORS = ("least_squares", "pgm", "auto")
SMALL_COUNTS = ("off", "geometric", "fair")  # `dpsql.handlers.small_counts`
HYBRID_MEANS = ("blend", "kvh", "pwh")
SHOWABLE = _OPTIONS | {"budget"}
_SWITCH = {"on": True, "true": True, "1": True, "off": False, "false": False, "0": False}
OBJECTIVE_NAMES = ("total", "max")
_HINT = re.compile(r"/\*\+\s*WEIGHT\s*(?:\(\s*([^)]*?)\s*\)|=\s*(\S+?))\s*\*/", re.I)




def classify(statement: str) -> Statement:
    """Recognise dpsql statements; anything else is SQL."""
    text = statement.strip()
    m = _BEGIN.match(text)
    if m:
        return replace(_begin(bool(m.group(1)), m.group(3).strip()), pareto=bool(m.group(2)))
    if _END.match(text):
        return EndWorkload()
    m = _SET.match(text)
    if m:
        name = m.group(1).lower()
        if name not in _OPTIONS:
            raise ProgrammingError(f"unknown setting dpsql.{name}; settable: {', '.join(sorted(_OPTIONS))}")
        if name == "objective":
            return SetOption(name, _objective(m.group(2)))
        if name == "stderr":
            return SetOption(name, _switch(m.group(2), f"dpsql.{name}"))
        if name in ("max_rmse", "planning_seconds") and m.group(2).strip().strip("'").lower() in ("0", "off", "none"):
            return SetOption(name, 0.0)
        if name in ("estimator", "small_counts", "hybrid_mean"):
            value = m.group(2).strip().strip("'").lower()
            allowed = {"estimator": ESTIMATORS, "small_counts": SMALL_COUNTS, "hybrid_mean": HYBRID_MEANS}[name]
            if value not in allowed:
                raise ProgrammingError(f"dpsql.{name} is one of {', '.join(allowed)}, not {value!r}")
            return SetOption(name, value)
        if name == "key_delta":
            return SetOption(name, checked("delta", m.group(2), f"dpsql.{name}"))
        return SetOption(name, checked(name.removeprefix("query_"), m.group(2), f"dpsql.{name}"))
    m = _SHOW.match(text)
    if m:
        name = m.group(1).lower()
        if name not in SHOWABLE:
            raise ProgrammingError(f"unknown setting dpsql.{name}; shown: {', '.join(sorted(SHOWABLE))}")
        return ShowOption(name)
    m = _EXPLAIN.match(text)
    if m and not re.match(r"^(ANALYZE|ANALYSE)\b", m.group(1), re.I):
        pareto = _PARETO.match(m.group(1).strip())
        return Explain(pareto.group(1).strip(), pareto=True) if pareto else Explain(m.group(1).strip())
    if _CONTINUAL_START.match(text):
        return _continual(text)
    m = _EMIT.match(text)
    if m:
        return Emit(m.group(1).lower())
    m = _SHOW_CONTINUAL.match(text)
    if m:
        return ShowContinual(m.group(1).lower())
    return Sql(text)


def _continual(text: str) -> CreateContinual:
    m = _CONTINUAL.match(text)
    if not m:
        raise ProgrammingError(
            "expected CREATE CONTINUAL QUERY <name> AS SELECT ... EMIT EVERY INTERVAL '<n> days' ON <time column> "
            "FROM '<start>' FOR <T> RELEASES [WITH (epsilon = E) | WITH (rho = R)]")
    name, sql, interval, column, start, releases, options = m.groups()
    budget = _begin(False, f"WITH ({options})") if options else BeginWorkload(False)
    if budget.max_rmse is not None or budget.objective is not None:
        raise ProgrammingError("a continual query takes a budget: WITH (epsilon = E [, delta = D]) or WITH (rho = R)")
    return CreateContinual(name.lower(), sql.strip(), interval.strip(), column, start.strip(), int(releases),
                           budget.epsilon, budget.delta, budget.rho)


def _begin(explain: bool, rest: str) -> BeginWorkload:
    if not rest:
        return BeginWorkload(explain)
    m = _WITH.match(rest)
    if not m:
        raise ProgrammingError("expected BEGIN WORKLOAD [WITH (epsilon = E, delta = D) | WITH (rho = R)]")
    options: dict[str, float] = {}
    objective = None
    for part in filter(None, (p.strip() for p in m.group(1).split(","))):
        key, _, value = part.partition("=")
        key = key.strip().lower()
        if key == "objective" and value:
            objective = _objective(value)
            continue
        if key not in ("epsilon", "delta", "rho", "max_rmse") or not value:
            raise ProgrammingError(
                f"unknown workload option {part!r}: use epsilon, delta, rho, max_rmse or objective"
            )
        options[key] = checked(key, value)
        if key == "delta" and options[key] == 0:
            raise ProgrammingError("a workload's delta converts its epsilon to zCDP: it must be above 0")
    if sum(k in options for k in ("rho", "epsilon", "max_rmse")) > 1:
        raise ProgrammingError("give a workload one of epsilon (with delta), rho or max_rmse")
    return BeginWorkload(
        explain, options.get("epsilon"), options.get("delta"), options.get("rho"), options.get("max_rmse"), objective
    )


def _switch(text: str, what: str) -> bool:
    value = text.strip().strip("'").lower()
    if value not in _SWITCH:
        raise ProgrammingError(f"{what} must be on or off, got {text.strip()!r}")
    return _SWITCH[value]


def _objective(text: str) -> str:
    value = text.strip().strip("'").lower()
    if value not in OBJECTIVE_NAMES:
        raise ProgrammingError(f"objective must be one of {', '.join(OBJECTIVE_NAMES)}, got {text.strip()!r}")
    return value


def take_weight(sql: str) -> tuple[str, float]:
    """Remove a ``/*+ WEIGHT(w) */`` hint from a query; returns the query and w (default 1)."""
    weight = 1.0
    for m in _HINT.finditer(sql):
        weight = checked("weight", m.group(1) or m.group(2) or "", "WEIGHT")
    return _HINT.sub(" ", sql).strip(), weight


def without_parameters(tree: exp.Expression, dialect: str) -> str | None:
    """A DP query's text with the clauses that hold parameters left out (WHERE, HAVING, LIMIT, OFFSET), for
    describing its columns before the parameters are known: they decide which rows, never which columns.
    None if a parameter stands elsewhere (in the select list, a join condition)."""
    tree = tree.copy()
    for clause in ("where", "having", "limit", "offset"):
        part = tree.args.get(clause)
        if part is not None and part.find(exp.Placeholder):
            tree.set(clause, None)
    return None if tree.find(exp.Placeholder) else tree.sql(dialect)
