"""The joins benchmark's own parts: the two-table split of Adult is what its docstring says, scoring, and
Tumult skipped cleanly when its environment is absent."""

from __future__ import annotations

import math

import duckdb
import pytest

from benchmarks import joins_vs_tumult as bench
from benchmarks import peer_envs
from benchmarks.adult_dashboard import DATA
from benchmarks.peers import exact

pytestmark = pytest.mark.skipif(not (DATA / "adult.csv").exists(), reason="shared/data/adult is not next to the repository")


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    con = duckdb.connect()
    return con, bench.tables(con, tmp_path_factory.mktemp("joins"))


def test_people_and_their_income_records_split_adult(split):
    con, data = split
    assert con.execute("SELECT COUNT(*), COUNT(DISTINCT person_id) FROM people").fetchone() == (48_842, 48_842)
    per_person = dict(con.execute("SELECT n, COUNT(*) FROM (SELECT person_id, COUNT(*) AS n FROM records GROUP BY 1) "
                                  "GROUP BY 1").fetchall())
    assert set(per_person) <= {1, 2, 3} and sum(per_person.values()) == 48_842  # a wage record each, then gains, losses
    assert data.rows == con.execute("SELECT COUNT(*) FROM records").fetchone()[0]
    assert con.execute("SELECT MIN(amount), MAX(amount) FROM records").fetchone()[1] <= 99
    catalog_table = data.catalog.get("records")
    assert catalog_table.unit.bound == bench.K
    # the CSVs Tumult reads hold the same rows
    for name in ("people", "records"):
        assert con.execute(f"SELECT COUNT(*) FROM read_csv('{data.csv.with_name(name + '.csv')}')").fetchone()[0] == \
            con.execute(f"SELECT COUNT(*) FROM {name}").fetchone()[0]


def test_scores_are_rmse_with_standard_errors_and_need_every_group(split):
    con, data = split
    truth = exact(con, data, bench.QUERIES)
    assert [len(t) for t in truth] == [2, 15, 1, 3, 2]
    exact_scores = bench.scores(truth, [truth, truth])
    assert exact_scores["count"] == exact_scores["q5"] == [0.0, 0.0]
    off = [{k: v + 3.0 for k, v in t.items()} for t in truth]
    off_by_more = [{k: v + 5.0 for k, v in t.items()} for t in truth]
    rmse, se = bench.scores(truth, [off, off_by_more])["sum"]
    assert rmse == pytest.approx(math.sqrt((9 + 25) / 2)) and se > 0
    with pytest.raises(ValueError, match="not the true groups"):
        bench.scores(truth, [[{} for _ in truth]])


def test_tumult_without_its_environment_is_skipped(split, tmp_path, monkeypatch):
    monkeypatch.setattr(peer_envs, "ENVS", tmp_path)
    assert bench.tumult_answers(split[1], 0.01, 1) is None
