"""The shell's meta commands (`.tables`, `.schema`, `.budget`, `.mode`, ...).

Each command takes the running shell (`dpsql.interfaces.shell.app.Shell`, which imports this module, so
it is not imported back) and the text after its name. Listings are
rendered like query results, so they follow `.mode` (e.g. `.budget` as CSV).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, Callable

from dpsql.errors import ProgrammingError
from dpsql.interfaces.formatting import MODES
from dpsql.answers.result import Result
from dpsql.interfaces.shell.schema import PROTECTED, find_table

_STATEMENT_WIDTH = 60


@dataclass(frozen=True)
class Command:
    run: Callable[[Any, str], None]  # (the running `dpsql.interfaces.shell.app.Shell`, the argument)
    usage: str
    summary: str


def _help(shell, arg: str) -> None:
    lines = ["Meta commands (one line each, no ';'):"]
    width = max(len(c.usage) for c in COMMANDS.values())
    lines += [f"  {c.usage:<{width}}  {c.summary}" for c in COMMANDS.values()]
    lines += [
        "",
        "SQL statements end with ';' and may span lines. Protected tables answer DP aggregates",
        "(COUNT, SUM, AVG with WHERE / GROUP BY), shown as value ± 95% confidence half-width;",
        "public tables run as plain DuckDB SQL. Also: EXPLAIN <query>, SET dpsql.query_epsilon = E,",
        "BEGIN WORKLOAD [WITH (epsilon = E)]; <queries>; END WORKLOAD; (planned and measured together).",
        "Tab completes keywords, tables, columns and declared values; Up/Down and Ctrl-R search history;",
        "Ctrl-C cancels a running statement without charging it; Ctrl-D quits.",
    ]
    shell.note("\n".join(lines))


def _tables(shell, arg: str) -> None:
    rows = [(t.name, t.kind + (" (DP answers only)" if t.kind == PROTECTED else ""), len(t.columns))
            for t in shell.tables()]
    shell.show_listing(Result(["name", "kind", "columns"], rows, kind="public"))


def _schema(shell, arg: str) -> None:
    tables = shell.tables()
    if arg:
        table = find_table(tables, arg)
        if table is None:
            raise ProgrammingError(f"no table named {arg!r}; .tables lists them")
        tables = [table]
    for table in tables:
        what = "declared domain" if table.kind == PROTECTED else "type"
        shell.note(f"{table.name} ({table.kind})")
        shell.show_listing(Result(["column", what], [(c.name, c.description) for c in table.columns], kind="public"))


def _budget(shell, arg: str) -> None:
    session = shell.conn.session
    status = session.budget()
    shell.note(
        f"total {status.total}\nspent {status.spent}\nremaining {status.remaining}\n"
        f"each query that needs new measurements spends {session.amount(session.query_share)}"
    )
    shell.note(shell.composition_note())
    rows = []
    for c in session.ledger.charges():
        amount = session.amount(c.cost)
        statement = " ".join(c.statement.split())
        if len(statement) > _STATEMENT_WIDTH:
            statement = statement[: _STATEMENT_WIDTH - 1] + "…"
        rows.append((c.seq, c.at.strftime("%Y-%m-%d %H:%M:%S"), c.who, c.table,
                     _rounded(c.epsilon(session.amount)), _rounded(amount.rho), statement))
    if not rows:
        shell.note("no charges yet")
        return
    shell.show_listing(Result(["#", "charged at (UTC)", "who", "table", "epsilon", "rho", "statement"], rows,
                              kind="public"))


def _rounded(x: float) -> float:
    """Six significant digits: ε and ρ carry conversion round-off beyond that."""
    return float(f"{x:.6g}")


def _explain(shell, arg: str) -> None:
    if not arg:
        raise ProgrammingError("usage: .explain <query>")
    shell.run_sql("EXPLAIN " + arg.rstrip().rstrip(";"))


def _dropped(shell, arg: str) -> None:
    table, _, epsilon = arg.partition(" ")
    if not table:
        raise ProgrammingError("usage: .dropped TABLE [EPSILON]")
    try:
        amount = float(epsilon) if epsilon.strip() else None
    except ValueError:
        raise ProgrammingError(f"EPSILON must be a number, got {epsilon.strip()!r}") from None
    result = shell.conn.dropped_rows(table, epsilon=amount)
    shell.show_listing(result)
    shell.note(result.charge_text)
    shell.note_composition_once()


def _mode(shell, arg: str) -> None:
    if not arg:
        shell.note(f"mode {shell.mode}")
        return
    if arg not in MODES:
        raise ProgrammingError(f"unknown mode {arg!r}; use one of {', '.join(MODES)}")
    shell.mode = arg


def _file_argument(arg: str, usage: str) -> tuple[str | None, bool]:
    """(FILE or None, whether --overwrite was given) of `[--overwrite] [FILE]`."""
    overwrite = arg.startswith("--overwrite")
    if overwrite:
        arg = arg[len("--overwrite"):]
        if arg and not arg[0].isspace():
            raise ProgrammingError(f"usage: {usage}")
    return arg.strip() or None, overwrite


def _output(shell, arg: str) -> None:
    path, overwrite = _file_argument(arg, ".output [--overwrite] [FILE]")
    if path is None and overwrite:
        raise ProgrammingError("usage: .output [--overwrite] [FILE]")
    shell.redirect(path, overwrite)


def _once(shell, arg: str) -> None:
    path, overwrite = _file_argument(arg, ".once [--overwrite] FILE")
    if path is None:
        raise ProgrammingError("usage: .once [--overwrite] FILE")
    shell.redirect(path, overwrite, once=True)


def _read(shell, arg: str) -> None:
    if not arg:
        raise ProgrammingError("usage: .read FILE")
    shell.run_file(arg)


def _import(shell, arg: str) -> None:
    try:
        words = shlex.split(arg)
    except ValueError as e:
        raise ProgrammingError(f"usage: .import FILE TABLE ({e})") from None
    if len(words) != 2:
        raise ProgrammingError("usage: .import FILE TABLE")
    rows = shell.import_csv(*words)
    shell.note(f"{rows} row{'' if rows == 1 else 's'} imported into {words[1]}")


def _pager(shell, arg: str) -> None:
    if not arg:
        shell.note(f"pager {'on' if shell.pager else 'off'}")
        return
    if arg not in ("on", "off"):
        raise ProgrammingError("usage: .pager on|off")
    shell.pager = arg == "on"


def _timer(shell, arg: str) -> None:
    if arg not in ("on", "off"):
        raise ProgrammingError("usage: .timer on|off")
    shell.timer = arg == "on"


def _maxrows(shell, arg: str) -> None:
    if not arg:
        shell.note(f"maxrows {shell.max_rows} (0: no limit)")
        return
    if not arg.isdigit():
        raise ProgrammingError("usage: .maxrows N (0: no limit)")
    shell.max_rows = int(arg)


def _quit(shell, arg: str) -> None:
    shell.done = True


COMMANDS: dict[str, Command] = {
    ".help": Command(_help, ".help", "show this help"),
    ".tables": Command(_tables, ".tables", "list protected and public tables"),
    ".schema": Command(_schema, ".schema [TABLE]", "columns with their declared domains (protected) or types"),
    ".budget": Command(_budget, ".budget", "total, spent and remaining budget, and every charge"),
    ".explain": Command(_explain, ".explain QUERY", "the plan for a query; reads no data, spends nothing"),
    ".dropped": Command(_dropped, ".dropped TABLE [EPSILON]", "DP count of rows bounding per privacy unit drops (charged)"),
    ".mode": Command(_mode, ".mode [MODE]", f"output format: {', '.join(MODES)}"),
    ".output": Command(_output, ".output [--overwrite] [FILE]",
                       "write results to a new FILE (--overwrite: replace it; no FILE: back to the terminal)"),
    ".once": Command(_once, ".once [--overwrite] FILE", "write the next result only to FILE"),
    ".read": Command(_read, ".read FILE", "run the statements and meta commands in FILE; stop at its first error"),
    ".import": Command(_import, ".import FILE TABLE",
                       "load a CSV file (header first) into a public table: new, or appended to by column name"),
    ".pager": Command(_pager, ".pager [on|off]", "page results that do not fit the terminal ($PAGER, else less -S)"),
    ".timer": Command(_timer, ".timer on|off", "show how long each statement took"),
    ".maxrows": Command(_maxrows, ".maxrows [N]", "rows shown in table and markdown modes (0: all)"),
    ".quit": Command(_quit, ".quit", "leave the shell (also .exit, Ctrl-D)"),
    ".exit": Command(_quit, ".exit", "leave the shell"),
}


def run_command(shell, line: str) -> None:
    """Run one meta command line."""
    name, _, arg = line.strip().partition(" ")
    command = COMMANDS.get(name.lower())
    if command is None:
        raise ProgrammingError(f"unknown command {name}; .help lists the commands")
    command.run(shell, arg.strip())


def command_arguments(name: str, tables: Callable[[], list]) -> list[str]:
    """Completions for a command's argument."""
    if name == ".mode":
        return list(MODES)
    if name in (".timer", ".pager"):
        return ["on", "off"]
    if name in (".schema", ".dropped"):
        return [t.name for t in tables()]
    return []


def command_summaries() -> dict[str, str]:
    """Command name -> one-line summary (for completion)."""
    return {name: c.summary for name, c in COMMANDS.items()}
