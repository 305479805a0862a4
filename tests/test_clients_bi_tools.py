"""What Metabase and Superset send when a PostgreSQL database is added to them and its schema synced, sent
over the wire to `dpsql serve` (tests/served.py): each answers from the catalog (declared columns only,
protected and public tables told apart, no row counts of protected tables).

The statements follow the shapes of Metabase's PostgreSQL driver (src/metabase/driver/postgres.clj: its
connection test, time zone, enum types, tables, table privileges, fields, foreign keys and indexes, written
by HoneySQL with quoted identifiers) and of Superset's PostgreSQL engine spec
(superset/db_engine_specs/postgres.py: databases, search path, backend pid) over SQLAlchemy's inspector,
whose own queries tests/test_clients_sqlalchemy.py runs by reflection.
"""

from __future__ import annotations

import pytest

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed: pip install 'dpsql[serve-clients]'")

METABASE_TABLES = """
SELECT "n"."nspname" AS "schema", "c"."relname" AS "name",
       CASE "c"."relkind" WHEN 'r' THEN 'TABLE' WHEN 'p' THEN 'PARTITIONED TABLE' WHEN 'v' THEN 'VIEW'
            WHEN 'f' THEN 'FOREIGN TABLE' WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE NULL END AS "type",
       "d"."description" AS "description", "stat"."n_live_tup" AS "estimated_row_count"
FROM "pg_catalog"."pg_class" AS "c"
INNER JOIN "pg_catalog"."pg_namespace" AS "n" ON "c"."relnamespace" = "n"."oid"
LEFT JOIN "pg_catalog"."pg_description" AS "d"
       ON ("c"."oid" = "d"."objoid") AND ("d"."objsubid" = 0) AND ("d"."classoid" = 'pg_class'::regclass)
LEFT JOIN "pg_stat_user_tables" AS "stat" ON ("n"."nspname" = "stat"."schemaname") AND ("c"."relname" = "stat"."relname")
WHERE ("c"."relnamespace" = "n"."oid") AND ("n"."nspname" !~ '^pg_') AND ("n"."nspname" <> 'information_schema')
  AND c.relkind in ('r', 'p', 'v', 'f', 'm') AND ("n"."nspname" IN ('main'))
ORDER BY "type" ASC, "schema" ASC, "name" ASC
"""

_QUALIFIED = "'\"' || replace(t.schemaname, '\"', '\"\"') || '\".\"' || replace(t.objectname, '\"', '\"\"') || '\"'"
METABASE_PRIVILEGES = (  # the privileges the connecting user has on each table, as Metabase asks (syncing only
    # the tables it may select from; `update`, `insert`, `delete`: whether it may write to them)
    "with table_privileges as (select NULL as role, t.schemaname as schema, t.objectname as table, "
    + ", ".join(f"pg_catalog.{check}(current_user, {_QUALIFIED}, '{name}') as {name}" for check, name in (
        ("has_any_column_privilege", "update"), ("has_any_column_privilege", "select"),
        ("has_any_column_privilege", "insert"), ("has_table_privilege", "delete")))
    + " from (select schemaname, tablename as objectname from pg_catalog.pg_tables union "
    "select schemaname, viewname as objectname from pg_catalog.pg_views union "
    "select schemaname, matviewname as objectname from pg_catalog.pg_matviews) t "
    "where t.schemaname !~ '^pg_' and t.schemaname <> 'information_schema' "
    "and pg_catalog.has_schema_privilege(current_user, t.schemaname, 'usage')) select t.* from table_privileges t")

METABASE_FIELDS = """
SELECT "c"."column_name" AS "name",
       CASE WHEN "c"."udt_schema" IN ('public', 'pg_catalog') THEN FORMAT('%s', "c"."udt_name")
            ELSE FORMAT('"%s"."%s"', "c"."udt_schema", "c"."udt_name") END AS "database-type",
       "c"."ordinal_position" - 1 AS "database-position", "c"."table_schema" AS "table-schema",
       "c"."table_name" AS "table-name", "pk"."column_name" IS NOT NULL AS "pk?",
       COL_DESCRIPTION(CAST(CAST(FORMAT('%I.%I', CAST("c"."table_schema" AS TEXT), CAST("c"."table_name" AS TEXT))
                                 AS REGCLASS) AS OID), "c"."ordinal_position") AS "field-comment",
       (("column_default" IS NULL) OR (LOWER("column_default") = 'null')) AND ("is_nullable" = 'NO')
         AND NOT ((("column_default" IS NOT NULL) AND ("column_default" LIKE '%nextval(%')) OR ("is_identity" <> 'NO'))
         AS "database-required",
       (("column_default" IS NOT NULL) AND ("column_default" LIKE '%nextval(%')) OR ("is_identity" <> 'NO')
         AS "database-is-auto-increment"
FROM "information_schema"."columns" AS "c"
LEFT JOIN (SELECT "tc"."table_schema", "tc"."table_name", "kc"."column_name"
           FROM "information_schema"."table_constraints" AS "tc"
           INNER JOIN "information_schema"."key_column_usage" AS "kc"
                   ON ("tc"."constraint_name" = "kc"."constraint_name") AND ("tc"."table_schema" = "kc"."table_schema")
                  AND ("tc"."table_name" = "kc"."table_name")
           WHERE "tc"."constraint_type" = 'PRIMARY KEY') AS "pk"
       ON ("c"."table_schema" = "pk"."table_schema") AND ("c"."table_name" = "pk"."table_name")
      AND ("c"."column_name" = "pk"."column_name")
WHERE c.table_schema !~ '^information_schema|catalog_history|pg_' AND ("c"."table_schema" IN ('main'))
UNION ALL
SELECT "pa"."attname" AS "name",
       CASE WHEN "ptn"."nspname" IN ('public', 'pg_catalog') THEN FORMAT('%s', "pt"."typname")
            ELSE FORMAT('"%s"."%s"', "ptn"."nspname", "pt"."typname") END AS "database-type",
       "pa"."attnum" - 1 AS "database-position", "pn"."nspname" AS "table-schema", "pc"."relname" AS "table-name",
       FALSE AS "pk?", NULL AS "field-comment", FALSE AS "database-required", FALSE AS "database-is-auto-increment"
FROM "pg_catalog"."pg_class" AS "pc"
INNER JOIN "pg_catalog"."pg_namespace" AS "pn" ON "pn"."oid" = "pc"."relnamespace"
INNER JOIN "pg_catalog"."pg_attribute" AS "pa" ON "pa"."attrelid" = "pc"."oid"
INNER JOIN "pg_catalog"."pg_type" AS "pt" ON "pt"."oid" = "pa"."atttypid"
INNER JOIN "pg_catalog"."pg_namespace" AS "ptn" ON "ptn"."oid" = "pt"."typnamespace"
WHERE ("pc"."relkind" = 'm') AND ("pa"."attnum" >= 1) AND ("pn"."nspname" IN ('main'))
ORDER BY "table-schema" ASC, "table-name" ASC, "database-position" ASC
"""

METABASE_FOREIGN_KEYS = """
SELECT "fk_ns"."nspname" AS "fk-table-schema", "fk_table"."relname" AS "fk-table-name",
       "fk_column"."attname" AS "fk-column-name", "pk_ns"."nspname" AS "pk-table-schema",
       "pk_table"."relname" AS "pk-table-name", "pk_column"."attname" AS "pk-column-name"
FROM "pg_constraint" AS "c"
INNER JOIN "pg_class" AS "fk_table" ON "c"."conrelid" = "fk_table"."oid"
INNER JOIN "pg_namespace" AS "fk_ns" ON "c"."connamespace" = "fk_ns"."oid"
INNER JOIN "pg_attribute" AS "fk_column" ON "c"."conrelid" = "fk_column"."attrelid"
INNER JOIN "pg_class" AS "pk_table" ON "c"."confrelid" = "pk_table"."oid"
INNER JOIN "pg_namespace" AS "pk_ns" ON "pk_table"."relnamespace" = "pk_ns"."oid"
INNER JOIN "pg_attribute" AS "pk_column" ON "c"."confrelid" = "pk_column"."attrelid"
WHERE fk_ns.nspname !~ '^information_schema|catalog_history|pg_' AND ("c"."contype" = 'f'::char)
  AND ("fk_column"."attnum" = ANY(c.conkey)) AND ("pk_column"."attnum" = ANY(c.confkey))
  AND ("fk_table"."relname" IN ('people', 'regions')) AND ("fk_ns"."nspname" IN ('main'))
ORDER BY "fk-table-schema" ASC, "fk-table-name" ASC
"""

METABASE_INDEXES = """
SELECT "tmp"."table-schema", "tmp"."table-name",
       TRIM(BOTH '"' FROM PG_CATALOG.PG_GET_INDEXDEF("tmp"."ci_oid", "tmp"."pos", FALSE)) AS "field-name"
FROM (SELECT "n"."nspname" AS "table-schema", "ct"."relname" AS "table-name", "ci"."oid" AS "ci_oid",
             (INFORMATION_SCHEMA._PG_EXPANDARRAY("i"."indkey")).n AS "pos"
      FROM "pg_catalog"."pg_class" AS "ct"
      INNER JOIN "pg_catalog"."pg_namespace" AS "n" ON "ct"."relnamespace" = "n"."oid"
      INNER JOIN "pg_catalog"."pg_index" AS "i" ON "ct"."oid" = "i"."indrelid"
      INNER JOIN "pg_catalog"."pg_class" AS "ci" ON "ci"."oid" = "i"."indexrelid"
      WHERE (PG_CATALOG.PG_GET_EXPR("i"."indpred", "i"."indrelid") IS NULL)
        AND n.nspname !~ '^information_schema|catalog_history|pg_' AND ("n"."nspname" IN ('main'))
        AND ("ct"."relname" IN ('people', 'regions'))) AS "tmp"
WHERE "tmp"."pos" = 1
"""

METABASE_ENUMS = ("SELECT nspname, typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace "
                  "WHERE t.oid IN (SELECT DISTINCT enumtypid FROM pg_enum e)")


def _query(conn, sql: str) -> list[dict]:
    cur = conn.execute(sql)
    names = [d.name for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def test_metabase_connects_and_syncs_the_schema_from_the_catalog(census_server):
    with psycopg.connect(census_server.dsn(), autocommit=True, application_name="Metabase") as conn:
        before = census_server.ledger().spent()
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the connection test
        assert conn.execute("show timezone;").fetchone() == ("UTC",)
        conn.execute("SET SESSION TIMEZONE TO 'UTC';")
        assert _query(conn, METABASE_ENUMS) == []
        tables = {t["name"]: t for t in _query(conn, METABASE_TABLES)}
        assert set(tables) == {"people", "regions"}
        assert tables["people"]["type"] == tables["regions"]["type"] == "TABLE"
        assert tables["people"]["description"].startswith("protected")
        assert tables["regions"]["description"].startswith("public")
        assert tables["people"]["estimated_row_count"] is None  # a protected table's size is never told
        privileges = {p["table"]: p for p in _query(conn, METABASE_PRIVILEGES) if p["schema"] == "main"}
        assert privileges["people"]["select"] and not privileges["people"]["insert"]  # read-only: answered with DP
        assert privileges["regions"]["select"]
        fields = [(f["table-name"], f["name"], f["database-type"], f["database-position"])
                  for f in _query(conn, METABASE_FIELDS)]
        assert [f for f in fields if f[0] == "people"] == [("people", "age", "int8", 0), ("people", "sex", "varchar", 1)]
        assert [f[1] for f in fields if f[0] == "regions"] == ["id", "name"]  # declared columns only: never ssn
        assert _query(conn, METABASE_FOREIGN_KEYS) == [] and _query(conn, METABASE_INDEXES) == []
        assert census_server.ledger().spent() == before  # browsing the schema spends nothing


def test_superset_adds_the_database_and_browses_it(census_server):
    with psycopg.connect(census_server.dsn(), autocommit=True, application_name="Superset") as conn:
        before = census_server.ledger().spent()
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert conn.execute("SELECT datname FROM pg_database\nWHERE datistemplate = false;\n").fetchall() == [("census",)]
        # what SQLAlchemy's PostgreSQL dialect asks on connecting
        assert conn.execute("select pg_catalog.version()").fetchone()[0].startswith("PostgreSQL 16")
        assert conn.execute("SELECT version()").fetchone()[0].startswith("PostgreSQL 16")
        assert conn.execute("select current_schema()").fetchone() == ("main",)
        assert conn.execute("show standard_conforming_strings").fetchone() == ("on",)
        assert conn.execute("SHOW search_path").fetchone()[0]
        assert conn.execute("show transaction isolation level").fetchone() == ("read committed",)
        conn.execute('set search_path = "main"')  # Superset's prequery for a chosen schema
        assert conn.execute("SHOW search_path").fetchone() == ('"main"',)
        assert isinstance(conn.execute("SELECT pg_backend_pid()").fetchone()[0], int)  # the id it cancels by
        cur = conn.execute("SELECT sex, COUNT(*) FROM people GROUP BY sex ORDER BY sex")  # a chart
        assert [d.name for d in cur.description] == ["sex", "count"] and len(cur.fetchall()) == 2
        assert census_server.ledger().spent() > before


@pytest.mark.parametrize("driver", ["psycopg", "psycopg2"])
def test_superset_inspector_calls(census_server, driver):
    sqlalchemy = pytest.importorskip("sqlalchemy")
    pytest.importorskip(driver, reason=f"{driver} is not installed: pip install 'dpsql[serve-clients]'")
    engine = sqlalchemy.create_engine(census_server.url(driver=driver))
    try:
        inspector = sqlalchemy.inspect(engine)
        assert "main" in inspector.get_schema_names()
        tables = set(inspector.get_table_names("main")) | set(inspector.get_foreign_table_names("main"))
        assert tables == {"people", "regions"}
        assert inspector.get_view_names("main") == [] and inspector.get_materialized_view_names("main") == []
        for table in ("people", "regions"):  # what Superset's dataset editor and SQL Lab's schema browser read
            assert inspector.get_pk_constraint(table, "main")["constrained_columns"] == []
            assert inspector.get_foreign_keys(table, "main") == [] and inspector.get_indexes(table, "main") == []
            assert inspector.get_unique_constraints(table, "main") == []
            assert inspector.get_check_constraints(table, "main") == []
        assert [c["name"] for c in inspector.get_columns("people", "main")] == ["age", "sex"]
        assert inspector.get_table_comment("people", "main")["text"].startswith("protected")
        assert inspector.get_table_comment("regions", "main")["text"].startswith("public")
        assert inspector.has_table("people", "main") and not inspector.has_table("nosuch", "main")
    finally:
        engine.dispose()
