"""Tables of local-DP reports: SQL over them is answered by the frequency oracle's unbiased
estimate with exact variances, and charges nothing."""

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.tables.catalog import Catalog, CatalogError
from mechanisms.domain import Domain
from mechanisms.ldp.answering import FrequencyOracleAnswers
from mechanisms.ldp.client import PROTOCOLS
from mechanisms.workload import Block, Term
from mechanisms.matrices import Dense

CATALOG = """
[tables.survey]
model = "local"
protocol = "{protocol}"
epsilon = 2.0
[tables.survey.columns]
a = {{ type = "integer", min = 0, max = 3 }}
b = {{ type = "categorical", values = ["x", "y", "z"] }}
"""
# The users' true cells (a, b), flat index a * 3 + b.
TRUTH = np.array([3000, 500, 200, 2500, 100, 900, 1800, 1200, 0, 700, 300, 800])


def _support_probabilities(protocol, epsilon=2.0, cells=12):
    oracle = PROTOCOLS[protocol](epsilon=epsilon, domain=cells)
    return tuple(float(v) for v in oracle.support_probabilities)


def _reports(protocol, rng):
    """Each user's report, drawn with the client's exact probabilities."""
    p, q = _support_probabilities(protocol)
    values = np.repeat(np.arange(TRUTH.size), TRUTH)
    if protocol == "grr":
        keep = rng.random(values.size) < p
        other = rng.integers(0, TRUTH.size - 1, values.size)
        return np.where(keep, values, other + (other >= values))
    bits = rng.random((values.size, TRUTH.size)) < np.where(np.arange(TRUTH.size) == values[:, None], p, q)
    return [np.flatnonzero(row).tolist() for row in bits]


def _connect(protocol, rng):
    con = duckdb.connect()
    reports = _reports(protocol, rng)
    column, sql_type = ("value", "INTEGER") if protocol == "grr" else ("ones", "INTEGER[]")
    con.execute(f"CREATE TABLE survey AS SELECT unnest(?)::{sql_type} AS {column}", [list(map(
        lambda r: r if isinstance(r, list) else int(r), reports))])
    return dpsql.connect(con=con, catalog=CATALOG.format(protocol=protocol), epsilon=1.0, delta=1e-6)


@pytest.mark.parametrize("protocol", ["grr", "oue"])
def test_sql_over_reports_is_the_unbiased_estimate_within_its_error_and_free(protocol):
    conn = _connect(protocol, np.random.default_rng(1))
    cur = conn.cursor()
    cur.execute("SET dpsql.stderr = on")
    by_a = cur.execute("SELECT a, COUNT(*) AS n FROM survey GROUP BY a").fetchall()
    truth_a = TRUTH.reshape(4, 3).sum(axis=1)
    for (a, n, err), exact in zip(by_a, truth_a):
        assert abs(n - exact) < 5 * err
    (n, err), = cur.execute("SELECT COUNT(*) FROM survey WHERE a < 2 AND b <> 'z'").fetchall()
    assert abs(n - TRUTH.reshape(4, 3)[:2, :2].sum()) < 5 * err
    rows = cur.execute("SELECT b, AVG(a) AS m FROM survey GROUP BY b").fetchall()
    exact = (TRUTH.reshape(4, 3) * np.arange(4)[:, None]).sum(axis=0) / TRUTH.reshape(4, 3).sum(axis=0)
    for (_, m, err), e in zip(rows, exact):
        assert abs(m - e) < 5 * err
    assert "no charge" in cur.result.charge_text and conn.session.ledger.spent() == 0
    plan = cur.execute("EXPLAIN SELECT a, COUNT(*) FROM survey GROUP BY a").fetchall()[0][0]
    assert "local DP" in plan and "no central budget" in plan


@pytest.mark.parametrize("protocol", ["grr", "oue", "sue"])
def test_the_variance_formula_is_exact(protocol):
    """Over many draws of the reports, answers are unbiased and their spread is the stated variance."""
    domain = Domain(("a", "b"), (4, 3))
    p, q = _support_probabilities(protocol)
    rng = np.random.default_rng(7)
    n = int(TRUTH.sum())
    weights = np.array([[1.0, 2.0, 0.0, -1.0], [0.0, 1.0, 1.0, 1.0]])  # two query rows over a
    block = Block("w", (), [Term(1.0, {"a": Dense(weights)})], mapped_rows={"a": 2})
    answers, variances = [], []
    for _ in range(400):
        if protocol == "grr":
            reports = np.bincount(_reports("grr", rng), minlength=TRUTH.size)
        else:
            reports = rng.binomial(TRUTH, p) + rng.binomial(n - TRUTH, q)
        model = FrequencyOracleAnswers(domain, protocol, 2.0, reports, n)
        estimate, variance = model.answer(block)
        answers.append(estimate)
        variances.append(variance)
    answers, variances = np.array(answers), np.array(variances)
    truth = weights @ TRUTH.reshape(4, 3).sum(axis=1)
    spread = answers.var(axis=0, ddof=1)
    assert np.all(np.abs(answers.mean(axis=0) - truth) < 4 * np.sqrt(spread / len(answers)))
    assert np.allclose(variances.mean(axis=0), spread, rtol=0.2)  # ~400 draws: the sample variance is ±7%


def test_a_local_table_is_declared_with_its_protocol():
    with pytest.raises(CatalogError, match="needs protocol"):
        Catalog.from_toml('[tables.t]\nmodel = "local"\nepsilon = 1.0\n[tables.t.columns]\na = { type = "integer", min = 0, max = 1 }')
    with pytest.raises(CatalogError, match="no privacy unit"):
        Catalog.from_toml('[tables.t]\nmodel = "local"\nprotocol = "oue"\nepsilon = 1.0\nprivacy_unit = "u"\n'
                          'max_rows_per_unit = 1\n[tables.t.columns]\na = { type = "integer", min = 0, max = 1 }')
    with pytest.raises(CatalogError, match="declare a local table"):
        Catalog.from_toml('[tables.t]\nprotocol = "oue"\n[tables.t.columns]\na = { type = "integer", min = 0, max = 1 }')
