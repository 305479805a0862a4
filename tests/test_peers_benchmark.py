"""The peers benchmark's own parts: dpsql's side answers every cell, scoring, and a peer not installed is skipped."""

from __future__ import annotations

import math

import duckdb
import pytest

from benchmarks import peer_envs, peers
from benchmarks.adult_dashboard import DATA, load

pytestmark = pytest.mark.skipif(not (DATA / "adult.csv").exists(), reason="shared/data/adult is not next to the repository")


def test_dpsql_side_answers_every_cell_and_is_scored_by_kind():
    con = duckdb.connect()
    load(con)
    truth = peers.exact(con, peers.BI)
    runs = peers.dpsql_answers(con, peers.BI, rho=0.0172, draws=1)
    scores = peers.rmse_by_kind(peers.BI, truth, runs)
    assert set(scores) == {"count", "sum", "avg"} and all(math.isfinite(v) and v > 0 for v in scores.values())
    assert peers.rmse_by_kind(peers.BI, truth, [truth]) == {"count": 0.0, "sum": 0.0, "avg": 0.0}
    with pytest.raises(ValueError, match="no answer"):
        peers.rmse_by_kind(peers.BI, truth, [[{} for _ in peers.BI]])


def test_a_peer_without_its_environment_is_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(peer_envs, "ENVS", tmp_path)
    assert peer_envs.python("opendp") is None
    assert peers.peer_answers("opendp", peers.BI, 0.01, 1) is None
    assert peer_envs.requirements("tumult")[0].startswith("tmlt.analytics")


def test_workloads_are_what_the_docstring_says():
    loads = peers.workloads()
    assert [len(loads[k]) for k in ("bi", "ranges", "marginals", "reask")] == [10, 128, 15, 20]
    assert peers.sql(peers.BI[4]) == (
        "SELECT sex, SUM(hours_per_week) FROM adult WHERE age BETWEEN 20 AND 40 GROUP BY sex"
    )
