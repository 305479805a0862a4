"""Tables the owner validated (`dpsql catalog --validate`): scans skip the per-row checks while unchanged."""

import contextlib
import io

import duckdb
import numpy as np

import dpsql
from dpsql.interfaces import cli
from dpsql.backends import DuckDBBackend
from dpsql.tables.catalog import Catalog
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table
from dpsql.tables.validation import Validations, validated_path


def _database(tmp_path, rows=2000):
    db = str(tmp_path / "people.duckdb")
    con = duckdb.connect(db)
    create_people_table(con, rows=rows, typed=False)  # VARCHAR, nullable: as a CSV import stores it
    con.close()
    catalog = tmp_path / "catalog.toml"
    catalog.write_text(PEOPLE_CATALOG_TOML)
    return db, str(catalog)


def _validate(db, catalog, *tables):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = cli.main(["catalog", db, "--catalog", catalog, "--validate", *tables])
    return status, out.getvalue()


def _scan(db, catalog, cliques):
    con = duckdb.connect(db, read_only=True)
    table = Catalog.load(catalog).tables["people"]
    backend = DuckDBBackend(con, Validations.load(db))
    trusted = backend.marginal_types(table)[1]
    counts = backend.marginals(table, cliques)
    con.close()
    return trusted, counts


def test_a_validated_table_is_scanned_without_checks_and_answers_the_same(tmp_path):
    db, catalog = _database(tmp_path)
    cliques = [("sex",), ("education", "age"), ()]
    trusted, checked = _scan(db, catalog, cliques)
    assert not trusted
    status, out = _validate(db, catalog, "people")
    assert status == 0 and "all 2,000 rows fit" in out and validated_path(db).is_file()
    trusted, counts = _scan(db, catalog, cliques)
    assert trusted and all(np.array_equal(counts[q], checked[q]) for q in cliques)
    with dpsql.connect(db, catalog=catalog, epsilon=1, seed=3, state=":memory:") as c:
        assert c.session.backend.marginal_types(c.session.catalog.tables["people"])[1]
        assert len(c.execute("SELECT sex, COUNT(*) FROM people GROUP BY sex").fetchall()) == 2


def test_a_changed_table_is_checked_again_and_misfits_are_not_validated(tmp_path):
    db, catalog = _database(tmp_path)
    assert _validate(db, catalog, "people")[0] == 0
    con = duckdb.connect(db)
    con.execute("UPDATE people SET sex = 'unknown' WHERE person_id = 1")  # not a declared value
    con.close()
    trusted, _ = _scan(db, catalog, [("sex",)])
    assert not trusted  # the database changed since: every row is checked again
    status, out = _validate(db, catalog, "people")
    assert status == 1 and "1 of 2,000 rows do not fit" in out
    assert _scan(db, catalog, [("sex",)])[0] is False


def test_a_false_record_changes_which_rows_count_never_fails_on_them(tmp_path):
    db, catalog = _database(tmp_path)
    con = duckdb.connect(db)
    con.execute("UPDATE people SET sex = 'unknown' WHERE person_id = 1")
    con.close()
    table = Catalog.load(catalog).tables["people"]
    Validations.load(db).record(table, 2000)  # a record no check made: a false declaration
    trusted, counts = _scan(db, catalog, [("sex",), ("age",)])
    assert trusted
    assert counts[("sex",)].sum() == 1999 and counts[("age",)].sum() == 2000  # left out where it has no bin
