"""The peers benchmark's own parts: dpsql's side answers every cell, scoring, and a peer not installed is skipped."""

from __future__ import annotations

import math

import duckdb
import pytest

from benchmarks import peer_envs, peers
from benchmarks.adult_dashboard import DATA

pytestmark = pytest.mark.skipif(not (DATA / "adult.csv").exists(), reason="shared/data/adult is not next to the repository")


@pytest.mark.parametrize("dataset", ["adult", "demo"])
def test_dpsql_side_answers_every_cell_and_is_scored_by_kind(dataset, tmp_path):
    data, con = peers.adult() if dataset == "adult" else peers.demo(tmp_path, rows=5_000)
    bi = peers.workloads(data)["bi"]
    truth = peers.exact(con, data, bi)
    runs = peers.dpsql_answers(con, data, bi, rho=0.0172, draws=1)
    scores = peers.rmse_by_kind(bi, truth, runs)
    assert set(scores) == {"count", "sum", "avg"} and all(math.isfinite(v) and v > 0 for v in scores.values())
    assert peers.rmse_by_kind(bi, truth, [truth]) == {"count": 0.0, "sum": 0.0, "avg": 0.0}
    with pytest.raises(ValueError, match="no answer"):
        peers.rmse_by_kind(bi, truth, [[{} for _ in bi]])
    if dataset == "demo":  # the peers read the same rows
        assert duckdb.connect().execute(f"SELECT COUNT(*) FROM read_csv('{data.csv}')").fetchone()[0] == 5_000


def test_a_peer_without_its_environment_is_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(peer_envs, "ENVS", tmp_path)
    data, _ = peers.adult()
    assert peer_envs.python("opendp") is None
    assert peers.peer_answers("opendp", data, peers.workloads(data)["bi"], 0.01, 1) is None
    assert peer_envs.requirements("tumult")[0].startswith("tmlt.analytics")


def test_workloads_are_what_the_docstring_says():
    data, _ = peers.adult()
    loads = peers.workloads(data)
    assert [len(loads[k]) for k in ("bi", "ranges", "marginals", "reask")] == [10, 128, 15, 20]
    assert peers.sql(loads["bi"][4], data.table) == (
        "SELECT sex, SUM(hours_per_week) FROM adult WHERE age BETWEEN 20 AND 40 GROUP BY sex"
    )
