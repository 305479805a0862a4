"""Re-asks: a query asked again of the same measurements reuses what was computed, and nothing more."""

import duckdb

import dpsql
from dpsql.handlers import queries

CATALOG = {"tables": {"people": {"columns": {"age": {"type": "integer", "min": 0, "max": 99}}}}}


def _database(tmp_path):
    db = str(tmp_path / "data.duckdb")
    con = duckdb.connect(db)
    con.execute("CREATE TABLE people AS SELECT (i % 100)::INTEGER AS age FROM range(5000) t(i)")
    con.close()
    return db


def test_a_re_ask_gets_its_own_copy_of_the_same_answer(tmp_path):
    with dpsql.connect(_database(tmp_path), catalog=CATALOG, rho=1.0, seed=1, state=":memory:") as c:
        query = "SELECT COUNT(*) AS n, COUNT(*) + 1 AS m FROM people WHERE age < 50"
        first = queries.query(c.session, query)
        first.rows.append(("changed",))
        again = queries.query(c.session, query)
        assert again.rows == first.rows[:1] and again.charged == 0.0 and first.charged > 0


def test_a_re_ask_reads_measurements_another_connection_added(tmp_path):
    db, state = _database(tmp_path), str(tmp_path / "state")
    mine = dpsql.connect(db, catalog=CATALOG, rho=1.0, seed=1, state=state)
    other = dpsql.connect(db, catalog=CATALOG, seed=2, state=state)
    query = "SELECT COUNT(*) FROM people WHERE age < 50"
    before = mine.execute(query).fetchall()
    assert mine.execute(query).fetchall() == before  # remembered
    other.session.query_share = 0.5
    other.execute("SELECT age, COUNT(*) FROM people GROUP BY age")  # a histogram: it answers the query too
    assert mine.execute(query).fetchall() != before  # combined with the new measurement
    mine.close(), other.close()


def test_outer_expressions_reading_the_clock_are_evaluated_again(tmp_path):
    with dpsql.connect(_database(tmp_path), catalog=CATALOG, rho=1.0, seed=1, state=":memory:") as c:
        query = "SELECT COUNT(*), current_timestamp AS at FROM people"
        first = queries.query(c.session, query).rows[0][1]
        assert queries.query(c.session, query).rows[0][1] != first
