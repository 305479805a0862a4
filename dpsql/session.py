"""A session: runs statements against a database under one privacy budget.

Public SQL (statements that name no protected table) runs in the analyst's
workspace (`dpsql.workspace`), apart from the protected data, if the allowlist
of `dpsql.sql.public` allows it. A query on a protected table is compiled to blocks; blocks the session's model already
determines are answered for free; the rest are planned, their marginals
computed in the database, the ledger charged together with the noisy
measurements, and only then are answers assembled from the refitted model.
Any error raised before the charge spends nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np
from sqlglot import exp

from dpsql.backends import Backend, DuckDBBackend
from dpsql.budget import Sizing, checked
from dpsql.catalog import Catalog, Table
from dpsql.sql.compiler import CompiledQuery, compile_tree, parse_statement
from dpsql.errors import BudgetExceededError, Error, NotSupportedError, OperationalError, ProgrammingError
from dpsql.ledger import Entry, Ledger
from dpsql.sql.lookups import PublicTables
from dpsql.sql.public import ProtectedNames
from dpsql.result import Result, aggregate_answers, answered_by, assemble
from dpsql.backends.scan_speed import duckdb_scan_speed
from dpsql.workspace import Workspace
from dpsql.sql.statements import (
    BeginWorkload,
    EndWorkload,
    Explain,
    SetOption,
    Sql,
    classify,
    split_statements,
    take_weight,
)
from mechanisms.accounting import Amount, epsilon_delta_to_zcdp
from mechanisms.reconstruction.answering import AnsweringModel
from mechanisms.measurement import GAUSSIAN, LAPLACE, Measurement, measure
from mechanisms.noise import RandomSource
from mechanisms.pgm import GraphicalModel
from mechanisms.reconstruction import Estimator, LeastSquaresModel
from mechanisms.workload import Block, Term, Workload
from planner.deadline import Deadline, PlanningCancelled
from planner.families import split
from planner.adaptive import AIM
from planner.plan import Plan
from planner.chart import draw_chart, error_curves
from planner.planner import budget_for_accuracy, plan_workload
from planner.plan import TOTAL_SQUARED
from planner.timing import ScanSpeed
from planner.timing import predict as predict_time

DEFAULT_QUERY_EPSILON = 0.1
# The default planning time budget (CPU seconds of the planning thread): a base and a share per query.
PLANNING_SECONDS, PLANNING_SECONDS_PER_QUERY = 1.0, 0.1


@dataclass(frozen=True)
class BudgetStatus:
    total: Amount
    spent: Amount
    remaining: Amount


def _substitute(tree: exp.Expression, params: Sequence[Any] | dict | None) -> exp.Expression:
    """Bind qmark (?) or named ($name) parameters as literals."""
    if not params:
        if tree.find(exp.Placeholder):
            raise ProgrammingError("the query has parameters but none were given")
        return tree
    positional = iter(params) if not isinstance(params, dict) else None

    def bind(node):
        if not isinstance(node, exp.Placeholder):
            return node
        if positional is not None:
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
    """Executes statements for one connection; holds the models and the ledger.

    `backend` measures protected tables; `workspace` runs public SQL (see `dpsql.workspace`).
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
    ):
        self.workspace = workspace
        self.catalog = catalog
        self.ledger = ledger
        self.noise = ledger.noise
        self.delta = ledger.delta
        self.dialect = dialect
        self.backend = backend
        self.rng = RandomSource(seed)
        self.models: dict[str, LeastSquaresModel] = {}
        self.generative: dict[str, list[Estimator]] = {}  # per table: models fitted by adaptive releases
        self.query_share = self.share(query_epsilon, query_rho, DEFAULT_QUERY_EPSILON)
        self.objective = TOTAL_SQUARED
        self.max_rmse: float | None = None
        self._workload: BeginWorkload | None = None
        self._pending: list[str] = []
        self._compiled: dict[tuple[str, str, float], CompiledQuery] = {}  # within one `execute`
        self.protected = ProtectedNames(self.catalog, self.dialect)
        # Called right before a statement charges; raising there cancels it with nothing spent.
        self.before_charge: Callable[[], None] | None = None
        # Asked while planning: True stops planning at once (e.g. Ctrl-C in the shell).
        self.cancelled: Callable[[], bool] | None = None
        self.planning_seconds: float | None = None  # None: by the workload's size (`_deadline`); 0: no limit
        # Shown progress of long releases (AIM, RAP): called with (fraction done, message).
        self.progress: Callable[[float, str], None] | None = None

    # --- budget ------------------------------------------------------------------
    def share(self, epsilon: float | None, rho: float | None, default: float | None = None) -> float:
        """A budget share in the ledger's unit, from ε (at the session's δ) or ρ (each checked)."""
        if rho is not None:
            if self.noise == LAPLACE:
                raise ProgrammingError("this session uses pure ε-DP: give shares as epsilon, not rho")
            return checked("rho", rho)
        epsilon = checked("epsilon", default if epsilon is None else epsilon)
        if self.noise == LAPLACE:
            return epsilon
        return epsilon_delta_to_zcdp(epsilon, self.delta)

    def amount(self, share: float) -> Amount:
        """A share of the ledger's unit, in both units."""
        return Amount.pure(share) if self.noise == LAPLACE else Amount.zcdp(share, self.delta)

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
            self.planning_seconds = checked("planning_seconds", value, "dpsql.planning_seconds") if value else 0.0
        else:
            self.objective = str(value)

    def _sizing(self) -> Sizing:
        """How a statement's new measurements are sized: the query share, or an accuracy target."""
        sizing = Sizing(self.query_share, self.objective)
        return sizing.with_accuracy(self.max_rmse) if self.max_rmse is not None else sizing

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
                results.extend(self._statement(st, params))
        except Error as e:  # what earlier statements released (and paid for) stays available
            e.partial_results = results
            raise
        finally:
            self._compiled.clear()
        return results

    def _validate(self, statements: list) -> None:
        """Compile every DP statement of a script (and guard public ones) before running any,
        so that a bad statement late in a script cannot follow charged ones; the compiled
        queries are kept for the run (`_compiled`), so each statement is compiled once."""
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
                    self._prepare(sql, None, weight)

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
            return [Result(["setting", "value"], [(f"dpsql.{st.name}", st.value)], kind="status")]
        if self._workload is not None:
            if isinstance(st, Explain) or params:
                raise ProgrammingError("inside a workload, list plain SELECT queries without parameters")
            self._pending.append(st.sql)
            return []
        if isinstance(st, Explain):
            return [self.explain(st.sql)]
        return [self.query(st.sql, params)]

    def query(self, sql: str, params: Sequence[Any] | dict | None = None) -> Result:
        """One statement: a DP query on a protected table, or plain SQL on public tables."""
        sql, weight = take_weight(sql)
        if self.protected.reference(sql) is None:
            return self._public(sql, params)
        compiled = self._prepare(sql, params, weight)
        return self._execute([compiled], sql, self._sizing())[0]

    def _prepare(self, sql: str, params, weight: float, label: str = "") -> CompiledQuery:
        """A statement that mentions a protected table, compiled as a DP query (or refused)."""
        protected = self.protected.reference(sql)
        tree = parse_statement(sql, self.dialect)
        if not isinstance(tree, exp.Select):
            raise NotSupportedError(
                f"protected table {protected!r} is read-only through dpsql (the data owner "
                f"administers it in DuckDB); only SELECT with aggregates is allowed"
            )
        return self._compile(sql, params, label, weight)

    def _compile(self, sql: str, params=None, label: str = "", weight: float = 1.0) -> CompiledQuery:
        """Compile a DP query (its blocks' weights multiplied by `weight`), then evaluate the
        outer template once on zeros: errors there (HAVING, ORDER BY, LIMIT on noisy values)
        must surface before anything is charged."""
        key = (sql, label, weight)
        if not params and key in self._compiled:
            return self._compiled[key]
        tree = _substitute(parse_statement(sql, self.dialect), params)
        lookups = PublicTables(self.workspace.prepare(tree), self.protected.names)
        try:
            compiled = compile_tree(tree, sql, self.catalog, label, lookups)
        except RecursionError:
            raise ProgrammingError("the query is nested too deeply to compile; simplify its conditions") from None
        for b in compiled.blocks:
            b.weight *= weight
        zeros = np.zeros(compiled.rows)
        assemble(compiled, [(zeros, zeros) for _ in compiled.aggregates])
        if not params:
            self._compiled[key] = compiled
        return compiled

    def _public(self, sql: str, params) -> Result:
        return self.workspace.run(sql, params)

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

    # --- DP execution -----------------------------------------------------------------
    def model(self, table: Table) -> LeastSquaresModel:
        key = table.name.lower()
        if key not in self.models:
            stored = self.ledger.measurements(table.name, table.signature())
            self.models[key] = LeastSquaresModel(table.domain, stored)
        return self.models[key]

    def answering(self, table: Table) -> AnsweringModel:
        """Least squares over the measurements, then the table's generative models (AIM, RAP)."""
        key = table.name.lower()
        if key not in self.generative:
            self.generative[key] = self._stored_generative(table)
        return AnsweringModel(self.model(table), self.generative[key])

    def _stored_generative(self, table: Table) -> list[Estimator]:
        """The graphical model of earlier AIM/MST releases on the table, refitted from the ledger's marginals.

        (Post-processing of stored measurements. RAP's relaxed data lives only in the session that ran it.)
        """
        adaptive = {AIM, "mst"}
        if not any(c.table == table.name and c.detail in adaptive for c in self.ledger.charges()):
            return []
        marginals = [m for m in self.model(table).measurements if m.is_marginal and m.clique]
        return [GraphicalModel.fit(table.domain, marginals)] if marginals else []

    def _uncovered(self, queries: list[CompiledQuery], exact: bool = False) -> dict[str, tuple[Table, list, list]]:
        """Per table: (table, blocks that need measurements, blocks answered free); with `exact`, only
        blocks least squares determines are free (a generative model does not answer them)."""
        out: dict[str, tuple[Table, dict[str, Any], list]] = {}
        for q in queries:
            table = q.table
            model = self.model(table) if exact else self.answering(table)
            _, needed, free = out.setdefault(table.name, (table, {}, []))
            for b in q.blocks:
                if model.covers(b):
                    free.append(b)
                else:
                    needed.setdefault(b.fingerprint(table.domain), b)
        return {name: (t, list(needed.values()), free) for name, (t, needed, free) in out.items()}

    def bounding_key(self, table: Table) -> str | None:
        """The ledger's secret bounding key for a table with a privacy unit (None: row-level table)."""
        return None if table.unit is None else self.ledger.bounding_key()

    def _existing(self, table: Table) -> list[Measurement]:
        """Everything measured on the table so far (planning needs their variances, not their values)."""
        return self.model(table).measurements

    def _rows(self, table: Table) -> float | None:
        """The table's size as declared public, or as already released (free: post-processing); else None.

        Planning input only: for costing AIM and RAP and predicting scan time."""
        if table.public_rows is not None:
            return float(table.public_rows)
        total = Block("rows", (), [Term(1.0, {})])
        model = self.answering(table)
        return max(float(model.answer(total)[0][0]), 1.0) if model.covers(total) else None

    def _plan(self, queries: list[CompiledQuery], sizing: Sizing) -> dict[str, tuple[Table, Plan]]:
        """Plan the not-yet-determined blocks of each table.

        With a budget, it is split across tables optimally; with `max_rmse`
        instead, each table gets the least budget meeting the target.
        """
        try:
            return self._plan_within(self._deadline(len(queries)), queries, sizing)
        except PlanningCancelled:
            raise OperationalError("planning was cancelled; nothing was charged") from None

    def _plan_within(self, deadline: Deadline, queries: list[CompiledQuery], sizing: Sizing):
        budget, objective, max_rmse = sizing.budget, sizing.objective, sizing.max_rmse
        pending = self._uncovered(queries, sizing.measure_unmeasured)
        needing = {name: (t, bs) for name, (t, bs, _) in pending.items() if bs}
        shares: dict[str, float] = {}
        if len(needing) == 1 and max_rmse is None:
            shares[next(iter(needing))] = budget
        elif needing and max_rmse is None:
            unit = [self._unit_error(t, bs, objective, deadline) for t, bs in needing.values()]
            for name, fraction in zip(needing, split(unit, self.noise)):
                shares[name] = budget * fraction
        plans = {}
        for name, (table, blocks, free) in pending.items():
            workload = Workload(table.domain, blocks)
            rows = self._rows(table)
            if not blocks:
                plan = Plan(self.noise, self.delta, [], {}, {}, [], "answered from earlier measurements")
            elif max_rmse is not None:
                try:
                    _, plan = budget_for_accuracy(
                        workload, max_rmse, self.noise, self.delta, self._existing(table), table.contribution,
                        deadline,
                    )
                except ArithmeticError as e:
                    raise BudgetExceededError(f"an RMSE of at most {max_rmse:g} is out of reach ({e}); ask for a "
                                              "larger max_rmse; nothing was charged") from None
            else:
                plan = plan_workload(
                    workload, shares[name], self.noise, self.delta, self._existing(table), objective,
                    rows=rows, contribution=table.contribution, deadline=deadline,
                )
            if blocks:
                plan.time = predict_time(plan, table.domain, rows, self._scan_speed())
            model = self.answering(table)
            for b in free:
                plan.expected_rmse[b.name] = float(np.sqrt(np.mean(model.variance(b))))
                plan.free_source[b.name] = model.source_name(b)
            plan.free = [b.name for b in free]
            plans[name] = (table, plan)
        return plans

    def _scan_speed(self) -> ScanSpeed | None:
        """The backend's marginal-scan speed, measured on synthetic data (None: not known for this engine)."""
        return duckdb_scan_speed() if isinstance(self.backend, DuckDBBackend) else None

    def _deadline(self, queries: int) -> Deadline:
        """This statement's planning time budget: `dpsql.planning_seconds`, or by default
        `PLANNING_SECONDS` plus `PLANNING_SECONDS_PER_QUERY` per query; Ctrl-C stops it too."""
        seconds = self.planning_seconds
        if seconds is None:
            seconds = PLANNING_SECONDS + PLANNING_SECONDS_PER_QUERY * queries
        return Deadline(seconds or None, self.cancelled)

    def _unit_error(self, table: Table, blocks, objective: str, deadline: Deadline) -> float:
        plan = plan_workload(
            Workload(table.domain, blocks), 1.0, self.noise, self.delta, (), objective, contribution=table.contribution,
            deadline=deadline,
        )
        return sum(b.weight * b.num_rows(table.domain) * plan.expected_rmse[b.name] ** 2 for b in blocks)

    def _execute(self, queries: list[CompiledQuery], statement: str, sizing: Sizing) -> list[Result]:
        """Plan, measure, answer, and only then charge: one result per query.

        New measurements are released into models apart from the session's; every answer
        is assembled from them; only then is the ledger charged (one atomic entry per
        table) and the models kept. Whatever fails before the charge (a block the
        measurements would not determine, a model fit, assembly) spends nothing, and a
        charge is recorded only for answers already in hand.
        """
        plans = self._plan(queries, sizing)
        total = sum(plan.cost for _, plan in plans.values())
        if total > 0:
            self._check_affordable(total, sizing.max_rmse)
        released = {}
        for name, (table, plan) in plans.items():
            if plan.adaptive is not None:
                released[name] = (table, plan, *self._run_adaptive(table, plan))
            elif plan.measurements:
                counts = self.backend.marginals(table, [m.clique for m in plan.measurements], self.bounding_key(table))
                measurements = [
                    pm.release(counts[pm.clique], table.domain, self.noise, self.rng) for pm in plan.measurements
                ]
                released[name] = (table, plan, measurements, None)
        models = {name: self._with(table, measurements, estimator)
                  for name, (table, _, measurements, estimator) in released.items()}
        text = "\n".join(plan.explain() for _, plan in plans.values())
        results = []
        for q in queries:
            model = models.get(q.table.name) or self.answering(q.table)
            result = assemble(q, aggregate_answers(q, model))
            result.plan = text
            result.answered_by = answered_by(q, model)
            results.append(result)
        if released:
            if self.before_charge is not None:
                self.before_charge()  # the last point a statement can be cancelled: nothing charged yet
            self.ledger.charge_all([
                Entry(plan.cost, statement, table.name, table.signature(), measurements,
                      plan.adaptive.procedure.name if plan.adaptive is not None else plan.chosen)
                for table, plan, measurements, _ in released.values()])
            for name, (table, _, _, _) in released.items():
                self.models[table.name.lower()] = models[name].exact
                self.generative[table.name.lower()] = models[name].generative
        for i, result in enumerate(results):
            result.charged = total if i == 0 else 0.0
            result.charge_text = self._charge_text(result.charged)
        return results

    def _with(self, table: Table, measurements: list, estimator: Estimator | None) -> AnsweringModel:
        """The table's answering model with new measurements (and a new generative model) added,
        apart from the session's own until the charge is recorded."""
        current = self.answering(table)
        exact = LeastSquaresModel(table.domain, [*current.exact.measurements, *measurements])
        return AnsweringModel(exact, [*current.generative, *([estimator] if estimator is not None else [])])

    def _run_adaptive(self, table: Table, plan: Plan) -> tuple[list, Estimator]:
        """Execute the plan's adaptive procedure on exact counts from the database (nothing leaves yet)."""
        run = plan.adaptive
        self.answering(table)  # loads earlier generative models before this release joins the ledger
        release = run.procedure.run(
            table.domain, list(run.blocks), run.share, lambda cliques: self.backend.marginals(table, cliques),
            self.rng, self._rows(table), self.progress,
        )
        return release.measurements, release.estimator

    def dropped_rows(
        self, table: str, epsilon: float | None = None, rho: float | None = None, cap: int | None = None
    ) -> Result:
        """A charged DP count of the rows that bounding to k rows per privacy unit drops.

        Each unit counts min(rows − k, cap), cap = k by default: a unit's excess is
        unbounded, so it is capped, and one unit then moves the count by at most cap,
        the sensitivity the noise is calibrated to (k, like every other measurement of
        the table). The count is exact when no unit has more than k + cap rows and a
        lower bound otherwise; cap = 1 counts the units that lost rows. Rows without a
        unit are not counted. Spends ε/ρ (default: the query share), charged before release.
        """
        spec = self.catalog.get(table)
        if spec is None:
            raise ProgrammingError(f"{table!r} is not a protected table of the catalog")
        if spec.unit is None:
            raise ProgrammingError(f"{spec.name!r} declares no privacy unit: nothing is bounded, nothing dropped")
        cap = spec.contribution if cap is None else cap
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise ProgrammingError(f"cap must be a positive integer, got {cap!r}")
        share = self.query_share if epsilon is None and rho is None else self.share(epsilon, rho)
        self.ledger.check(share)
        exact = self.backend.dropped_rows(spec, cap)
        values, cal = measure(np.asarray([exact]), None, self.noise, share, self.rng, cap)
        if self.before_charge is not None:
            self.before_charge()
        self.ledger.charge(share, f"DROPPED ROWS {spec.name} (cap {cap})", spec.name, spec.signature(), [],
                           detail="dropped rows")
        result = Result(["dropped_rows"], [(float(values[0]),)], [(float(np.sqrt(cal.variance)),)], charged=share)
        result.charge_text = self._charge_text(share)
        return result

    def _check_affordable(self, cost: float, max_rmse: float | None) -> None:
        if max_rmse is not None and cost > self.ledger.remaining() * (1 + 1e-9):
            raise BudgetExceededError(
                f"an RMSE of at most {max_rmse:g} for every query needs {self.amount(cost)}, but only "
                f"{self.amount(self.ledger.remaining())} remains: impossible within the budget; nothing was charged"
            )
        self.ledger.check(cost)

    def _charge_text(self, charged: float) -> str:
        remaining = self.budget().remaining
        spent = "no charge (answered from earlier measurements)" if charged == 0 else f"charged {self.amount(charged)}"
        return f"{spent}; remaining {remaining}"

    def _workload_sizing(self, begin: BeginWorkload) -> Sizing:
        sizing = self._sizing()
        if begin.epsilon or begin.rho:
            sizing = sizing.with_budget(self.share(begin.epsilon, begin.rho, None))
        if begin.delta is not None and begin.epsilon is not None and self.noise == GAUSSIAN:
            sizing = sizing.with_budget(epsilon_delta_to_zcdp(begin.epsilon, begin.delta))
        if begin.max_rmse is not None:
            sizing = sizing.with_accuracy(begin.max_rmse)
        if begin.objective is not None:
            sizing = replace(sizing, objective=begin.objective)
        return sizing

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
        sizing = self._workload_sizing(begin)
        if begin.explain:
            return [self._explain_result(self._plan(compiled, sizing))]
        statement = "BEGIN WORKLOAD; " + "; ".join(queries) + "; END WORKLOAD"
        return self._execute(compiled, statement, sizing)

    def explain(self, sql: str) -> Result:
        """The plan for a query (or EXPLAIN of a public query), without reading data or spending."""
        sql, weight = take_weight(sql)
        if self.protected.reference(sql) is None:
            return self.workspace.run(sql, explain=True)
        compiled = self._compile(sql, weight=weight)
        return self._explain_result(self._plan([compiled], self._sizing()))

    def chart(self, script: str, path: str) -> str:
        """Draw expected error vs budget for a query's (or a workload's) plan and its runners-up."""
        statements = [classify(t) for t in split_statements(script)]
        sizing = self._sizing()
        if statements and isinstance(statements[0], BeginWorkload):
            sizing = self._workload_sizing(statements[0])
        queries = [take_weight(st.sql) for st in statements if not isinstance(st, (BeginWorkload, EndWorkload))]
        compiled = [self._compile(sql, label=f"q{i}", weight=w) for i, (sql, w) in enumerate(queries, start=1)]
        plans = self._plan(compiled, sizing)
        pending = self._uncovered(compiled, sizing.measure_unmeasured)
        for name, (table, plan) in plans.items():
            blocks = pending[name][1]
            if blocks:
                curves = error_curves(Workload(table.domain, blocks), plan.cost, self.noise, self.delta,
                                      self._existing(table), sizing.objective, contribution=table.contribution)
                unit = "ρ" if self.noise == GAUSSIAN else "ε"
                return str(draw_chart(curves, plan.cost, unit, path))
        raise ProgrammingError("nothing to chart: every query is answered from earlier measurements")

    def _explain_result(self, plans: dict) -> Result:
        text = "\n".join(f"[{name}] " + plan.explain() for name, (_, plan) in plans.items())
        cost = sum(plan.cost for _, plan in plans.values())
        remaining = self.ledger.remaining()
        verdict = "fits in" if cost <= remaining * (1 + 1e-9) else "EXCEEDS"
        text += f"\nTotal cost {self.amount(cost)}; {verdict} the remaining budget {self.amount(remaining)}"
        return Result(["plan"], [(line,) for line in text.splitlines()], kind="explain", plan=text)


def _check_unicode(text: str) -> None:
    """Refuse text DuckDB cannot take: a lone surrogate (e.g. from undecodable bytes on a command line)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ProgrammingError(f"the SQL or a parameter is not valid Unicode (a lone surrogate at character "
                               f"{e.start + 1})") from None
