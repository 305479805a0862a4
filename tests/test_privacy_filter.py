"""Exact composition of mixed histories (`mechanisms.privacy_filter`), the noise the planner picks for a
share (`planner.noise_choice`), and calibrated intervals for Laplace answers."""

import contextlib
import io
import math

import duckdb
import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_mechanism as plm

import dpsql
from dpsql.interfaces import cli
from dpsql.budget.ledger import Ledger
from dpsql.answers.result import Result
from mechanisms.accounting import epsilon_delta_to_zcdp, zcdp_to_epsilon
from mechanisms.noise import RandomSource, discrete_laplace_variance, discrete_laplace_vector, laplace_scale_upper
from dpsql.budget.ledger_accounting import accountant
from mechanisms.privacy_filter import Accountant, History, Piece
from planner.noise_choice import laplace_share

EPSILON, DELTA = 1.0, 1e-6
TOTAL = epsilon_delta_to_zcdp(EPSILON, DELTA)
ACC = Accountant(zcdp_to_epsilon(TOTAL, DELTA), DELTA, TOTAL)


def test_one_laplace_piece_spends_its_epsilon_and_no_delta():
    eps = ACC.epsilon  # the declared ε as the ledger's ρ gives it back
    assert ACC.remaining(History().plus([Piece.laplace(eps)])) == pytest.approx(0.0, abs=1e-9 * TOTAL)
    assert not ACC.fits(History().plus([Piece.laplace(eps * 1.001)]))
    assert not ACC.fits(History().plus([Piece.laplace(math.nextafter(eps, 2.0))]))  # the pure filter has no slack
    # zCDP alone would count it as ε²/2 = 0.5 of ρ, twenty times the whole budget
    assert ACC.remaining(History().plus([Piece.laplace(eps)]), exact=False) < -0.4
    # Pure pieces add up (δ = 0): ten shares of ε/10 fit, eleven do not.
    share = laplace_share(TOTAL / 10, TOTAL, DELTA)
    assert ACC.fits(History(epsilons=(share,) * 10))
    assert not ACC.fits(History(epsilons=(share,) * 11))


@pytest.mark.parametrize("seed", range(6))
def test_exact_is_never_looser_than_zcdp(seed):
    rng = np.random.default_rng(seed)
    pieces = [Piece.gaussian(TOTAL * rng.uniform(0, 0.2)) if rng.random() < 0.5 else Piece.laplace(rng.uniform(0, 0.3))
              for _ in range(int(rng.integers(1, 8)))]
    history = History().plus(pieces, delta=float(rng.choice([0.0, DELTA / 10])))
    assert ACC.remaining(history) >= ACC.remaining(history, exact=False)


def test_gaussian_histories_are_composed_as_in_zcdp():
    keys = accountant(TOTAL, DELTA, DELTA / 10)  # δ/10 set apart for δ events
    history = History().plus([Piece.gaussian(TOTAL / 4)] * 3, delta=DELTA / 10)
    assert keys.remaining(history) == keys.remaining(history, exact=False)
    assert keys.total == pytest.approx(epsilon_delta_to_zcdp(EPSILON, DELTA - DELTA / 10))
    assert keys.remaining(history) == pytest.approx(keys.total - 3 * TOTAL / 4)
    assert keys.fits(History().plus([Piece.gaussian(keys.total)], delta=DELTA / 10))
    assert not keys.fits(History().plus([Piece.gaussian(keys.total * 1.001)]))  # δ − δ_K, whatever was released


def test_beside_a_gaussian_pure_pieces_count_in_zcdp():
    """Only the zCDP filter accepts histories with Gaussians: each pure piece is ε²/2 of ρ there."""
    history = History().plus([Piece.laplace(0.1), Piece.gaussian(TOTAL / 4)])
    assert ACC.remaining(history) == ACC.remaining(history, exact=False)
    assert not ACC.fits(History().plus([Piece.laplace(0.5), Piece.gaussian(TOTAL / 4)]))  # 0.125 > ρ_total
    assert ACC.fits(History().plus([Piece.laplace(0.5)]))  # alone, the pure filter takes it


def test_delta_events_fit_both_filters_within_the_part_set_apart_and_neither_past_it():
    """A Laplace key release of the whole ε is a pure piece and a δ event: the pure filter takes it while the
    events stay within δ_K; a δ event past δ_K fits no filter, however little it spends."""
    keys = accountant(TOTAL, DELTA, DELTA / 2)
    assert keys.fits(History().plus([Piece.laplace(keys.epsilon)], delta=DELTA / 10))
    assert keys.fits(History().plus([Piece.laplace(keys.epsilon / 2)] * 2, delta=DELTA / 2))
    assert not keys.fits(History().plus([Piece.laplace(keys.epsilon / 2)] * 2, delta=DELTA / 2 * 1.01))
    assert not keys.fits(History().plus([Piece.gaussian(keys.total / 100)], delta=DELTA / 2 * 1.01))
    assert not ACC.fits(History().plus([Piece.laplace(0.01)], delta=DELTA / 100))  # none set apart


def test_a_discrete_gaussian_is_not_a_continuous_one():
    """Why Gaussian pieces stay in zCDP: at the same σ the discrete Gaussian's exact δ(ε) is larger."""
    discrete = plm.DiscreteGaussianPrivacyLoss(sigma=4.0, sensitivity=1).get_delta_for_epsilon(1.0)
    continuous = plm.GaussianPrivacyLoss(standard_deviation=4.0, sensitivity=1.0).get_delta_for_epsilon(1.0)
    assert discrete > continuous * 1.02


def test_pieces_round_trip_through_json():
    piece = Piece.laplace(0.5, 2.0, 1.0)
    assert Piece.from_json(piece.to_json()) == piece
    with pytest.raises(ValueError):
        Piece.from_json({"mechanism": "gumbel", "value": 1.0})


def test_laplace_intervals_cover_95_percent():
    """Monte Carlo: a discrete Laplace answer's 95% interval covers the truth 95% of the time (the normal
    interval covers only about 93.8%)."""
    rng = RandomSource(seed=11)
    for scale in (0.7, 3.0, 40.0):
        b = laplace_scale_upper(scale)
        noise = np.asarray(discrete_laplace_vector(b, 40_000, rng), dtype=float)
        se = math.sqrt(discrete_laplace_variance(b))
        values = 100.0 + noise
        result = Result(["n"], [(v,) for v in values], stderr=[(se,)] * len(values), laplace_tails=True)
        covered = np.mean([lo <= 100.0 <= hi for ((lo, hi),) in result.ci(0.95)])
        normal = np.mean(np.abs(noise) <= 1.959964 * se)
        assert 0.945 <= covered <= 0.985, (scale, covered)  # at least 95%; the lattice may add some
        assert normal < 0.945, (scale, normal)


@pytest.fixture
def people(tmp_path):
    path = str(tmp_path / "p.duckdb")
    con = duckdb.connect(path)
    con.execute("CREATE TABLE people AS SELECT (i % 90)::INT AS age, (i % 7)::INT AS g FROM range(5000) r(i)")
    con.close()
    catalog = {"tables": {"people": {"columns": {"age": {"type": "integer", "min": 0, "max": 89},
                                                 "g": {"type": "integer", "min": 0, "max": 6}}}}}
    return path, catalog


def test_one_count_spending_the_budget_gets_laplace(people, tmp_path):
    path, catalog = people
    state = str(tmp_path / "state")
    with dpsql.connect(path, catalog=catalog, epsilon=EPSILON, delta=DELTA, query_epsilon=EPSILON, state=state,
                       seed=5) as c:
        plan = "\n".join(r[0] for r in c.execute("EXPLAIN SELECT COUNT(*) FROM people").fetchall())
        assert "laplace noise" in plan and "noise: discrete Laplace" in plan and "fits in" in plan
        cur = c.execute("SELECT COUNT(*) FROM people")
        assert cur.result.stderr[0][0] == pytest.approx(math.sqrt(discrete_laplace_variance(1.0)), rel=1e-6)
        assert "ε=1 of pure DP" in cur.result.charge_text and cur.result.laplace_tails
        c.execute("SELECT COUNT(*) FROM people")  # asked again: free
    ledger = Ledger.existing(state)
    assert ledger.verify() == [] and len(ledger.charges()) == 1 and ledger.remaining() < 1e-9 * TOTAL
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["ledger", "show", state]) == 0
    assert [c.strip() for c in out.getvalue().splitlines()[4].split("|")[3:6]] == ["people", "1.0", "0.5"]
    with dpsql.connect(path, catalog=catalog, state=state, seed=5) as c:
        with pytest.raises(dpsql.errors.BudgetExceededError, match="nothing was charged"):
            c.execute("SELECT COUNT(*) FROM people WHERE age < 30")


def test_many_small_shares_keep_the_gaussian(people, tmp_path):
    path, catalog = people
    with dpsql.connect(path, catalog=catalog, epsilon=EPSILON, delta=DELTA, query_epsilon=EPSILON / 30,
                       state=str(tmp_path / "state"), seed=5) as c:
        plan = "\n".join(r[0] for r in c.execute("EXPLAIN SELECT COUNT(*) FROM people").fetchall())
        assert "gaussian noise" in plan and "noise: discrete Gaussian" in plan


def test_an_accuracy_target_is_met_with_the_noise_that_takes_the_smaller_share(people, tmp_path):
    path, catalog = people
    with dpsql.connect(path, catalog=catalog, epsilon=EPSILON, delta=DELTA, state=str(tmp_path / "state"),
                       seed=5) as c:
        c.execute("SET dpsql.max_rmse = 5")  # one COUNT: σ = 5 takes ρ = 0.02 (most of ρ_total) or ε ≈ 0.28
        plan = "\n".join(r[0] for r in c.execute("EXPLAIN SELECT COUNT(*) FROM people").fetchall())
        assert "noise: discrete Laplace" in plan and "chosen for this accuracy target" in plan
        cur = c.execute("SELECT COUNT(*) FROM people")
        assert cur.result.stderr[0][0] <= 5 and "of pure DP" in cur.result.charge_text
        spent = c.session.ledger.charges()[0].pure_epsilon
        assert 0.25 < spent < 0.3  # ε ≈ 0.28 of pure DP; what is left is that share of the budget less
        assert c.budget.remaining.rho == pytest.approx((1 - spent / ACC.epsilon) * TOTAL, rel=1e-9)
        c.execute("SET dpsql.max_rmse = 60")  # beside the pure piece a Gaussian no longer fits (ε²/2 of ρ)
        plan = "\n".join(r[0] for r in c.execute("EXPLAIN SELECT age, COUNT(*) FROM people GROUP BY age"
                                                  ).fetchall())
        assert "noise: discrete Laplace" in plan and "the Gaussian meeting it no longer fits" in plan
    with dpsql.connect(path, catalog=catalog, epsilon=EPSILON, delta=DELTA, state=str(tmp_path / "fresh"),
                       seed=5) as c:
        c.execute("SET dpsql.max_rmse = 60")  # many rows: the Gaussian meets it with the smaller share
        plan = "\n".join(r[0] for r in c.execute("EXPLAIN SELECT age, COUNT(*) FROM people GROUP BY age"
                                                  ).fetchall())
        assert "noise: discrete Gaussian" in plan and "chosen for this accuracy target" in plan


def test_zcdp_mode_keeps_gaussian_noise_and_tampered_pieces_are_detected(people, tmp_path):
    path, catalog = people
    state = str(tmp_path / "state")
    with dpsql.connect(path, catalog=catalog, epsilon=EPSILON, delta=DELTA, query_epsilon=EPSILON, state=state,
                       seed=5, accounting="zcdp") as c:
        assert "gaussian noise" in "\n".join(r[0] for r in c.execute("EXPLAIN SELECT COUNT(*) FROM people").fetchall())
        with pytest.raises(dpsql.errors.ProgrammingError, match="accounting"):
            dpsql.connect(path, catalog=catalog, state=state, accounting="rdp")
    with dpsql.connect(path, catalog=catalog, state=state, seed=5) as c:
        c.session.query_share = TOTAL / 2
        c.execute("SELECT COUNT(*) FROM people WHERE age < 30")
    assert Ledger.existing(state).verify() == []
    con = duckdb.connect(state)
    con.execute("UPDATE dpsql_pieces SET pieces = replace(pieces, 'discrete_laplace', 'discrete_gaussian')")
    con.close()
    assert any("altered" in p for p in Ledger.existing(state).verify())


def test_a_ledger_written_before_converts_exactly(tmp_path):
    """Charges with no recorded mechanisms are the Gaussians of their ρ: exact and zCDP modes agree on them."""
    import shutil
    from pathlib import Path

    state = tmp_path / "ledger.dpsql-state"
    shutil.copy(Path(__file__).parent / "data" / "ledger-0.2.dpsql-state", state)
    ledger = Ledger.existing(str(state))
    exact = ledger.status()
    ledger.accounting = "zcdp"
    assert ledger.status() == pytest.approx(exact, rel=1e-12) and ledger.verify() == []
