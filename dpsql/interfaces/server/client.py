"""One client of `dpsql serve`: start-up, login, then the simple and extended query protocols.

A `ClientConnection` runs in a thread of its own. After the login (`dpsql.interfaces.server.auth`) it opens
the analyst's dpsql connection from the owner's profile — the same session the DB-API and the
shell use, so every statement goes through the same privacy boundary and the same ledger, in the
analyst's name — and translates between PostgreSQL messages (`dpsql.interfaces.server.wire`) and that
session. Statements about the server itself (transactions, client settings) are answered by
`dpsql.interfaces.server.pgcompat`.

Charges and the connection: a statement's charge happens once its answer is ready and right
before it is sent. If the client has gone by then (disconnected mid-statement) or asked to
cancel, the statement is stopped there and nothing is charged; once charged, the measurements
are in the ledger, so asking again is free.
"""

from __future__ import annotations

import logging
import re
import secrets
import socket
import ssl
import struct
from dataclasses import dataclass, field
from functools import partial

import duckdb
import sqlglot

from dpsql import errors
from dpsql.interfaces.dbapi import Connection, _connect_profile
from dpsql.handlers.options import show
from dpsql.answers.result import Result
from dpsql.interfaces.server import copy_out, parameters, pgcompat, wire
from dpsql.interfaces.server.auth import SCRAM, ScramExchange, Verifier
from dpsql.sql.column_names import postgres_names
from dpsql.sql.statements import split_statements

log = logging.getLogger("dpsql.server")

IDLE, IN_TRANSACTION, FAILED = "I", "T", "E"
_SQLSTATES = [  # most specific first
    (errors.BudgetExceededError, "53400"), (errors.ProfileError, "28000"), (errors.NotSupportedError, "0A000"),
    (errors.ProgrammingError, "42601"), (errors.IntegrityError, "23000"), (errors.DataError, "22000"),
    (errors.InterfaceError, "08000"), (errors.OperationalError, "58000"), (errors.Error, "XX000"),
]
_PLACEHOLDER = re.compile(r"\$(\d+)")
_SHAPES_KEPT = 256  # DP queries' descriptions remembered per connection


class Refused(Exception):
    """A login or start-up refused: (SQLSTATE, message) sent to the client before closing."""

    def __init__(self, sqlstate: str, text: str):
        super().__init__(text)
        self.sqlstate = sqlstate


class Cancelled(errors.OperationalError):
    """The client asked to cancel the running statement."""

    sqlstate = "57014"  # query_canceled


class TransactionAborted(errors.InternalError):
    """A statement in a transaction an error ended (until ROLLBACK), as PostgreSQL refuses it."""

    sqlstate = "25P02"  # in_failed_sql_transaction


class ChangedResultType(errors.NotSupportedError):
    """PostgreSQL's error (0A000, from its routine RevalidateCachedQuery) when a prepared statement's columns
    are no longer those its Describe told: clients (asyncpg, JDBC) know it and prepare the statement again."""

    routine = "RevalidateCachedQuery"
    detail = "a setting (such as dpsql.stderr) changed the columns since the statement was described"

    def __init__(self):
        super().__init__("cached plan must not change result type")


@dataclass
class Prepared:
    """A parsed statement of the extended protocol."""

    sql: str
    param_types: list[int]  # as Parse gave them (0: left to the server)
    inferred: dict[int, int] | None = None  # parameter number -> type OID from its context (`parameters`)
    columns: list[str] | None = None  # the columns its Describe told the client (None: not described or unknown)
    oids: list[int] = field(default_factory=list)


@dataclass
class Portal:
    """A bound statement: its parameters, and once run, its results and how far they were sent."""

    prepared: Prepared
    params: list
    result_formats: list[int]
    results: list[Result] | None = None
    sent: int = 0
    tag: str = ""
    columns: list[str] | None = None  # the columns the client was told (its statement's or its own Describe;
    # their names may differ from the answer's, e.g. an expression of a parameter: their number may not)
    oids: list[int] = field(default_factory=list)


class ClientConnection:
    """The protocol state machine of one client connection, accepted by `server` (the listening
    `dpsql.interfaces.server.server.Server`, which imports this module: its profile, TLS and cancel registry)."""

    def __init__(self, server, sock: socket.socket, address: str):
        self.server = server
        self.sock = sock
        self.address = address
        self.pid = server.next_pid()
        self.secret = secrets.randbits(31)
        self.settings = dict(pgcompat.SETTINGS)
        self.connection: Connection | None = None
        self.analyst = ""
        self.status = IDLE
        self.prepared: dict[str, Prepared] = {}
        self.portals: dict[str, Portal] = {}
        self._out: list[bytes] = []
        self._cancel = False
        self._skip_to_sync = False
        self._public_listed = False  # the owner's public tables copied in for catalog queries
        self._shapes: dict[tuple[str, bool], Result] = {}  # `_described`

    # --- lifecycle -----------------------------------------------------------------------
    def run(self) -> None:
        try:
            if not self._startup():
                return
            self._loop()
        except wire.Closed:
            pass
        except Refused as e:
            self._send_now(wire.error_response(e.sqlstate, str(e), "FATAL"))
        except wire.ProtocolError as e:
            self._send_now(wire.error_response("08P01", f"protocol violation: {e}", "FATAL"))
        except (OSError, ssl.SSLError):
            pass
        finally:
            self.server.unregister(self)
            self._close()

    def _close(self) -> None:
        if self.connection is not None:
            try:
                self.connection.close()
            except Exception:  # closing must not fail the server thread
                log.exception("closing the session of %s", self.analyst)
            self.connection = None
        try:
            self.sock.close()
        except OSError:
            pass

    def cancel(self) -> None:
        """Called from the cancel request's thread: stop the running statement."""
        self._cancel = True
        connection = self.connection  # the client's own thread may be closing it
        if connection is not None:
            try:
                connection.session.interrupt()
            except duckdb.Error:  # closed meanwhile: nothing left to stop
                pass

    # --- start-up and login -------------------------------------------------------------------
    def _startup(self) -> bool:
        for _ in range(3):  # SSLRequest / GSSENCRequest, then the StartupMessage
            code, body = wire.read_startup(self.sock)
            if code == wire.SSL_REQUEST:
                if self.server.tls is None:
                    self.sock.sendall(wire.SSL_REFUSED)
                    continue
                self.sock.sendall(wire.SSL_ACCEPTED)
                self.sock = self.server.tls.wrap_socket(self.sock, server_side=True)
                continue
            if code == wire.GSSENC_REQUEST:
                self.sock.sendall(wire.SSL_REFUSED)
                continue
            if code == wire.CANCEL_REQUEST:
                reader = wire.Reader(body)
                self.server.cancel(reader.int32(), reader.int32())
                return False
            if code != wire.PROTOCOL_3:
                raise Refused("0A000", f"unsupported frontend protocol {code >> 16}.{code & 0xFFFF}: use 3.0")
            return self._login(wire.startup_parameters(body))
        raise wire.ProtocolError("too many start-up requests")

    def _login(self, params: dict[str, str]) -> bool:
        if self.server.tls is not None and self.server.tls_required and not isinstance(self.sock, ssl.SSLSocket):
            raise Refused("28000", "this server requires TLS: connect with sslmode=require")
        name = params.get("user", "")
        server = self.server
        login = f"{self.address}\0{name}"  # never the name alone: a stranger cannot lock an analyst out
        wait = max(server.by_login.wait(login), server.by_address.wait(self.address))
        if wait > 0:
            raise Refused("28000", f"too many failed logins: try again in {wait:.0f} s")
        if not self._authenticate(server.verifier(name)):
            server.by_login.failed(login)
            server.by_address.failed(self.address)
            log.warning("failed login for %r from %s", name, self.address)
            raise Refused("28P01", f'password authentication failed for user "{name}"')
        server.by_login.succeeded(login)
        self.analyst = name
        try:
            self.connection = _connect_profile(self.server.profile, name, None, None, "duckdb")
        except errors.Error as e:
            raise Refused("28000", str(e)) from None
        session = self.connection.session
        session.workspace.prepare_for_clients(pgcompat.catalog_setup(params.get("database") or name, self.pid))
        session.before_charge = self._before_charge
        session.cancelled = lambda: self._cancel
        self.settings["application_name"] = params.get("application_name", "")
        out = [wire.authentication(0)]
        out += [wire.parameter_status(k, self.settings[k]) for k in pgcompat.STARTUP_REPORTED]
        out += [wire.backend_key(self.pid, self.secret), wire.ready_for_query(IDLE)]
        self._send_now(b"".join(out))
        log.info("%s connected from %s", name, self.address)
        return True

    def _authenticate(self, verifier: Verifier) -> bool:
        exchange = ScramExchange(verifier)
        self._send_now(wire.authentication(10, SCRAM.encode() + b"\0\0"))
        reader = wire.Reader(self._expect(b"p"))
        if reader.cstring() != SCRAM:
            raise Refused("28000", f"unsupported SASL mechanism: use {SCRAM}")
        length = reader.int32()
        try:
            server_first = exchange.first(reader.bytes(length).decode())
        except (ValueError, UnicodeDecodeError) as e:
            raise wire.ProtocolError(f"malformed SCRAM message: {e}") from None
        self._send_now(wire.authentication(11, server_first.encode()))
        try:
            server_final = exchange.final(self._expect(b"p").decode())
        except (ValueError, UnicodeDecodeError) as e:
            raise wire.ProtocolError(f"malformed SCRAM message: {e}") from None
        if server_final is None:
            return False
        self._out.append(wire.authentication(12, server_final.encode()))
        return True

    def _expect(self, kind: bytes) -> bytes:
        got, payload = wire.read_message(self.sock)
        if got != kind:
            raise wire.ProtocolError(f"expected message {kind!r}, got {got!r}")
        return payload

    # --- the query loop ----------------------------------------------------------------------
    def _loop(self) -> None:
        handlers = {b"Q": self._simple, b"P": self._parse, b"B": self._bind, b"D": self._describe,
                    b"E": self._execute, b"C": self._close_target, b"S": self._sync, b"H": self._flush}
        while True:
            kind, payload = wire.read_message(self.sock)
            if kind == b"X":
                return
            handler = handlers.get(kind)
            if handler is None:
                raise wire.ProtocolError(f"unexpected message type {kind!r}")
            if self._skip_to_sync and kind not in (b"S", b"Q"):
                continue  # after an error in the extended protocol, everything up to Sync is ignored
            try:
                handler(payload)
            except (errors.Error, duckdb.Error) as e:
                if isinstance(e, duckdb.Error):
                    e = errors.OperationalError(str(e).splitlines()[0] if str(e) else type(e).__name__)
                self._error(e)
                if kind != b"Q":
                    # Everything up to Sync is now ignored (Flush too); the error goes out at once, as
                    # PostgreSQL sends it: a client waiting on a Flush for its answer gets the error.
                    self._skip_to_sync = True
                    self._flush(b"")

    def _simple(self, payload: bytes) -> None:
        self._skip_to_sync = False
        sql = wire.Reader(payload).cstring()
        statements = split_statements(sql) if sql.strip() else []
        try:
            if not statements:
                self._out.append(wire.EMPTY_QUERY)
            group: list[str] = []
            for text in statements + [None]:
                copy = None if text is None else copy_out.parse(text)
                answer = None if text is None else self._client_statement(copy.query if copy else text)
                if text is not None and answer is None and copy is None:
                    group.append(text)
                    continue
                if group:
                    self._send_results(self._run(";\n".join(group), []), group)
                    group = []
                if copy is not None:
                    self._copy_out(copy)
                elif answer is not None:
                    self._send_client_answer(answer)
        except errors.Error as e:
            self._error(e)
        self._out.append(wire.ready_for_query(self.status))
        self._flush(b"")

    def _copy_out(self, copy: copy_out.CopyOut) -> None:
        """COPY (query) TO STDOUT: the query runs (and is charged) as any other; its rows go out as CopyData."""
        results = self._run(copy.query, [])
        result = results[-1] if results else None
        if result is None or not result.columns:
            raise errors.ProgrammingError("COPY (query) TO STDOUT needs a query that returns rows")
        self._out.append(wire.copy_out_response(len(result.columns)))
        for line in copy_out.lines(result, copy):
            self._out.append(wire.copy_data(line))
            if len(self._out) > 512:
                self._flush(b"")
        self._out += [wire.COPY_DONE, wire.command_complete(f"COPY {len(result.rows)}")]

    def _parse(self, payload: bytes) -> None:
        parsed = wire.parse_parse(payload)
        if len(split_statements(parsed.query)) > 1:
            raise errors.ProgrammingError("cannot insert multiple commands into a prepared statement")
        self.prepared[parsed.name] = Prepared(parsed.query, parsed.param_types)
        self._out.append(wire.PARSE_COMPLETE)

    def _bind(self, payload: bytes) -> None:
        bind = wire.parse_bind(payload)
        prepared = self.prepared.get(bind.statement)
        if prepared is None:
            raise errors.ProgrammingError(f'prepared statement "{bind.statement}" does not exist')
        formats = bind.param_formats or [0]
        if len(formats) not in (1, len(bind.params)):
            raise wire.ProtocolError("parameter format codes do not match the parameters")
        values = []
        types = self._parameter_types(prepared, len(bind.params))
        for i, raw in enumerate(bind.params):
            oid = types[i]
            binary = (formats[0] if len(formats) == 1 else formats[i]) == 1
            try:
                values.append(pgcompat.decode_parameter(raw, oid, binary))
            except (ValueError, UnicodeDecodeError, ArithmeticError, struct.error):
                raise errors.DataError(f"parameter ${i + 1} is not a valid value of type OID {oid}") from None
        self.portals[bind.portal] = Portal(prepared, values, bind.result_formats, columns=prepared.columns,
                                           oids=list(prepared.oids))
        self._out.append(wire.BIND_COMPLETE)

    def _parameter_types(self, prepared: Prepared, count: int) -> list[int]:
        """The type OID of each of `count` parameters: as Parse gave it, else as its context tells (0: unknown)."""
        if prepared.inferred is None:
            prepared.inferred = self._infer_parameters(prepared.sql)
        given = prepared.param_types
        return [(given[i] if i < len(given) else 0) or prepared.inferred.get(i + 1, 0) for i in range(count)]

    def _infer_parameters(self, sql: str) -> dict[int, int]:
        if "$" not in sql:
            return {}
        session = self.connection.session
        try:
            tree = sqlglot.parse_one(pgcompat.rewrite_catalog_sql(sql), read=session.dialect)
            return parameters.infer(tree, session.workspace.column_types(tree, parameters.tables_named(tree)))
        except (sqlglot.errors.SqlglotError, errors.Error, duckdb.Error):
            return {}  # a statement this cannot read: its Describe or Execute says what is wrong

    def _describe(self, payload: bytes) -> None:
        kind, name = wire.parse_target(payload)
        if kind == "S":
            prepared = self.prepared.get(name)
            if prepared is None:
                raise errors.ProgrammingError(f'prepared statement "{name}" does not exist')
            count = max([len(prepared.param_types)] + [int(n) for n in _PLACEHOLDER.findall(prepared.sql)])
            types = self._parameter_types(prepared, count)
            self._out.append(wire.parameter_description([t or pgcompat.TEXT for t in types]))
            shape = self._shape(prepared.sql)
            if shape is None:
                prepared.columns, prepared.oids = None, []
                self._out.append(wire.NO_DATA)
            else:
                prepared.columns, prepared.oids = list(shape.columns), pgcompat.result_oids(shape)
                self._out.append(self._row_description(shape, prepared.sql))
            return
        portal = self._portal(name)
        shape = self._portal_shape(portal)
        if shape is not None and shape.columns:
            portal.columns, portal.oids = list(shape.columns), pgcompat.result_oids(shape)
            self._out.append(self._row_description(shape, portal.prepared.sql, portal.result_formats))
        else:
            portal.columns, portal.oids = [], []
            self._out.append(wire.NO_DATA)

    def _portal_shape(self, portal: Portal) -> Result | None:
        """The columns a bound statement returns: described without running it where that can be known
        (a DP query is charged only at Execute); otherwise (public statements, the server's own) it runs now."""
        sql = portal.prepared.sql
        if portal.results is None and sql.strip() and pgcompat.client_statement(sql, dict(self.settings)) is None:
            shape = self._described(sql)
            if shape is not None:
                return shape
        self._run_portal(portal)
        return portal.results[0] if portal.results else None

    def _shape(self, sql: str) -> Result | None:
        """The columns a prepared statement will return, known before it runs (None: none, or not known
        until it is bound: its portal's Describe then says)."""
        answer = pgcompat.client_statement(sql, dict(self.settings)) if sql.strip() else None
        if answer is not None:
            return Result(list(answer.columns), [], kind="status") if answer.columns else None
        if not sql.strip():
            return None
        shape = self._described(sql)
        return shape if shape is not None and shape.columns else None

    def _described(self, sql: str) -> Result | None:
        """The session's description of a statement (parameters unbound: they never decide the columns),
        remembered for DP queries, whose columns depend only on their text and dpsql.stderr (describing one
        costs about as much as compiling it)."""
        session = self.connection.session
        key = (sql, session.stderr_columns)
        if key in self._shapes:
            return self._shapes[key]
        shape = session.describe(pgcompat.rewrite_catalog_sql(sql))
        if shape is not None and shape.kind == "dp":
            if len(self._shapes) >= _SHAPES_KEPT:
                self._shapes.pop(next(iter(self._shapes)))
            self._shapes[key] = shape
        return shape

    def _execute(self, payload: bytes) -> None:
        name, limit = wire.parse_execute(payload)
        portal = self._portal(name)
        self._run_portal(portal)
        result = portal.results[0] if portal.results else None
        if portal.columns and result is not None and len(result.columns) != len(portal.columns):
            raise ChangedResultType()  # (a statement queued in a workload answers nothing yet: no rows)
        if result is None:
            self._out.append(wire.command_complete(portal.tag))
            return
        if result.columns:
            end = len(result.rows) if limit <= 0 else min(len(result.rows), portal.sent + limit)
            self._send_rows(result, portal, portal.sent, end)
            portal.sent = end
            if end < len(result.rows):
                self._out.append(wire.PORTAL_SUSPENDED)
                return
        self._out.append(wire.command_complete(pgcompat.command_tag(result, portal.prepared.sql)))

    def _close_target(self, payload: bytes) -> None:
        kind, name = wire.parse_target(payload)
        (self.prepared if kind == "S" else self.portals).pop(name, None)
        self._out.append(wire.CLOSE_COMPLETE)

    def _sync(self, _payload: bytes) -> None:
        self._skip_to_sync = False
        self.portals.pop("", None)
        self._out.append(wire.ready_for_query(self.status))
        self._flush(b"")

    def _flush(self, _payload: bytes) -> None:
        if self._out:
            data, self._out = b"".join(self._out), []
            self.sock.sendall(data)

    # --- running statements ------------------------------------------------------------------
    def _portal(self, name: str) -> Portal:
        portal = self.portals.get(name)
        if portal is None:
            raise errors.ProgrammingError(f'portal "{name}" does not exist')
        return portal

    def _run_portal(self, portal: Portal) -> None:
        if portal.results is not None:
            return
        sql = portal.prepared.sql
        answer = self._client_statement(sql) if sql.strip() else pgcompat.ClientAnswer("")
        if answer is not None:
            if answer.rows:
                portal.results = [Result(list(answer.columns), [tuple(r) for r in answer.rows], kind="status")]
            else:
                portal.results, portal.tag = [], answer.tag
            self._apply(answer)
            return
        if portal.columns:  # described: a setting changed since (dpsql.stderr) must not change how many columns
            shape = self._described(sql)
            if shape is not None and len(shape.columns) != len(portal.columns):
                raise ChangedResultType()
        if any(f != 0 for f in portal.result_formats):
            self._check_result_formats(portal)
        portal.results = self._run(sql, portal.params)
        portal.tag = pgcompat.command_tag(None, sql)

    def _check_result_formats(self, portal: Portal) -> None:
        """Refuse result format codes that do not match the answer's columns before the statement runs: a DP
        answer must not be charged and then fail to be sent. (Every type shown has a binary format:
        `pgcompat.BINARY_RESULTS`.)"""
        shape = self._described(portal.prepared.sql)
        if shape is not None:
            pgcompat.result_formats(portal.result_formats, len(shape.columns))

    def _client_statement(self, sql: str) -> pgcompat.ClientAnswer | None:
        answer = pgcompat.client_statement(sql, self.settings)
        if self.status == FAILED and not (answer is not None and answer.transaction in ("end", "recover")):
            raise TransactionAborted("current transaction is aborted, commands ignored until end of transaction "
                                     "block")
        return answer

    def _apply(self, answer: pgcompat.ClientAnswer) -> None:
        if answer.transaction == "begin":
            self.status = IN_TRANSACTION
        elif answer.transaction == "end":
            self.status = IDLE
        elif answer.transaction == "recover" and self.status == FAILED:
            self.status = IN_TRANSACTION
        if answer.setting is not None:
            self._out.append(wire.parameter_status(*answer.setting))

    def _run(self, sql: str, params: list) -> list[Result]:
        """Statements on the analyst's session (DP queries, public SQL, dpsql's own statements)."""
        self._cancel = False
        workspace = self.connection.session.workspace
        if not self._public_listed and pgcompat.reads_catalog(sql):
            workspace.bring_public()  # so that schema browsers list the public tables
            self._public_listed = True
        if pgcompat.reads_settings(sql):
            workspace.prepare_for_clients([pgcompat.settings_view(self.settings, partial(show, self.connection.session))])
        try:
            return self.connection.session.execute(pgcompat.rewrite_catalog_sql(sql), params or None)
        except (errors.Error, duckdb.Error) as e:
            if self._cancel:  # whatever stopped it (an interrupted scan, planning), the client asked for it
                raise Cancelled("canceling statement due to user request; nothing was charged") from None
            log.debug("failed statement of %s: %s", self.analyst, sql[:500])
            if isinstance(e, duckdb.Error):
                raise errors.OperationalError(str(e).splitlines()[0]) from None
            raise

    def _before_charge(self) -> None:
        """The last moment a statement can be stopped with nothing spent: if the client asked to
        cancel, or has gone, it is."""
        if self._cancel:
            raise Cancelled("canceling statement due to user request; nothing was charged")
        if self._client_gone():
            raise errors.OperationalError("the client disconnected before the answer; nothing was charged")

    def _client_gone(self) -> bool:
        """Whether the client closed its end (peeked on a duplicate of the raw socket, so TLS works too)."""
        try:
            raw = socket.fromfd(self.sock.fileno(), self.sock.family, self.sock.type)
        except OSError:
            return True
        try:
            return raw.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True
        finally:
            raw.close()

    # --- sending ----------------------------------------------------------------------------
    def _send_now(self, data: bytes) -> None:
        self._out.append(data)
        self._flush(b"")

    def _send_client_answer(self, answer: pgcompat.ClientAnswer) -> None:
        self._apply(answer)
        if answer.columns:
            result = Result(list(answer.columns), [tuple(r) for r in answer.rows], kind="status")
            self._out.append(self._row_description(result, ""))
            self._send_rows(result, None, 0, len(result.rows))
        self._out.append(wire.command_complete(answer.tag))

    def _send_results(self, results: list[Result], statements: list[str]) -> None:
        if not results:
            self._out.append(wire.command_complete(pgcompat.command_tag(None, statements[-1])))
        matched = statements if len(statements) == len(results) else [""] * len(results)
        for result, sql in zip(results, matched):
            if result.columns:
                self._out.append(self._row_description(result, sql))
                self._send_rows(result, None, 0, len(result.rows))
            self._out.append(wire.command_complete(pgcompat.command_tag(result, sql or statements[-1])))

    def _row_description(self, result: Result, sql: str, formats: list[int] | None = None) -> bytes:
        """The RowDescription of `result`, the answer to `sql`: its columns named as PostgreSQL names them
        (`postgres_names`: `count`, not `COUNT(*)`)."""
        names = postgres_names(sql, result.columns, result.dp, self.connection.session.dialect)
        return pgcompat.row_description(names, pgcompat.result_oids(result), formats or [])

    def _send_rows(self, result: Result, portal: Portal | None, start: int, end: int) -> None:
        oids = portal.oids if portal is not None and portal.oids else pgcompat.result_oids(result)
        formats = pgcompat.result_formats(portal.result_formats if portal else [], len(result.columns))
        for row in result.rows[start:end]:
            self._out.append(wire.data_row(
                pgcompat.encode_binary(v, oid) if fmt == 1 else pgcompat.encode_text(v)
                for v, oid, fmt in zip(row, oids, formats)))
            if len(self._out) > 512:
                self._flush(b"")

    def _error(self, e: Exception) -> None:
        sqlstate = getattr(e, "sqlstate", None) or next(s for cls, s in _SQLSTATES if isinstance(e, cls))
        if self.status == IN_TRANSACTION:
            self.status = FAILED
        self._out.append(wire.error_response(sqlstate, str(e).splitlines()[0] if str(e) else type(e).__name__,
                                             detail=getattr(e, "detail", ""), routine=getattr(e, "routine", "")))

