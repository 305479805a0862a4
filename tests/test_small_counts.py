"""Small-group counts (`mechanisms.small_counts`, `dpsql.handlers.small_counts`): the LDP thesis' GM and EM.

The mechanism: its matrices against the thesis' closed forms, exactly; ε-DP of every pair of adjacent
columns in rationals (and a matrix that is not); the properties of its Fig. 6.5; the exact sampler against
the matrix by a chi-square test with fixed seeds (and its power against the other mechanism); the error bars.
The catalog's `sizes`, the setting, and SQL end to end: the answers, the charge, the free re-ask, the
clamping, and refusals that spend nothing.
"""

import math
from fractions import Fraction

import duckdb
import pandas
import pytest
from scipy.stats import chisquare

import dpsql
from dpsql.budget.ledger_entries import SMALL_COUNTS
from dpsql.errors import CatalogError, NotSupportedError, ProgrammingError
from mechanisms.noise import RandomSource, sample_weighted
from mechanisms.small_counts import (
    FAIR, GEOMETRIC, UNIFORM, alpha_for, column_weights, epsilon_of, l0, matrix, properties, rmse_by_count, sample,
    standard_error,
)

ALPHAS = [Fraction(1, 2), Fraction(2, 3), Fraction(3, 4), Fraction(9, 10), alpha_for(0.1)]

# --- the mechanisms -----------------------------------------------------------------------


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_gm_is_the_thesis_closed_form(n, alpha):
    """Pr[i|j] = y_i α^|i-j|, y_0 = y_n = 1/(1+α), y_i = (1-α)/(1+α) inside (thesis Fig. 6.2, Thm 12)."""
    p = matrix(GEOMETRIC, n, alpha)
    for i in range(n + 1):
        y = 1 / (1 + alpha) if i in (0, n) else (1 - alpha) / (1 + alpha)
        assert all(p[i][j] == y * alpha ** abs(i - j) for j in range(n + 1))
    assert l0(p) == 2 * alpha / (1 + alpha)  # Thm 12, independent of n


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("n", [2, 3, 4, 7, 8, 9])
def test_em_is_fair_with_the_thesis_diagonal(n, alpha):
    """(6.15): every diagonal entry is y = (1-α)/(1+α-2α^(n/2+1)) for even n, 1/(1 + 2Σα^k + α^⌈n/2⌉) for odd n;
    every column holds the same multiset of values; L₀ = (n+1)(1-y)/n (Thm 13)."""
    p = matrix(FAIR, n, alpha)
    if n % 2 == 0:
        y = (1 - alpha) / (1 + alpha - 2 * alpha ** (n // 2 + 1))
    else:
        y = 1 / (1 + 2 * sum(alpha ** k for k in range(1, n // 2 + 1)) + alpha ** ((n + 1) // 2))
    assert all(p[i][i] == y for i in range(n + 1))
    assert all(sorted(p[i][j] for i in range(n + 1)) == sorted(p[i][0] for i in range(n + 1)) for j in range(n + 1))
    assert l0(p) == Fraction(n + 1, n) * (1 - y)


def test_the_thesis_worked_numbers():
    """Example 1 (n = 2, α = 9/10): the truth on input 1 is 18x less likely than a wrong answer; EM's y at n = 4."""
    p = matrix(GEOMETRIC, 2, Fraction(9, 10))
    assert (p[0][1], p[1][1], p[2][1]) == (Fraction(9, 19), Fraction(1, 19), Fraction(9, 19))
    assert p[0][0] == Fraction(10, 19)
    assert float(matrix(FAIR, 4, Fraction(9, 10))[0][0]) == pytest.approx(0.2262, abs=1e-4)
    assert float(l0(matrix(GEOMETRIC, 5, Fraction(19, 25)))) == pytest.approx(0.8636, abs=1e-4)


@pytest.mark.parametrize("kind", [GEOMETRIC, FAIR, UNIFORM])
@pytest.mark.parametrize("n", range(0, 13))
def test_every_pair_of_adjacent_columns_is_within_e_to_the_epsilon_exactly(kind, n):
    for alpha in ALPHAS:
        p = matrix(kind, n, alpha)
        assert all(sum(p[i][j] for i in range(n + 1)) == 1 for j in range(n + 1))
        assert all(alpha * p[i][j + 1] <= p[i][j] and alpha * p[i][j] <= p[i][j + 1]
                   for i in range(n + 1) for j in range(n))
        assert properties(p, alpha)["DP"]


def test_the_dp_check_fails_where_it_should():
    """GM's ratios are tight: at a slightly larger α (a smaller ε) it is not DP; nor is a matrix that
    tells the truth more often."""
    alpha = Fraction(2, 3)
    assert not properties(matrix(GEOMETRIC, 4, alpha), alpha * Fraction(1001, 1000))["DP"]
    truthful = [[Fraction(int(i == j)) for j in range(3)] for i in range(3)]
    assert not properties(truthful, alpha)["DP"]


@pytest.mark.parametrize("epsilon", [1e-3, 0.05, 0.1, 0.5, 1.0, 3.0, 10.0])
def test_alpha_is_a_rational_at_least_e_to_the_minus_epsilon(epsilon):
    alpha = alpha_for(epsilon)
    assert isinstance(alpha, Fraction) and alpha.denominator <= 2 ** 20
    assert Fraction(math.exp(-epsilon)) < alpha < Fraction(math.exp(-epsilon)) + Fraction(3, 2 ** 20)
    assert epsilon_of(alpha) <= epsilon
    with pytest.raises(ValueError):
        alpha_for(0.0)
    with pytest.raises(ValueError, match="too small"):
        alpha_for(1e-9)


@pytest.mark.parametrize("n", [2, 4, 7, 12, 30])
@pytest.mark.parametrize("alpha", [Fraction(1, 2), Fraction(2, 3), Fraction(10, 11)])
def test_the_properties_of_figure_6_5(n, alpha):
    """GM: S and RM always, CM iff α <= 1/2 (Lemma 14), WH iff n >= 2α/(1-α) (Lemma 13), not F;
    EM and UM: every property; UM's L₀ is 1."""
    gm = properties(matrix(GEOMETRIC, n, alpha), alpha)
    assert gm["S"] and gm["RM"] and not gm["F"]
    assert gm["CM"] == (alpha <= Fraction(1, 2))
    assert gm["WH"] == (n >= 2 * alpha / (1 - alpha))
    assert all(properties(matrix(FAIR, n, alpha), alpha).values())
    assert all(properties(matrix(UNIFORM, n, alpha), alpha).values())
    assert l0(matrix(UNIFORM, n, alpha)) == 1


@pytest.mark.parametrize("kind, other", [(GEOMETRIC, FAIR), (FAIR, GEOMETRIC)])
def test_the_exact_sampler_draws_the_matrix_columns(kind, other):
    """20,000 draws per column (seeded: deterministic) fit the exact column by chi-square, and do not fit the
    other mechanism's column (the test has power: GM and EM differ by a few percent here)."""
    n, alpha = 6, Fraction(2, 3)
    p, q = matrix(kind, n, alpha), matrix(other, n, alpha)
    rng = RandomSource(2026)
    draws = 20_000
    for j in (0, 2, 3):
        observed = [0] * (n + 1)
        for _ in range(draws):
            observed[sample(kind, n, alpha, j, rng)] += 1
        assert chisquare(observed, [float(p[i][j]) * draws for i in range(n + 1)]).pvalue > 1e-3
        if j > 0:  # column 0 of GM and EM differ less
            assert chisquare(observed, [float(q[i][j]) * draws for i in range(n + 1)]).pvalue < 1e-6


def test_counts_outside_the_group_are_clamped_and_weights_are_integers():
    alpha = Fraction(1, 10 ** 6)  # all but certain to tell the truth
    rng = RandomSource(1)
    assert [sample(FAIR, 5, alpha, c, rng) for c in (-3, 0, 4, 5, 9)] == [0, 0, 4, 5, 5]
    assert all(isinstance(w, int) for w in column_weights(GEOMETRIC, 9, alpha_for(0.2), 4))
    with pytest.raises(ValueError, match="above"):
        sample(FAIR, 1001, alpha, 0, rng)


def test_sample_weighted_is_exact_and_refuses_bad_weights():
    rng = RandomSource(5)
    assert {sample_weighted([0, 3, 0], rng) for _ in range(50)} == {1}
    for bad in ([], [0, 0], [1, -1], [1.5, 1], [True, 1]):
        with pytest.raises(ValueError):
            sample_weighted(bad, rng)


@pytest.mark.parametrize("kind", [GEOMETRIC, FAIR, UNIFORM])
def test_the_error_bars_are_the_exact_distributions_rmse(kind):
    n, alpha = 7, Fraction(3, 4)
    p = matrix(kind, n, alpha)
    exact = [math.sqrt(sum(p[i][j] * (i - j) ** 2 for i in range(n + 1))) for j in range(n + 1)]
    assert list(rmse_by_count(kind, n, alpha)) == pytest.approx(exact, rel=1e-12)
    assert standard_error(kind, n, alpha) == pytest.approx(max(exact), rel=1e-12)


# --- SQL ----------------------------------------------------------------------------------

CATALOG = """
[tables.staff.columns]
team = { type = "categorical", values = ["a", "b", "c"], sizes = [4, 7, 3] }
high = { type = "boolean" }
age = { type = "integer", min = 18, max = 70 }
"""
# Team c holds 5 rows but declares 3: its counts are clamped to 3.
TEAMS = {"a": (4, 1), "b": (7, 5), "c": (5, 5)}  # team: (rows, of them high)


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("small_counts") / "data.duckdb")
    rows = [(t, i < high, 20 + 3 * i) for t, (n, high) in TEAMS.items() for i in range(n)]
    con = duckdb.connect(path)
    con.register("s", pandas.DataFrame(rows, columns=["team", "high", "age"]))
    con.execute("CREATE TABLE staff AS SELECT * FROM s")
    con.close()
    return path


def _connect(database, tmp_path, **kwargs):
    options = {"epsilon": 2.0, "delta": 1e-6, "query_epsilon": 0.5, "seed": 7, **kwargs}
    return dpsql.connect(database, catalog=CATALOG, state=str(tmp_path / "ledger.duckdb"), **options)


def _run(conn, *statements):
    cur = conn.cursor()
    for sql in statements:
        cur.execute(sql)
    return cur.fetchall()


def test_the_catalog_declares_sizes_one_per_value():
    base = 'team = { type = "categorical", values = ["a", "b"], %s }'
    for bad, message in [("sizes = [1]", "one non-negative integer per value"),
                         ("sizes = [1, -2]", "one non-negative integer per value"),
                         ("sizes = [1, true]", "one non-negative integer per value"),
                         ("sizes = [1, 2], nullable = true", "cannot be nullable")]:
        with pytest.raises(CatalogError, match=message):
            dpsql.connect(":memory:", catalog="[tables.t.columns]\n" + base % bad, epsilon=1.0)
    conn = dpsql.connect(":memory:", catalog="[tables.t.columns]\n" + base % "sizes = [3, 0]", epsilon=1.0)
    column = conn.session.catalog.get("t").column("team")
    assert column.sizes == (3, 0) and "sizes=[3, 0]" in column.declaration()
    assert dpsql.categorical(["a", "b"], sizes=[3, 0])["sizes"] == [3, 0]


def test_the_setting_takes_off_geometric_or_fair(database, tmp_path):
    with _connect(database, tmp_path) as conn:
        assert _run(conn, "SHOW dpsql.small_counts") == [("off",)]
        assert _run(conn, "SET dpsql.small_counts = 'geometric'", "SHOW dpsql.small_counts") == [("geometric",)]
        with pytest.raises(ProgrammingError, match="one of off, geometric, fair"):
            _run(conn, "SET dpsql.small_counts = 'laplace'")


@pytest.mark.parametrize("kind", ["fair", "geometric"])
def test_counts_are_integers_in_their_group_charged_once_and_free_when_asked_again(database, tmp_path, kind):
    sql = "SELECT team, COUNT(*) FILTER (WHERE high) AS n FROM staff GROUP BY team"
    with _connect(database, tmp_path) as conn:
        plan = _run(conn, f"SET dpsql.small_counts = '{kind}'", "EXPLAIN " + sql)
        assert "Small-group counts" in plan[0][0] and conn.session.ledger.spent() == 0
        cur = conn.cursor()
        cur.execute(sql)
        rows = cur.fetchall()
        assert [r[0] for r in rows] == ["a", "b", "c"]
        assert all(isinstance(v, int) and 0 <= v <= n for (_, v), n in zip(rows, (4, 7, 3)))
        [charge] = conn.session.ledger.charges()
        spent = conn.session.ledger.spent()
        [(_, _, payload)] = conn.session.ledger.records(SMALL_COUNTS, "staff")
        assert payload["counts"] == [v for _, v in rows] and payload["mechanism"] == kind
        assert _run(conn, sql) == rows and conn.session.ledger.spent() == spent  # the record, free
        assert len(conn.session.ledger.charges()) == 1
        stderr = _run(conn, "SET dpsql.stderr = on", sql)
        alpha = Fraction(payload["alpha"])
        assert [r[2] for r in stderr] == pytest.approx([standard_error(kind, n, alpha) for n in (4, 7, 3)])
        assert charge  # one charge, before the answer


def test_the_counts_are_the_groups_rows_that_the_where_and_filter_keep_clamped_to_the_declared_size(
        database, tmp_path):
    """At ε = 20 (α = 2^-19) the mechanisms all but surely tell the truth: the wiring is read off the answers."""
    with _connect(database, tmp_path, delta=0.0, epsilon=100.0, query_epsilon=20.0) as conn:
        _run(conn, "SET dpsql.small_counts = 'fair'")
        assert _run(conn, "SELECT team, COUNT(*) FILTER (WHERE high) FROM staff GROUP BY team") == \
            [("a", 1), ("b", 5), ("c", 3)]  # c: 5 high rows, 3 declared
        assert _run(conn, "SELECT team, COUNT(*) FROM staff WHERE age >= 29 GROUP BY team ORDER BY team DESC") == \
            [("c", 2), ("b", 4), ("a", 1)]
        assert conn.session.ledger.spent() == pytest.approx(40.0)  # a pure-ε ledger: ε per release


@pytest.mark.parametrize("sql, message", [
    ("SELECT team, high, COUNT(*) FROM staff GROUP BY team, high", "one column alone"),
    ("SELECT high, COUNT(*) FROM staff GROUP BY high", "'high' declares no sizes"),
    ("SELECT CASE WHEN team = 'a' THEN 'x' ELSE 'y' END AS g, COUNT(*) FROM staff GROUP BY g", "expression"),
    ("SELECT team, SUM(age) FROM staff GROUP BY team", "one COUNT"),
    ("SELECT team, COUNT(*), AVG(age) FROM staff GROUP BY team", "one COUNT"),
    ("SELECT COUNT(*) FROM staff", "one column alone"),
    ("SELECT MODE(team) FROM staff", "report-noisy-max"),
    ("SELECT (SELECT COUNT(*) FROM staff WHERE high) - (SELECT COUNT(*) FROM staff)", "several DP parts"),
    ("BEGIN WORKLOAD; SELECT team, COUNT(*) FROM staff GROUP BY team; END WORKLOAD", "not workloads"),
])
def test_what_the_setting_cannot_answer_is_refused_before_anything_is_spent(database, tmp_path, sql, message):
    with _connect(database, tmp_path) as conn:
        _run(conn, "SET dpsql.small_counts = 'fair'")
        with pytest.raises(NotSupportedError, match=message):
            conn.cursor().execute(sql)
        assert conn.session.ledger.spent() == 0 and conn.session.ledger.charges() == []
        assert _run(conn, "SET dpsql.small_counts = 'off'", "SELECT COUNT(*) FROM staff")  # off: the usual path


def test_the_benchmarks_wm_lp_has_its_properties_and_lies_between_gm_and_em():
    from benchmarks.small_counts import lp

    alpha = Fraction(9, 10)
    wm = lp(4, alpha, True).tolist()
    assert properties(wm, alpha, 1e-7) == {"DP": True, "S": True, "RM": True, "CM": True, "F": False, "WH": True}
    assert float(l0(matrix(GEOMETRIC, 4, alpha))) < l0(wm) < float(l0(matrix(FAIR, 4, alpha))) + 1e-7


def test_clients_that_describe_first_see_integer_counts_and_a_zcdp_ledger_charges_one_pure_piece(database, tmp_path):
    from dpsql.handlers import describe
    from dpsql.sql.statements import classify

    sql = "SELECT team, COUNT(*) AS n FROM staff WHERE high GROUP BY team"
    with _connect(database, tmp_path, accounting="zcdp") as conn:
        _run(conn, "SET dpsql.small_counts = 'geometric'")
        shape = describe(conn.session, classify(sql), None)
        assert shape.columns == ["team", "n"] and shape.types[1] == "BIGINT" and shape.rows == []
        assert describe(conn.session, classify("SELECT SUM(age) FROM staff"), None) is None
        cur = conn.cursor()
        cur.execute(sql)
        assert cur.result.types[1] == "BIGINT" and "pure DP" in cur.result.charge_text
        [charge] = conn.session.ledger.charges()
        assert conn.session.ledger.spent() == pytest.approx(cur.result.charged)
