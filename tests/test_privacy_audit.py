"""Privacy audits: lower bounds on ε estimated from outputs on neighbouring inputs.

Each audit must stay below the claimed ε. Each also has a *power check*: the
same audit on a deliberately broken mechanism (too little noise) must flag
it, so a passing audit means something. Confidence: every bound holds with
probability ≥ 1 - 2e-3 (Clopper–Pearson, union bound over the events tried);
seeds are fixed. The Gaussian, Laplace and Gumbel top-1 audits run by default
(a few seconds); the exponential mechanism, Gumbel top-K, a least-squares plan
end to end through the DB-API, AIM, RAP and partition selection are `slow`.
"""

import math
from fractions import Fraction

import duckdb
import numpy as np
import pytest

import dpsql
import dpsql.executor
from dpsql.tables.catalog import Catalog
from mechanisms.accounting import zcdp_to_epsilon
from mechanisms.aim import aim
from mechanisms.domain import Domain
from mechanisms.measurement import calibrate
from mechanisms.noise import RandomSource, discrete_gaussian_vector, discrete_laplace_vector
from mechanisms.partition_selection import (
    DiscreteGaussian,
    DiscreteLaplace,
    gaussian_selection,
    laplace_selection,
    release_probability,
    select_partitions,
)
from mechanisms.rap import ProjectionConfig, RAPConfig, RecordCounts, ThresholdQueries, ThresholdWorkload, run_rap
from mechanisms.rap.top_k import NoisyTopK, gumbel_scale
from mechanisms.rap.workloads import Threshold
from mechanisms.reconstruction import LeastSquaresModel
from mechanisms.exponential import exponential_mechanism
from tests.privacy_audit import audit, clopper_pearson

TRIALS = 100_000
DELTA = 1e-5


def counting_mechanism(kind, share, weaken=1.0):
    """A count released with the calibrated noise, its scale divided by `weaken` to break it."""
    cal = calibrate(kind, 1.0, share)
    sampler = discrete_gaussian_vector if kind == "gaussian" else discrete_laplace_vector

    def run(neighbour, seed):
        return 1000 + neighbour + sampler(cal.scale / Fraction(weaken), TRIALS, RandomSource(seed))

    return run


def test_gaussian_mechanism_audit():
    rho = 0.125
    claimed = zcdp_to_epsilon(rho, DELTA)
    assert audit(counting_mechanism("gaussian", rho), DELTA) < claimed
    assert audit(counting_mechanism("gaussian", rho, weaken=16), DELTA) > claimed  # power check


def test_laplace_mechanism_audit():
    epsilon = 1.0
    assert audit(counting_mechanism("laplace", epsilon), 0.0) < epsilon
    assert audit(counting_mechanism("laplace", epsilon, weaken=4), 0.0) > epsilon  # power check


# --- selection: scores of sensitivity 1 moving in opposite directions --------------------------
# On D candidate 0 leads by 1; on the neighbour D' every other candidate does. Picking candidate 0
# then has likelihood ratio close to e^ε (the exponential mechanism's worst case).

CANDIDATES = 20


def _scores(neighbour: int, boosted: int = 1) -> list[int]:
    """The first `boosted` candidates score 1 on D (neighbour 0); the others score 1 on D'."""
    return [int(i < boosted) ^ neighbour for i in range(CANDIDATES)]


def gumbel_top_k(k, rho_pick, trials, weaken=1.0):
    """How many of the first k candidates the one-shot Gumbel top-K picks, per run."""
    scale = gumbel_scale(rho_pick) / weaken

    def run(neighbour, seed):
        rng, scores, ids = RandomSource(seed), np.asarray(_scores(neighbour, k), dtype=float), np.arange(CANDIDATES)
        out = np.empty(trials)
        for i in range(trials):
            top = NoisyTopK(k, scale, rng)
            top.add(ids, scores)
            out[i] = np.count_nonzero(top.winners() < k)
        return out

    return run


def test_gumbel_top_one_audit():
    """One report-noisy-max pick at ρ = 1/8: the exponential mechanism with ε = √(8ρ) = 1, pure DP."""
    rho_pick = 0.125
    claimed = k_picks_epsilon(1, rho_pick)
    assert audit(gumbel_top_k(1, rho_pick, 10_000), 0.0) < claimed
    assert audit(gumbel_top_k(1, rho_pick, 10_000, weaken=3), 0.0) > claimed  # power check


def k_picks_epsilon(k: int, rho_pick: float) -> float:
    """K picks, each an exponential mechanism with ε = √(8 ρ_pick): K·ε pure DP (tighter here than via zCDP)."""
    return min(k * math.sqrt(8 * rho_pick), zcdp_to_epsilon(k * rho_pick, DELTA))


@pytest.mark.slow
def test_gumbel_top_k_audit():
    rho_pick = 0.125
    claimed = k_picks_epsilon(3, rho_pick)
    assert audit(gumbel_top_k(3, rho_pick, 20_000), 0.0) < claimed
    assert audit(gumbel_top_k(3, rho_pick, 20_000, weaken=4), 0.0) > claimed  # power check


@pytest.mark.slow
def test_exponential_mechanism_audit():
    """The exact sampler of `mechanisms.exponential`, at ε = 1 (pure DP)."""
    epsilon = 1.0

    def mechanism(weaken):
        def run(neighbour, seed):
            rng, scores = RandomSource(seed), [Fraction(s) for s in _scores(neighbour)]
            return np.array([exponential_mechanism(scores, epsilon * weaken, Fraction(1), rng)
                             for _ in range(20_000)])
        return run

    assert audit(mechanism(1), 0.0) < epsilon
    assert audit(mechanism(2), 0.0) > epsilon  # power check


# --- a least-squares plan --------------------------------------------------------------------

LSQ_CATALOG = {"tables": {"t": {"columns": {
    "a": {"type": "integer", "min": 0, "max": 3}, "b": {"type": "integer", "min": 0, "max": 2}}}}}
LSQ_QUERIES = ["SELECT a, COUNT(*) FROM t GROUP BY a", "SELECT a, b, COUNT(*) FROM t GROUP BY a, b",
               "SELECT a, VAR_POP(b), COUNT(*) FROM t GROUP BY ROLLUP (a)", "SELECT COUNT(*) FROM t WHERE b >= 1"]


@pytest.mark.slow
def test_least_squares_plan_audit():
    """A whole plan (planner shares, exact noise, least squares) on histograms differing by one row."""
    from dpsql.sql.compiler import compile_query
    from mechanisms.workload import Workload
    from planner.planner import plan_workload

    catalog = Catalog.from_dict(LSQ_CATALOG)
    table = catalog.get("t")
    blocks = [b for q in LSQ_QUERIES for b in compile_query(q, catalog).blocks]
    rho = 0.125
    plan = plan_workload(Workload(table.domain, blocks), rho, "gaussian", DELTA)
    base = {("a",): np.array([50, 60, 70, 80]), ("a", "b"): np.arange(12) + 10}
    base[("b",)] = base[("a", "b")].reshape(4, 3).sum(axis=0)
    base[()] = base[("b",)].sum(keepdims=True)
    target = blocks[-1]  # COUNT(*) WHERE b >= 1: the row added to D' has a = 0, b = 2
    runs = 20_000

    def run(neighbour, seed):
        rng = RandomSource(seed)
        counts = {k: v.copy() for k, v in base.items()}
        if neighbour:
            counts[("a",)][0] += 1
            counts[("a", "b")][2] += 1
            counts[("b",)][2] += 1
            counts[()][0] += 1
        out = np.empty(runs)
        for i in range(runs):
            model = LeastSquaresModel(table.domain, [
                m.release(counts[m.clique], table.domain, "gaussian", rng) for m in plan.measurements])
            out[i] = model.answer(target)[0][0]
        return out

    assert all(m.clique in base for m in plan.measurements)
    assert audit(run, DELTA) < zcdp_to_epsilon(plan.cost, DELTA)


def _memoized_planning(monkeypatch):
    """Plan each workload once: planning reads no data, so reusing a plan changes no output distribution."""
    plans = {}
    plan_workload = dpsql.executor.plan_workload

    def once(workload, *args, **kwargs):
        settings = sorted((k, v) for k, v in kwargs.items() if k != "limit")  # a fresh object per statement
        key = repr(([b.fingerprint(workload.domain) for b in workload.blocks], args, settings))
        if key not in plans:
            plans[key] = plan_workload(workload, *args, **kwargs)
        return plans[key]

    monkeypatch.setattr(dpsql.executor, "plan_workload", once)


def dbapi_workload(rho, trials, weaken=1.0):
    """COUNT(*) WHERE b >= 1 (the last query) from the LSQ_QUERIES workload run through `dpsql.connect`, one
    fresh ledger per run; the neighbour's DuckDB table holds one more row (a = 0, b = 2). `weaken` > 1 spends
    weaken² ρ.
    Returns the runner and the charges seen."""
    catalog = Catalog.from_dict(LSQ_CATALOG)
    spend = rho * weaken**2
    charged = set()

    def run(neighbour, seed):
        con = duckdb.connect()
        con.execute("CREATE TABLE t AS SELECT (i % 4)::INT AS a, (i % 3)::INT AS b FROM range(60) r(i)")
        if neighbour:
            con.execute("INSERT INTO t VALUES (0, 2)")
        out = np.empty(trials)
        for i in range(trials):
            with dpsql.connect(con=con, catalog=catalog, rho=spend, seed=seed * trials + i) as conn:
                out[i] = conn.workload(LSQ_QUERIES, rho=spend)[-1].rows[0][0]  # COUNT(*) WHERE b >= 1
                charged.add(conn.budget.spent.rho)
        con.close()
        return out

    return run, charged


@pytest.mark.slow
def test_least_squares_plan_through_the_dbapi_audit(monkeypatch):
    """SQL compiled, planned, measured on DuckDB, reconstructed by least squares and assembled: end to end."""
    _memoized_planning(monkeypatch)
    rho = 0.02
    run, charged = dbapi_workload(rho, 400)
    claimed = zcdp_to_epsilon(rho, DELTA)
    assert audit(run, DELTA) < claimed
    assert charged and all(c == pytest.approx(rho) for c in charged)  # the whole budget, charged once per run
    assert audit(dbapi_workload(rho, 100, weaken=100)[0], DELTA) > claimed  # power check: noise std / 100


# --- AIM and RAP at small scale ---------------------------------------------------------------

SMALL = Domain(("a", "b"), (2, 3))
ROWS = np.array([[i % 2, i % 3] for i in range(30)])
ADDED = np.array([[0, 0]])  # the neighbour's extra row: the cell the audits watch


def _marginals(rows):
    def marginal(clique):
        columns = [SMALL.attributes.index(a) for a in clique]
        index = np.ravel_multi_index(tuple(rows[:, c] for c in columns), SMALL.shape(clique))
        return np.bincount(index, minlength=SMALL.size(clique))
    return marginal


def aim_cell(rho, trials, weaken=1.0):
    """The AIM model's estimate of cell (0, 0): 1-way marginals, then one selected and measured marginal.
    `weaken` > 1 spends weaken² ρ."""
    def run(neighbour, seed):
        marginal = _marginals(np.vstack([ROWS, ADDED]) if neighbour else ROWS)
        rng = RandomSource(seed)
        return np.array([aim(SMALL, marginal, rho * weaken**2, [(("a", "b"), 1.0)], rng, rounds=3, max_iters=50)
                         .model.project(("a", "b"))[0, 0] for _ in range(trials)])
    return run


@pytest.mark.slow
def test_aim_audit():
    rho = 0.05
    claimed = zcdp_to_epsilon(rho, DELTA)
    assert audit(aim_cell(rho, 2_000), DELTA) < claimed
    assert audit(aim_cell(rho, 300, weaken=100), DELTA) > claimed  # power check


def rap_cell(rho, trials, weaken=1.0):
    """RAP's noisy answer for cell (0, 0), plus 100 if Gumbel selection picked it in the second round
    (two rounds of three picks measure all six cells). `weaken` > 1 spends weaken² ρ."""
    workload = ThresholdWorkload(SMALL, [Threshold.r_of_k(("a", "b"), 2)])  # the six cells of (a, b)
    config = RAPConfig(rounds=2, per_round=3, synthetic_rows=10, one_way_fraction=0.0, count_fraction=0.3,
                       projection=ProjectionConfig(max_iterations=20))

    def run(neighbour, seed):
        counts = RecordCounts(SMALL, np.vstack([ROWS, ADDED]) if neighbour else ROWS)
        rng, out = RandomSource(seed), np.empty(trials)
        for i in range(trials):
            release = run_rap(ThresholdQueries(workload), counts, rho * weaken**2, rng, config).release
            position = release.ids.tolist().index(0)  # query 0 counts cell (0, 0)
            out[i] = release.values[position] + 100 * (position >= config.per_round)
        return out

    return run


@pytest.mark.slow
def test_rap_audit():
    rho = 0.05
    claimed = zcdp_to_epsilon(rho, DELTA)
    assert audit(rap_cell(rho, 1_000), DELTA) < claimed
    assert audit(rap_cell(rho, 300, weaken=100), DELTA) > claimed  # power check


# --- partition selection: a unit that holds keys of its own, and a key both neighbours hold ----

SELECTION_DELTA = 1e-4  # δ_τ: large enough for 10^6 runs to resolve release probabilities near it
SELECTIONS = [laplace_selection(2.0, SELECTION_DELTA, max_keys=2),
              gaussian_selection(0.5, SELECTION_DELTA, max_keys=2, max_per_key=2)]


def own_keys_released(selection, threshold, runs, seed, split=None):
    """Runs in which any key of the added unit is released. D' = D plus one unit holding keys that no other
    unit holds, with counts `split` (default: `max_keys` keys of count `max_per_key`); on D those keys are
    absent, so never released."""
    base = np.array([3, 8, 20])
    split = np.full(selection.max_keys, selection.max_per_key) if split is None else np.asarray(split)
    counts = np.concatenate([base, split])
    rng, hits, chunk = RandomSource(seed), 0, 100_000
    for start in range(0, runs, chunk):
        kept, _ = select_partitions(np.tile(counts, min(chunk, runs - start)), threshold, selection.noise, rng)
        hits += np.unique(kept[kept % counts.size >= base.size] // counts.size).size
    return hits


@pytest.mark.slow
@pytest.mark.parametrize("selection", SELECTIONS, ids=["laplace", "gaussian"])
def test_partition_selection_new_keys_audit(selection):
    """The unit's own keys appear with probability ≤ δ_τ (the exact 1 − (1 − p)^m lies in the interval)."""
    runs, tau = 1_000_000, selection.threshold
    exact = 1 - (1 - release_probability(selection.max_per_key, tau, selection.noise)) ** selection.max_keys
    low, high = clopper_pearson(own_keys_released(selection, tau, runs, 1), runs, 1e-3)
    assert low <= exact <= high and low <= selection.delta
    low, _ = clopper_pearson(own_keys_released(selection, tau - 1, runs, 2), runs, 1e-3)
    assert low > selection.delta  # power check: one below the threshold


@pytest.mark.slow
def test_partition_selection_with_a_total_row_bound_audit():
    """A unit's k = 3 rows split among new keys in every way: each split's keys appear w.p. ≤ δ_τ (the
    threshold is set by the worst split), and one below the threshold the worst split exceeds δ_τ."""
    selection = gaussian_selection(0.5, SELECTION_DELTA, max_keys=3, max_per_key=3, max_rows=3)
    runs, tau = 1_000_000, selection.threshold
    for seed, split in enumerate([[3], [2, 1], [1, 1, 1]], start=3):
        low, _ = clopper_pearson(own_keys_released(selection, tau, runs, seed, split), runs, 1e-3)
        assert low <= selection.delta
    low, _ = clopper_pearson(own_keys_released(selection, tau - 1, runs, 9, [3]), runs, 1e-3)
    assert low > selection.delta  # power check: one below the threshold


def shared_key(noise, threshold):
    """A key both neighbours hold: count τ on D, τ + 1 on D' (the unit adds one row). Its noisy count where
    released, else τ (released counts exceed τ, so this is a function of the release)."""
    def run(neighbour, seed):
        kept, noisy = select_partitions(np.full(TRIALS, threshold + neighbour), threshold, noise, RandomSource(seed))
        out = np.full(TRIALS, threshold)
        out[kept] = noisy
        return out

    return run


@pytest.mark.slow
def test_partition_selection_shared_key_audit():
    """The thresholded count of a shared key: pure ε for Laplace, ε(ρ, δ) for the Gaussian (m = c = 1)."""
    lap = laplace_selection(1.0, SELECTION_DELTA)
    assert audit(shared_key(lap.noise, lap.threshold), 0.0) < lap.cost
    weak = DiscreteLaplace(lap.noise.scale / 4)
    assert audit(shared_key(weak, lap.threshold), 0.0) > lap.cost  # power check
    gauss = gaussian_selection(0.125, SELECTION_DELTA)
    claimed = zcdp_to_epsilon(gauss.cost, DELTA)
    assert audit(shared_key(gauss.noise, gauss.threshold), DELTA) < claimed
    weak = DiscreteGaussian(gauss.noise.sigma2 / 16)
    assert audit(shared_key(weak, gauss.threshold), DELTA) > claimed  # power check
