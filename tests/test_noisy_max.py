"""Report-noisy-max: MODE(x) and the top group of x (GNMax, Confident-GNMax; `mechanisms.noisy_max`).

The mechanism: its calibration and charge (the pick's k²(1 − 1/m)/(2σ²), the check's k²/(2σ₁²)),
the exact Rényi divergence of a two-candidate pick on the worst neighbours against what is charged,
correctness on skewed counts, and a privacy audit with a power check. The SQL: answers, charges,
the free re-ask, Confident-GNMax and its owner setting, and refusals that spend nothing.
"""

import math

import duckdb
import numpy as np
import pandas
import pytest

import dpsql
import mechanisms.partition_selection
from dpsql.errors import CatalogError, NotSupportedError, OperationalError
from mechanisms.accounting import zcdp_to_epsilon
from mechanisms.noise import RandomSource, discrete_gaussian_vector
from mechanisms.noisy_max import CHECK_RATIO, NoisyMax, confident_noisy_max, noisy_max
from mechanisms.partition_selection import DiscreteGaussian
from tests.privacy_audit import audit

# --- the mechanism ------------------------------------------------------------------------


@pytest.mark.parametrize("m, k", [(2, 1), (5, 3), (40, 2)])
def test_the_pick_costs_its_share_and_its_noise_follows_the_shift_invariant_bound(m, k):
    rho = 0.02
    mech = noisy_max("gaussian", rho, m, k)
    assert rho * (1 - 1e-6) <= mech.cost <= rho
    histogram_std = k / math.sqrt(2 * rho)  # the noisy histogram's, at the same ρ
    assert mech.std == pytest.approx(histogram_std * math.sqrt(1 - 1 / m), rel=1e-4)
    assert mech.lattice == m
    histogram = NoisyMax("gaussian", m, k, mech.noise)  # the same noise on the counts themselves (lattice 1)
    assert histogram.cost == pytest.approx(k * k / (2 * float(mech.noise.sigma2)))
    with pytest.raises(ValueError, match="lattice"):
        NoisyMax("laplace", m, k, mech.noise, lattice=m)
    laplace = noisy_max("laplace", 0.5, m, k)
    assert 0.5 * (1 - 1e-6) <= laplace.cost <= 0.5 and laplace.lattice == 1  # ε = k/b: no gain with Laplace


def test_one_candidate_is_public_and_costs_nothing():
    mech = noisy_max("gaussian", 0.1, 1, 4)
    assert mech.cost == 0 and mech.pick(np.array([17])) == 0
    confident = confident_noisy_max("gaussian", 0.1, 1, 4, threshold=10)
    assert confident.argmax.cost == 0 and confident.check.cost == pytest.approx(0.1, rel=1e-6)


@pytest.mark.parametrize("kind, share", [("gaussian", 0.02), ("laplace", 0.3)])
def test_confident_noisy_max_splits_its_share_and_charges_the_check_alone_when_it_answers_none(kind, share):
    mech = confident_noisy_max(kind, share, 6, 2, threshold=100)
    assert share * (1 - 1e-6) <= mech.cost <= share
    assert mech.charged(False) == mech.check.cost < mech.charged(True) == mech.cost
    pick_std = mech.argmax.std
    assert mech.check.std == pytest.approx(CHECK_RATIO * pick_std, rel=1e-3)
    rng = RandomSource(4)
    assert mech.run(np.array([1000, 5, 5, 5, 5, 5]), rng) == 0  # a clear mode, far above T
    assert mech.run(np.array([20, 19, 18, 0, 0, 0]), rng) is None  # far below T


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="share"):
        noisy_max("gaussian", 0, 3, 1)
    with pytest.raises(ValueError, match="candidates"):
        noisy_max("gaussian", 0.1, 0, 1)
    with pytest.raises(ValueError, match="threshold"):
        confident_noisy_max("gaussian", 0.1, 3, 1, threshold=2.5)


def _pmf(sigma2: float, reach: int) -> np.ndarray:
    z = np.arange(-reach, reach + 1)
    p = np.exp(-z.astype(float) ** 2 / (2 * sigma2))
    return p / p.sum()


def test_the_two_candidate_pick_is_within_its_charge_on_the_worst_neighbours():
    """m = 2, k = 1: counts (0, 0) against (1, 0). The pick is a Bernoulli; its exact Rényi divergence (from the
    discrete Gaussian's pmf on the lattice) stays below α·ρ at every order, in both directions: half the
    histogram's ρ buys it. The sampler agrees with the exact probability."""
    rho = 0.05
    mech = noisy_max("gaussian", rho, 2, 1)
    sigma2 = float(mech.noise.sigma2)
    reach = int(12 * math.sqrt(sigma2)) + 4
    pmf = _pmf(sigma2, reach)
    difference = np.convolve(pmf, pmf[::-1])  # Z0 − Z1 on −2·reach..2·reach
    values = np.arange(-2 * reach, 2 * reach + 1)

    def first(shift):  # P[pick 0] when 2·n0 − 2·n1 = shift: Z0 − Z1 > −shift, half the ties
        return difference[values > -shift].sum() + 0.5 * difference[values == -shift].sum()

    p, q = first(0), first(2)
    for alpha in (1.5, 2, 4, 8, 32):
        for a, b in ((p, q), (q, p)):
            divergence = math.log(a**alpha * b ** (1 - alpha) + (1 - a) ** alpha * (1 - b) ** (1 - alpha)) / (alpha - 1)
            assert divergence <= alpha * mech.cost
    picks = mech.picks(np.array([1, 0]), 40_000, RandomSource(5))
    assert abs(np.mean(picks == 0) - q) < 4 * math.sqrt(q * (1 - q) / 40_000)


def test_the_mode_of_skewed_counts_is_found():
    """Zipf counts over 30 values: at ρ = 0.01 (σ ≈ 7 per count) the mode (1,000 ahead of the next) is always
    picked; two values tied at the top are each picked about half the time."""
    counts = (3000 / np.arange(1, 31)).astype(np.int64)
    mech = noisy_max("gaussian", 0.01, 30, 1)
    assert np.all(mech.picks(counts, 2000, RandomSource(6)) == 0)
    tied = np.array([500, 500, 10])
    shares = np.bincount(noisy_max("gaussian", 0.01, 3, 1).picks(tied, 4000, RandomSource(7)), minlength=3) / 4000
    assert abs(shares[0] - 0.5) < 0.05 and shares[2] == 0


DELTA = 1e-5


def _gnmax_runs(m: int, rho: float, weaken: float = 1.0):
    """Picks on neighbours: counts all 0 (D) against candidate 0 one row ahead (D'); the event is picking 0.
    `weaken` divides the noise's variance, to break the mechanism (the power check)."""
    mech = noisy_max("gaussian", rho, m, 1)
    broken = type(mech)(mech.kind, m, 1, DiscreteGaussian(mech.noise.sigma2 / int(weaken)), mech.lattice)

    def run(neighbour, seed):
        counts = np.zeros(m, dtype=np.int64)
        counts[0] = neighbour
        return (broken.picks(counts, 100_000, RandomSource(seed)) == 0).astype(float)

    return run


def _confident_runs(rho: float, weaken: float = 1.0):
    """Confident-GNMax (m = 3, T = 50) on counts (50, 50, 0) against (51, 50, 0): the check near its threshold.
    The output is the pick, or −1 for ⊥; `weaken` divides both noises' variances."""
    mech = confident_noisy_max("gaussian", rho, 3, 1, threshold=50)
    check = type(mech.check)("gaussian", 1, 50, DiscreteGaussian(mech.check.noise.sigma2 / int(weaken)))
    pick = type(mech.argmax)("gaussian", 3, 1, DiscreteGaussian(mech.argmax.noise.sigma2 / int(weaken)), 3)
    broken = type(mech)(check, pick)

    def run(neighbour, seed):
        return broken.runs(np.array([50 + neighbour, 50, 0]), 100_000, RandomSource(seed)).astype(float)

    return run


def test_confident_gnmax_audit():
    """The check and the pick together, at their full charge (the answered case's)."""
    rho = 0.05
    claimed = zcdp_to_epsilon(rho, DELTA)
    assert audit(_confident_runs(rho), DELTA) < claimed
    assert audit(_confident_runs(rho, weaken=64), DELTA) > claimed  # power check: σ / 8


@pytest.mark.parametrize("m", [2, 5])
def test_gnmax_audit(m):
    rho = 0.05
    claimed = zcdp_to_epsilon(rho, DELTA)
    assert audit(_gnmax_runs(m, rho), DELTA) < claimed
    assert audit(_gnmax_runs(m, rho, weaken=64), DELTA) > claimed  # power check: σ / 8


# --- SQL ----------------------------------------------------------------------------------

CATALOG = """
[tables.pets]
privacy_unit = "owner"
max_rows_per_unit = 2
[tables.pets.columns]
kind = { type = "categorical", values = ["cat", "dog", "fish", "bird"], nullable = true }
weight = { type = "numeric", min = 0, max = 100, bins = 1000 }

[tables.votes]
confident_mode = true
[tables.votes.columns]
query = { type = "integer", min = 0, max = 3 }
label = { type = "integer", min = 0, max = 9 }

[tables.visits]
[tables.visits.columns]
url = { type = "key" }
"""
# Pets: dogs lead cats by 900 rows; a NULL kind is the most frequent group (3,000 rows).
PETS = {"dog": 2000, "cat": 1100, "fish": 300, "bird": 100, None: 3000}


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("noisy_max") / "data.duckdb")
    con = duckdb.connect(path)
    rows = [(i, kind, 30.05) for i, kind in enumerate(k for k, n in PETS.items() for _ in range(n))]
    con.register("p", pandas.DataFrame(rows, columns=["owner", "kind", "weight"]))
    con.execute("CREATE TABLE pets AS SELECT * FROM p")
    votes = [(q, 7 if q < 2 else i % 10) for q in range(4) for i in range(250)]  # queries 0, 1: consensus on 7
    con.register("v", pandas.DataFrame(votes, columns=["query", "label"]))
    con.execute("CREATE TABLE votes AS SELECT * FROM v")
    con.register("u", pandas.DataFrame({"url": ["/a"] * 3000 + ["/b"] * 1000 + [f"/x{i}" for i in range(30)]}))
    con.execute("CREATE TABLE visits AS SELECT * FROM u")
    con.close()
    return path


def _connect(database, tmp_path, catalog=CATALOG, **kwargs):
    options = {"epsilon": 2.0, "delta": 1e-6, "query_rho": 0.01, "seed": 11, **kwargs}
    return dpsql.connect(database, catalog=catalog, state=str(tmp_path / "ledger.duckdb"), **options)


def _run(conn, sql):
    cur = conn.cursor()
    cur.execute(sql)
    return cur.fetchall()


def test_mode_picks_the_most_frequent_value_charged_its_share_and_free_when_asked_again(database, tmp_path):
    with _connect(database, tmp_path) as conn:
        assert _run(conn, "SELECT MODE(kind) FROM pets") == [("dog",)]  # NULL is no value of MODE
        spent = conn.session.ledger.spent()
        assert spent == pytest.approx(0.01, rel=1e-6)
        assert _run(conn, "SELECT MODE(kind) FROM pets") == [("dog",)]
        assert conn.session.ledger.spent() == spent  # the recorded pick, free
        assert _run(conn, "SELECT MODE() WITHIN GROUP (ORDER BY kind) AS top FROM pets WHERE kind <> 'dog'") == \
            [("cat",)]
        cur = conn.cursor().execute("SELECT kind FROM pets GROUP BY kind ORDER BY COUNT(*) DESC LIMIT 1")
        assert cur.fetchall() == [(None,)] and cur.description[0][0] == "kind"  # NULL is a group
        assert len(conn.session.ledger.charges()) == 3


def test_mode_of_a_numeric_column_with_many_bins_is_a_bin(database, tmp_path):
    """1,000 bins of width 0.1: every weight is 30.05, in the bin [30.0, 30.1); the answer is its label."""
    with _connect(database, tmp_path) as conn:
        [(value,)] = _run(conn, "SELECT MODE(weight) FROM pets")
        assert value == pytest.approx(30.0)


def test_the_plan_says_k_m_and_the_cost_and_reads_nothing(database, tmp_path):
    with _connect(database, tmp_path) as conn:
        plan = "\n".join(r[0] for r in _run(conn, "EXPLAIN SELECT MODE(kind) FROM pets"))
        assert "among 4 declared value(s)" in plan and "at most 2 in L1" in plan and "Total cost" in plan
        assert conn.session.ledger.spent() == 0


def test_confident_gnmax_answers_consensus_and_otherwise_no_row_for_the_check_alone(database, tmp_path):
    top = "SELECT label FROM votes WHERE query = {q} GROUP BY label HAVING COUNT(*) >= 150 " \
          "ORDER BY COUNT(*) DESC LIMIT 1"
    with _connect(database, tmp_path) as conn:
        assert _run(conn, top.format(q=0)) == [(7,)]  # 250 votes for 7
        full = conn.session.ledger.spent()
        assert full == pytest.approx(0.01, rel=1e-6)
        assert _run(conn, top.format(q=3)) == []  # 25 votes each: nothing reaches 150
        check = conn.session.ledger.spent() - full
        expected = confident_noisy_max("gaussian", 0.01, 10, 1, 150)
        assert check == pytest.approx(expected.check.cost, rel=1e-9) and check < 0.001
        assert _run(conn, top.format(q=3)) == [] and conn.session.ledger.spent() == full + check  # recorded


def test_confident_gnmax_needs_the_owners_permission_and_refusing_spends_nothing(database, tmp_path):
    with _connect(database, tmp_path) as conn:
        with pytest.raises(NotSupportedError, match="confident_mode = true"):
            _run(conn, "SELECT kind FROM pets GROUP BY kind HAVING COUNT(*) > 10 ORDER BY COUNT(*) DESC LIMIT 1")
        assert conn.session.ledger.spent() == 0
    with pytest.raises(CatalogError, match="confident_mode is true or false"):
        dpsql.connect(database, catalog=CATALOG.replace("confident_mode = true", 'confident_mode = "yes"'),
                      epsilon=1.0)


@pytest.mark.parametrize("sql, message", [
    ("SELECT MODE(url) FROM visits", "have not been released yet"),
    ("SELECT kind, MODE(weight) FROM pets GROUP BY kind", "in a query of its own"),
    ("SELECT MODE(kind), COUNT(*) FROM pets", "in a query of its own"),
    ("SELECT MODE(weight + 1) FROM pets", "one declared column"),
    ("SELECT MODE(kind) FROM pets ORDER BY 1 LIMIT 1", "in a query of its own"),
    ("BEGIN WORKLOAD; SELECT MODE(kind) FROM pets; END WORKLOAD", "in a statement of its own"),
])
def test_what_noisy_max_cannot_answer_is_refused_before_anything_is_spent(database, tmp_path, sql, message):
    with _connect(database, tmp_path) as conn:
        with pytest.raises(NotSupportedError, match=message):
            conn.cursor().execute(sql)
        assert conn.session.ledger.spent() == 0


def test_a_key_column_is_answered_among_its_released_keys(database, tmp_path):
    with _connect(database, tmp_path) as conn:
        _run(conn, "SELECT url, COUNT(*) FROM visits GROUP BY url")  # releases /a and /b (not the rare ones)
        assert _run(conn, "SELECT MODE(url) FROM visits") == [("/a",)]


def test_a_pure_epsilon_ledger_picks_with_discrete_laplace_noise(database, tmp_path):
    with _connect(database, tmp_path, delta=0.0, query_rho=None, query_epsilon=0.5) as conn:
        assert _run(conn, "SELECT MODE(kind) FROM pets") == [("dog",)]
        assert conn.session.ledger.spent() == pytest.approx(0.5, rel=1e-6)


def test_a_failure_after_the_first_draw_charges_and_shows_nothing(database, tmp_path, monkeypatch):
    def drawn_then_failing(*args, **kwargs):
        discrete_gaussian_vector(*args, **kwargs)
        raise RuntimeError("secret 98765")

    monkeypatch.setattr(mechanisms.partition_selection, "discrete_gaussian_vector", drawn_then_failing)
    with _connect(database, tmp_path) as conn:
        with pytest.raises(OperationalError) as raised:
            conn.cursor().execute("SELECT MODE(kind) FROM pets")
        assert "98765" not in str(raised.value) and "nothing was released" in str(raised.value)
        assert conn.session.ledger.spent() == pytest.approx(0.01, rel=1e-6)


def test_counts_measured_before_answer_the_pick_free(database, tmp_path):
    with _connect(database, tmp_path) as conn:
        _run(conn, "SELECT kind, COUNT(*) FROM pets GROUP BY kind")
        spent = conn.session.ledger.spent()
        cur = conn.cursor().execute("SELECT kind FROM pets GROUP BY kind ORDER BY COUNT(*) DESC LIMIT 1")
        assert cur.fetchall() == [(None,)] and conn.session.ledger.spent() == spent
        assert any("earlier measurements" in n for n in cur.result.notes)
        assert _run(conn, "SELECT MODE(kind) FROM pets") == [("dog",)] and conn.session.ledger.spent() == spent
        assert "Total cost 0" in "\n".join(r[0] for r in _run(conn, "EXPLAIN SELECT MODE(kind) FROM pets"))


def test_clients_that_ask_first_get_the_one_column_and_nothing_is_spent(database, tmp_path):
    with _connect(database, tmp_path) as conn:
        shape = conn.session.describe("SELECT MODE(weight) AS heaviest FROM pets")
        assert shape.columns == ["heaviest"] and shape.types == ["DOUBLE"] and shape.rows == []
        shape = conn.session.describe("SELECT kind FROM pets GROUP BY kind ORDER BY COUNT(*) DESC LIMIT 1")
        assert shape.columns == ["kind"] and shape.types == ["VARCHAR"]
        assert conn.session.ledger.spent() == 0
