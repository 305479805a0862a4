"""MEDIAN and QUANTILE over `model = "local"` tables (hh, haar): the LDP thesis' §5.4.4 quantiles in SQL.

The real client randomizes every user's value; DuckDB holds the reports; SQL answers the quantile by
binary search over the protocol's prefix estimates (free: the reports were randomized on the devices).
Over fresh draws of the reports the answers centre on the true quantile, and the 95% interval whose
half-width the stated error is (times 1.96) holds it: the interval [low, high] contains the answer, so
it lies within answer ± 2·1.96·err. (It is not centred on the answer: with integer values, an answer 6
of interval [5, 6] states err 0.5/1.96, and answer ± 1.96·err misses 5.)
"""

import random

import duckdb
import numpy as np
import pytest

import dpsql
from benchmarks.ldp_quantiles import quantile_error, true_quantile
from mechanisms.domain import Domain
from mechanisms.ldp.answering import client_protocol
from mechanisms.quantiles import quantile_bins

SIZE = 32
DOMAIN = Domain(("a",), (SIZE,))
COUNTS = np.round(2000 * np.exp(-np.arange(SIZE) / 9.0) / np.exp(-np.arange(SIZE) / 9.0).sum()).astype(int)
CDF = np.cumsum(COUNTS) / COUNTS.sum()
CASES = [("hh", {"branching": 4}, "branching = 4"), ("haar", {}, "")]
DRAWS = 8


def _cursor(name, options, declared, rng):
    protocol = client_protocol(name, 2.0, DOMAIN, options)
    payloads = [protocol.randomize(int(v), rng) for v in np.repeat(np.arange(SIZE), COUNTS)]
    keys = list(payloads[0])
    con = duckdb.connect()
    columns = ", ".join(f"unnest(${i + 1}) AS {k}" for i, k in enumerate(keys))
    con.execute(f"CREATE TABLE reports AS SELECT {columns}", [[p[k] for p in payloads] for k in keys])
    catalog = (f'[tables.reports]\nmodel = "local"\nprotocol = "{name}"\nepsilon = 2.0\n{declared}\n'
               f'[tables.reports.columns]\na = {{ type = "integer", min = 0, max = {SIZE - 1} }}\n')
    cur = dpsql.connect(con=con, catalog=catalog, epsilon=1.0, delta=1e-6).cursor()
    cur.execute("SET dpsql.stderr = on")
    return cur


@pytest.mark.parametrize("name, options, declared", CASES, ids=[c[0] for c in CASES])
def test_median_and_deciles_over_local_reports_centre_on_the_truth_within_their_error(name, options, declared):
    rng = random.Random(7)
    found = {q: [] for q in (0.5, 0.9)}
    covered = 0
    for _ in range(DRAWS):
        cur = _cursor(name, options, declared, rng)
        (median, err), = cur.execute("SELECT MEDIAN(a) FROM reports").fetchall()
        (high, _), = cur.execute("SELECT QUANTILE(a, 0.9) FROM reports").fetchall()
        assert "no charge" in cur.result.charge_text and cur.connection.session.ledger.spent() == 0
        found[0.5].append(median)
        found[0.9].append(high)
        covered += abs(median - true_quantile(CDF, 0.5)) <= 2 * 1.96 * err + 1e-9
    for q, values in found.items():
        errors = np.array(values) - true_quantile(CDF, q)
        # unbiased-ish: the mean value error within 3 standard errors of 0 (plus half a bin of rounding)
        assert abs(errors.mean()) <= 3 * errors.std(ddof=1) / np.sqrt(DRAWS) + 0.5
        assert np.mean([quantile_error(CDF, int(v), q) for v in values]) < 0.05
    assert covered >= 0.75 * DRAWS  # nominal ≥ 95%; 8 draws


def test_true_quantile_and_quantile_error_follow_definition_19():
    cdf = np.array([0.2, 0.5, 0.5, 0.9, 1.0])
    assert true_quantile(cdf, 0.5) == 1 and true_quantile(cdf, 0.6) == 3
    assert quantile_error(cdf, 1, 0.5) == 0.0  # bin 1 is the 0.5-quantile
    assert quantile_error(cdf, 3, 0.5) == 0.0 or quantile_error(cdf, 3, 0.5) == pytest.approx(0.0)
    assert quantile_error(cdf, 0, 0.5) == pytest.approx(0.3)  # bin 0 is the q′-quantile for q′ ≤ 0.2
    assert quantile_error(cdf, 4, 0.5) == pytest.approx(0.4)  # for q′ in (0.9, 1]


def test_the_search_runs_on_the_isotonic_fit_with_the_estimated_total():
    """Not on a running maximum: it crosses q·N̂ at the first upward noise excursion (a downward bias,
    −221 bins at 2¹⁶ bins, `benchmarks.ldp_quantiles`), and its last value, the largest noisy prefix,
    would raise the target q·N̂ (an upward one)."""
    early = np.array([[10.0, 60.0, 40.0, 45.0, 70.0, 100.0]])
    found = quantile_bins(early, np.zeros_like(early), 0.5, 1.96)
    assert found.bin[0] == 4  # the fit is [10, 48.3, 48.3, 48.3, 70, 100]; a running maximum gives bin 1
    overshoot = np.array([[10.0, 45.0, 55.0, 130.0, 100.0]])
    found = quantile_bins(overshoot, np.zeros_like(overshoot), 0.5, 1.96)
    assert found.bin[0] == 2 and found.total[0] == 100.0  # target 50, not 65 (bin 3)
