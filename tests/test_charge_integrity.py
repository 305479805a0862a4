"""Every charge buys its answer: each failure path either charges nothing or delivers what was paid for."""

import duckdb
import pytest

import dpsql
import dpsql.session
import dpsql.releases.synth
from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table
from dpsql.errors import BudgetExceededError, OperationalError
from dpsql.releases.synth import synthesize


@pytest.fixture(scope="module")
def people():
    con = duckdb.connect()
    create_people_table(con, rows=20_000)
    yield con
    con.close()


def _connect(con, **kwargs):
    return dpsql.connect(con=con, catalog=PEOPLE_CATALOG_TOML, epsilon=10, seed=1, **kwargs)


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0])
def test_a_second_strategy_on_a_measured_clique_answers(people, epsilon):
    """Two optimal factorizations on (age, education): least squares over both once failed its span test
    on rounding noise (pinv kept singular values of 1e-15), so the second query was charged, then refused."""
    with _connect(people, query_epsilon=epsilon) as c:
        first = c.execute("SELECT education, COUNT(*) FROM people WHERE age >= 35 GROUP BY education").result
        second = c.execute("SELECT education, COUNT(*) FROM people WHERE age >= 27 GROUP BY education").result
        assert first.charged > 0 and second.charged > 0 and len(c.ledger.charges()) == 2
        again = c.execute("SELECT education, COUNT(*) FROM people WHERE age >= 27 GROUP BY education").result
        assert again.charged == 0 and again.rows == second.rows


def test_a_failure_while_answering_charges_nothing_and_a_retry_pays_once(people, monkeypatch):
    with _connect(people) as c:
        real = dpsql.session.assemble

        def broken(*args):
            raise RuntimeError("assembly failed")

        monkeypatch.setattr(dpsql.session, "assemble", broken)
        with pytest.raises(RuntimeError):
            c.execute("SELECT sex, COUNT(*) FROM people GROUP BY sex")
        assert c.ledger.charges() == []
        monkeypatch.setattr(dpsql.session, "assemble", real)
        assert c.execute("SELECT sex, COUNT(*) FROM people GROUP BY sex").result.charged > 0
        assert c.execute("SELECT sex, COUNT(*) FROM people GROUP BY sex").result.charged == 0
        assert len(c.ledger.charges()) == 1


def test_a_refused_charge_releases_nothing_and_keeps_the_model(people, monkeypatch):
    """Another process spent the budget between the check and the charge: no answer, nothing kept."""
    with _connect(people) as c:
        def refused(entries):
            raise BudgetExceededError("spent elsewhere")

        monkeypatch.setattr(c.ledger, "charge_all", refused)
        with pytest.raises(BudgetExceededError):
            c.execute("SELECT sex, COUNT(*) FROM people GROUP BY sex")
        assert c.session.executor.models["people"].measurements == []
        monkeypatch.undo()
        assert c.execute("SELECT sex, COUNT(*) FROM people GROUP BY sex").result.charged > 0


def test_a_cancelled_statement_keeps_nothing(people):
    with _connect(people) as c:
        def cancel():
            raise dpsql.OperationalError("cancelled")

        c.session.before_charge = cancel
        with pytest.raises(dpsql.OperationalError):
            c.execute("BEGIN WORKLOAD; SELECT sex, COUNT(*) FROM people GROUP BY sex; "
                      "SELECT COUNT(*) FROM people WHERE age > 30; END WORKLOAD")
        assert c.ledger.charges() == [] and c.session.executor.models["people"].measurements == []


def test_a_failing_scan_charges_nothing(people, monkeypatch):
    with _connect(people) as c:
        def failing(*args, **kwargs):
            raise OperationalError("scan failed")

        monkeypatch.setattr(c.session.backend, "marginals", failing)
        monkeypatch.setattr(c.session.backend, "dropped_rows", failing)
        for sql in ("SELECT sex, COUNT(*) FROM people GROUP BY sex",
                    "BEGIN WORKLOAD WITH (epsilon = 0.3); SELECT COUNT(*) FROM people; END WORKLOAD"):
            with pytest.raises(OperationalError):
                c.execute(sql)
        with pytest.raises(OperationalError):
            synthesize(c, "people", 0.5, "unused.parquet")
        assert c.ledger.charges() == []


def test_a_synthesis_whose_write_fails_is_charged_once_and_says_so(people, tmp_path, monkeypatch):
    """Noise is born charged: the file is written after the charge (a write failing on the noisy data's size
    before it would have been a free retry), so a failed write is charged, named, and keeps the measurements."""
    with _connect(people) as c:
        def failing_write(table, bins, path):
            raise OperationalError("disk full")

        real = dpsql.releases.synth.write_parquet
        monkeypatch.setattr(dpsql.releases.synth, "write_parquet", failing_write)
        out = tmp_path / "people.parquet"
        with pytest.raises(OperationalError, match="charged .* could not be written: disk full"):
            synthesize(c, "people", 0.5, out, mechanism="mst", rows=100)
        assert len(c.ledger.charges()) == 1 and list(tmp_path.iterdir()) == []
        monkeypatch.setattr(dpsql.releases.synth, "write_parquet", real)
        report = synthesize(c, "people", 0.5, out, mechanism="mst", rows=100)
        assert out.exists() and len(c.ledger.charges()) == 2
        assert c.ledger.charges()[1].cost == pytest.approx(report.charged.rho)


def test_a_synthesis_paid_for_is_delivered_even_if_the_rename_fails(people, tmp_path, monkeypatch):
    with _connect(people) as c:
        def failing_replace(src, dst):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(dpsql.releases.synth.os, "replace", failing_replace)
        with pytest.raises(OperationalError, match="paid for") as failed:
            synthesize(c, "people", 0.5, tmp_path / "people.parquet", mechanism="mst", rows=100)
        assert len(c.ledger.charges()) == 1
        written = [p for p in tmp_path.iterdir() if ".partial" in p.name]
        assert len(written) == 1 and str(written[0]) in str(failed.value)
        assert duckdb.sql(f"SELECT COUNT(*) FROM read_parquet('{written[0]}')").fetchall() == [(100,)]
