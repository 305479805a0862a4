"""Tests for mechanisms.accounting."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from mechanisms.accounting import (
    Amount,
    epsilon_delta_to_zcdp,
    pure_dp_to_zcdp,
    zcdp_to_delta,
    zcdp_to_epsilon,
)

RHOS = [1e-8, 1e-4, 0.01, 0.5, 3.0, 100.0]
EPSILONS = [0.0, 0.01, 0.1, 1.0, 10.0, 100.0]
DELTAS = [1e-30, 1e-9, 1e-5, 0.1]


def grid_delta(rho: float, epsilon: float) -> float:
    """min of the CKS objective over a log grid of alpha - 1, refined around its argmin."""

    def log_objective(x: np.ndarray) -> np.ndarray:
        return x * ((1 + x) * rho - epsilon) - x * np.log1p(1 / x) - np.log1p(x)

    u = np.linspace(-30.0, 30.0, 60_001)
    for _ in range(2):
        i = int(np.argmin(log_objective(np.exp(u))))
        u = np.linspace(u[max(i - 2, 0)], u[min(i + 2, len(u) - 1)], 60_001)
    return float(np.exp(min(log_objective(np.exp(u)).min(), 0.0)))


# --- conversions -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "epsilon, rho, rel",
    [(1.0, 0.014973, 4e-5), (0.1, 1.771e-4, 3e-4), (10.0, 1.091, 5e-4), (100.0, 42.38, 2e-4),
     (0.01, 2.095e-6, 3e-4)],
)
def test_known_values_at_delta_1e9(epsilon: float, rho: float, rel: float) -> None:
    assert epsilon_delta_to_zcdp(epsilon, 1e-9) == pytest.approx(rho, rel=rel)
    assert zcdp_to_epsilon(rho, 1e-9) == pytest.approx(epsilon, rel=10 * rel)


@pytest.mark.parametrize("rho", [1e-4, 0.1, 1.0, 50.0])
@pytest.mark.parametrize("epsilon", [0.0, 0.5, 2.0, 20.0])
def test_zcdp_to_delta_is_the_minimum_over_alpha(rho: float, epsilon: float) -> None:
    ours, grid = zcdp_to_delta(rho, epsilon), grid_delta(rho, epsilon)
    assert grid * (1 - 1e-9) <= ours <= grid * (1 + 1e-9)


@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("delta", DELTAS)
def test_zcdp_to_epsilon_is_tight_and_valid(rho: float, delta: float) -> None:
    eps = zcdp_to_epsilon(rho, delta)
    assert zcdp_to_delta(rho, eps) <= delta
    if eps > 0:
        assert zcdp_to_delta(rho, eps * (1 - 1e-9)) > delta
    assert eps <= rho + 2 * math.sqrt(rho * math.log(1 / delta))


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("delta", DELTAS)
def test_epsilon_delta_to_zcdp_is_tight_and_valid(epsilon: float, delta: float) -> None:
    rho = epsilon_delta_to_zcdp(epsilon, delta)
    assert rho > 0
    assert zcdp_to_delta(rho, epsilon) <= delta
    assert zcdp_to_delta(rho * (1 + 1e-9), epsilon) > delta


def test_monotonicity() -> None:
    for rho in RHOS:
        deltas = [zcdp_to_delta(rho, e) for e in EPSILONS]
        assert all(a >= b for a, b in zip(deltas, deltas[1:]))
    for epsilon in EPSILONS:
        deltas = [zcdp_to_delta(r, epsilon) for r in RHOS]
        assert all(a <= b for a, b in zip(deltas, deltas[1:]))
    for delta in DELTAS:
        eps = [zcdp_to_epsilon(r, delta) for r in RHOS]
        assert all(a < b or a == b == 0 for a, b in zip(eps, eps[1:]))
        rhos = [epsilon_delta_to_zcdp(e, delta) for e in EPSILONS]
        assert all(a < b for a, b in zip(rhos, rhos[1:]))
    for rho in RHOS:
        eps = [zcdp_to_epsilon(rho, d) for d in DELTAS]
        assert all(a >= b for a, b in zip(eps, eps[1:]))


def test_edge_cases() -> None:
    assert zcdp_to_delta(0.0, 0.0) == 0.0
    assert zcdp_to_epsilon(0.0, 1e-9) == 0.0
    assert zcdp_to_epsilon(0.5, 0.0) == math.inf
    assert epsilon_delta_to_zcdp(1.0, 0.0) == 0.0
    assert zcdp_to_delta(1.0, math.inf) == 0.0
    assert zcdp_to_epsilon(1e-12, 0.5) == 0.0  # delta at epsilon = 0 is already below 0.5
    assert pure_dp_to_zcdp(1.0) == 0.5


def test_extreme_values_do_not_overflow() -> None:
    assert zcdp_to_delta(1e6, 1e3) == pytest.approx(1.0)
    assert zcdp_to_delta(1e-300, 1.0) == 0.0
    assert 0 < zcdp_to_delta(1e-300, 0.0) < 1e-100
    assert zcdp_to_delta(1e-3, 1e300) == 0.0
    assert math.isfinite(epsilon_delta_to_zcdp(1e6, 1e-300))
    assert math.isfinite(zcdp_to_epsilon(1e6, 1e-300))
    assert 0 < zcdp_to_epsilon(1e-300, 1e-300) < 1e-140


@pytest.mark.parametrize(
    "call",
    [
        lambda: zcdp_to_delta(-1.0, 1.0),
        lambda: zcdp_to_delta(math.nan, 1.0),
        lambda: zcdp_to_delta(1.0, -1.0),
        lambda: zcdp_to_epsilon(math.inf, 1e-9),
        lambda: zcdp_to_epsilon(1.0, 1.0),
        lambda: zcdp_to_epsilon(1.0, -1e-9),
        lambda: epsilon_delta_to_zcdp(math.inf, 1e-9),
        lambda: pure_dp_to_zcdp(-1.0),
    ],
)
def test_invalid_arguments(call) -> None:
    with pytest.raises(ValueError):
        call()


# --- Amount ----------------------------------------------------------------------------


def test_amount_in_both_units() -> None:
    rho = epsilon_delta_to_zcdp(1.0, 1e-9)
    a = Amount.zcdp(rho, 1e-9)
    assert a.rho == pytest.approx(0.014973, rel=4e-5)
    assert a.epsilon == pytest.approx(1.0, rel=1e-9)
    assert str(a) == "ε=1, δ=1e-09 (ρ=0.01497)"
    assert Amount.zcdp(0.0, 1e-9) == Amount(0.0, 0.0, 0.0)
    p = Amount.pure(0.5)
    assert (p.rho, p.epsilon, p.delta) == (0.125, 0.5, 0.0)
    assert str(p) == "ε=0.5"


def test_amount_validation_and_immutability() -> None:
    with pytest.raises(ValueError):
        Amount.zcdp(-0.1, 1e-9)
    with pytest.raises(ValueError):
        Amount.zcdp(0.1, 1.0)
    with pytest.raises(ValueError):
        Amount.pure(-1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        Amount.pure(1.0).rho = 0.2  # type: ignore[misc]
