"""The shell's line editor: statement boundaries, highlighting, completion, history.

A line starting with `.` is a meta command; anything else is SQL, read until
a `;` that is outside quotes and comments (Enter inside an unfinished
statement starts a new line).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable, Iterable

from prompt_toolkit import PromptSession
from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.filters import completion_is_selected
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.lexers import Lexer
from prompt_toolkit.styles import Style

from dpsql.errors import ProgrammingError
from dpsql.interfaces.shell.schema import PROTECTED, TableInfo
from dpsql.sql.statements import split_statements

KEYWORDS = (
    "SELECT", "FROM", "WHERE", "GROUP BY", "HAVING", "ORDER BY", "LIMIT", "OFFSET", "AS", "AND", "OR",
    "NOT", "IN", "BETWEEN", "IS NULL", "IS NOT NULL", "NULL", "CASE", "WHEN", "THEN", "ELSE", "END",
    "COUNT", "SUM", "AVG", "FILTER", "ASC", "DESC", "DISTINCT", "EXPLAIN", "BEGIN WORKLOAD",
    "END WORKLOAD", "WITH", "SET dpsql.query_epsilon", "SET dpsql.query_rho", "CREATE TABLE",
    "INSERT INTO", "VALUES", "DROP TABLE", "DELETE FROM", "UPDATE", "TRUE", "FALSE", "CAST", "JOIN", "ON",
)
_HIGHLIGHTED = {w for k in KEYWORDS for w in k.split() if w.isalpha()} | {
    "ALTER", "BY", "CREATE", "DELETE", "DROP", "INSERT", "INTO", "IS", "LIKE", "ILIKE", "RHO", "EPSILON",
    "DELTA", "TABLE", "VIEW", "WORKLOAD", "BEGIN", "UNION", "ALL", "LEFT", "RIGHT", "INNER", "OUTER",
}

STYLE = Style.from_dict({
    "keyword": "ansiblue bold",
    "string": "ansigreen",
    "number": "ansicyan",
    "comment": "ansibrightblack italic",
    "protected": "ansimagenta bold",
    "meta": "ansiyellow",
    "prompt": "bold",
    "bottom-toolbar": "noreverse bg:ansibrightblack ansiwhite",
})

_TOKEN = re.compile(
    r"(?P<comment>--[^\n]*|/\*.*?(?:\*/|\Z))"
    r"|(?P<string>'(?:[^']|'')*'?)"
    r"|(?P<ident>\"(?:[^\"]|\"\")*\"?)"
    r"|(?P<number>\b\d+(?:\.\d*)?(?:[eE][+-]?\d+)?\b)"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_$]*)",
    re.S,
)
_SENTINEL = "\x00"


def is_meta(text: str) -> bool:
    """A meta command: a line starting with '.'."""
    return text.lstrip().startswith(".")


def is_complete(text: str) -> bool:
    """True when `text` is ready to run: a meta command, or SQL ending in ';' outside quotes and comments."""
    stripped = text.strip()
    if not stripped or is_meta(stripped) or stripped.lower() in ("quit", "exit"):
        return True
    try:  # the sentinel stands alone only if a ';' ends the text (it vanishes in an open comment)
        parts = split_statements(text + "\n" + _SENTINEL)
    except ProgrammingError:  # an open quote: the statement goes on
        return False
    return bool(parts) and parts[-1] == _SENTINEL


class SqlLexer(Lexer):
    """Highlights SQL keywords, strings, numbers, comments, protected tables and meta commands."""

    def __init__(self, protected: Callable[[], set[str]]):
        self.protected = protected

    def lex_document(self, document: Document) -> Callable[[int], StyleAndTextTuples]:
        lines = self.fragments(document.text)
        return lambda i: lines[i] if i < len(lines) else []

    def fragments(self, text: str) -> list[StyleAndTextTuples]:
        """Styled fragments of each line of `text`."""
        if is_meta(text):
            pieces: StyleAndTextTuples = [("class:meta", text)]
        else:
            pieces = self._sql(text)
        lines: list[StyleAndTextTuples] = [[]]
        for style, chunk in pieces:
            for k, part in enumerate(chunk.split("\n")):
                if k:
                    lines.append([])
                if part:
                    lines[-1].append((style, part))
        return lines

    def _sql(self, text: str) -> StyleAndTextTuples:
        protected = self.protected()
        out: StyleAndTextTuples = []
        pos = 0
        for m in _TOKEN.finditer(text):
            if m.start() > pos:
                out.append(("", text[pos : m.start()]))
            kind, token = m.lastgroup, m.group()
            if kind == "word":
                if token.upper() in _HIGHLIGHTED:
                    kind = "keyword"
                elif token.lower() in protected:
                    kind = "protected"
                else:
                    kind = ""
            elif kind == "ident":
                kind = "protected" if token.strip('"').lower() in protected else ""
            out.append((f"class:{kind}" if kind else "", token))
            pos = m.end()
        if pos < len(text):
            out.append(("", text[pos:]))
        return out


class SqlCompleter(Completer):
    """Completes meta commands, keywords, tables, columns and declared categorical values."""

    def __init__(self, tables: Callable[[], list[TableInfo]], commands: Callable[[], dict[str, str]],
                 arguments: Callable[[str], list[str]]):
        self.tables = tables
        self.commands = commands
        self.arguments = arguments

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        before = document.text_before_cursor
        if is_meta(before):
            yield from self._meta(before.lstrip())
            return
        tables = self.tables()
        mentioned = [t for t in tables if re.search(rf"\b{re.escape(t.name)}\b", document.text, re.I)]
        quoted = re.search(r"'([^']*)$", before)
        if quoted:
            if before.count("'") % 2 == 1:  # inside a string literal: declared values
                yield from self._values(mentioned or tables, quoted.group(1))
            return
        word = re.search(r"[A-Za-z_][A-Za-z0-9_]*$", before)
        prefix = word.group() if word else ""
        if not prefix:
            return
        candidates: list[tuple[str, str]] = [(t.name, t.kind) for t in tables]
        for t in mentioned or tables:
            candidates.extend((c.name, f"{t.name}: {c.description}") for c in t.columns)
        candidates.extend((k, "keyword") for k in KEYWORDS)
        seen: set[str] = set()
        for text, meta in candidates:
            if text.lower().startswith(prefix.lower()) and text.lower() != prefix.lower() and text not in seen:
                seen.add(text)
                shown = text if meta != "keyword" or not prefix.islower() else text.lower()
                yield Completion(shown, -len(prefix), display_meta=meta)

    def _meta(self, text: str) -> Iterable[Completion]:
        name, space, arg = text.partition(" ")
        if not space:
            for command, summary in self.commands().items():
                if command.startswith(name):
                    yield Completion(command, -len(name), display_meta=summary)
            return
        for value in self.arguments(name):
            if value.lower().startswith(arg.strip().lower()):
                yield Completion(value, -len(arg.lstrip()))

    def _values(self, tables: list[TableInfo], typed: str) -> Iterable[Completion]:
        seen: set[str] = set()
        for t in tables:
            for c in t.columns:
                for v in c.values:
                    if v.lower().startswith(typed.lower()) and v not in seen:
                        seen.add(v)
                        yield Completion(v.replace("'", "''") + "'", -len(typed), display=v,
                                         display_meta=f"{t.name}.{c.name}")


def _key_bindings() -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add("enter", filter=~completion_is_selected)
    def _(event) -> None:
        """Enter runs a complete statement and starts a new line inside an unfinished one."""
        buffer = event.current_buffer
        if is_complete(buffer.text):
            buffer.validate_and_handle()
        else:
            buffer.insert_text("\n")

    @bindings.add("enter", filter=completion_is_selected)
    def _(event) -> None:
        """Enter in the completion menu takes the highlighted completion."""
        buffer = event.current_buffer
        buffer.apply_completion(buffer.complete_state.current_completion)

    return bindings


def history_path() -> Path:
    """`$XDG_STATE_HOME/dpsql/history` (default `~/.local/state/dpsql/history`)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "dpsql" / "history"


def make_prompt_session(lexer: Lexer, completer: Completer) -> PromptSession:
    """A multi-line prompt with persistent history, highlighting and completion."""
    path = history_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return PromptSession(
        multiline=True,
        history=FileHistory(str(path)),
        lexer=lexer,
        completer=completer,
        complete_while_typing=False,
        auto_suggest=AutoSuggestFromHistory(),
        style=STYLE,
        key_bindings=_key_bindings(),
        prompt_continuation=lambda width, line, wrap: " " * (width - 5) + "...> ",
        include_default_pygments_style=False,
    )


def protected_names(tables: list[TableInfo]) -> set[str]:
    """Lower-case names of the protected tables (highlighted differently)."""
    return {t.name.lower() for t in tables if t.kind == PROTECTED}
