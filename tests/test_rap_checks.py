"""Checks C1-C3 of the RAP seed report (shared/research/seed_avent.md, Sec 6.3).

C1: zCDP <-> (epsilon, delta) conversions at ADULT's delta = 1/n^2.
C2: RAP's noise scales, sigma_t = beta_t = sqrt(T K / rho) / n, and the GM baseline.
C3: the partition, inclusion-exclusion and negated forms of r-of-k agree.
"""

from __future__ import annotations

import math
from itertools import product
from math import comb

import numpy as np
import pytest

from mechanisms.accounting import epsilon_delta_to_zcdp, zcdp_to_delta, zcdp_to_epsilon
from mechanisms.domain import Domain
from mechanisms.measurement import GAUSSIAN, calibrate
from mechanisms.noise import RandomSource
from mechanisms.rap import RAPConfig, RecordCounts, Threshold, ThresholdQueries, ThresholdWorkload, run_rap
from mechanisms.rap.multilinear import BooleanFunction
from mechanisms.rap.top_k import NoisyTopK, gumbel_scale

ADULT_N = 48842
DELTA = 1 / ADULT_N**2


def paper_rho(epsilon: float, delta: float) -> float:
    """RAP's Alg 4.1 line 1: the exact inverse of epsilon = rho + 2 sqrt(rho log(1/delta))."""
    log = math.log(1 / delta)
    return epsilon + 2 * (log - math.sqrt(log * (epsilon + log)))


# --- C1 -----------------------------------------------------------------------------------
@pytest.mark.parametrize("epsilon, rho", [(0.1, 1.1551e-4), (1.0, 1.1317e-2), (0.01, 1.1575e-6)])
def test_c1_paper_conversion_and_round_trip(epsilon, rho):
    got = paper_rho(epsilon, DELTA)
    assert got == pytest.approx(rho, rel=5e-4)
    back = got + 2 * math.sqrt(got * math.log(1 / DELTA))
    assert back == pytest.approx(epsilon, rel=1e-8)  # exact up to cancellation in the formula


@pytest.mark.parametrize("epsilon", [0.1, 1.0])
def test_c1_engine_conversion_is_tighter_and_round_trips(epsilon):
    """The engine's CKS conversion gives at least the paper's rho, and converts back to epsilon."""
    rho = epsilon_delta_to_zcdp(epsilon, DELTA)
    assert rho >= paper_rho(epsilon, DELTA)
    assert zcdp_to_delta(paper_rho(epsilon, DELTA), epsilon) <= DELTA  # the paper's rho is valid here too
    assert zcdp_to_epsilon(rho, DELTA) == pytest.approx(epsilon, rel=1e-9)


# --- C2 -----------------------------------------------------------------------------------
@pytest.mark.parametrize("t, k, sigma", [(16, 4, 0.0152), (4, 64, 0.0305), (64, 256, 0.244)])
def test_c2_adaptive_scales(t, k, sigma):
    rho = paper_rho(0.1, DELTA)
    rho_t = rho / t
    share = rho_t / (2 * k)  # per pick and per answer
    beta = gumbel_scale(share) / ADULT_N
    noise = math.sqrt(calibrate(GAUSSIAN, 1.0, share).variance) / ADULT_N
    assert beta == pytest.approx(math.sqrt(t * k / rho) / ADULT_N, rel=1e-8)
    assert beta == pytest.approx(sigma, rel=3.5e-3)  # the report prints 3 significant digits
    assert noise == pytest.approx(sigma, rel=3.5e-3)  # sigma_t = beta_t: the erratum E1 scale


@pytest.mark.parametrize("m, sigma", [(10**3, 0.043), (10**5, 0.43), (10**6, 1.35)])
def test_c2_gm_baseline(m, sigma):
    rho = paper_rho(0.1, DELTA)
    got = math.sqrt(calibrate(GAUSSIAN, 1.0, rho / m).variance) / ADULT_N
    assert got == pytest.approx(math.sqrt(m / (2 * rho)) / ADULT_N, rel=1e-8)
    assert got == pytest.approx(sigma, rel=1.2e-2)  # the report prints 2 significant digits


def test_c2_mechanism_uses_these_scales(monkeypatch):
    """run_rap selects with Gumbel scale sqrt(T K / rho) and releases with variance T K / rho (counts)."""
    scales = []

    class RecordingTopK(NoisyTopK):
        def __init__(self, k, scale, rng):
            scales.append(scale)
            super().__init__(k, scale, rng)

    monkeypatch.setattr("mechanisms.rap.mechanism.NoisyTopK", RecordingTopK)
    domain = Domain(("a", "b", "c"), (4, 3, 5))
    rng = np.random.default_rng(0)
    records = np.stack([rng.integers(0, s, 300) for s in domain.sizes], axis=1)
    source = ThresholdQueries(ThresholdWorkload(domain, [Threshold.r_of_k(("a", "b", "c"), 2)]))
    rho, t, k = 0.5, 3, 4
    config = RAPConfig(rounds=t, per_round=k, synthetic_rows=20, one_way_fraction=0.0)
    result = run_rap(source, RecordCounts(domain, records), rho, RandomSource(1), config, rows=300)
    assert scales == pytest.approx([math.sqrt(t * k / rho)] * t, rel=1e-8)
    assert result.release.variance == pytest.approx(t * k / rho, rel=1e-6)
    assert len(result.release.ids) == t * k and len(set(result.release.ids.tolist())) == t * k


# --- C3 -----------------------------------------------------------------------------------
def partition_form(z, r: int):
    """Def 4.4.3: sum over partitions (T+, T-) with |T+| >= r of prod_{T+} z prod_{T-} (1 - z)."""
    k = len(z)
    total = 0
    for bits in product((0, 1), repeat=k):
        if sum(bits) >= r:
            term = 1
            for b, v in zip(bits, z):
                term *= v if b else 1 - v
            total += term
    return total


def expansion_value(coefficients: dict[int, int], w) -> object:
    total = 0
    for mask, c in coefficients.items():
        term = c
        for j, v in enumerate(w):
            if mask >> j & 1:
                term *= v
        total += term
    return total


@pytest.mark.parametrize("k", range(1, 7))
def test_c3_inclusion_exclusion_coefficients_are_the_closed_form(k):
    """Def 4.4.4: g_S = (-1)^{|S|-r} C(|S|-1, |S|-r) for |S| >= r."""
    for r in range(1, k + 1):
        got = BooleanFunction.threshold(k, r).moebius()
        want = {
            mask: (-1) ** (mask.bit_count() - r) * comb(mask.bit_count() - 1, mask.bit_count() - r)
            for mask in range(1 << k)
            if mask.bit_count() >= r
        }
        assert got == want


@pytest.mark.parametrize("k", range(1, 7))
def test_c3_three_forms_agree(k):
    """Partition form, inclusion-exclusion, the complemented expansion and 1 - phi_{k-r+1}(1 - z)."""
    rng = np.random.default_rng(k)
    for r in range(1, k + 1):
        f = BooleanFunction.threshold(k, r)
        plain, negated = f.moebius(), f.complemented().moebius()
        z = rng.random((k, 100))  # atom j's values at 100 random points
        part = partition_form(z, r)
        np.testing.assert_allclose(expansion_value(plain, z), part, rtol=0, atol=1e-14)
        np.testing.assert_allclose(expansion_value(negated, 1 - z), part, rtol=0, atol=1e-14)
        np.testing.assert_allclose(1 - partition_form(1 - z, k - r + 1), part, rtol=0, atol=1e-14)  # Sec 4.4.2
        for cube in product((0, 1), repeat=k):  # exactly (integer arithmetic) on the cube
            z = list(cube)
            want = int(sum(cube) >= r)
            assert partition_form(z, r) == want
            assert expansion_value(plain, z) == want
            assert expansion_value(negated, [1 - v for v in z]) == want


@pytest.mark.parametrize(
    "k, counts",
    [(3, [7, 4, 1]), (4, [15, 11, 5, 1]), (5, [31, 26, 16, 6, 1])],
)
def test_c3_term_counts_match_the_report(k, counts):
    """Partition terms sum_{t >= r} C(k, t); the chosen expansion's non-constant terms: IE after negation."""
    for r, partition_terms in enumerate(counts, start=1):
        assert sum(comb(k, t) for t in range(r, k + 1)) == partition_terms
        _, coefficients = BooleanFunction.threshold(k, r).expansion()
        r_used = k - r + 1 if 2 * r <= k else r  # the negation trick applies for r <= k / 2
        assert len([m for m in coefficients if m]) == sum(comb(k, i) for i in range(r_used, k + 1))


def test_negation_trick_shortens_small_r():
    """1-of-4 needs 15 terms in z but 2 in 1 - z; expansion() picks the shorter form."""
    negated, coefficients = BooleanFunction.threshold(4, 1).expansion()
    assert negated and coefficients == {0: 1, 15: -1}
    assert len(BooleanFunction.threshold(4, 1).moebius()) == 15
    assert BooleanFunction.threshold(4, 4).expansion() == (False, {15: 1})
