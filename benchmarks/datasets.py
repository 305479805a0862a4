"""The shared benchmark datasets (../shared/data), loaded into DuckDB with a catalog.

Every dataset there is integer-encoded with a domain file giving each column's
number of values, so its catalog declares integer columns 0..size-1 — public
declarations, as the engine requires; nothing is read from the data to build it.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from dpsql.tables.catalog import Catalog
from dpsql.tables.columns import quote_identifier

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

FILES = {
    "adult": ("adult/adult.csv", "adult/adult-domain.json"),
    "adult_hd": ("adult_hd/adult.csv", "adult_hd/adult-domain.json"),
    "nist_taxi": ("nist_taxi/nist-taxi.csv", "nist_taxi/nist-taxi-domain.json"),
    "nltcs": ("nltcs/nltcs.csv", "nltcs/nltcs-domain.json"),
    "titanic": ("titanic/titanic.csv", "titanic/titanic-domain.json"),
    "salary": ("salary/salary.csv", "salary/salary-domain.json"),
}


def domain_sizes(name: str) -> dict[str, int]:
    """Column -> number of values, from the dataset's domain file."""
    return json.loads((DATA / FILES[name][1]).read_text())


def load(con: duckdb.DuckDBPyConnection, name: str, table: str | None = None) -> Catalog:
    """Create `table` (default: the dataset name) from the CSV and return its catalog."""
    table = table or name
    csv, _ = FILES[name]
    sizes = domain_sizes(name)
    columns = ", ".join(f"{quote_identifier(c)}: 'INTEGER'" for c in sizes)
    con.execute(
        f"CREATE OR REPLACE TABLE {quote_identifier(table)} AS "
        f"SELECT * FROM read_csv('{DATA / csv}', header = true, columns = {{{columns}}})"
    )
    catalog = Catalog()
    catalog.add_table(table, {c: {"type": "integer", "min": 0, "max": n - 1} for c, n in sizes.items()})
    return catalog
