"""The `dpsql://` SQLAlchemy dialect: pandas.read_sql over an engine gives DP answers."""

from pathlib import Path

import duckdb
import pandas as pd
import pytest
import sqlalchemy as sa

import dpsql
from dpsql.tables.catalog import Catalog
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table


@pytest.fixture
def engine(tmp_path):
    database, catalog = tmp_path / "census.duckdb", tmp_path / "catalog.toml"
    with duckdb.connect(str(database)) as con:
        create_people_table(con, rows=5_000)
    catalog.write_text(PEOPLE_CATALOG_TOML)
    engine = sa.create_engine(f"dpsql:///{database}?catalog={catalog}&epsilon=1&delta=1e-9&query_epsilon=0.2")
    yield engine
    engine.dispose()


def test_read_sql_returns_dp_answers(engine):
    frame = pd.read_sql("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex", engine)
    assert list(frame.columns) == ["sex", "n"] and list(frame["sex"]) == ["F", "M"]
    assert 4_000 < frame["n"].sum() < 6_000
    older = pd.read_sql("SELECT COUNT(*) AS n FROM people WHERE age >= ?", engine, params=(50,))
    assert older["n"][0] < frame["n"].sum()
    with engine.connect() as con:
        budget = con.connection.dbapi_connection.budget
        assert budget.total.epsilon == pytest.approx(1.0) and budget.spent.epsilon > 0.2
        assert con.execute(sa.text("SELECT COUNT(*) FROM people WHERE sex = :sex"), {"sex": "F"}).scalar() > 0
        with pytest.raises(sa.exc.ProgrammingError, match="raw columns|aggregate"):
            con.exec_driver_sql("SELECT age FROM people")


def test_the_url_is_checked(tmp_path):
    with pytest.raises(dpsql.ProgrammingError, match="epsilon"):
        sa.create_engine("dpsql:///x.duckdb?epsilon=lots")
    catalog = tmp_path / "catalog.toml"
    catalog.write_text(PEOPLE_CATALOG_TOML)
    with pytest.raises(sa.exc.OperationalError, match="does not exist"):
        sa.create_engine(f"dpsql:///{tmp_path / 'nope.duckdb'}?catalog={catalog}").connect()


def test_inspect_lists_declared_columns_and_tells_protected_tables_apart(engine):
    inspector = sa.inspect(engine)
    assert "people" in inspector.get_table_names() and inspector.has_table("people")
    columns = inspector.get_columns("people")
    declared = Catalog.load(Path(engine.url.query["catalog"])).tables["people"].columns
    assert [c["name"] for c in columns] == list(declared)  # declared columns only
    assert inspector.get_table_comment("people")["text"].startswith("protected")
    with engine.connect() as con:
        con.exec_driver_sql("CREATE TABLE mine (a INTEGER, b DECIMAL(10, 2))")
        mine = {c["name"]: c["type"] for c in sa.inspect(con).get_columns("mine")}
        assert isinstance(mine["a"], sa.Integer) and isinstance(mine["b"], sa.Numeric)
        assert sa.inspect(con).get_table_comment("mine")["text"].startswith("public")
        assert sa.Table("people", sa.MetaData(), autoload_with=con).columns.keys() == [c["name"] for c in columns]
