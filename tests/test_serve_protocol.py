"""The pieces of `dpsql serve`'s protocol that need no server: parameter types from their context,
COPY's options and formats, PostgreSQL's binary formats."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest
import sqlglot

from dpsql.errors import NotSupportedError
from dpsql.result import Result
from dpsql.server import binary, copy_out, parameters, pgcompat

COLUMNS = {"people": {"age": "INTEGER", "sex": "VARCHAR", "income": "DOUBLE"},
           "notes": {"a": "BIGINT", "b": "VARCHAR", "c": "DATE"}}


def types_of(sql: str) -> dict[int, int]:
    return parameters.infer(sqlglot.parse_one(sql, read="duckdb"), COLUMNS)


def test_parameters_take_the_type_of_their_context():
    assert types_of("SELECT COUNT(*) FROM people p WHERE p.age > $1 AND $2 = sex AND income BETWEEN $3 AND $4") == \
        {1: pgcompat.INT4, 2: pgcompat.TEXT, 3: pgcompat.FLOAT8, 4: pgcompat.FLOAT8}
    assert types_of("SELECT COUNT(*) FROM people WHERE age IN ($1, $2) AND sex = $3::int LIMIT $4") == \
        {1: pgcompat.INT4, 2: pgcompat.INT4, 3: pgcompat.INT4, 4: pgcompat.INT8}
    assert types_of("INSERT INTO notes VALUES ($1, $2, $3)") == {1: pgcompat.INT8, 2: pgcompat.TEXT, 3: pgcompat.DATE}
    assert types_of("INSERT INTO notes (c, a) VALUES ($1, $2)") == {1: pgcompat.DATE, 2: pgcompat.INT8}
    assert types_of("SELECT $1, nosuch = $2 FROM people") == {}  # nothing tells: unknown (text)


def test_copy_options_and_formats():
    assert copy_out.parse("SELECT 1") is None and copy_out.parse("COPY people TO STDOUT") is None
    plain = copy_out.parse("COPY (SELECT a FROM t) TO STDOUT")
    assert (plain.query, plain.csv, plain.header, plain.delimiter, plain.null) == ("SELECT a FROM t", False, False,
                                                                                   "\t", "\\N")
    psql = copy_out.parse("COPY ( SELECT 1 ) TO STDOUT CSV HEADER")  # what psql's \copy sends
    assert psql.csv and psql.header and psql.delimiter == ","
    listed = copy_out.parse("COPY (SELECT 1) TO STDOUT WITH (FORMAT csv, HEADER false, DELIMITER ';', NULL 'NA')")
    assert listed.csv and not listed.header and listed.delimiter == ";" and listed.null == "NA"
    for bad in ("COPY (SELECT 1) TO STDOUT (FORMAT binary)", "COPY (SELECT 1) TO STDOUT (FREEZE)"):
        with pytest.raises(NotSupportedError):
            copy_out.parse(bad)
    result = Result(["x", "y"], [("a\tb", None), ('say "hi", ok', 1.5)])
    assert b"".join(copy_out.lines(result, plain)) == b"a\\tb\t\\N\nsay \"hi\", ok\t1.5\n"
    assert b"".join(copy_out.lines(result, psql)) == b'x,y\na\tb,\n"say ""hi"", ok",1.5\n'


@pytest.mark.parametrize("value, oid, back", [
    (decimal.Decimal("-1234567.891"), binary.NUMERIC, -1234567.891), (decimal.Decimal("0.0001"), binary.NUMERIC, 0.0001),
    (decimal.Decimal("10000"), binary.NUMERIC, 10000), (decimal.Decimal("0.00"), binary.NUMERIC, 0.0),
    (dt.date(1999, 12, 31), binary.DATE, "1999-12-31"), (dt.time(23, 59, 1, 5), binary.TIME, "23:59:01.000005"),
    (dt.datetime(2020, 1, 2, 3, 4, 5, 6), binary.TIMESTAMP, "2020-01-02 03:04:05.000006"),
])
def test_binary_formats_round_trip(value, oid, back):
    assert binary.decode(binary.encode(value, oid), oid) == back


def test_binary_numeric_is_postgres_layout():
    # 1234.5 = 1234 * 10000^0 + 5000 * 10000^-1: two base-10000 digits, weight 0, positive, scale 1
    assert binary.encode(decimal.Decimal("1234.5"), binary.NUMERIC) == bytes.fromhex("0002 0000 0000 0001 04d2 1388")
