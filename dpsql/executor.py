"""The executor: plan → release (charged) → answer → keep, for compiled DP queries.

It owns what one connection knows about its protected tables: the least-squares model
of each table's measurements (loaded from the ledger, so earlier answers stay free) and
the generative models of adaptive releases. A statement goes through these steps:

1. **plan** (`plan`): the blocks no model determines yet are planned per table (data-free,
   bounded by the planning budget, `planner.planning_limit`); blocks a model determines are
   free unless far weaker than the share buys (`planner.remeasure`); the cost is checked;
2. **release, charged** (`charged`): the backend computes the exact marginals of the planned
   cliques in one scan per table, reading only rows in the bins the measurements read
   (`measurement.support`), exact noise is added (or an adaptive procedure, AIM or RAP, runs
   on whole marginals), and the ledger records the charges and the noisy measurements (one
   atomic entry per statement);
3. **answer** (`answered`): every query's result is read off the models that now hold the
   new measurements, and its outer expressions are evaluated;
4. **keep**: those models are the connection's, so asking again is free.

**Noise is born charged.** `charged` is the one place a statement's noise is drawn: nothing
computed from noise (an estimate, an outer expression, a blend, a key set's compilation, an error
message) happens between the first draw and the ledger's commit, except what the release itself
needs to be recorded. From the first draw the statement is paid for: if drawing fails part-way
(an adaptive procedure's step, a scan between its rounds), the planned cost is charged, nothing is
kept, and a dpsql error with no value in it is raised — so no retry can draw fresh noise for free.
Whatever fails before the first draw (planning, the scan) spends nothing. After the charge, a failure
to form an answer (`answered`) is a dpsql error that quotes no value, and asking again is free and
fails or answers the same way. Every noise-drawing release (queries, workloads, key releases,
dropped-row counts, continual EMITs, syntheses) goes through `charged`; `tests/test_charge_order.py`
fails each step after the first draw in turn, on every statement kind.

Key releases (`dpsql.releases.keys`) go through `charged` like every other release.

A table of local-DP reports (`Table.answered_by_reports`) spends nothing here: its queries are answered
from the protocol's unbiased estimate of its reports (`mechanisms.ldp.answering`), apart from the
plan. A hybrid table (a local table with an `opt_in` central table) is planned, measured and
charged as a query over its opt-in table, whose answers are then blended, after the charge, with
the reports' (`mechanisms.ldp.hybrid_answers`; AVG by KVH or PWH under `hybrid_mean`); one whose
table holds fewer than two reports is refused before anything is planned.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Callable, TypeVar

import numpy as np

from dpsql.backends import Backend, DuckDBBackend
from dpsql.backends.scan_speed import duckdb_scan_speed
from dpsql.budget.units import Budget, Sizing
from dpsql.tables.catalog import Catalog
from dpsql.tables.table import Table
from dpsql.errors import BudgetExceededError, NotSupportedError, OperationalError
from dpsql.tables.key_domains import over_current
from dpsql.budget.ledger import Ledger
from dpsql.budget.ledger_entries import KEYS, MODEL, Entry, Record, model_record
from dpsql.budget.noise_charges import charge_of, charge_words, check_share, cheaper_noise, cheaper_target, fits
from dpsql.answers.result import Result, aggregate_answers, answered_by, assemble, describe_failure
from dpsql.sql.compiler import CompiledQuery
from mechanisms.accounting import Amount
from mechanisms.ldp.answering import local_answers
from mechanisms.ldp.hybrid_answers import HybridAnswers
from mechanisms.measurement import LAPLACE, Measurement, support
from mechanisms.noise import RandomSource
from mechanisms.pgm import AutoEstimator, GraphicalModel, GraphicalModelEstimator
from mechanisms.rap import RelaxedData
from mechanisms.reconstruction import AnsweringModel, Estimator, LeastSquaresModel
from mechanisms.workload import Block, Term, Workload
from planner.adaptive import AIM
from planner.planning_limit import PlanningLimit, PlanningCancelled
from planner.families import split
from planner.fairness import floored_split
from planner.plan import TOTAL_SQUARED, Plan
from planner.planner import budget_for_accuracy, plan_workload
from planner.remeasure import Remeasure
from planner.timing import ScanSpeed
from planner.timing import predict as predict_time

# The default planning budget (seconds of work on the reference machine, `planner.planning_limit`): a base and a
# share per query.
PLANNING_SECONDS, PLANNING_SECONDS_PER_QUERY = 1.0, 0.1
# Charges of these procedures leave a graphical model that later sessions refit from the ledger.
_REFITTED = {AIM, "mst"}


@dataclass
class Hooks:
    """How a surface (the shell) takes part in running a statement."""

    # Called right before a statement charges; raising there cancels it with nothing spent.
    before_charge: Callable[[], None] | None = None
    # Asked while planning: True stops planning at once (e.g. Ctrl-C in the shell).
    cancelled: Callable[[], bool] | None = None
    # Shown progress of long releases (AIM, RAP): called with (fraction done, message).
    progress: Callable[[float, str], None] | None = None


@dataclass(frozen=True)
class Release:
    """One table's new measurements (and generative model, or a record such as a key set), drawn and
    not yet charged: only `Executor.charged` holds one between the draw and the charge."""

    table: Table
    cost: float
    statement: str
    measurements: list[Measurement]
    estimator: Estimator | None
    detail: str
    record: Record | None = None
    pieces: tuple | None = None  # the mechanisms it is (`Entry.pieces`); None: the Gaussian of its cost


@dataclass(frozen=True)
class Pending:
    """A release planned and priced whose noise is not drawn yet: `draw` scans and draws it."""

    table: Table
    cost: float
    statement: str
    detail: str
    draw: Callable[[], Release]
    pieces: tuple | None = None  # the mechanisms it will be (`Entry.pieces`)


T = TypeVar("T")
_RESULTS_KEPT = 256  # results a connection keeps for re-asks (then it starts again)
_VOLATILE = re.compile(r"now|current_|random|uuid|today|timestamp|nextval|setseed", re.IGNORECASE)


def _copy(result: Result) -> Result:
    """A result that shares no list with `result` (a caller may change its own)."""
    return replace(result, rows=list(result.rows), stderr=list(result.stderr), types=list(result.types),
                   answered_by=list(result.answered_by), dp=list(result.dp), notes=list(result.notes))


class Executor:
    """Runs compiled DP queries for one connection (see the module docstring)."""

    def __init__(self, catalog: Catalog, ledger: Ledger, backend: Backend, budget: Budget, rng: RandomSource):
        self.catalog, self.ledger, self.backend, self.budget, self.rng = catalog, ledger, backend, budget, rng
        self.hooks = Hooks()
        self.planning_seconds: float | None = None  # None: by the workload's size (`planning_limit`); 0: no limit
        self.models: dict[str, LeastSquaresModel] = {}
        self._versions: dict[str, tuple | None] = {}  # per table: the ledger version its model was read at
        self.generative: dict[str, list[Estimator]] = {}  # per table: models fitted by adaptive releases
        self._models_seen: dict[str, tuple[str, ...]] = {}  # per table: the ledger's models `generative` holds
        self.estimator = "least_squares"  # SET dpsql.estimator: or "pgm", "auto" (a graphical model over all)
        self.hybrid_mean = "blend"  # SET dpsql.hybrid_mean: AVG over a hybrid table, or "kvh", "pwh"
        self._fitted: dict[str, tuple[int, GraphicalModelEstimator]] = {}  # per table: (measurements, the fit)
        self._results: dict[int, tuple[CompiledQuery, tuple, str, Result]] = {}  # see `_answer`
        self.remeasure = Remeasure(budget.noise)

    # --- what is known ------------------------------------------------------------------
    def model(self, table: Table) -> LeastSquaresModel:
        """Least squares over every measurement of the table in the ledger, read again whenever another
        connection (another analyst, another process) has charged since: what anyone paid for is free here."""
        key = table.name.lower()
        version = self.ledger.version()
        if key not in self.models or self._versions.get(key) != version:
            stored = self.ledger.stored_measurements(table.name, table.signature())
            # Over key columns, as the keys released since read them (`dpsql.tables.key_domains`).
            current = [over_current(m, table, then) for m, then in stored] if table.key_counts() else \
                [m for m, _ in stored]
            self.models[key] = LeastSquaresModel(table.domain, [m for m in current if m is not None])
            self._versions[key] = self.ledger.written_version
        return self.models[key]

    def answering(self, table: Table) -> AnsweringModel:
        """Least squares over the measurements, then the table's generative models (AIM, RAP): read again
        when a model was released since (by any connection)."""
        key = table.name.lower()
        released = self._released_models(table)
        if key not in self.generative or self._models_seen.get(key) != released:
            self.generative[key] = self._stored_generative(table)
            self._models_seen[key] = released
        return AnsweringModel(self.model(table), self.generative[key])

    def _released_models(self, table: Table) -> tuple[str, ...]:
        return tuple(name for _, name, _ in self.ledger.records(MODEL, table.name))

    def _stored_generative(self, table: Table) -> list[Estimator]:
        """The graphical model of earlier AIM/MST releases on the table, refitted from the ledger's marginals,
        and the relaxed data of earlier RAP releases, as stored (post-processing of what was released)."""
        models: list[Estimator] = []
        if any(c.table == table.name and c.detail in _REFITTED for c in self.ledger.charges()):
            marginals = [m for m in self.model(table).measurements if m.is_marginal and m.clique]
            models += [GraphicalModel.fit(table.domain, marginals)] if marginals else []
        relaxed = (RelaxedData.from_spec(spec) for spec in self.ledger.models(table.name, table.signature()))
        return models + [m for m in relaxed if m.domain == table.domain]

    def bounding_key(self, table: Table) -> str | None:
        """The ledger's secret bounding key for a table with a privacy unit (None: row-level table)."""
        return self.ledger.bounding_key() if table.needs_bounding_key else None

    def rows(self, table: Table) -> float | None:
        """The table's size as declared public, or as already released (free: post-processing); else None.

        Planning input only: for costing AIM and RAP and predicting scan time."""
        if table.public_rows is not None:
            return float(table.public_rows)
        total = Block("rows", (), [Term(1.0, {})])
        model = self.answering(table)
        return max(float(model.answer(total)[0][0]), 1.0) if model.covers(total) else None

    def uncovered(self, queries: list[CompiledQuery], sizing: Sizing | None = None) -> dict[str, tuple[Table, list, list]]:
        """Per table: (table, blocks to measure, blocks free: least squares' only if `measure_unmeasured`; `planner.remeasure`)."""
        out: dict[str, tuple[Table, dict[str, Any], list]] = {}
        share = sizing and sizing.budget and sizing.budget / max(len(queries), 1)  # the ledger is read only if weak
        for q in queries:
            if q.noisy_max is not None:  # its counts are never measured: only the pick is released
                raise NotSupportedError(f"{q.sql.strip()!r} is answered by report-noisy-max in a statement of its "
                                        "own (not in a workload, a subquery or EXPLAIN PARETO)")
            table = q.table
            model = self.model(table) if sizing and sizing.measure_unmeasured else self.answering(table)
            _, needed, free = out.setdefault(table.name, (table, {}, []))
            for b in q.blocks:
                if model.covers(b) and not (share and self.remeasure.weak(self.model(table), b, share, table.contribution)
                                            and fits(self.ledger, sizing.budget)):
                    free.append(b)
                else:
                    needed.setdefault(b.fingerprint(table.domain), b)
        return {name: (t, list(needed.values()), free) for name, (t, needed, free) in out.items()}

    # --- 1. plan --------------------------------------------------------------------------
    def plan(self, queries: list[CompiledQuery], sizing: Sizing, timed: bool = False) -> dict[str, tuple[Table, Plan]]:
        """Plan the not-yet-determined blocks of each table.

        With a budget, it is split across tables optimally; with `max_rmse` instead, each
        table gets the least budget meeting the target. Reads no data, spends nothing.
        `timed` adds the predicted execution time (for EXPLAIN: its speed calibrations run
        once per machine (`planner.speed_cache`), never on the path of an answer).
        """
        queries = [self.central_part(q) for q in queries if not _reports_only(q)]  # reports are not measured here
        try:
            return self._plan_within(self.planning_limit(len(queries)), queries, sizing, timed)
        except PlanningCancelled:
            raise OperationalError("planning was cancelled; nothing was charged") from None

    def planning_limit(self, queries: int) -> PlanningLimit:
        """A statement's planning budget: `planning_seconds`, or by default `PLANNING_SECONDS`
        plus `PLANNING_SECONDS_PER_QUERY` per query; the cancellation hook stops it too."""
        seconds = self.planning_seconds
        if seconds is None:
            seconds = PLANNING_SECONDS + PLANNING_SECONDS_PER_QUERY * queries
        return PlanningLimit(seconds or None, self.hooks.cancelled)

    def _plan_within(self, limit: PlanningLimit, queries: list[CompiledQuery], sizing: Sizing, timed: bool):
        noise, delta = self.budget.noise, self.budget.delta
        pending = self.uncovered(queries, sizing)
        needing = {name: (t, bs) for name, (t, bs, _) in pending.items() if bs}
        shares: dict[str, float] = {}
        if len(needing) == 1 and sizing.max_rmse is None:
            shares[next(iter(needing))] = sizing.budget
        elif needing and sizing.max_rmse is None:
            unit = [self._unit_error(t, bs, sizing.objective, limit) for t, bs in needing.values()]
            fractions = split(unit, noise)
            if sizing.objective == TOTAL_SQUARED:  # each table at least its queries' even share (planner.fairness)
                asked = [len(_asked(queries, t, bs)) for t, bs in needing.values()]
                fractions = floored_split(unit, [n / sum(asked) for n in asked], noise) or fractions
            for name, fraction in zip(needing, fractions):
                shares[name] = sizing.budget * fraction
        plans = {}
        for name, (table, blocks, free) in pending.items():
            workload = Workload(table.domain, blocks)
            rows = self.rows(table)
            again = self.remeasure.reasons(self.model(table), blocks, sizing.budget, len(queries), table.contribution)
            existing = () if again else self.model(table).measurements  # planned fresh (`planner.remeasure`)
            if not blocks:
                plan = Plan(noise, delta, [], {}, {}, [], "answered from earlier measurements")
            elif sizing.max_rmse is not None:
                try:
                    _, plan = budget_for_accuracy(workload, sizing.max_rmse, noise, delta, existing,
                                                  table.contribution, limit)
                    plan = cheaper_target(plan, self.ledger, self.budget, lambda: budget_for_accuracy(
                        workload, sizing.max_rmse, LAPLACE, delta, existing, table.contribution, limit)[1])
                except ArithmeticError as e:
                    raise BudgetExceededError(f"an RMSE of at most {sizing.max_rmse:g} is out of reach ({e}); ask "
                                              "for a larger max_rmse; nothing was charged") from None
            else:
                asked = _asked(queries, table, blocks)
                plan = plan_workload(workload, shares[name], noise, delta, existing, sizing.objective, rows=rows,
                                     contribution=table.contribution, limit=limit, queries=asked)
                plan = cheaper_noise(plan, self.ledger, self.budget, shares[name], blocks, table.domain, partial(
                    plan_workload, workload, noise=LAPLACE, delta=delta, existing=existing, objective=sizing.objective,
                    contribution=table.contribution, limit=limit, queries=asked))
            if blocks and timed:
                plan.time = predict_time(plan, table.domain, rows, self._scan_speed())
            model = self.answering(table)
            for b in free:
                plan.expected_rmse[b.name] = float(np.sqrt(np.mean(model.variance(b))))
                plan.free_source[b.name] = model.source_name(b)
            plan.free = [b.name for b in free]
            plan.remeasured = again
            plans[name] = (table, plan)
        return plans

    def _scan_speed(self) -> ScanSpeed | None:
        """The backend's marginal-scan speed, measured on synthetic data (None: not known for this engine)."""
        return duckdb_scan_speed() if isinstance(self.backend, DuckDBBackend) else None

    def _unit_error(self, table: Table, blocks, objective: str, limit: PlanningLimit) -> float:
        plan = plan_workload(Workload(table.domain, blocks), 1.0, self.budget.noise, self.budget.delta, (), objective,
                             contribution=table.contribution, limit=limit)
        return sum(b.weight * b.num_rows(table.domain) * plan.expected_rmse[b.name] ** 2 for b in blocks)

    # --- 2-4. release (charged), answer, keep ---------------------------------------------
    def execute(self, queries: list[CompiledQuery], statement: str, sizing: Sizing) -> list[Result]:
        """Plan, release and charge, then answer: one result per query (see the module docstring)."""
        if any(_reports_only(q) for q in queries):
            central = iter(self.execute([q for q in queries if not _reports_only(q)], statement, sizing)
                           if not all(_reports_only(q) for q in queries) else [])
            return [self.answer_local(q) if _reports_only(q) else next(central) for q in queries]
        originals, queries = queries, [self.central_part(q) for q in queries]
        for original, query in zip(originals, queries):
            if original is not query and self.local_answers(original.table).n < 2:  # refused before the charge
                raise NotSupportedError(f"{original.table.name} holds fewer than 2 client reports (over its columns "
                                        "as they are now): nothing to blend yet; nothing was charged")
        if sizing.max_rmse is None and sizing.budget and any(
                blocks for _, blocks, _ in self.uncovered(queries, sizing).values()):
            check_share(self.ledger, self.budget, sizing.budget, self.check_affordable)  # refused before planned
        plans = self.plan(queries, sizing)
        charges = {name: charge_of(plan, self.budget.noise) for name, (_, plan) in plans.items()}
        total = sum(cost for cost, _ in charges.values())
        pieces = tuple(p for _, ps in charges.values() for p in ps or ())
        if total > 0:
            self.check_affordable(total, sizing.max_rmse, pieces or None)
        self.charged([Pending(table, charges[name][0], statement, plan.chosen,
                              partial(self._release, table, plan, statement), charges[name][1])
                      for name, (table, plan) in plans.items() if plan.cost > 0])
        text = "\n".join(plan.explain() for _, plan in plans.values())
        results = self.answered(lambda: [self._answer(q, original, text) for q, original in zip(queries, originals)])
        for i, result in enumerate(results):
            result.charged = total if i == 0 else 0.0
            result.charge_text = self.charge_text(result.charged, pieces if i == 0 else None)
        return results

    def _answer(self, query: CompiledQuery, original: CompiledQuery, plan_text: str) -> Result:
        """One query's result from the connection's models (which hold every charged measurement); a query
        asked again of the same models gets the result made the first time (a copy: evaluating its outer
        expressions costs milliseconds)."""
        model = self.estimating(query.table, self.answering(query.table))
        if original is not query:  # a hybrid table: the opt-in group's answers blended with the reports'
            model = HybridAnswers(query.table.domain, model, self.local_answers(original.table), query.table.public_rows,
                                  self.hybrid_mean)
        models = (model.exact, *model.generative) if isinstance(model, AnsweringModel) else (model,)
        known = self._results.get(id(original))
        if known is not None and known[0] is original and known[2] == plan_text and len(known[1]) == len(models) \
                and all(a is b for a, b in zip(known[1], models)):
            return _copy(known[3])
        result = assemble(original, aggregate_answers(original, model))
        result.laplace_tails = any(m.noise == LAPLACE for m in self.model(query.table).measurements)
        result.plan = plan_text
        result.answered_by = answered_by(original, model)
        if _VOLATILE.search(original.sql) is None:  # outer expressions reading the clock are evaluated anew
            if len(self._results) >= _RESULTS_KEPT:
                self._results.clear()
            self._results[id(original)] = (original, models, plan_text, _copy(result))
        return result

    def charged(self, pending: list[Pending]) -> list[Release]:
        """Draw the noise of priced releases and charge them: the one place noise is drawn, so every noisy
        value leaves it paid for (module docstring). A failure after the first draw charges `pending`'s costs,
        keeps nothing and raises an OperationalError quoting no value; one before it spends nothing."""
        before = self.rng.requests
        try:
            releases = [p.draw() for p in pending]
        except BaseException:
            if self.rng.requests == before:
                raise  # no noise drawn yet (planning or a scan failed): nothing was learned, nothing spent
            cost = sum(p.cost for p in pending)
            if cost > 0:
                self.ledger.charge_all([Entry(p.cost, p.statement, p.table.name, p.table.signature(), [],
                                              f"{p.detail}: failed after its noise was drawn; nothing released",
                                              pieces=p.pieces) for p in pending])
            charged = f"so it was charged ({self.amount(cost)}) and " if cost > 0 else ""
            raise OperationalError(f"the release failed after its noise was drawn, {charged}nothing was released") \
                from None
        self.record(releases)
        return releases

    @staticmethod
    def answered(answer: Callable[[], T]) -> T:
        """`answer()`, run after the charge: a failure there is an OperationalError that quotes no value (only
        what kind of step failed); asking again is free and answers, or fails, the same way."""
        try:
            return answer()
        except Exception as e:
            raise OperationalError(
                f"the answer could not be formed from its charged measurements: {describe_failure(e)}; the charge "
                "stands and asking again is free (change the query's outer expressions if they caused it)") from None

    def estimating(self, table: Table, model: AnsweringModel):
        """What answers the table's queries under `estimator`: least squares (and the generative models), or a
        graphical model over all its measurements (refitted, warm-started, when measurements were added)."""
        if self.estimator == "least_squares" or not model.exact.measurements:
            return model
        key = table.name.lower()
        count, fitted = self._fitted.get(key, (0, None))
        if fitted is None or count != len(model.exact.measurements) or fitted.domain != table.domain:
            warm = fitted.model if fitted is not None and fitted.domain == table.domain else None
            fitted = GraphicalModelEstimator(table.domain, model.exact.measurements, exact=model.exact, warm_start=warm)
            self._fitted[key] = (len(model.exact.measurements), fitted)
        return AutoEstimator(fitted) if self.estimator == "auto" else fitted

    def _release(self, table: Table, plan: Plan, statement: str) -> Release:
        """Scan the table and add the plan's noise (an adaptive plan: run its procedure); nothing is shown yet."""
        if plan.adaptive is not None:
            run = plan.adaptive
            self.answering(table)  # loads earlier generative models before this release joins the ledger
            key, rows = self.bounding_key(table), self.rows(table)
            with self.ledger.suspended():  # an adaptive release may run for minutes: others need not wait
                released = run.procedure.run(
                    table.domain, list(run.blocks), run.share,
                    lambda cliques: self.backend.marginals(table, cliques, key),
                    self.rng, rows, self.hooks.progress,
                )
            return Release(table, plan.cost, statement, released.measurements, released.estimator,
                           run.procedure.name)
        within: dict[tuple, list[np.ndarray]] = {}  # per clique, the bins its measurements read
        for pm in plan.measurements:
            box = support(pm.query(table.domain), tuple(table.domain.size_of(a) for a in pm.clique))
            within[pm.clique] = [a | b for a, b in zip(within[pm.clique], box)] if pm.clique in within else box
        counts = self.backend.marginals(table, list(within), self.bounding_key(table), within)
        measurements = [pm.release(counts[pm.clique], table.domain, plan.noise, self.rng)
                        for pm in plan.measurements]
        cost, pieces = charge_of(plan, self.budget.noise)
        return Release(table, cost, statement, measurements, None, plan.chosen, pieces=pieces)

    def _with(self, table: Table, measurements: list, estimator: Estimator | None) -> AnsweringModel:
        """The table's answering model with new measurements (and a new generative model) added,
        apart from the connection's own until the charge is recorded."""
        current = self.answering(table)
        exact = LeastSquaresModel(table.domain, [*current.exact.measurements, *measurements])
        return AnsweringModel(exact, [*current.generative, *([estimator] if estimator is not None else [])])

    def record(self, releases: list[Release], models: dict[str, AnsweringModel] | None = None) -> None:
        """Charge releases (one atomic ledger transaction) and keep their measurements and models.

        `models` are the answering models already built with the releases (else built here, before the
        charge: built after it, the ledger read would hold the new measurements already, and adding them
        again would count them twice; building one computes nothing from the noise). A release that
        changes the table's domain (a key set) is read again from the ledger instead."""
        if not releases:
            return
        kept = [r for r in releases if (r.measurements or r.estimator is not None)
                and (r.record is None or r.record.kind != KEYS)]
        models = {r.table.name.lower(): (models or {}).get(r.table.name.lower())
                  or self._with(r.table, r.measurements, r.estimator) for r in kept}
        if self.hooks.before_charge is not None:
            self.hooks.before_charge()  # the last point a statement can be cancelled: nothing charged yet
        self.ledger.charge_all([self._entry(r) for r in releases])
        for r in releases:
            key = r.table.name.lower()
            if r.record is not None and r.record.kind == KEYS:
                self.models.pop(key, None)  # read again over the table with its keys
                self.generative.pop(key, None)
                continue
            if key not in models:
                continue
            model = models[key]
            self.models[key], self.generative[key] = model.exact, model.generative
            if self._versions.get(key) == self.ledger.opened_version:
                self._versions[key] = self.ledger.written_version  # nobody else wrote: the model is current
                self._models_seen[key] = self._released_models(r.table)

    @staticmethod
    def _entry(release: Release) -> Entry:
        """A release's ledger entry; a generative model no later session could refit from the measurements
        (RAP's relaxed data) is kept with it, so it answers free in any session."""
        r = release
        record, model = model_record(r.estimator.spec()) if isinstance(r.estimator, RelaxedData) else (r.record, None)
        return Entry(r.cost, r.statement, r.table.name, r.table.signature(), r.measurements, r.detail, record, model,
                     r.table.key_counts(), r.pieces)

    def check_affordable(self, cost: float, max_rmse: float | None = None, pieces: tuple | None = None) -> None:
        """Refuse (BudgetExceededError) a cost (made of `pieces`: `Entry.pieces`) that does not fit."""
        try:
            self.ledger.check(cost, pieces)
        except BudgetExceededError as refused:
            if max_rmse is None:
                raise
            needs = charge_words(cost, pieces, self.amount).removeprefix("charged ")
            raise BudgetExceededError(f"an RMSE of at most {max_rmse:g} for every query needs {needs}, which is "
                                      f"impossible within the budget: {refused}") from None

    def amount(self, share: float) -> Amount:
        """A share of the ledger's unit in both units (ε at `Ledger.unit`'s δ)."""
        return self.budget.amount(share)

    def charge_text(self, charged: float, pieces: tuple | None = None) -> str:
        remaining = self.amount(self.ledger.status()[2])
        spent = "no charge (answered from earlier measurements)" if charged == 0 else \
            charge_words(charged, pieces, self.amount)
        return f"{spent}; remaining {remaining}"

    # --- local-DP reports -------------------------------------------------------------------
    def local_answers(self, table: Table):
        """The protocol's estimate from a local table's reports (tallied again each time: reports arrive)."""
        return local_answers(table.domain, table.client, self.backend.report_tally(table))

    def central_part(self, query: CompiledQuery) -> CompiledQuery:
        """A query over a hybrid table as the query over its opt-in (central) table; any other query as it is."""
        measured = query.table.measured_as(self.catalog.get)
        return query if measured is query.table else replace(query, table=measured)

    def answer_local(self, query: CompiledQuery) -> Result:
        """A query over local-DP reports: the protocol's unbiased estimate and its exact variance; no charge."""
        table = query.table
        model = self.local_answers(table)
        try:
            answers = aggregate_answers(query, model)
        except ValueError as e:  # a query the protocol does not estimate (a marginal above its order)
            raise NotSupportedError(f"{e}; nothing was charged") from None
        result = self.answered(lambda: assemble(query, answers))
        result.plan = table.explain_text(model.n)
        result.answered_by = [model.kind]
        result.charge_text = (f"no charge: each of the {model.n:,} reports was randomized on its device "
                              f"({table.protocol} at ε = {table.local_epsilon:g}); remaining "
                              f"{self.amount(self.ledger.status()[2])}")
        return result


def _asked(queries: list[CompiledQuery], table: Table, blocks: list[Block]) -> list[list[str]]:
    """The analyst's queries that read `blocks` (of `table`, deduplicated), as lists of their block names:
    the planner's even split (`planner.fairness`) gives each query budget/queries."""
    name_of = {b.fingerprint(table.domain): b.name for b in blocks}
    out = []
    for q in (q for q in queries if q.table.name == table.name):
        names = [name_of[f] for f in dict.fromkeys(b.fingerprint(table.domain) for b in q.blocks) if f in name_of]
        if names:
            out.append(names)
    return out


def _reports_only(query: CompiledQuery) -> bool:
    """Whether a query reads only local-DP reports (a local table without opt-in users)."""
    return query.table.answered_by_reports


__all__ = ["Executor", "Hooks", "Pending", "PLANNING_SECONDS", "PLANNING_SECONDS_PER_QUERY", "Release"]
