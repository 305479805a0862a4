"""A session: runs a connection's statements under one privacy budget.

It dispatches each statement of a script: dpsql's own (SET dpsql.*, BEGIN/END WORKLOAD,
EXPLAIN), public SQL — statements that name no protected table — to the analyst's
workspace (`dpsql.workspace`), which runs it only if the allowlist of `dpsql.sql.public`
allows it, and DP queries to the compiler (`dpsql.sql.compiler`, each statement tokenized
and parsed once) and then to the executor (`dpsql.executor`: plan, scan, release, answer,
charge). Any error raised before the charge spends nothing.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from sqlglot import exp

from dpsql.backends import Backend
from dpsql.budget import Budget, Sizing, checked
from dpsql.catalog import Catalog
from dpsql.columns import KEY
from dpsql.errors import Error, NotSupportedError, ProgrammingError
from dpsql.continual import ContinualQueries
from dpsql.executor import Executor, local_plan
from dpsql.ledger import Ledger
from dpsql.post_processing import CompositeQuery, answers, compile_composite, dry_run, parts_of
from dpsql.result import Result, assemble
from dpsql.sql.compiler import CompiledQuery, compile_tree, parse_statement
from dpsql.sql.flatten import Composite, flatten
from dpsql.sql.lookups import PublicTables
from dpsql.sql.public import ProtectedNames
from dpsql.sql.statements import (
    BeginWorkload,
    CreateContinual,
    Emit,
    EndWorkload,
    Explain,
    SetOption,
    ShowContinual,
    ShowOption,
    Sql,
    classify,
    split_statements,
    take_weight,
    without_parameters,
)
from dpsql.workspace import Workspace
from mechanisms.accounting import Amount
from mechanisms.partition_selection import count_released_with
from mechanisms.noise import RandomSource
from mechanisms.workload import Workload
from planner.chart import draw_chart, draw_front, error_curves
from planner.planning_limit import PlanningLimit
from planner.pareto import ADAPTIVE_SECONDS, FRONT_COLUMNS, pareto_front
from planner.plan import TOTAL_SQUARED

DEFAULT_QUERY_EPSILON = 0.1
KEY_DELTA_SHARE = 10  # a release of keys spends this fraction (1/10) of the ledger's δ by default
COMPILED_CACHE = 256  # compiled statements kept per session


@dataclass(frozen=True)
class BudgetStatus:
    total: Amount
    spent: Amount
    remaining: Amount


def _substitute(tree: exp.Expression, params: Sequence[Any] | dict | None) -> exp.Expression:
    """Bind qmark (?), numbered ($1, as PostgreSQL clients send) or named ($name) parameters as literals."""
    if not params:
        if tree.find(exp.Placeholder):
            raise ProgrammingError("the query has parameters but none were given")
        return tree
    values = list(params) if not isinstance(params, dict) else None
    positional = iter(values or ())

    def bind(node):
        if not isinstance(node, exp.Placeholder):
            return node
        if values is not None and node.name.isdigit():
            if not 1 <= int(node.name) <= len(values):
                raise ProgrammingError(f"parameter ${node.name} was not given")
            value = values[int(node.name) - 1]
        elif values is not None:
            try:
                value = next(positional)
            except StopIteration:
                raise ProgrammingError("not enough parameters for the query") from None
        else:
            if node.name not in params:
                raise ProgrammingError(f"missing parameter {node.name!r}")
            value = params[node.name]
        if value is None:
            return exp.null()
        if isinstance(value, bool):
            return exp.true() if value else exp.false()
        if isinstance(value, (int, float)):
            return exp.Literal.number(value)
        if isinstance(value, str):
            return exp.Literal.string(value)
        raise ProgrammingError(f"unsupported parameter type {type(value).__name__}")

    return tree.transform(bind)


class Session:
    """Executes statements for one connection.

    `backend` measures protected tables (through the `executor`); `workspace` runs public SQL.
    """

    def __init__(
        self,
        workspace: Workspace,
        catalog: Catalog,
        ledger: Ledger,
        backend: Backend,
        *,
        query_epsilon: float | None = None,
        query_rho: float | None = None,
        seed: int | None = None,
        dialect: str = "duckdb",
        key_delta: float | None = None,
        analyst: bool = False,
    ):
        self.workspace = workspace
        self.declared = catalog  # as the owner declared it; `catalog` adds the key sets released since
        self._released: tuple[tuple | None, Catalog] = (None, catalog)
        self.ledger = ledger
        self.budget_unit = Budget(ledger.noise, ledger.delta)
        self.dialect = dialect
        self.executor = Executor(catalog, ledger, backend, self.budget_unit, RandomSource(seed))
        self.continual = ContinualQueries(self.executor, dialect)
        self.query_share = self.budget_unit.share(query_epsilon, query_rho, default_epsilon=DEFAULT_QUERY_EPSILON)
        self.objective = TOTAL_SQUARED
        self.max_rmse: float | None = None
        self.stderr_columns = False  # SET dpsql.stderr = on: a `<column>_stderr` column after each DP column
        self.analyst = analyst  # an analyst's session (from a profile): the owner's settings are fixed
        self.key_delta = ledger.delta / KEY_DELTA_SHARE  # what one release of keys spends of δ
        if key_delta is not None:
            self._set_key_delta(key_delta)
        self.last_charge = 0.0  # what the last statement that read protected data charged
        self._workload: BeginWorkload | None = None
        self._pending: list[str] = []
        # Compiled DP queries by (text, label, weight): kept across statements (a re-ask compiles nothing)
        # unless they join public tables, which the workspace may change; those last one `execute`.
        self._compiled: OrderedDict[tuple[str, str, float], CompiledQuery | CompositeQuery] = OrderedDict()
        self._joins: set[tuple[str, str, float]] = set()
        self.protected = ProtectedNames(catalog, self.dialect)
        workspace.declare_protected(list(catalog.tables.values()))

    @property
    def catalog(self) -> Catalog:
        """The catalog with the key sets released so far (by anyone: read again when the ledger changes)."""
        version = self.ledger.version()
        if version is None or version != self._released[0]:
            released = self.declared.with_keys(self.ledger.key_sets()) if self._has_key_columns() else self.declared
            if released is not self._released[1]:
                self._compiled.clear()  # compiled over other domains
            self._released = (version, released)
        return self._released[1]

    def _has_key_columns(self) -> bool:
        return any(c.kind == KEY for t in self.declared.tables.values() for c in t.columns.values())

    # --- what other parts read and set ----------------------------------------------------
    @property
    def backend(self) -> Backend:
        return self.executor.backend

    @property
    def rng(self) -> RandomSource:
        return self.executor.rng

    @property
    def before_charge(self) -> Callable[[], None] | None:
        """Called right before a statement charges; raising there cancels it with nothing spent."""
        return self.executor.hooks.before_charge

    @before_charge.setter
    def before_charge(self, hook: Callable[[], None] | None) -> None:
        self.executor.hooks.before_charge = hook

    @property
    def cancelled(self) -> Callable[[], bool] | None:
        """Asked while planning: True stops planning at once (e.g. Ctrl-C in the shell)."""
        return self.executor.hooks.cancelled

    @cancelled.setter
    def cancelled(self, hook: Callable[[], bool] | None) -> None:
        self.executor.hooks.cancelled = hook

    @property
    def progress(self) -> Callable[[float, str], None] | None:
        """Shown progress of long releases (AIM, RAP): called with (fraction done, message)."""
        return self.executor.hooks.progress

    @progress.setter
    def progress(self, hook: Callable[[float, str], None] | None) -> None:
        self.executor.hooks.progress = hook

    # --- budget ------------------------------------------------------------------
    def share(self, epsilon: float | None, rho: float | None) -> float:
        """A budget share in the ledger's unit, from ε (at the ledger's δ) or ρ (each checked)."""
        return self.budget_unit.share(epsilon, rho)

    def amount(self, share: float) -> Amount:
        """A share of the ledger's unit, in both units (ε at the δ key releases left: see `Ledger.capacity`)."""
        return self.executor.amount(share)

    def budget(self) -> BudgetStatus:
        """Total, spent and remaining: the ledger's, or the analyst's own under a profile's limit."""
        total, spent, remaining = self.ledger.status()
        return BudgetStatus(self.amount(total), self.amount(spent), self.amount(remaining))

    def set_option(self, name: str, value: float | str) -> None:
        if name == "query_epsilon":
            self.query_share = self.share(value, None)
        elif name == "query_rho":
            self.query_share = self.share(None, value)
        elif name == "max_rmse":
            self.max_rmse = checked("max_rmse", value, "dpsql.max_rmse") if value else None
        elif name == "planning_seconds":
            value = checked("planning_seconds", value, "dpsql.planning_seconds") if value else 0.0
            self.executor.planning_seconds = value
        elif name == "stderr":
            self.stderr_columns = bool(value)
        elif name == "estimator":
            self.executor.estimator = str(value)
        elif name == "key_delta":
            if self.analyst:
                raise ProgrammingError("dpsql.key_delta is the data owner's setting: the profile's [budget] "
                                       "key_delta fixes it")
            self._set_key_delta(value)
        else:
            self.objective = str(value)

    def _set_key_delta(self, value: float) -> None:
        if not 0 < value < self.ledger.delta:
            raise ProgrammingError(f"dpsql.key_delta must be above 0 and below the ledger's δ "
                                   f"({self.ledger.delta:g}), got {value:g}")
        self.key_delta = value

    def show(self, name: str) -> Result:
        """`SHOW dpsql.<name>`: the budget (total, spent, remaining, the last charge) or a setting."""
        if name == "budget":
            status = self.budget()
            rows = [(label, a.epsilon, a.delta, a.rho) for label, a in (
                ("total", status.total), ("spent", status.spent), ("remaining", status.remaining),
                ("last_charge", self.amount(self.last_charge)))]
            spent_delta = self.ledger.delta_spent()
            if spent_delta:  # δ spent by key releases: the total above is what the rest of δ affords
                rows.append(("key_releases", None, spent_delta, None))
            return Result(["budget", "epsilon", "delta", "rho"], rows, kind="status",
                          types=["VARCHAR", "DOUBLE", "DOUBLE", "DOUBLE"])
        values = {"query_epsilon": self.amount(self.query_share).epsilon, "query_rho": self.amount(self.query_share).rho,
                  "max_rmse": self.max_rmse or 0.0, "objective": self.objective,
                  "planning_seconds": "auto" if self.executor.planning_seconds is None
                  else self.executor.planning_seconds,
                  "stderr": "on" if self.stderr_columns else "off", "key_delta": self.key_delta,
                  "estimator": self.executor.estimator}
        return Result([f"dpsql.{name}"], [(values[name],)], kind="status")

    def _sizing(self) -> Sizing:
        """How a statement's new measurements are sized: the query share, or an accuracy target."""
        sizing = Sizing(self.query_share, self.objective)
        return sizing.with_accuracy(self.max_rmse) if self.max_rmse is not None else sizing

    def _workload_sizing(self, begin: BeginWorkload) -> Sizing:
        sizing = self._sizing()
        if begin.epsilon or begin.rho:
            sizing = sizing.with_budget(self.budget_unit.share(begin.epsilon, begin.rho, delta=begin.delta))
        if begin.max_rmse is not None:
            sizing = sizing.with_accuracy(begin.max_rmse)
        if begin.objective is not None:
            sizing = replace(sizing, objective=begin.objective)
        return sizing

    # --- statements ------------------------------------------------------------------
    def execute(self, script: str, params: Sequence[Any] | dict | None = None) -> list[Result]:
        """Run a script; returns one result per statement that produces one."""
        values = params.values() if isinstance(params, dict) else params or ()
        for text in (script, *(v for v in values if isinstance(v, str))):
            _check_unicode(text)
        statements = [classify(text) for text in split_statements(script)]
        if not statements:
            raise ProgrammingError("empty statement")
        if params and len(statements) > 1:
            raise ProgrammingError("parameters can only be bound to a single statement")
        results: list[Result] = []
        try:
            if len(statements) > 1:
                self._validate(statements)
            for st in statements:
                done = self._statement(st, params)
                if any(r.kind == "dp" for r in done):
                    self.last_charge = sum(r.charged for r in done)
                results.extend(r.with_stderr_columns() if self.stderr_columns else r for r in done)
        except Error as e:  # what earlier statements released (and paid for) stays available
            e.partial_results = results
            raise
        finally:
            for key in self._joins:
                self._compiled.pop(key, None)
            self._joins.clear()
        return results

    def _validate(self, statements: list) -> None:
        """Compile every DP statement of a script (and guard public ones) before running any,
        so that a bad statement late in a script cannot follow charged ones; the compiled
        queries are kept (`_compiled`), so each statement is compiled once."""
        queued = None if self._workload is None else len(self._pending)
        for st in statements:
            if isinstance(st, BeginWorkload):
                queued = 0
            elif isinstance(st, EndWorkload):
                queued = None
            elif isinstance(st, (Explain, Sql)):
                sql, weight = take_weight(st.sql)
                if self.protected.reference(sql) is None:
                    self.workspace.check(sql)
                elif queued is not None and isinstance(st, Sql):
                    queued += 1
                    self._compile(sql, label=f"q{queued}", weight=weight)
                else:
                    self._compile(sql, weight=weight)

    def queries_of(self, script: str, skip_errors: bool = False) -> list[CompiledQuery]:
        """The DP queries of a script (plain and in workloads, EXPLAIN's included), compiled; nothing runs.
        With `skip_errors`, statements that are not DP queries or do not compile (any more) are left out."""
        out = []
        for text in split_statements(script):
            try:
                st = classify(text)
                if isinstance(st, (Explain, Sql)):
                    sql, weight = take_weight(st.sql)
                    if self.protected.reference(sql) is not None:
                        out += parts_of([self._compile(sql, weight=weight)])
            except Error:
                if not skip_errors:
                    raise
        return out

    def _statement(self, st, params) -> list[Result]:
        if isinstance(st, BeginWorkload):
            if self._workload is not None:
                raise ProgrammingError("a workload is already open; END WORKLOAD first")
            self._workload, self._pending = st, []
            return []
        if isinstance(st, EndWorkload):
            if self._workload is None:
                raise ProgrammingError("END WORKLOAD without BEGIN WORKLOAD")
            begin, queries = self._workload, self._pending
            self._workload, self._pending = None, []
            return self.run_workload(queries, begin)
        if isinstance(st, SetOption):
            self.set_option(st.name, st.value)
            value = ("on" if st.value else "off") if isinstance(st.value, bool) else st.value
            return [Result(["setting", "value"], [(f"dpsql.{st.name}", value)], kind="status")]
        if isinstance(st, ShowOption):
            return [self.show(st.name)]
        if isinstance(st, (CreateContinual, Emit, ShowContinual)):
            if self._workload is not None:
                raise ProgrammingError("continual queries are created, emitted and shown outside a workload")
            return [self._continual(st)]
        if self._workload is not None:
            if isinstance(st, Explain) or params:
                raise ProgrammingError("inside a workload, list plain SELECT queries without parameters")
            self._pending.append(st.sql)
            return []
        if isinstance(st, Explain):
            return [self.pareto([st.sql], self._sizing()) if st.pareto else self.explain(st.sql)]
        return [self.query(st.sql, params)]

    def _continual(self, st: CreateContinual | Emit | ShowContinual) -> Result:
        if isinstance(st, Emit):
            return self.continual.emit(st.name, self.catalog)
        if isinstance(st, ShowContinual):
            return self.continual.show(st.name, self.catalog)
        share = self.query_share if st.epsilon is None and st.rho is None else \
            self.budget_unit.share(st.epsilon, st.rho, delta=st.delta)
        budget = "" if st.epsilon is None and st.rho is None else \
            f" WITH ({'rho = ' + repr(st.rho) if st.rho is not None else 'epsilon = ' + repr(st.epsilon)})"
        text = (f"CREATE CONTINUAL QUERY {st.name} AS {st.sql} EMIT EVERY INTERVAL '{st.interval}' ON {st.time_column} "
                f"FROM '{st.start}' FOR {st.releases} RELEASES{budget}")
        return self.continual.create(st, self.catalog, share, text)

    def query(self, sql: str, params: Sequence[Any] | dict | None = None) -> Result:
        """One statement: a DP query on a protected table, or plain SQL on public tables."""
        sql, weight = take_weight(sql)
        if self.protected.reference(sql) is None:
            return self.workspace.run(sql, params)
        compiled = self._compile(sql, params, weight=weight)
        if compiled.selection is not None:
            return self._release_keys(compiled, sql, params, weight)
        results = self.executor.execute(parts_of([compiled]), sql, self._sizing())
        return self.executor.answered(lambda: answers([compiled], results))[0]

    def _release_keys(self, compiled: CompiledQuery, sql: str, params, weight: float) -> Result:
        """A query grouped by a key column whose keys are not released: release them by partition selection
        (the query share, and `key_delta` of δ), charged, then answer the query over them (free). No key
        clearing τ answers with no rows (charged all the same)."""
        if self.max_rmse is not None:
            raise NotSupportedError("releasing keys is sized by a budget, not by max_rmse: SET dpsql.max_rmse = 0 "
                                    "first (the counts' error is then shown)")
        selection = compiled.selection
        table, column = selection.table.name, selection.column

        def over(keys: tuple[str, ...]) -> CompiledQuery:
            return self._compile(sql, params, weight=weight, catalog=self.catalog.with_keys({(table, column): keys}))

        keys = self.executor.release_keys(selection, self.query_share, self.key_delta, sql, over)
        if keys:
            result = self.executor.execute([self._compile(sql, params, weight=weight)], sql, self._sizing())[0]
        else:  # nothing to measure: the query's shape over no keys (no rows)
            shape = over(())
            result = assemble(shape, shape.zero_answers())
        result.charged = self.query_share
        result.charge_text = self.executor.charge_text(self.query_share)
        tau = self.executor.selection(selection, self.query_share, self.key_delta).threshold
        released = (f"{len(keys)} keys of {column} released" if keys else
                    f"no key of {column} cleared the threshold, so none was released (the column stays unreleased)")
        result.notes = [*result.notes, (
            f"{released} by partition selection (noisy count above τ = {tau}; δ = {self.key_delta:g} spent)"
            + (": later queries see these keys as the column's domain; counts near τ are biased upward (only "
               "those that cleared it are shown)" if keys else ""))]
        return result

    def _compile(self, sql: str, params=None, label: str = "", weight: float = 1.0,
                 catalog: Catalog | None = None) -> CompiledQuery | CompositeQuery:
        """A statement that names a protected table, compiled as a DP query (or refused), its blocks'
        weights multiplied by `weight`; the outer template is then evaluated once on zeros, so errors
        there (HAVING, ORDER BY, LIMIT on noisy values) surface before anything is charged. A query that
        must release keys first is checked likewise, over an empty key set. `catalog` (default: the
        session's) is for compiling over keys about to be released (not cached)."""
        key = (sql, label, weight)
        current = self.catalog if catalog is None else catalog
        cached = catalog is None and not params
        if cached and key in self._compiled:
            self._compiled.move_to_end(key)
            return self._compiled[key]
        _, tokens = self.protected.scan(sql)
        public: list[str] = []  # public subqueries run in the workspace, their values inlined (`flatten`)
        tree = flatten(_substitute(parse_statement(sql, self.dialect, tokens), params), self.protected.names,
                       lambda query: public.append(query) or self.workspace.run(query).rows)
        if isinstance(tree, Composite):  # DP parts and what is done with their answers (`dpsql.post_processing`)
            composite = compile_composite(tree, sql, label, lambda part, name: self._compile(
                part, label=name, weight=weight, catalog=catalog), self.workspace)
            if cached:
                self._compiled[key] = composite
                self._joins.add(key)  # it may read public tables, which the workspace may change
            return composite
        lookups = PublicTables(self.workspace.prepare(tree), self.protected.names)
        try:
            compiled = compile_tree(tree, sql, current, label, lookups)
            if compiled.selection is not None:
                s = compiled.selection
                shape = compile_tree(tree, sql, current.with_keys({(s.table.name, s.column): ()}), label, lookups)
                assemble(shape, shape.zero_answers())
        except RecursionError:
            raise ProgrammingError("the query is nested too deeply to compile; simplify its conditions") from None
        for b in compiled.blocks:
            b.weight *= weight
        if compiled.selection is None:
            assemble(compiled, compiled.zero_answers())
        if cached:
            self._compiled[key] = compiled
            if tree.args.get("joins") or public:
                self._joins.add(key)
            while len(self._compiled) > COMPILED_CACHE:
                self._compiled.popitem(last=False)
        return compiled

    def run_workload(
        self, queries: list[str], begin: BeginWorkload, weights: Sequence[float] | None = None
    ) -> list[Result]:
        """Plan and measure a batch of queries jointly; one result per query.

        `weights` (one per query) multiply the weight of each query's errors in the plan,
        as a ``/*+ WEIGHT(w) */`` hint does.
        """
        if not queries:
            raise ProgrammingError("the workload holds no query")
        if weights is not None and len(weights) != len(queries):
            raise ProgrammingError(f"{len(weights)} weights given for {len(queries)} queries")
        compiled = []
        for i, text in enumerate(queries, start=1):
            sql, weight = take_weight(text)
            if weights is not None:
                weight *= checked("weight", weights[i - 1], f"the weight of query {i}")
            if self.protected.reference(sql) is None:
                raise ProgrammingError(f"workload query {i} does not read a protected table: {sql[:60]!r}")
            compiled.append(self._compile(sql, label=f"q{i}", weight=weight))
            selection = compiled[-1].selection
            if selection is not None:
                why = selection.table.column(selection.column).not_released()
                raise NotSupportedError(f"workload query {i}: {why}, outside a workload")
        sizing = self._workload_sizing(begin)
        if begin.pareto:
            return [self.pareto(queries, sizing, weights)]
        if begin.explain:
            return [self._explain_result(self.executor.plan(parts_of(compiled), sizing, timed=True))]
        statement = "BEGIN WORKLOAD; " + "; ".join(queries) + "; END WORKLOAD"
        results = self.executor.execute(parts_of(compiled), statement, sizing)
        return self.executor.answered(lambda: answers(compiled, results))

    def dropped_rows(
        self, table: str, epsilon: float | None = None, rho: float | None = None, cap: int | None = None
    ) -> Result:
        """A charged DP count of the rows bounding to a table's privacy unit drops (`Executor.dropped_rows`);
        spends ε/ρ, by default the query share."""
        share = self.query_share if epsilon is None and rho is None else self.share(epsilon, rho)
        return self.executor.dropped_rows(table, share, cap)

    def describe(self, text: str, params: Sequence[Any] | dict | None = None) -> Result | None:
        """The columns (names and types, no rows) one statement would return, without running it or
        spending anything; None when it returns none or they cannot be known before it runs (public
        SQL other than a query, or with parameters; a DP query with parameters not given). For
        clients that ask first, and for checking that an answer can be sent before it is paid for."""
        st = classify(text)
        if isinstance(st, SetOption):
            return Result(["setting", "value"], [], kind="status", types=["VARCHAR", "VARCHAR"])
        if isinstance(st, ShowOption):
            shown = self.show(st.name)
            return Result(shown.columns, [], kind="status", types=shown.types)
        if isinstance(st, Explain) and st.pareto:
            return Result(["table", *FRONT_COLUMNS], [], kind="explain",
                          types=["VARCHAR", "DOUBLE", "DOUBLE", "DOUBLE", "VARCHAR", "VARCHAR", "VARCHAR"])
        if isinstance(st, Explain):
            return Result(["plan"], [], kind="explain", types=["VARCHAR"])
        if not isinstance(st, Sql) or self._workload is not None:
            return None
        sql, weight = take_weight(st.sql)
        if self.protected.reference(sql) is None:
            return None if params else self.workspace.describe_query(sql)
        if not params:
            tree = parse_statement(sql, self.dialect)
            sql = without_parameters(tree, self.dialect) if tree.find(exp.Placeholder) else sql
            if sql is None:
                return None
        compiled = self._compile(sql, params, weight=weight)
        if isinstance(compiled, CompositeQuery):
            shape = dry_run(compiled.outer, compiled.parts)
            shape.rows, shape.stderr = [], []
            return (shape.with_stderr_columns() if self.stderr_columns else shape) if shape.columns else None
        if compiled.selection is not None:  # the columns it will have once the keys are released
            selection = compiled.selection
            over = self.catalog.with_keys({(selection.table.name, selection.column): ()})
            compiled = self._compile(sql, params, weight=weight, catalog=over)
        shape = assemble(compiled, compiled.zero_answers())
        shape.rows, shape.stderr = [], []
        return shape.with_stderr_columns() if self.stderr_columns else shape

    def explain(self, sql: str) -> Result:
        """The plan for a query (or EXPLAIN of a public query), without reading data or spending."""
        sql, weight = take_weight(sql)
        if self.protected.reference(sql) is None:
            return self.workspace.run(sql, explain=True)
        compiled = self._compile(sql, weight=weight)
        if compiled.selection is not None:
            return self._explain_key_release(compiled.selection)
        if isinstance(compiled, CompositeQuery):
            return self._explain_result(self.executor.plan(compiled.parts, self._sizing(), timed=True))
        if compiled.table.is_local and compiled.table.opt_in is None:  # a hybrid table: its opt-in part's plan
            text = local_plan(compiled.table)
            return Result(["plan"], [(text,)], kind="explain", plan=text)
        return self._explain_result(self.executor.plan([compiled], self._sizing(), timed=True))

    def _explain_key_release(self, selection) -> Result:
        """EXPLAIN of a query that must release keys first: the partition selection, its threshold and cost."""
        chosen = self.executor.selection(selection, self.query_share, self.key_delta)
        sigma = float(chosen.noise.variance) ** 0.5
        at = [count_released_with(p, chosen.threshold, chosen.noise) for p in (0.05, 0.5, 0.95)]
        k = selection.table.contribution
        lines = [
            f"[{selection.table.name}] Key release: partition selection of {selection.column} (its keys are not "
            "declared)",
            f"  each key's count (at most {k} row(s) per privacy unit, over any keys) gets discrete Gaussian noise of "
            f"std {sigma:.4g}; keys whose noisy count exceeds τ = {chosen.threshold} are released",
            f"  a key with true count {at[0]} / {at[1]} / {at[2]} is released with probability 5% / 50% / 95%; a key "
            f"only one unit holds, with probability at most δ = {self.key_delta:g}",
            "  the released keys become the column's domain, and their noisy counts answer this query (free when "
            "asked again)",
        ]
        remaining = self.ledger.remaining()
        verdict = "fits in" if self.query_share <= remaining * (1 + 1e-9) else "EXCEEDS"
        lines.append(f"Total cost {self.amount(self.query_share)} and δ = {self.key_delta:g} for the key release; "
                     f"{verdict} the remaining budget {self.amount(remaining)}")
        return Result(["plan"], [(line,) for line in lines], kind="explain", plan="\n".join(lines))

    def pareto(self, queries: list[str], sizing: Sizing, weights: Sequence[float] | None = None,
               chart: str | None = None) -> Result:
        """EXPLAIN PARETO: per table, the (ε, expected RMSE) front of the planner's choice and each family (AIM and
        RAP simulated on public stand-in data where the table's size is public or released); reads no data, spends
        nothing. `chart` also draws it (PNG or SVG)."""
        compiled = []
        for i, text in enumerate(queries, start=1):
            sql, weight = take_weight(text)
            weight *= 1.0 if weights is None else checked("weight", weights[i - 1], f"the weight of query {i}")
            compiled += parts_of([self._compile(sql, label=f"q{i}" if len(queries) > 1 else "", weight=weight)])
            if compiled[-1].selection is not None or compiled[-1].table.is_local:
                raise NotSupportedError("EXPLAIN PARETO plans measurements: not a key release or local-DP reports")
        rows, notes = [], []
        for name, (table, blocks, free) in self.executor.uncovered(compiled, sizing.measure_unmeasured).items():
            if not blocks:  # the front of measuring them again, on top of what was measured (free now)
                notes.append(f"{name}: every query is answered from earlier measurements (free); the front is "
                             "of measuring them again on top of those")
                blocks = list({b.fingerprint(table.domain): b for b in free}.values())
            front = pareto_front(Workload(table.domain, blocks), None, self.budget_unit.noise, self.budget_unit.delta,
                                 self.executor.model(table).measurements, table.contribution, sizing.objective,
                                 self.executor.rows(table), limit=PlanningLimit(ADAPTIVE_SECONDS, self.cancelled))
            rows += [(name, *row) for row in front.table()]
            notes += [f"{name}: {note}" for note in front.notes]
            if chart is not None:
                notes.append(f"chart written to {draw_front(front, chart)}")
        return Result(["table", *FRONT_COLUMNS], rows, kind="explain", notes=notes,
                      types=["VARCHAR", "DOUBLE", "DOUBLE", "DOUBLE", "VARCHAR", "VARCHAR", "VARCHAR"])

    def chart(self, script: str, path: str) -> str:
        """Draw expected error vs budget for a query's (or a workload's) plan and its runners-up."""
        statements = [classify(t) for t in split_statements(script)]
        sizing = self._sizing()
        if statements and isinstance(statements[0], BeginWorkload):
            sizing = self._workload_sizing(statements[0])
        queries = [take_weight(st.sql) for st in statements if not isinstance(st, (BeginWorkload, EndWorkload))]
        compiled = parts_of([self._compile(sql, label=f"q{i}", weight=w)
                             for i, (sql, w) in enumerate(queries, start=1)])
        plans = self.executor.plan(compiled, sizing)
        pending = self.executor.uncovered(compiled, sizing.measure_unmeasured)
        for name, (table, plan) in plans.items():
            blocks = pending[name][1]
            if blocks:
                curves = error_curves(Workload(table.domain, blocks), plan.cost, self.budget_unit.noise,
                                      self.budget_unit.delta, self.executor.model(table).measurements,
                                      sizing.objective, contribution=table.contribution)
                return str(draw_chart(curves, plan.cost, self.budget_unit.unit, path))
        raise ProgrammingError("nothing to chart: every query is answered from earlier measurements")

    def _explain_result(self, plans: dict) -> Result:
        text = "\n".join(f"[{name}] " + plan.explain() + ("" if table.graph is None else
                                                          "\n  " + table.graph.explain(table.role))
                         for name, (table, plan) in plans.items())
        cost = sum(plan.cost for _, plan in plans.values())
        remaining = self.ledger.remaining()
        verdict = "fits in" if cost <= remaining * (1 + 1e-9) else "EXCEEDS"
        text += f"\nTotal cost {self.amount(cost)}; {verdict} the remaining budget {self.amount(remaining)}"
        return Result(["plan"], [(line,) for line in text.splitlines()], kind="explain", plan=text)

    # --- the connection's resources ------------------------------------------------------
    def close(self) -> None:
        """Close the workspace, the ledger and the scan's connection."""
        self.workspace.close()
        self.ledger.close()
        getattr(self.backend, "close", lambda: None)()

    def interrupt(self) -> None:
        """Stop the running statement's database work (from another thread)."""
        self.workspace.interrupt()
        getattr(self.backend, "interrupt", lambda: None)()

    def scan_progress(self) -> float:
        """How far the running scan of protected data has got, in percent (-1: unknown)."""
        return getattr(self.backend, "progress", lambda: -1.0)()


def _check_unicode(text: str) -> None:
    """Refuse text DuckDB cannot take: a lone surrogate (e.g. from undecodable bytes on a command line)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ProgrammingError(f"the SQL or a parameter is not valid Unicode (a lone surrogate at character "
                               f"{e.start + 1})") from None
