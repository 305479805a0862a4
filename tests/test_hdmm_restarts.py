"""HDMM's multi-start rules (mechanisms.hdmm.restarts): restarts where they pay, none where they cannot."""

from __future__ import annotations

from itertools import combinations

import numpy as np

from mechanisms.hdmm import restarts
from mechanisms.hdmm.marginals import opt_marginals
from mechanisms.hdmm.opt0 import opt0_laplace
from mechanisms.hdmm.workload import marginals_workload, width_range_gram

CPS = (50, 100, 7, 4, 2)


def _counting(monkeypatch) -> list:
    runs: list = []
    real = restarts._run

    def counted(*args):
        out = real(*args)
        runs.append(len(out[2]))
        return out

    monkeypatch.setattr(restarts, "_run", counted)
    return runs


def test_cheap_restarts_run_and_pay_on_cps_marginals(monkeypatch) -> None:
    runs = _counting(monkeypatch)
    w = marginals_workload(CPS, [s for k in (1, 2) for s in combinations(range(5), k)]).marginal_weights()
    found = opt_marginals(CPS, w, 1, restarts=20)
    # The closed-form start alone ends at 244,139; the reference hdmm's template reaches 230,446.
    assert found.error < 230_446 and 2 < len(runs) <= 20
    again = opt_marginals(CPS, w, 1, restarts=20)
    assert again.error == found.error and np.array_equal(again.theta, found.theta)


def test_no_restart_once_the_work_budget_is_spent(monkeypatch) -> None:
    runs = _counting(monkeypatch)
    gram = width_range_gram(128, 16)
    cheap = opt0_laplace(gram, restarts=6, seed=1)
    several = len(runs)
    runs.clear()
    monkeypatch.setattr(restarts, "RESTART_WORK", 1.0)  # every restart now costs too much
    single = opt0_laplace(gram, restarts=6, seed=1)
    assert several > 1 and len(runs) == 1
    assert cheap.error <= single.error


def test_a_run_stops_when_its_progress_stalls(monkeypatch) -> None:
    gram = width_range_gram(128, 16)
    monkeypatch.setattr(restarts, "PROGRESS_TOL", 0.0)  # only L-BFGS-B's own tests
    full = opt0_laplace(gram, restarts=1, seed=2, max_iter=400)
    monkeypatch.setattr(restarts, "PROGRESS_TOL", 1e-4)
    stopped = opt0_laplace(gram, restarts=1, seed=2, max_iter=400)
    assert stopped.iterations < full.iterations
    assert stopped.error <= full.error * 1.01  # the tail it skipped was worth under 1%
