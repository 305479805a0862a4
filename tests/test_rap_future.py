"""RAP for future queries (mechanisms.rap.future): fit to known cliques, answer unseen ones,
the r-aware (T, K) rule, and the relaxed data's JSON spec."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mechanisms.domain import Domain
from mechanisms.matrices import Dense, Diagonal
from mechanisms.noise import RandomSource
from mechanisms.rap import RAPConfig, RecordCounts, RelaxedData, ThresholdQueries, ThresholdWorkload, tk_rule
from mechanisms.rap.future import (
    augment_cliques,
    drifted,
    feature_probabilities,
    fit_workload,
    independent_model,
    sample_thresholds,
    threshold_errors,
    total_variation,
    workload_thresholds,
)
from mechanisms.rap.mechanism import SEED_PER_ROUND, SEED_ROUNDS, workload_r_of_k
from mechanisms.rap.workloads import Threshold
from mechanisms.workload import Block, Term

DOMAIN = Domain(("a", "b", "c", "d", "e", "f"), (4, 5, 3, 4, 6, 3))
N = 4000
KNOWN = [("a", "b", "c"), ("c", "d", "e"), ("a", "e", "f"), ("b", "d", "f")]
UNSEEN = [("a", "b", "d"), ("b", "c", "f"), ("a", "d", "f"), ("b", "e", "f"), ("c", "d", "f")]
CONFIG = RAPConfig(synthetic_rows=100, max_measured=256)


@pytest.fixture(scope="module")
def records() -> np.ndarray:
    """Three clusters with 15% noise: every attribute is strongly correlated with every other."""
    rng = np.random.default_rng(11)
    centres = np.stack([rng.permutation(s)[:3] for s in DOMAIN.sizes], axis=1)
    which = rng.choice(3, size=N, p=[0.5, 0.3, 0.2])
    noise = rng.random((N, len(DOMAIN))) < 0.15
    uniform = rng.integers(0, DOMAIN.sizes, size=(N, len(DOMAIN)))
    return np.where(noise, uniform, centres[which]).astype(np.int64)


@pytest.fixture(scope="module")
def fitted(records):
    counts = RecordCounts(DOMAIN, records)
    return fit_workload(DOMAIN, KNOWN, 1.0, counts, RandomSource(21), config=CONFIG, rows=N)


def test_fit_to_known_cliques_answers_unseen_ones(records, fitted):
    counts = RecordCounts(DOMAIN, records)
    model = fitted.model
    assert model.attributes == DOMAIN.attributes  # the 1-way marginals of every attribute were released
    assert set(fitted.release.one_way) == set(DOMAIN.attributes)
    independent = independent_model(DOMAIN, counts, 1.0, RandomSource(22), rows=N)
    unseen = workload_thresholds(DOMAIN, UNSEEN)
    errors = threshold_errors(unseen, counts, N, {"rap": model.relaxed, "independent": independent.relaxed, "all-0": None})
    rap, ind, zero = errors["rap"], errors["independent"], errors["all-0"]
    # the correlations learnt from the known cliques carry over to cliques RAP never measured
    assert rap.future()[0] < 0.2 * ind.future()[0] and rap.future()[0] < 0.2 * zero.future()[0]
    assert rap.mean < 0.3 * ind.mean and rap.mean < 0.3 * zero.mean
    # the estimator's blocks agree with the streamed evaluation (a marginal = its k-of-k threshold)
    for clique in UNSEEN[:2]:
        block = Block(f"marginal {clique}", clique, [Term(1.0, {})])
        assert model.covers(block)
        exact = counts.marginals([clique])[clique].project(tuple(range(3))) / N
        error = np.abs(model.estimate(block) / N - exact).max()
        mine = threshold_errors([Threshold.r_of_k(clique, 3)], counts, N, {"rap": model.relaxed})["rap"].max[0]
        assert error == pytest.approx(mine, abs=1e-6)


def test_thresholds_of_cliques_and_augmentation():
    thresholds = workload_thresholds(DOMAIN, [("c", "a"), ("a", "c"), ("b",), ("a", "b", "d")], r=2)
    assert [t.attributes for t in thresholds] == [("a", "c"), ("b",), ("a", "b", "d")]
    assert [(t.r, t.k) for t in thresholds] == [(2, 2), (1, 1), (2, 3)]
    assert [t.r for t in workload_thresholds(DOMAIN, KNOWN)] == [3, 3, 3, 3]
    more = augment_cliques(DOMAIN, KNOWN, 5, seed=3)
    assert more[: len(KNOWN)] == KNOWN and len(set(more)) == len(KNOWN) + 5
    assert all(len(c) == 3 and DOMAIN.canonical(c) == c for c in more)
    assert more == augment_cliques(DOMAIN, KNOWN, 5, seed=3)  # public, reproducible randomness
    assert len(augment_cliques(DOMAIN, KNOWN, 100, seed=3)) == 20  # all C(6, 3) sets, no more


def test_r_aware_rule_matches_the_seed():
    # adult, n = 48,842, delta = 1/n^2: rho = 1.6748e-4 at epsilon = 0.1, 1.4270e-2 at epsilon = 1
    n, queries = 48_842, 10**7
    # marginals (r = k): the T·K banding, few rounds of many queries (seeds/000 L2719)
    assert tk_rule(1.6748e-4, n, queries) == tk_rule(1.6748e-4, n, queries, r=3, k=3) == (4, 40)
    assert tk_rule(1.4270e-2, n, queries, r=4, k=4) == (12, 170)
    # r < k: "the number of adaptive rounds is relatively large and the number of selected queries
    # per round [...] relatively small" (seeds/000 L2846, Fig 4.8): K = the grid's smallest, T up to its largest
    assert SEED_ROUNDS == (1, 4, 16, 64) and SEED_PER_ROUND == (4, 16, 64, 256)
    assert tk_rule(1.6748e-4, n, queries, r=1, k=3) == (40, 4)  # the same c = T·K = 160
    assert tk_rule(1.6748e-4, n, queries, r=2, k=4) == (40, 4)
    t, k = tk_rule(1.4270e-2, n, queries, r=1, k=4)
    assert (t, k) == (SEED_ROUNDS[-1], 32) and t * k == 2048  # c above 64 · 4: T at the grid's largest
    t, k = tk_rule(1e-5, n, queries, r=1, k=3)  # a small budget: c = 10, K stays at 4
    assert (t, k) == (2, 5) and t * k == 10
    assert tk_rule(1.6748e-4, n, queries, RAPConfig(r_aware=False), r=1, k=3) == (4, 40)
    assert tk_rule(1.6748e-4, n, 100, r=1, k=3) == (1, 100)  # the whole workload: non-adaptive
    # run_rap reads r and k off the workload
    one_of_three = ThresholdQueries(ThresholdWorkload(DOMAIN, workload_thresholds(DOMAIN, KNOWN, r=1)))
    assert workload_r_of_k(one_of_three) == (1, 3)
    marginals = ThresholdQueries(ThresholdWorkload(DOMAIN, workload_thresholds(DOMAIN, KNOWN)))
    assert workload_r_of_k(marginals) == (None, None)


def test_run_rap_uses_the_r_aware_rule(records):
    counts = RecordCounts(DOMAIN, records)
    config = RAPConfig(synthetic_rows=20, noise_target=0.1, max_measured=64)
    rho, rows = 0.02, N  # c = 0.1^2 · 0.02 · 4000^2 = 3200, capped at 64
    result = fit_workload(DOMAIN, KNOWN[:2], rho, counts, RandomSource(3), r=1, config=config, rows=rows)
    rest = rho * (1 - config.one_way_fraction)
    assert (result.release.rounds, result.release.per_round) == tk_rule(rest, rows, 10**6, config, r=1, k=3) == (16, 4)


def test_spec_round_trip(fitted):
    model = fitted.model
    spec = model.spec()
    text = json.dumps(spec)  # JSON-able as it is
    again = RelaxedData.from_spec(json.loads(text))
    assert again.domain == model.domain and again.attributes == model.attributes
    assert (again.rows, again.rows_variance, again.error_variance) == (model.rows, model.rows_variance, model.error_variance)
    blocks = [
        Block("abd", ("a", "b", "d"), [Term(1.0, {})]),
        Block("e where f in {0, 2}", ("e",), [Term(1.0, {"f": Dense(np.array([[1.0, 0.0, 1.0]]))})]),
        Block("e weighted", ("e",), [Term(1.0, {"e": Diagonal(np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0]))})]),
        Block("total", (), [Term(1.0, {})]),
    ]
    for block in blocks:
        assert np.array_equal(again.estimate(block), model.estimate(block))
        assert np.array_equal(again.variance(block), model.variance(block))
    assert np.array_equal(again.sample(3, seed=1), model.sample(3, seed=1))
    assert again.spec() == spec  # deterministic: the ledger can hash it
    half = model.spec(precision="float16")
    assert len(half["relaxed"]) < len(spec["relaxed"])
    lossy = RelaxedData.from_spec(half)
    assert np.max(np.abs(lossy.estimate(blocks[0]) - model.estimate(blocks[0]))) < 2e-3 * N
    with pytest.raises(ValueError):
        RelaxedData.from_spec(spec | {"shape": [spec["shape"][0], spec["shape"][1] + 1]})
    with pytest.raises(ValueError):
        RelaxedData.from_spec(spec | {"kind": "something else"})


def test_seed_threshold_distributions():
    d = len(DOMAIN)
    for name in ("uniform", "zipf", "geometric"):
        p = feature_probabilities(name, d, seed=1)
        assert p.shape == (d,) and p.sum() == pytest.approx(1.0) and np.all(p > 0)
    geometric = feature_probabilities("geometric", d, seed=1)
    assert np.allclose(np.sort(geometric)[::-1], 0.25 * 0.75 ** np.arange(d) / (0.25 * 0.75 ** np.arange(d)).sum())
    assert np.array_equal(drifted(geometric, 0.0, seed=4), geometric)  # gamma = 0: the exact setting
    reversed_ = drifted(geometric, 1.0, seed=4)  # gamma = 1: the order of the masses reversed
    assert np.array_equal(np.argsort(reversed_), np.argsort(-geometric))
    assert sorted(drifted(geometric, 0.3, seed=4)) == sorted(geometric)  # the same concentration
    assert total_variation(geometric, reversed_) > total_variation(geometric, drifted(geometric, 0.05, seed=4))
    history = sample_thresholds(DOMAIN, geometric, 3, 1, 10, seed=2, replace=False)
    assert len({t.attributes for t in history}) == 10 and all((t.r, t.k) == (1, 3) for t in history)
    future = sample_thresholds(DOMAIN, geometric, 3, 1, 200, seed=3, replace=True)
    assert len({t.attributes for t in future}) < 200  # i.i.d., with repeats
    with pytest.raises(ValueError):
        sample_thresholds(DOMAIN, geometric, 3, 1, 21, seed=2, replace=False)
