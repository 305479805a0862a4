"""What PostgreSQL clients expect of a server beyond SQL: types, settings, transactions, catalog functions.

A client library (psql, psycopg, SQLAlchemy, JDBC drivers) sends, besides the analyst's SQL,
statements about the server itself — `SET extra_float_digits = 3`, `SHOW transaction isolation
level`, `BEGIN`/`COMMIT`, `SELECT pg_catalog.version()` — and reads values in PostgreSQL's
text format with PostgreSQL type OIDs. This module answers those itself (`client_statement`),
adapts catalog queries to the analyst's workspace, whose DuckDB emulates most of `pg_catalog`
(`rewrite_catalog_sql`, `CATALOG_MACROS`: what psql, JDBC, SQLAlchemy, Metabase and Superset ask),
answers current_setting() and pg_settings from the connection's settings (`settings_view`), and encodes
values (`type_oid`, `encode_text`, `decode_parameter`, `row_description`).

To support a new client: capture what it sends (the server logs failed statements at
DEBUG level on `dpsql.server`), then add the setting to `SETTINGS`, the statement shape
to `client_statement`, or the catalog function to `CATALOG_MACROS`.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
import struct
import uuid
from dataclasses import dataclass

from dpsql.errors import ProgrammingError
from dpsql.answers.result import Result
from dpsql.interfaces.server import binary as binary_formats
from dpsql.interfaces.server import wire

SERVER_VERSION = "16.0"
VERSION_TEXT = f"PostgreSQL {SERVER_VERSION} (dpsql: differentially private answers; DuckDB workspace)"

# Settings reported at start-up (ParameterStatus) and answered by SHOW; SET of any of these is
# accepted and remembered for the connection (it changes nothing in dpsql's answers); SET of
# anything else (but dpsql.*) is refused.
SETTINGS = {
    "server_version": SERVER_VERSION, "server_encoding": "UTF8", "client_encoding": "UTF8",
    "DateStyle": "ISO, MDY", "IntervalStyle": "postgres", "TimeZone": "UTC", "integer_datetimes": "on",
    "standard_conforming_strings": "on", "application_name": "", "is_superuser": "off",
    "default_transaction_read_only": "off", "in_hot_standby": "off", "search_path": '"$user", public',
    "extra_float_digits": "1", "statement_timeout": "0", "lock_timeout": "0",
    "idle_in_transaction_session_timeout": "0", "transaction_isolation": "read committed",
    "transaction isolation level": "read committed", "max_identifier_length": "63", "lc_messages": "C",
    "lc_monetary": "C", "lc_numeric": "C", "lc_time": "C", "bytea_output": "hex", "client_min_messages": "notice",
    "row_security": "on", "jit": "off", "geqo": "on",
    "default_table_access_method": "heap", "server_version_num": "160000", "max_index_keys": "32",
    "default_transaction_isolation": "read committed", "block_size": "8192",
}
# dpsql's own settings (`SET dpsql.<name>`), read by current_setting('dpsql.<name>') and pg_settings too
DPSQL_SETTINGS = ("stderr", "query_epsilon", "query_rho", "max_rmse", "objective", "planning_seconds", "key_delta",
                  "estimator", "small_counts")
STARTUP_REPORTED = ("server_version", "server_encoding", "client_encoding", "DateStyle", "IntervalStyle",
                    "TimeZone", "integer_datetimes", "standard_conforming_strings", "application_name",
                    "is_superuser", "default_transaction_read_only", "in_hot_standby")

# Catalog functions psql, pgcli, JDBC and SQLAlchemy call that DuckDB's pg_catalog emulation lacks; created in
# each analyst's workspace (where only catalog metadata lives). Calls written pg_catalog.f(...) (and
# information_schema._pg_expandarray(...)) are rewritten to f(...) so that these apply.
_UNQUALIFIED = "regexp_replace(replace(name, '\"', ''), '^.*[.]', '')"
_PRIVILEGE = ("lower(privilege) = 'select' OR coalesce(obj_description(to_regclass(relation)), '') "
              "NOT LIKE 'protected%'")
CATALOG_MACROS = [
    "CREATE MACRO pg_get_userbyid(id) AS 'dpsql'",
    f"CREATE MACRO to_regtype(name) AS (SELECT oid FROM pg_catalog.pg_type WHERE typname = {_UNQUALIFIED} LIMIT 1)",
    f"CREATE MACRO to_regclass(name) AS (SELECT oid FROM pg_catalog.pg_class WHERE relname = {_UNQUALIFIED} LIMIT 1)",
    f"CREATE MACRO to_regproc(name) AS (SELECT oid FROM pg_catalog.pg_proc WHERE proname = {_UNQUALIFIED} LIMIT 1)",
    # comments (the workspace marks protected and public tables: `Workspace.declare_protected`), keyed by
    # pg_class as PostgreSQL's are
    "CREATE TEMP VIEW dpsql_pg_description AS SELECT objoid, to_regclass('pg_class') AS classoid, objsubid, "
    "description FROM pg_catalog.pg_description WHERE description IS NOT NULL AND description <> ''",
    "CREATE MACRO obj_description(id, catalog := NULL) AS (SELECT description FROM dpsql_pg_description "
    "WHERE objoid = id AND objsubid = 0 LIMIT 1)",
    "CREATE MACRO col_description(id, column_number) AS (SELECT description FROM dpsql_pg_description "
    "WHERE objoid = id AND objsubid = column_number LIMIT 1)",
    "CREATE MACRO _pg_expandarray(arr) AS {'x': arr[1], 'n': 1}",  # DuckDB's pg_index has no keys (indkey NULL)
    "CREATE MACRO array_upper(arr, dimension) AS CASE WHEN len(arr) > 0 THEN len(arr) END",
    "CREATE MACRO array_lower(arr, dimension) AS CASE WHEN len(arr) > 0 THEN 1 END",
    "CREATE MACRO shobj_description(id, catalog) AS NULL::VARCHAR",
    "CREATE MACRO pg_get_expr(expression, relation, pretty := false) AS NULL::VARCHAR",
    "CREATE MACRO pg_encoding_to_char(id) AS 'UTF8'",
    "CREATE MACRO pg_get_constraintdef(id, pretty := false) AS NULL::VARCHAR",
    "CREATE MACRO pg_get_indexdef(id, column_number := 0, pretty := false) AS NULL::VARCHAR",
    "CREATE MACRO pg_get_viewdef(id, pretty := false) AS NULL::VARCHAR",
    "CREATE MACRO pg_relation_is_publishable(id) AS false",
    "CREATE MACRO pg_total_relation_size(id) AS 0",
    "CREATE MACRO pg_get_serial_sequence(relation, column_name) AS NULL::VARCHAR",
    "CREATE MACRO pg_collation_is_visible(id) AS true",
    "CREATE MACRO pg_type_is_visible(id) AS true",
    "CREATE MACRO pg_get_partkeydef(id) AS NULL::VARCHAR",
    "CREATE MACRO pg_get_statisticsobjdef_columns(id) AS NULL::VARCHAR",
    "CREATE MACRO pg_relation_size(id) AS 0",
    "CREATE MACRO pg_table_size(id) AS 0",
    "CREATE MACRO pg_size_pretty(size) AS format_bytes(size::BIGINT)",
    "CREATE MACRO pg_tablespace_location(id) AS ''",
    "CREATE MACRO has_database_privilege(database, privilege) AS true, (role, database, privilege) AS true",
    "CREATE MACRO has_schema_privilege(schema, privilege) AS true, (role, schema, privilege) AS true",
    # every table can be read; a protected one (`Workspace.declare_protected`'s comment) is never written to
    *(f"CREATE MACRO {name}(relation, privilege) AS ({_PRIVILEGE}), (role, relation, privilege) AS ({_PRIVILEGE})"
      for name in ("has_table_privilege", "has_any_column_privilege")),
    # current_setting(name [, missing_ok]) reads the connection's settings (`settings_view`), as PostgreSQL's does
    "CREATE MACRO dpsql_current_setting" + ", ".join(
        f"({args}) AS (SELECT CASE WHEN count(*) = 0{missing} THEN error('unrecognized configuration parameter \"' "
        "|| setting_name || '\"') ELSE first(setting) END FROM dpsql_pg_settings WHERE lower(name) = lower(setting_name))"
        for args, missing in (("setting_name", ""), ("setting_name, missing_ok", " AND NOT missing_ok"))),
    # type names as PostgreSQL's format_type writes them (SQLAlchemy and others map these names to types)
    "CREATE MACRO dpsql_format_type(id, modifier) AS coalesce((SELECT CASE typname WHEN 'int8' THEN 'bigint' "
    "WHEN 'int4' THEN 'integer' WHEN 'int2' THEN 'smallint' WHEN 'float8' THEN 'double precision' "
    "WHEN 'float4' THEN 'real' WHEN 'varchar' THEN 'character varying' WHEN 'bool' THEN 'boolean' "
    "WHEN 'timestamp' THEN 'timestamp without time zone' WHEN 'timestamptz' THEN 'timestamp with time zone' "
    "WHEN 'time' THEN 'time without time zone' ELSE typname END FROM pg_catalog.pg_type WHERE oid = id), "
    "CASE id WHEN 25 THEN 'text' WHEN 114 THEN 'json' WHEN 705 THEN 'unknown' END)",  # types DuckDB's lacks
    # PostgreSQL's variadic json_build_object as DuckDB's json_object, for up to 10 pairs (SQLAlchemy's reflection)
    "CREATE MACRO json_build_object" + ", ".join(
        "(" + ", ".join(f"a{i}" for i in range(n)) + ") AS json_object("
        + ", ".join(f"a{i}::VARCHAR" if i % 2 == 0 else f"a{i}" for i in range(n)) + ")" for n in range(2, 21, 2)),
]

# Catalogs of PostgreSQL features a workspace has none of (row security, extended statistics, publications,
# inheritance, triggers, rules): empty, with the columns psql's \d and JDBC read.
_EMPTY_CATALOGS = {
    "pg_policy": "oid BIGINT, polname VARCHAR, polrelid BIGINT, polcmd VARCHAR, polpermissive BOOLEAN, "
                 "polroles BIGINT[], polqual VARCHAR, polwithcheck VARCHAR",
    "pg_statistic_ext": "oid BIGINT, stxrelid BIGINT, stxname VARCHAR, stxnamespace BIGINT, stxowner BIGINT, "
                        "stxstattarget INTEGER, stxkeys INTEGER[], stxkind VARCHAR[], stxexprs VARCHAR",
    "pg_publication": "oid BIGINT, pubname VARCHAR, pubowner BIGINT, puballtables BOOLEAN, pubinsert BOOLEAN, "
                      "pubupdate BOOLEAN, pubdelete BOOLEAN, pubtruncate BOOLEAN, pubviaroot BOOLEAN",
    "pg_publication_rel": "oid BIGINT, prpubid BIGINT, prrelid BIGINT, prqual VARCHAR, prattrs INTEGER[]",
    "pg_publication_namespace": "oid BIGINT, pnpubid BIGINT, pnnspid BIGINT",
    "pg_inherits": "inhrelid BIGINT, inhparent BIGINT, inhseqno INTEGER, inhdetachpending BOOLEAN",
    "pg_trigger": "oid BIGINT, tgrelid BIGINT, tgparentid BIGINT, tgname VARCHAR, tgfoid BIGINT, tgtype INTEGER, "
                  "tgenabled VARCHAR, tgisinternal BOOLEAN, tgconstraint BIGINT",
    "pg_rewrite": "oid BIGINT, rulename VARCHAR, ev_class BIGINT, ev_type VARCHAR, ev_enabled VARCHAR, "
                  "is_instead BOOLEAN",
    "pg_partitioned_table": "partrelid BIGINT, partstrat VARCHAR, partnatts INTEGER",
    "pg_foreign_table": "ftrelid BIGINT, ftserver BIGINT, ftoptions VARCHAR[]",
    "pg_collation": "oid BIGINT, collname VARCHAR, collnamespace BIGINT, collowner BIGINT, collprovider VARCHAR, "
                    "collisdeterministic BOOLEAN, collencoding INTEGER, collcollate VARCHAR, collctype VARCHAR",
    "pg_opclass": "oid BIGINT, opcname VARCHAR, opcmethod BIGINT, opcnamespace BIGINT, opcdefault BOOLEAN",
    "pg_auth_members": "oid BIGINT, roleid BIGINT, member BIGINT, grantor BIGINT, admin_option BOOLEAN",
    # statistics: none, so that no table's row count is told (a protected table's size is private)
    "pg_stat_user_tables": "relid BIGINT, schemaname VARCHAR, relname VARCHAR, n_live_tup BIGINT, "
                           "n_dead_tup BIGINT, seq_scan BIGINT, idx_scan BIGINT",
    "pg_matviews": "schemaname VARCHAR, matviewname VARCHAR, matviewowner VARCHAR, tablespace VARCHAR, "
                   "hasindexes BOOLEAN, ispopulated BOOLEAN, definition VARCHAR",
}


def _empty_view(name: str, columns: str) -> str:
    casts = ", ".join(f"CAST(NULL AS {t}) AS {c}" for c, t in (part.split() for part in columns.split(", ")))
    return f"CREATE TEMP VIEW dpsql_{name} AS SELECT {casts} WHERE false"


# information_schema.columns.udt_name: PostgreSQL's name of a column's type (Metabase maps types by it)
_UDT_NAME = "CASE WHEN c.data_type LIKE 'DECIMAL%' THEN 'numeric' " + " ".join(
    f"WHEN c.data_type = '{duckdb}' THEN '{postgres}'" for duckdb, postgres in (
        ("BIGINT", "int8"), ("INTEGER", "int4"), ("SMALLINT", "int2"), ("DOUBLE", "float8"), ("FLOAT", "float4"),
        ("BOOLEAN", "bool"), ("TIMESTAMP WITH TIME ZONE", "timestamptz"), ("BLOB", "bytea"))) + \
    " ELSE lower(c.data_type) END"


def catalog_setup(database: str, pid: int) -> list[str]:
    """The workspace's set-up for a client that connected to `database`: `CATALOG_MACROS`, pg_database
    with that one database (its owner's name for the data the profile serves), and pg_backend_pid()."""
    name = database.replace("'", "''")
    return [settings_view(SETTINGS), f"CREATE MACRO pg_backend_pid() AS {int(pid)}"] + CATALOG_MACROS + [
        "CREATE TEMP VIEW dpsql_pg_class AS SELECT * REPLACE (NULL::VARCHAR[] AS reloptions, 0 AS relam), "
        "false AS relforcerowsecurity FROM pg_catalog.pg_class",
        "CREATE TEMP VIEW dpsql_pg_index AS SELECT *, false AS indnullsnotdistinct FROM pg_catalog.pg_index",
        "CREATE TEMP VIEW dpsql_pg_type AS SELECT * REPLACE (coalesce(typrelid, 0) AS typrelid, coalesce(typelem, 0) "
        "AS typelem, coalesce(typbasetype, 0) AS typbasetype, coalesce(typtypmod, -1) AS typtypmod) "
        "FROM pg_catalog.pg_type",
        f"CREATE TEMP VIEW dpsql_pg_database AS SELECT 1 AS oid, '{name}' AS datname, 10 AS datdba, 6 AS encoding, "
        "'c' AS datlocprovider, false AS datistemplate, true AS datallowconn, -1 AS datconnlimit, 0 AS datfrozenxid, "
        "0 AS datminmxid, 1663 AS dattablespace, 'C' AS datcollate, 'C' AS datctype, NULL::VARCHAR AS daticulocale, "
        "NULL::VARCHAR AS daticurules, NULL::VARCHAR AS datcollversion, NULL::VARCHAR[] AS datacl",
        # the analyst's tables and views only: never dpsql's own set-up (these views) nor DuckDB's
        "CREATE TEMP VIEW dpsql_pg_views AS SELECT schema_name AS schemaname, view_name AS viewname, "
        "'dpsql' AS viewowner, sql AS definition FROM duckdb_views() WHERE NOT internal AND NOT temporary",
        "CREATE TEMP VIEW dpsql_information_schema_columns AS SELECT c.* REPLACE (coalesce(c.udt_schema, "
        f"'pg_catalog') AS udt_schema, coalesce(c.udt_name, {_UDT_NAME}) AS udt_name, coalesce(c.is_identity, 'NO') "
        "AS is_identity) FROM information_schema.columns AS c WHERE (c.table_schema, c.table_name) IN "
        "(SELECT (schema_name, table_name) FROM duckdb_tables() WHERE NOT temporary UNION ALL "
        "SELECT (schema_name, view_name) FROM duckdb_views() WHERE NOT internal AND NOT temporary)",
        "CREATE TEMP VIEW dpsql_pg_roles AS SELECT 10 AS oid, 'dpsql' AS rolname, false AS rolsuper, "
        "true AS rolinherit, false AS rolcreaterole, false AS rolcreatedb, true AS rolcanlogin, -1 AS rolconnlimit, "
        "NULL::TIMESTAMP AS rolvaliduntil, false AS rolreplication, false AS rolbypassrls",
    ] + [_empty_view(name, columns) for name, columns in _EMPTY_CATALOGS.items()]

def settings_view(settings: dict[str, str], show=None) -> str:
    """pg_settings (and so current_setting) as the connection's settings: the server's (`SETTINGS`, as the
    client SET them) and dpsql's (`show`: the session's SHOW dpsql.<name>), never the workspace engine's.
    Made again before a statement reads them."""
    if show is not None:
        settings = {**settings, **{f"dpsql.{name}": str(show(name).rows[0][0]) for name in DPSQL_SETTINGS}}
    rows = ", ".join(f"('{k}', '{v.replace(chr(39), chr(39) * 2)}')" for k, v in settings.items() if " " not in k)
    return ("CREATE OR REPLACE TEMP VIEW dpsql_pg_settings AS SELECT name, setting, NULL::VARCHAR AS unit, "
            "'dpsql' AS category, '' AS short_desc, 'string' AS vartype, 'session' AS source, setting AS boot_val, "
            f"setting AS reset_val FROM (VALUES {rows}) AS s(name, setting)")


_SETTINGS_READ = re.compile(r"\b(current_setting|pg_settings)\b", re.I)


def reads_settings(sql: str) -> bool:
    """Whether a statement reads settings (current_setting, pg_settings): `settings_view` is made again first."""
    return _SETTINGS_READ.search(sql) is not None


_COMMENTS = re.compile(r"^\s*(?:--[^\n]*\n\s*|/\*.*?\*/\s*)*", re.S)
_BEGIN = re.compile(r"^(BEGIN|START\s+TRANSACTION)\b", re.I)
_COMMIT = re.compile(r"^(COMMIT|END)(\s+(WORK|TRANSACTION))?\s*(AND\s+(NO\s+)?CHAIN)?\s*$", re.I)
_ROLLBACK = re.compile(r"^(ROLLBACK|ABORT)(\s+(WORK|TRANSACTION))?\s*$", re.I)
_SAVEPOINT = re.compile(r'^(SAVEPOINT|RELEASE(\s+SAVEPOINT)?|ROLLBACK\s+TO(\s+SAVEPOINT)?)\s+("[^"]+"|\w+)\s*$', re.I)
_SET = re.compile(r"^SET\s+(?:(?:SESSION|LOCAL)\s+)?(?!dpsql\.)([\w.]+)\s*(?:=|TO)\s*(.+?)\s*$", re.I | re.S)
_SET_SPECIAL = re.compile(r"^SET\s+(?:(?:SESSION|LOCAL)\s+)?(TIME\s+ZONE|NAMES|SESSION\s+CHARACTERISTICS|"
                          r"TRANSACTION)\b\s*(.*?)\s*$", re.I | re.S)
_SHOW = re.compile(r"^SHOW\s+(?!dpsql\.)(ALL|[\w.]+(?:\s+isolation\s+level)?)\s*$", re.I)
_RESET = re.compile(r"^(RESET\s+(ALL|[\w.]+)|DISCARD\s+(ALL|PLANS|SEQUENCES|TEMP|TEMPORARY)|DEALLOCATE(\s+PREPARE)?"
                    r"\s+(ALL|\w+)|UNLISTEN\s+\S+|CLOSE\s+ALL)\s*$", re.I)


@dataclass(frozen=True)
class ClientAnswer:
    """What a client statement does: a command tag, optionally rows, and the transaction state after it."""

    tag: str
    columns: tuple[str, ...] = ()
    rows: tuple[tuple, ...] = ()
    transaction: str | None = None  # "begin", "end", "recover" (ROLLBACK TO a savepoint) or None (unchanged)
    setting: tuple[str, str] | None = None  # a setting to report back (ParameterStatus)


def strip_leading_comments(sql: str) -> str:
    return _COMMENTS.sub("", sql, count=1).strip().rstrip(";").strip()


def client_statement(sql: str, settings: dict[str, str]) -> ClientAnswer | None:
    """The answer to a statement about the server or the transaction, or None for SQL proper."""
    text = strip_leading_comments(sql)
    if _BEGIN.match(text) and not re.match(r"^BEGIN\s+WORKLOAD\b", text, re.I):
        return ClientAnswer("BEGIN", transaction="begin")
    if _COMMIT.match(text):
        return ClientAnswer("COMMIT", transaction="end")
    if _ROLLBACK.match(text):
        return ClientAnswer("ROLLBACK", transaction="end")
    m = _SAVEPOINT.match(text)
    if m:
        command = m.group(1).split()[0].upper()
        return ClientAnswer(command, transaction="recover" if command == "ROLLBACK" else None)
    m = _SET_SPECIAL.match(text)
    if m:
        kind = " ".join(m.group(1).upper().split())
        if kind == "TIME ZONE":
            settings["TimeZone"] = m.group(2).strip("'")
            return ClientAnswer("SET", setting=("TimeZone", settings["TimeZone"]))
        return ClientAnswer("SET")
    m = _SET.match(text)
    if m:
        name, value = m.group(1), m.group(2).strip().strip("'")
        known = _known_setting(name)
        if known is None:  # e.g. DuckDB's own settings: never passed on, and not silently ignored either
            raise ProgrammingError(f'unrecognized configuration parameter "{name}" (clients may set '
                                   f'PostgreSQL session settings and dpsql.*)')
        settings[known] = value
        return ClientAnswer("SET", setting=(known, value) if known in STARTUP_REPORTED else None)
    m = _SHOW.match(text)
    if m:
        name = " ".join(m.group(1).split())
        if name.upper() == "ALL":
            return ClientAnswer("SHOW", ("name", "setting", "description"),
                                tuple((k, v, "") for k, v in sorted(settings.items())))
        known = _known_setting(name)
        if known is None:
            raise ProgrammingError(f'unrecognized configuration parameter "{name}"')
        return ClientAnswer("SHOW", (name.lower(),), ((settings[known],),))
    if _VERSION_QUERY.match(text):
        return ClientAnswer("SELECT 1", ("version",), ((VERSION_TEXT,),))
    m = _RESET.match(text)
    if m:
        return ClientAnswer(" ".join(text.split()[:1]).upper())
    return None


def _known_setting(name: str) -> str | None:
    lowered = {k.lower(): k for k in SETTINGS}
    return lowered.get(name.lower())


_VERSION_QUERY = re.compile(r"^SELECT\s+(?:pg_catalog\s*\.\s*)?version\s*\(\s*\)\s*(?:AS\s+\w+\s*)?$", re.I)
_VERSION_CALL = re.compile(r"\b(?:pg_catalog\s*\.\s*)?version\s*\(\s*\)", re.I)
_OPERATOR = re.compile(r"OPERATOR\s*\(\s*pg_catalog\s*\.\s*([~!=<>*+\-/]+)\s*\)", re.I)
_COLLATE = re.compile(r"\s+COLLATE\s+pg_catalog\s*\.\s*\"?default\"?", re.I)
_CATALOG_CALL = re.compile(r"\binformation_schema\s*\.\s*(_pg_\w+)\s*\(", re.I)
_CATALOG_PREFIX = re.compile(r"(?<![.\w\"])(\"?)pg_catalog\1\s*\.\s*(?=[\w\"])", re.I)  # quoted or not
_FORMAT_TYPE = re.compile(r"(?<![.\w])format_type\s*\(", re.I)
_JSON_BUILD = re.compile(r"\bjsonb_build_object\s*\(", re.I)
# a keyword as a column alias (PostgreSQL takes any word after AS; Metabase names a column `select`): quoted
_KEYWORD_ALIAS = re.compile(r"\bAS\s+(select|from|where|group|order|having|limit|offset|union)\b(?=\s*(?:,|\bfrom\b|\)|$))",
                            re.I)
_CURRENT_SETTING = re.compile(r"(?<![.\w\"])(?:\"?\w+\"?\s*\.\s*){0,2}\"?current_setting\"?\s*\(", re.I)  # qualified too
_REPLACED = ["pg_class", "pg_index", "pg_database", "pg_description", "pg_type", "pg_settings", "pg_roles", "pg_views",
             *_EMPTY_CATALOGS]
_COLUMNS_VIEW = re.compile(r"(?<![.\w\"])(\"?)information_schema\1\s*\.\s*(\"?)columns\2(?![\w\"])", re.I)
_CATALOG_VIEW = re.compile(rf"(?<![.\w\"])(\"?)({'|'.join(_REPLACED)})\1(?![\w\"])", re.I)
_LITERAL_REG_CAST = re.compile(r"('(?:[^']|'')*'|\$\d+)\s*::\s*(?:pg_catalog\s*\.\s*)?(regclass|regtype|regproc)\b", re.I)
_NAME_REG_CAST = re.compile(r"\bCAST\s*\(\s*(\$\d+|'(?:[^']|'')*')\s+AS\s+(?:pg_catalog\s*\.\s*)?"
                            r"(regclass|regtype|regproc)\s*\)", re.I)  # a name (literal or parameter) looked up
_REG_CAST = re.compile(r"::\s*(?:pg_catalog\s*\.\s*)?(regclass|regtype|regproc|regnamespace|oid)\b", re.I)
_REG_CAST_AS = re.compile(r"\bAS\s+(?:pg_catalog\s*\.\s*)?(regclass|regtype|regproc|regnamespace)\s*\)", re.I)


_CATALOG_READ = re.compile(r"\b(pg_catalog|information_schema|pg_class|pg_tables|pg_views|pg_attribute)\b", re.I)


def reads_catalog(sql: str) -> bool:
    """Whether a statement reads the catalog (what tables there are), as schema browsers' queries do."""
    return _CATALOG_READ.search(sql) is not None


def rewrite_catalog_sql(sql: str) -> str:
    """Adapt PostgreSQL catalog idioms to the workspace's DuckDB: version(), OPERATOR(pg_catalog.~),
    COLLATE pg_catalog.default, pg_catalog.f(...) calls, catalogs the workspace replaces (`catalog_setup`),
    jsonb_build_object and ::regclass casts."""
    if "pg_" not in sql.lower() and "version" not in sql.lower() and "current_setting" not in sql.lower():
        return sql
    sql = _LITERAL_REG_CAST.sub(lambda m: f"to_{m.group(2).lower()}({m.group(1)})", sql)
    sql = _NAME_REG_CAST.sub(lambda m: f"to_{m.group(2).lower()}({m.group(1)})", sql)
    sql = _FORMAT_CALL.sub(_as_printf, sql)
    sql = _rewrite_oid_casts(sql)
    parts = _STRING_LITERAL.split(sql)  # string literals (odd positions) are left as they are
    return "".join(part if i % 2 else _rewrite_code(part) for i, part in enumerate(parts))


_STRING_LITERAL = re.compile(r"('(?:[^']|'')*')")
# PostgreSQL's format('%s', ...) and format('%I.%I', schema, table) as DuckDB's printf (identifiers unquoted)
_FORMAT_CALL = re.compile(r"(?<![.\w])format\s*\(\s*'((?:[^']|'')*%[sIL](?:[^']|'')*)'", re.I)
_CAST_START = re.compile(r"(?<![.\w])CAST\s*\(", re.I)
_CAST_TO_OID = re.compile(r"^(.*?)\s+AS\s+(?:\"?pg_catalog\"?\s*\.\s*)?\"?(regclass|regtype|regproc|regnamespace|oid)\"?\s*$",
                          re.I | re.S)
_NAME_EXPRESSION = re.compile(r"^\s*(?:'|\$\d|(?:printf|concat|quote_ident)\s*\()|\|\|", re.I)


def _as_printf(m: re.Match) -> str:
    return "printf('" + m.group(1).replace("%I", "%s").replace("%L", "''%s''") + "'"


def _rewrite_oid_casts(sql: str) -> str:
    """CAST(x AS regclass / regtype / regproc / oid): a name (a string expression) looked up with to_regclass
    and the like; anything else (an oid already) as BIGINT. Innermost casts first."""
    for start in reversed([m.start() for m in _CAST_START.finditer(sql)]):
        opening = sql.index("(", start)
        closing = _matching_paren(sql, opening)
        found = _CAST_TO_OID.match(sql[opening + 1:closing]) if closing > 0 else None
        if found is None:
            continue
        expression, kind = found.group(1), found.group(2).lower()
        if kind != "oid" and kind != "regnamespace" and _NAME_EXPRESSION.search(expression):
            replacement = f"to_{kind}({expression})"
        else:
            replacement = f"CAST({expression} AS BIGINT)"
        sql = sql[:start] + replacement + sql[closing + 1:]
    return sql


def _matching_paren(sql: str, opening: int) -> int:
    """The index of the parenthesis closing the one at `opening` (string literals skipped), or -1."""
    depth, i = 0, opening
    while i < len(sql):
        ch = sql[i]
        if ch == "'":
            i = sql.find("'", i + 1)
            while i > 0 and sql.startswith("''", i):
                i = sql.find("'", i + 2)
            if i < 0:
                return -1
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _rewrite_code(sql: str) -> str:
    sql = _VERSION_CALL.sub(f"'{VERSION_TEXT}'", sql)
    sql = _OPERATOR.sub(r"\1", sql)
    sql = _COLLATE.sub("", sql)
    sql = _REG_CAST_AS.sub("AS BIGINT)", sql)
    sql = _REG_CAST.sub("::BIGINT", sql)
    sql = _CATALOG_CALL.sub(r"\1(", sql)
    sql = _COLUMNS_VIEW.sub("dpsql_information_schema_columns", sql)
    # pg_catalog.x -> x: DuckDB finds its pg_catalog by the search path, and binds pg_catalog.t.column
    # references unreliably; then the catalogs the workspace replaces are named
    sql = _CATALOG_PREFIX.sub("", sql)
    sql = _JSON_BUILD.sub("json_build_object(", sql)
    sql = _FORMAT_TYPE.sub("dpsql_format_type(", sql)
    sql = _CURRENT_SETTING.sub("dpsql_current_setting(", sql)
    sql = _KEYWORD_ALIAS.sub(lambda m: f'AS "{m.group(1).lower()}"', sql)
    return _CATALOG_VIEW.sub(lambda m: f"dpsql_{m.group(2).lower()}", sql)


def command_tag(result: Result | None, sql: str) -> str:
    """The CommandComplete tag PostgreSQL sends for a statement."""
    words = strip_leading_comments(sql).split()
    first = words[0].upper() if words else ""
    if result is not None and result.columns:
        return f"SELECT {len(result.rows)}"
    count = max(result.rowcount, 0) if result is not None else 0
    if first == "INSERT":
        return f"INSERT 0 {count}"
    if first in ("UPDATE", "DELETE"):
        return f"{first} {count}"
    if first in ("CREATE", "DROP", "ALTER") and len(words) > 1:
        kind = words[1].upper()
        kind = words[2].upper() if kind in ("OR", "TEMP", "TEMPORARY") and len(words) > 2 else kind
        return f"{first} {'TABLE' if kind in ('REPLACE', 'TEMP', 'TEMPORARY') else kind}"
    return first or "SELECT 0"


# --- types and values ----------------------------------------------------------------------------

BOOL, BYTEA, INT8, INT2, INT4, TEXT, FLOAT4, FLOAT8, VARCHAR = 16, 17, 20, 21, 23, 25, 700, 701, 1043
DATE, TIME, TIMESTAMP, TIMESTAMPTZ, INTERVAL, NUMERIC, UUID, JSON, UNKNOWN = (
    1082, 1083, 1114, 1184, 1186, 1700, 2950, 114, 705)
_OIDS = {
    "BOOLEAN": BOOL, "TINYINT": INT2, "SMALLINT": INT2, "UTINYINT": INT2, "INTEGER": INT4, "USMALLINT": INT4,
    "BIGINT": INT8, "UINTEGER": INT8, "UBIGINT": NUMERIC, "HUGEINT": NUMERIC, "UHUGEINT": NUMERIC,
    "FLOAT": FLOAT4, "DOUBLE": FLOAT8, "VARCHAR": TEXT, "BLOB": BYTEA, "DATE": DATE, "TIME": TIME,
    "TIMESTAMP": TIMESTAMP, "TIMESTAMP WITH TIME ZONE": TIMESTAMPTZ, "INTERVAL": INTERVAL, "UUID": UUID,
    "JSON": JSON,
}
_SIZES = {BOOL: 1, INT2: 2, INT4: 4, INT8: 8, FLOAT4: 4, FLOAT8: 8, DATE: 4, TIME: 8, TIMESTAMP: 8,
          TIMESTAMPTZ: 8, UUID: 16}


def type_oid(duckdb_type: str | None) -> int:
    """The PostgreSQL type OID shown for a DuckDB type (text for anything without a counterpart)."""
    if not duckdb_type:
        return TEXT
    name = duckdb_type.upper()
    if name.startswith("DECIMAL"):
        return NUMERIC
    return _OIDS.get(name, TEXT)


def type_size(oid: int) -> int:
    return _SIZES.get(oid, -1)


def encode_text(value) -> bytes | None:
    """A value in PostgreSQL's text format."""
    if value is None:
        return None
    if isinstance(value, bool):
        return b"t" if value else b"f"
    if isinstance(value, float):
        if math.isnan(value):
            return b"NaN"
        if math.isinf(value):
            return b"Infinity" if value > 0 else b"-Infinity"
        return repr(value).encode()
    if isinstance(value, (int, decimal.Decimal, uuid.UUID)):
        return str(value).encode()
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ").encode()
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat().encode()
    if isinstance(value, dt.timedelta):
        return f"{value.days} days {value.seconds} seconds {value.microseconds} microseconds".encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return b"\\x" + bytes(value).hex().encode()
    if isinstance(value, (list, tuple)):
        return ("{" + ",".join(_array_item(v) for v in value) + "}").encode()
    return str(value).encode()


def _array_item(value) -> str:
    if value is None:
        return "NULL"
    text = encode_text(value).decode()
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"' if isinstance(value, str) else text


_PACKERS = {BOOL: "!?", INT2: "!h", INT4: "!i", INT8: "!q", FLOAT4: "!f", FLOAT8: "!d"}
BINARY_RESULTS = frozenset({*_PACKERS, *binary_formats.TYPES, TEXT, VARCHAR, UNKNOWN, BYTEA})  # types sent in binary when asked


def encode_binary(value, oid: int) -> bytes | None:
    """A value in PostgreSQL's binary format, for a type of `BINARY_RESULTS`."""
    if value is None:
        return None
    if oid in _PACKERS:
        return struct.pack(_PACKERS[oid], value)
    if oid == BYTEA:
        return bytes(value)
    if oid in binary_formats.TYPES:
        return binary_formats.encode(value, oid)
    if oid in BINARY_RESULTS:
        return str(value).encode()
    raise ProgrammingError(f"binary results of type OID {oid} are not supported: ask for text results")


def decode_parameter(raw: bytes | None, oid: int, binary: bool):
    """A bound parameter as a Python value (text format: as the client wrote it, typed by its OID)."""
    if raw is None:
        return None
    if binary:
        if oid in _PACKERS:
            return struct.unpack(_PACKERS[oid], raw)[0]
        if oid in (TEXT, VARCHAR, UNKNOWN, 0):
            return raw.decode()
        if oid == BYTEA:
            return raw
        if oid in binary_formats.TYPES:
            return binary_formats.decode(raw, oid)
        raise ProgrammingError(f"binary parameters of type OID {oid} are not supported: send them as text")
    text = raw.decode()
    if oid in (INT2, INT4, INT8):
        return int(text)
    if oid in (FLOAT4, FLOAT8):
        return float(text)
    if oid == NUMERIC:
        number = decimal.Decimal(text)
        return int(number) if number == number.to_integral_value() else float(number)
    if oid == BOOL:
        return text.lower() in ("t", "true", "1", "on", "yes", "y")
    if oid == DATE:  # PostgreSQL reads a date followed by a zone ("2024-01-31 +00", as JDBC sends one)
        return dt.date.fromisoformat(text.split()[0])
    return text


def result_oids(result: Result) -> list[int]:
    """The type OIDs a result's columns are told and sent as (text where its type is not known)."""
    oids = [type_oid(t) for t in (result.types or [])] + [TEXT] * len(result.columns)
    return oids[:len(result.columns)]


def row_description(names: list[str], oids: list[int], requested_formats: list[int]) -> bytes:
    """The RowDescription of columns `names` of types `oids`, in the formats the client asked for."""
    return wire.row_description([wire.Field(name, oid, type_size(oid), fmt) for name, oid, fmt
                                 in zip(names, oids, result_formats(requested_formats, len(names)))])


def result_formats(requested: list[int], n: int) -> list[int]:
    """The format (0 text, 1 binary) of each of `n` columns, from a Bind's result format codes."""
    if not requested:
        return [0] * n
    if len(requested) == 1:
        return requested * n
    if len(requested) != n:
        raise wire.ProtocolError("result format codes do not match the columns")
    return requested
