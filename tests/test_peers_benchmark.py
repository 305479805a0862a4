"""The peers benchmark's own parts: dpsql's side answers every cell, scoring, and a peer not installed is skipped."""

from __future__ import annotations

import math

import duckdb
import numpy as np
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


def test_privacy_flag_defaults_to_zcdp_and_picks_the_modes():
    assert peers.arguments([]).privacy == "zcdp"
    assert [peers.MODES[peers.arguments(["--privacy", p]).privacy] for p in ("zcdp", "pure", "both")] == [
        ("zcdp",), ("pure",), ("zcdp", "pure")]
    with pytest.raises(SystemExit):
        peers.arguments(["--privacy", "approx"])
    assert [peers.label("tumult", m) for m in ("zcdp", "pure")] == ["tumult", "tumult_pure"]


def test_dpsql_pure_ledger_answers_every_cell(tmp_path):
    data, con = peers.demo(tmp_path, rows=5_000)
    bi = peers.workloads(data)["bi"]
    truth = peers.exact(con, data, bi)
    runs = peers.dpsql_answers(con, data, bi, rho=0.0172, draws=1, epsilon=1.0)
    assert set(peers.rmse_by_kind(bi, truth, runs)) == {"count", "sum", "avg"}


def test_record_takes_each_peers_better_mode_and_both_ratios():
    rmse = {"dpsql": 12.0, "dpsql_pure": 6.0, "opendp": 15.0, "opendp_pure": 9.0, "tumult": 10.0, "tumult_pure": 8.0}
    r = peers.record("adult", "bi", 10, "count", 3, 0.0172, 1.0, "both", ("zcdp", "pure"), rmse, ["opendp", "tumult"])
    assert r["best_mode"] == {"opendp": "pure", "tumult": "pure"} and r["best_peer"] == "tumult_pure"
    assert r["ratio_to_best_peer"] == 12.0 / 8.0 and r["ratio_best_dpsql_to_best_peer"] == 6.0 / 8.0
    zcdp = peers.record("adult", "bi", 10, "count", 3, 0.0172, 1.0, "zcdp", ("zcdp",),
                        {"dpsql": 12.0, "tumult": 10.0}, ["opendp", "tumult"])  # opendp not installed
    assert zcdp["best_peer"] == "tumult" and zcdp["ratio_to_best_peer"] == 1.2
    assert "ratio_best_dpsql_to_best_peer" not in zcdp and "epsilon" not in zcdp
    # a run replaces only its own (table, workload, ρ, privacy) records
    old = [dict(zcdp), {**r, "workload": "marginals"}, {k: v for k, v in zcdp.items() if k != "privacy"}]
    kept = peers.merged(old, [r])
    assert kept[:-1] == old and kept[-1] is r
    assert peers.merged(old, [zcdp]) == [{**r, "workload": "marginals"}, zcdp]


def test_expected_rmse_compares_plans_with_the_peers_even_split(tmp_path):
    data, con = peers.demo(tmp_path, rows=5_000)
    queries = [("count", None, [], []), ("sum", data.value, [data.groups[0]], []), ("count", None, [], [])]
    e = peers.expected_rmse(con, data, queries, rho=0.0244, epsilon=1.0)
    assert set(e) == {"count", "sum"} and set(e["count"]) == {"dpsql", "dpsql_pure", "peer", "peer_pure"}
    assert math.isclose(e["count"]["peer"], math.sqrt(3 / (2 * 0.0244)))
    assert math.isclose(e["sum"]["peer_pure"], math.sqrt(2) * 99 * 3)
    assert all(math.isfinite(v) and v > 0 for kinds in e.values() for v in kinds.values())


def test_quantile_rank_error_is_zero_for_the_exact_quantile_and_grows_off_it():
    data, con = peers.adult()
    queries = peers.workloads(data)["quantiles"]
    truth = peers.exact(con, data, queries)
    assert peers.rank_rmse(con, data, queries, [truth]) == 0.0
    off = [{key: (value + 30 if value is not None else None) for key, value in t.items()} for t in truth]
    assert peers.rank_rmse(con, data, queries, [off]) > 0.1
    assert peers.rank_rmse(con, data, peers.workloads(data)["bi"], [truth]) is None


def test_session_queries_are_k_distinct_queries_of_one_kind_and_scored_with_a_standard_error():
    from benchmarks import sequential_sessions as sessions
    data, _ = peers.adult()
    for kind in sessions.KINDS:
        for k in (1, 10, 100):
            queries = sessions.session_queries(data, kind, k)
            assert len(queries) == k and len({peers.sql(q, data.table) for q in queries}) == k
    assert sessions.peer_modes(3, False) == ("pure",) and sessions.peer_modes(10, False) == ("pure", "zcdp")
    assert sessions.peer_modes(30, False) == ("zcdp",) and sessions.peer_modes(1, True) == ("pure", "zcdp")
    rmse, se = sessions.rmse_se([3.0, -4.0, 3.0, -4.0])
    assert rmse == pytest.approx(math.sqrt(12.5)) and se > 0


def test_keys_benchmark_draws_a_heavy_tail_and_scores_released_keys():
    from benchmarks import keys_vs_peers as keys
    drawn = keys.zipf_keys(20_000, 2_000, 1.1)
    assert (drawn == keys.zipf_keys(20_000, 2_000, 1.1)).all()  # seeded
    _, counts = np.unique(drawn, return_counts=True)
    assert counts.max() > 1_000 and np.median(counts) < 5  # a head and a long tail
    assert keys.score({"k1": 12.0, "k2": 3.0}, {"k1": 10, "k2": 4}) == (2, pytest.approx(math.sqrt(2.5)))
    assert keys.score({"k9": 5.0}, {"k1": 10}) == (1, 5.0)  # a key not in the data counts its whole count
