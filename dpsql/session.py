"""A session: one connection's state under one privacy budget.

It holds the catalog (with the keys released so far), the ledger and the executor, the
connection's settings and budget share, its compiled queries (each statement tokenized and
parsed once, `compile`) and an open workload. A script is split, checked as a whole
(`execute`), and each statement goes to its handler (`dpsql.handlers`): dpsql's own
(SET/SHOW dpsql.*, BEGIN/END WORKLOAD, EXPLAIN, continual queries), public SQL (statements
that name no protected table) to the analyst's workspace (`dpsql.deployment.workspace`, under the
allowlist of `dpsql.sql.public`), DP queries to the compiler and then the executor
(`dpsql.executor`: plan, scan, release, charge, answer). Any error raised before the charge
spends nothing.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from sqlglot import exp

from dpsql import handlers
from dpsql.backends import Backend
from dpsql.budget.units import Sizing
from dpsql.tables.catalog import Catalog
from dpsql.tables.columns import KEY
from dpsql.errors import Error, NotSupportedError, ProgrammingError
from dpsql.releases.continual import ContinualQueries
from dpsql.releases.dropped_rows import dropped_rows
from dpsql.executor import Executor
from dpsql.budget.ledger import Ledger
from dpsql.answers.post_processing import CompositeQuery, compile_composite, parts_of
from dpsql.answers.result import Result, assemble
from dpsql.sql.compiler import CompiledQuery, compile_tree, parse_statement
from dpsql.sql.flatten import Composite, flatten
from dpsql.sql.lookups import PublicTables
from dpsql.sql.public import ProtectedNames
from dpsql.sql.statements import BeginWorkload, EndWorkload, Explain, Sql, classify, split_statements, take_weight
from dpsql.deployment.workspace import Workspace
from mechanisms.accounting import Amount
from mechanisms.arrays import ArrayModuleUnavailable
from mechanisms.noise import RandomSource
from planner.plan import TOTAL_SQUARED

DEFAULT_QUERY_EPSILON = 0.1
KEY_DELTA_SHARE = 10  # a release of keys spends this fraction (1/10) of the ledger's δ by default
KEY_RELEASES_SHARE = 0.5  # a new ledger whose catalog has key columns sets apart this fraction of δ for key releases
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
        self.budget_unit = ledger.unit
        self.dialect = dialect
        self.executor = Executor(catalog, ledger, backend, self.budget_unit, RandomSource(seed))
        self.continual = ContinualQueries(self.executor, dialect)
        self.query_share = self.budget_unit.share(query_epsilon, query_rho, default_epsilon=DEFAULT_QUERY_EPSILON)
        self.objective = TOTAL_SQUARED
        self.max_rmse: float | None = None
        self.stderr_columns = False  # SET dpsql.stderr = on: a `<column>_stderr` column after each DP column
        self.small_counts = "off"  # SET dpsql.small_counts: the small-group count mechanism (`handlers.small_counts`)
        self.analyst = analyst  # an analyst's session (from a profile): the owner's settings are fixed
        # what one release of keys spends of the δ the ledger set apart for them (`Ledger.events`)
        self.key_delta = min(ledger.delta / KEY_DELTA_SHARE, ledger.events) if ledger.events else \
            ledger.delta / KEY_DELTA_SHARE
        if key_delta is not None:  # a profile's; it may exceed what the ledger has left for key releases, which
            if not 0 < key_delta < ledger.delta:  # a release then says (connecting still works)
                raise ProgrammingError(f"key_delta must be above 0 and below the ledger's δ ({ledger.delta:g}), "
                                       f"got {key_delta:g}")
            self.key_delta = key_delta
        self.last_charge = 0.0  # what the last statement that read protected data charged
        self.workload: BeginWorkload | None = None  # an open BEGIN WORKLOAD (`dpsql.handlers.workloads`)
        self.queued: list[str] = []  # ... and the queries given since
        # Compiled DP queries by (text, label, weight): kept across statements (a re-ask compiles nothing)
        # unless they join public tables, which the workspace may change; those last one `execute`.
        self._compiled: OrderedDict[tuple[str, str, float], CompiledQuery | CompositeQuery] = OrderedDict()
        self._joins: set[tuple[str, str, float]] = set()
        # Whether a query grouped by a released key column must grow it (`dpsql.handlers.key_release`), by
        # (text, weight), for the catalog they were checked on.
        self.key_checks: tuple[Catalog | None, dict[tuple[str, float], Any]] = (None, {})
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

    def sizing(self, workload: BeginWorkload | None = None) -> Sizing:
        """How a statement's new measurements are sized: the query share, or an accuracy target; a workload's
        own budget, accuracy target or objective where its BEGIN WORKLOAD gives them."""
        sizing = Sizing(self.query_share, self.objective)
        sizing = sizing.with_accuracy(self.max_rmse) if self.max_rmse is not None else sizing
        if workload is None:
            return sizing
        if workload.epsilon or workload.rho:
            sizing = sizing.with_budget(self.budget_unit.share(workload.epsilon, workload.rho, delta=workload.delta))
        if workload.max_rmse is not None:
            sizing = sizing.with_accuracy(workload.max_rmse)
        return sizing if workload.objective is None else replace(sizing, objective=workload.objective)

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
                with self.ledger.holding():  # its ledger reads and charge share one open ledger
                    done = handlers.run(self, st, params)
                if any(r.kind == "dp" for r in done):
                    self.last_charge = sum(r.charged for r in done)
                results.extend(r.with_stderr_columns() if self.stderr_columns else r for r in done)
        except Error as e:  # what earlier statements released (and paid for) stays available
            e.partial_results = results
            raise
        except ArrayModuleUnavailable as e:  # DPSQL_ARRAY_MODULE asks for an array module this machine lacks
            error = NotSupportedError(str(e))
            error.partial_results = results
            raise error from None
        finally:
            for key in self._joins:
                self._compiled.pop(key, None)
            self._joins.clear()
        return results

    def _validate(self, statements: list) -> None:
        """Compile every DP statement of a script (and guard public ones) before running any,
        so that a bad statement late in a script cannot follow charged ones; the compiled
        queries are kept (`_compiled`), so each statement is compiled once."""
        queued = None if self.workload is None else len(self.queued)
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
                    self.compile(sql, label=f"q{queued}", weight=weight)
                else:
                    self.compile(sql, weight=weight)

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
                        out += parts_of([self.compile(sql, weight=weight)])
            except Error:
                if not skip_errors:
                    raise
        return out

    def compile(self, sql: str, params=None, label: str = "", weight: float = 1.0,
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
        if isinstance(tree, Composite):  # DP parts and what is done with their answers (`dpsql.answers.post_processing`)
            composite = compile_composite(tree, sql, label, lambda part, name: self.compile(
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

    def dropped_rows(
        self, table: str, epsilon: float | None = None, rho: float | None = None, cap: int | None = None
    ) -> Result:
        """A charged DP count of the rows bounding to a table's privacy unit drops (`dpsql.releases.dropped_rows`);
        spends ε/ρ, by default the query share."""
        share = self.query_share if epsilon is None and rho is None else self.share(epsilon, rho)
        return dropped_rows(self.executor, table, share, cap)

    def describe(self, text: str, params: Sequence[Any] | dict | None = None) -> Result | None:
        """The columns (names and types, no rows) one statement would return, without running it or
        spending anything; None when it returns none or they cannot be known before it runs (public
        SQL other than a query, or with parameters; a DP query with parameters not given). For
        clients that ask first, and for checking that an answer can be sent before it is paid for."""
        return handlers.describe(self, classify(text), params)

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
