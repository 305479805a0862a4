"""BLENDER as published (seeds/000, Alg 2.1–2.5): the grr2 client's exact law, Algorithm 2.5's estimate and
variance, the SQL flow (the opt-in group discovers the head list, charged first; the clients report over it;
the hybrid table blends; asked again free) and its refusals (which spend nothing)."""

from __future__ import annotations

import random

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.errors import NotSupportedError
from mechanisms.ldp.client import TwoLevelGRR
from mechanisms.ldp.head_list import channel, client_estimates, query_of

HEAD = TwoLevelGRR(epsilon=2.0, urls=(3, 1, 2), query_share=0.85)


def test_the_two_level_grr_law_is_exact_and_within_e_to_the_epsilon():
    law = channel(HEAD)
    for value in range(HEAD.values):
        column = [HEAD.probability({"value": r}, value) for r in range(HEAD.values)]
        assert sum(column) == 1 and np.allclose(law[:, value], [float(c) for c in column])
    ratios = law.max(axis=1) / law.min(axis=1)
    assert ratios.max() <= np.exp(HEAD.epsilon) * (1 + 1e-12)  # Lemma 2.2.4 with δ = 0
    rng = random.Random(7)
    draws = np.bincount([HEAD.randomize(3, rng)["value"] for _ in range(20000)], minlength=HEAD.values)
    expected = 20000 * law[:, 3]
    assert np.all(np.abs(draws - expected) < 5 * np.sqrt(expected) + 1)


def test_the_command_line_reports_over_a_head_list(capsys):
    import json
    from mechanisms.ldp.client import main
    assert main(["--protocol", "grr2", "--epsilon", "2", "--urls", "3,1", "--query-share", "0.5", "--value", "3"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["urls"] == [3, 1] and row["query_share"] == 0.5 and 0 <= row["payload"]["value"] < 4


def test_algorithm_2_5_is_the_inverse_of_the_report_law_and_unbiased_with_its_variance():
    truth = np.array([500, 200, 50, 1000, 100, 150])
    law = channel(HEAD)
    exact = client_estimates(HEAD, law @ truth)  # expected counts: the estimate is the truth
    assert np.allclose(exact.record * truth.sum(), truth)
    assert np.allclose(exact.query * truth.sum(), np.bincount(query_of(HEAD), weights=truth))
    rng = np.random.default_rng(3)
    users = np.repeat(np.arange(6), truth)
    records, variances = [], []
    for _ in range(400):  # the reports' counts, drawn from the exact law (each user's own column)
        reported = (rng.random(users.size)[:, None] > np.cumsum(law[:, users].T, axis=1)).sum(axis=1)
        estimate = client_estimates(HEAD, np.bincount(reported, minlength=6))
        records.append(estimate.record)
        variances.append(estimate.record_variance)
    records, variances = np.array(records), np.array(variances)
    p = truth / truth.sum()
    standard_error = records.std(axis=0) / np.sqrt(len(records))
    assert np.all(np.abs(records.mean(axis=0) - p) < 4 * standard_error)  # Lemma 2.2.5
    # Lemma 2.2.6's variance estimate (for i.i.d. users) is at least the spread over fixed users
    assert np.all(variances.mean(axis=0) > 0.8 * records.var(axis=0))


CATALOG = """
[tables.searches_optin]
rows = {optin}
[tables.searches_optin.columns]
q = {{ type = "key" }}
[tables.searches]
model = "local"
protocol = "grr2"
epsilon = 2.0
opt_in = "searches_optin"
[tables.searches.columns]
q = {{ type = "key" }}
"""
QUERIES = np.array(["a", "b", "c", "d", "e", "f"])
WEIGHTS = np.array([0.4, 0.25, 0.15, 0.1, 0.07, 0.03])


def _connect(optin: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    con = duckdb.connect()
    con.execute("CREATE TABLE searches_optin AS SELECT unnest(?) AS q", [rng.choice(QUERIES, optin, p=WEIGHTS).tolist()])
    con.execute("CREATE TABLE searches (value BIGINT)")
    conn = dpsql.connect(con=con, catalog=CATALOG.format(optin=optin), epsilon=2.0, delta=1e-6, state=":memory:")
    return con, conn


def _report(con, conn, clients: int, seed: int = 1):
    """The clients' grr2 reports over the head list as released (⋆ last), from the same population."""
    table = conn.session.catalog.get("searches")
    keys = list(table.column("q").values)
    client = table.client
    rng, python_rng = np.random.default_rng(seed), random.Random(seed)
    values = rng.choice(QUERIES, clients, p=WEIGHTS)
    reports = [client.randomize(keys.index(v) if v in keys else len(keys), python_rng)["value"] for v in values]
    con.execute("INSERT INTO searches SELECT unnest(?)", [reports])
    return keys


def test_sql_blender_discovers_charges_then_blends_and_asking_again_is_free():
    con, conn = _connect(3000)
    cur = conn.cursor()
    with pytest.raises(NotSupportedError, match="opt-in group discovers first"):
        cur.execute("SELECT q, COUNT(*) FROM searches GROUP BY q")
    assert conn.session.ledger.spent() == 0
    discovered = cur.execute("SELECT q, COUNT(*) FROM searches_optin GROUP BY q").fetchall()
    after_discovery = conn.session.ledger.spent()
    assert after_discovery > 0 and {r[0] for r in discovered} <= set(QUERIES)
    with pytest.raises(NotSupportedError, match="fewer than 2 client reports"):  # no client has reported yet
        cur.execute("SELECT q, COUNT(*) FROM searches GROUP BY q")
    assert conn.session.ledger.spent() == after_discovery
    keys = _report(con, conn, 30000)
    assert conn.session.catalog.get("searches").client.urls == (1,) * (len(keys) + 1)
    cur.execute("SET dpsql.stderr = on")
    rows = cur.execute("SELECT q, COUNT(*) AS n FROM searches GROUP BY q").fetchall()
    charged = conn.session.ledger.spent()
    assert charged == after_discovery  # the opt-in group's part: the discovery's noisy counts, charged there
    assert cur.execute("SELECT q, COUNT(*) AS n FROM searches GROUP BY q").fetchall() == rows  # asked again: free
    assert cur.execute("SELECT COUNT(*) FROM searches WHERE q <> 'a'").fetchall()[0][0] > 0  # ⋆'s count too: a fresh charge
    charged = conn.session.ledger.spent()
    assert charged > after_discovery
    assert cur.execute("SELECT COUNT(*) FROM searches WHERE q <> 'a'").fetchall()[0][0] > 0
    assert conn.session.ledger.spent() == charged
    plan = cur.execute("EXPLAIN SELECT q, COUNT(*) FROM searches GROUP BY q").fetchall()[0][0]
    assert "searches_optin" in plan and conn.session.ledger.spent() == charged
    truth = {k: 33000 * w for k, w in zip(QUERIES, WEIGHTS)}
    assert [r[0] for r in rows] == keys
    for key, count, error in rows:
        assert abs(count - truth[key]) < 5 * error
    # the blend against each group alone (Theorem 2.2.7): below both
    from mechanisms.ldp.hybrid_answers import HybridAnswers
    session, table = conn.session, conn.session.catalog.get("searches")
    query = session.compile("SELECT q, COUNT(*) FROM searches GROUP BY q")
    central = session.executor.answering(table.measured_as(session.catalog.get))
    model = HybridAnswers(table.domain, central, session.executor.local_answers(table), 3000)
    alone_central, alone_local = model.groups(query.blocks[0])
    blended = model.variance(query.blocks[0])
    assert np.all(blended < alone_central) and np.all(blended < alone_local)


def test_a_head_list_is_fixed_once_discovered_and_the_refusal_spends_nothing():
    columns = 'q = { type = "key" }\nu = { type = "categorical", values = ["x", "y"] }\n'
    catalog = CATALOG.format(optin=3000).replace('q = { type = "key" }\n', columns)
    con = duckdb.connect()
    con.execute("CREATE TABLE searches_optin AS SELECT 'a' AS q, 'x' AS u FROM range(3000)")
    con.execute("CREATE TABLE searches (value BIGINT)")
    conn = dpsql.connect(con=con, catalog=catalog, epsilon=2.0, delta=1e-6, state=":memory:")
    cur = conn.cursor()
    assert cur.execute("SELECT q, COUNT(*) FROM searches_optin WHERE u = 'x' GROUP BY q").fetchall()[0][0] == "a"
    assert conn.session.catalog.get("searches").client.urls == (2, 2)  # ⟨q, u⟩: query a and ⋆, URLs x, y
    spent = conn.session.ledger.spent()
    with pytest.raises(NotSupportedError, match="fixed once discovered"):  # the list the reports index stays
        cur.execute("SELECT q, COUNT(*) FROM searches_optin GROUP BY q")  # rows not counted yet: it would grow
    assert conn.session.ledger.spent() == spent


MEANS = """
[tables.survey_optin]
rows = 600
[tables.survey_optin.columns]
a = { type = "integer", min = 0, max = 7 }
[tables.survey]
model = "local"
protocol = "grr"
epsilon = 1.0
opt_in = "survey_optin"
[tables.survey.columns]
a = { type = "integer", min = 0, max = 7 }
"""
SHARES = np.array([300, 50, 10, 120, 200, 80, 40, 10]) / 810


def _means(seed: int):
    """600 opted-in users' rows and 6000 clients' grr reports (drawn from grr's exact law) of one population."""
    from mechanisms.ldp.client import DirectEncoding
    rng = np.random.default_rng(seed)
    con = duckdb.connect()
    optin = rng.choice(8, 600, p=SHARES)
    con.execute("CREATE TABLE survey_optin AS SELECT unnest(?) AS a", [optin.tolist()])
    p, q = (float(x) for x in DirectEncoding(1.0, 8).support_probabilities)
    values = rng.choice(8, 6000, p=SHARES)
    other = (values + 1 + rng.integers(0, 7, len(values))) % 8  # a uniformly random other value
    reports = np.where(rng.random(len(values)) < p, values, other)
    con.execute("CREATE TABLE survey AS SELECT unnest(?) AS value", [reports.tolist()])
    conn = dpsql.connect(con=con, catalog=MEANS, epsilon=1.0, delta=1e-6, state=":memory:", seed=seed)
    return conn, conn.cursor(), np.concatenate([optin, values]).mean()  # the mean of all the users' values


def test_avg_over_a_hybrid_table_by_kvh_and_pwh_with_their_error_bars():
    """AVG by the seed's hybrid means (§2.3): the weights of Defs 2.3.18/2.3.22 at the groups' own plug-ins, the
    error bar √E_H(w) (Lemma 2.3.17); switching the rule re-answers the same measurements for free."""
    conn, cur, truth = _means(0)
    cur.execute("SET dpsql.stderr = on")
    answers = {}
    for rule in ("blend", "kvh", "pwh"):
        cur.execute(f"SET dpsql.hybrid_mean = '{rule}'")
        answers[rule] = cur.execute("SELECT AVG(a) FROM survey").fetchall()[0]
        if rule == "blend":
            spent = conn.session.ledger.spent()
        assert conn.session.ledger.spent() == spent  # the rule is post-processing of one charge
    assert cur.execute("SHOW dpsql.hybrid_mean").fetchall() == [("pwh",)]
    for mean, error in answers.values():
        assert abs(mean - truth) < 4 * error and 0 < error < 0.5
    assert answers["kvh"] != answers["pwh"] != answers["blend"]
    assert answers["kvh"][1] <= answers["pwh"][1] + 1e-12  # KVH minimises the plug-in MSE (Def. 2.3.18)
    session = conn.session
    table = session.catalog.get("survey")
    query = session.compile("SELECT AVG(a) FROM survey")
    total, count = query.aggregates[0].blocks
    from mechanisms.ldp.hybrid_answers import HybridAnswers
    central = session.executor.answering(table.measured_as(session.catalog.get))
    model = HybridAnswers(table.domain, central, session.executor.local_answers(table), 600, "kvh")
    assert model.hybrid_mean(total, count)[1][0] == pytest.approx(answers["kvh"][1])


def test_hybrid_means_are_unbiased_on_fixed_seeds():
    """Over 30 fixed-seed populations and noise draws, each rule's mean error (against the mean of all the users'
    values) is within 3 standard errors of 0, and its error bar is the spread it shows (the root mean square of
    the bars within 35% of the errors'; 1.06 for both at these seeds)."""
    errors, bars = {"kvh": [], "pwh": []}, {"kvh": [], "pwh": []}
    for seed in range(30):
        _, cur, truth = _means(seed)
        cur.execute("SET dpsql.stderr = on")
        for rule in errors:
            cur.execute(f"SET dpsql.hybrid_mean = '{rule}'")
            mean, bar = cur.execute("SELECT AVG(a) FROM survey").fetchall()[0]
            errors[rule].append(mean - truth)
            bars[rule].append(bar)
    for rule in errors:
        error, bar = np.array(errors[rule]), np.array(bars[rule])
        assert abs(error.mean()) < 3 * error.std(ddof=1) / np.sqrt(len(error))
        assert 0.65 < np.sqrt((bar ** 2).mean() / (error ** 2).mean()) < 1.35


def test_a_bad_hybrid_mean_setting_is_refused_and_spends_nothing():
    conn, cur, _ = _means(0)
    with pytest.raises(dpsql.ProgrammingError, match="one of blend, kvh, pwh"):
        cur.execute("SET dpsql.hybrid_mean = 'median'")
    assert conn.session.ledger.spent() == 0


def test_the_sql_model_of_grr2_reports_has_the_exact_variance_of_its_answers():
    """`HeadListAnswers`: x̂ = P⁻¹c is unbiased, and the covariance it states (at the truth) is the spread of its
    answers over report draws, for the cells (q, u) and for the queries' totals (GROUP BY q)."""
    from mechanisms.domain import Domain
    from mechanisms.ldp.head_list_answers import HeadListAnswers
    from mechanisms.matrices import Dense
    from mechanisms.workload import Block, Term
    protocol = TwoLevelGRR(epsilon=1.5, urls=(2, 2, 2), query_share=0.7)
    domain = Domain(("q", "u"), (3, 2))
    truth = np.array([400, 100, 250, 50, 150, 50])
    cells = Block("cells", ("q", "u"), [Term(1.0, {"q": Dense(np.eye(3)), "u": Dense(np.eye(2))})])
    queries = Block("queries", ("q",), [Term(1.0, {"q": Dense(np.eye(3)), "u": Dense(np.ones((1, 2)))})])
    law, rng = channel(protocol), np.random.default_rng(11)
    at_truth = HeadListAnswers(domain, protocol, law @ truth)  # expected counts: its plug-in is the truth
    for block, expected in ((cells, truth), (queries, truth.reshape(3, 2).sum(axis=1))):
        draws = np.array([HeadListAnswers(domain, protocol, sum(rng.multinomial(c, law[:, v])
                                                                for v, c in enumerate(truth))).estimate(block)
                          for _ in range(2000)])
        assert np.allclose(at_truth.estimate(block), expected)
        assert np.all(np.abs(draws.mean(axis=0) - expected) < 4 * draws.std(axis=0) / np.sqrt(len(draws)))
        assert np.allclose(draws.var(axis=0, ddof=1), at_truth.variance(block), rtol=0.12)
        pairs = np.cov(draws[:, 0], draws[:, 1])[0, 1]  # two rows' covariance, as `covariance` states it
        first = Block("first", (), [Term(1.0, {a: Dense(f) for a, f in zip(("q", "u"), _row(block, 0))})])
        second = Block("second", (), [Term(1.0, {a: Dense(f) for a, f in zip(("q", "u"), _row(block, 1))})])
        stated = at_truth.covariance(first, second)[0]
        assert abs(pairs - stated) < 0.12 * np.sqrt(at_truth.variance(first)[0] * at_truth.variance(second)[0])


def _row(block, i: int) -> tuple[np.ndarray, np.ndarray]:
    """The Kronecker factors of row i of `cells` (q, u) or `queries` (q)."""
    if block.name == "cells":
        q, u = divmod(i, 2)
        return np.eye(3)[[q]], np.eye(2)[[u]]
    return np.eye(3)[[i]], np.ones((1, 2))
