"""Statement handlers: what each kind of statement does, one module per kind.

`dpsql.sql.statements.classify` names a statement's kind; `HANDLERS` maps each kind to the module
that runs it, `run(session, statement, params) -> list[Result]`, and that tells the columns of its
result before it runs, `describe(session, statement, params) -> Result | None` (for clients that ask
first). Every handler function takes the connection's `dpsql.session.Session` first (unannotated:
the session imports the handlers, and no module imports back). The session keeps the connection's state: its catalog, ledger and
executor, its settings and budget, its compiled queries and an open workload; the handlers act on it.
A statement's walk: session (script split, checked) → its handler → compiler and executor.

To add a kind of statement: a class in `dpsql.sql.statements` that `classify` returns, a module here
with `run` and `describe`, and its entry in `HANDLERS`.
"""

from __future__ import annotations

from dpsql.handlers import continual, explain, options, queries, workloads
from dpsql.answers.result import Result
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
    Statement,
)

HANDLERS = {
    BeginWorkload: workloads,
    EndWorkload: workloads,
    SetOption: options,
    ShowOption: options,
    Explain: explain,
    CreateContinual: continual,
    Emit: continual,
    ShowContinual: continual,
    Sql: queries,
}
RUN_IN_WORKLOADS = (BeginWorkload, EndWorkload, SetOption, ShowOption)  # the rest is queued while one is open


def run(session, st: Statement, params) -> list[Result]:
    """Run one classified statement; inside an open workload, queue it (`workloads.queue`) unless it runs at once."""
    if session.workload is not None and not isinstance(st, RUN_IN_WORKLOADS):
        return workloads.queue(session, st, params)
    return HANDLERS[type(st)].run(session, st, params)


def describe(session, st: Statement, params) -> Result | None:
    """The columns a statement's result will have (no rows), without running it or spending anything."""
    if session.workload is not None and isinstance(st, Sql):
        return None  # queued: its result comes at END WORKLOAD
    return HANDLERS[type(st)].describe(session, st, params)
