"""Continual release: dpsql's chosen time strategy against per-window composition, at one budget.

A generated weekly signup stream with repeat users (deterministic seed): each window brings
Poisson(40) new users in one of 4 regions, and a user signs up again after geometric gaps
(mean 4 windows) with probability 0.6 each time. Each user keeps their first k = 3 rows
by arrival (the online-stable bound of seed_gaps G3), so a user changes the T × 4 window
counts by at most 3 in L1 over the whole horizon.

Methods, all at the same total budget (ρ = 0.5, discrete Gaussian; and ε = 1, discrete
Laplace) and counted in dpsql's exact noise:
- compose (windows): a fresh measurement of each window's counts at ρ/T (ε/T), sensitivity
  k; running totals are their sums;
- compose (totals): a fresh measurement of each running total at ρ/T (ε/T), sensitivity k
  (S004 §6.6.1's COMPOSE baseline); window values are their differences;
- SENSDIFF: each window once at sensitivity k for the whole sequence (S004 Algorithm 5);
- binary tree: b = 2 with its root, the standard online sums (Chan–Shi–Song);
- dpsql: `mechanisms.continual.choice.choose` for running totals and window values together,
  answered causally (what each emit shows) and offline (least squares on all releases).

Errors are RMSE per answer (window × region) over the T running totals and the T window
values: expected (exact) and measured (Monte-Carlo over `--draws` noise draws on the stream).

    python -m benchmarks.continual [--draws 200]

writes benchmarks/results/continual.json and prints the tables of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

from mechanisms.arrays import to_numpy
from mechanisms.continual import BINARY, CAUSAL, OFFLINE, TimeWorkload, choose, estimate, identity, tree, variances
from mechanisms.continual.strategies import TimeStrategy
from mechanisms.measurement import GAUSSIAN, LAPLACE, calibrate
from mechanisms.noise import RandomSource, discrete_gaussian_vector, discrete_laplace_vector

RESULTS = Path(__file__).parent / "results" / "continual.json"
HORIZONS = (4, 13, 26, 52, 104, 365)
BUDGETS = {GAUSSIAN: 0.5, LAPLACE: 1.0}
BOUND = 3
REGIONS = 4
METHODS = ("compose (windows)", "compose (totals)", "SENSDIFF", "binary tree", "dpsql causal", "dpsql offline")


# ---------------------------------------------------------------------------
# The stream


def signups(horizon: int, seed: int = 0, new_per_window: float = 40.0, repeat: float = 0.6,
            mean_gap: float = 4.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(user, window, region) of every signup before the horizon, in arrival order."""
    rng = np.random.default_rng(seed)
    users, windows, regions = [], [], []
    user = 0
    for first in range(horizon):
        for _ in range(rng.poisson(new_per_window)):
            region, at = int(rng.integers(REGIONS)), first
            while at < horizon:
                users.append(user)
                windows.append(at)
                regions.append(region)
                if rng.random() >= repeat:
                    break
                at += int(rng.geometric(1.0 / mean_gap))
            user += 1
    order = np.argsort(np.asarray(windows) + rng.random(len(windows)), kind="stable")
    return np.asarray(users)[order], np.asarray(windows)[order], np.asarray(regions)[order]


def first_by_arrival(user: np.ndarray, bound: int) -> np.ndarray:
    """Mask of the rows kept when each user keeps their first `bound` rows in arrival order.

    Online-stable: the rows kept from a prefix of the stream are the prefix of the rows kept
    from the whole stream, so a window once released never changes (seed_gaps G3).
    """
    order = np.argsort(user, kind="stable")
    sorted_users = user[order]
    starts = np.flatnonzero(np.r_[True, sorted_users[1:] != sorted_users[:-1]])
    rank = np.arange(user.size) - np.repeat(starts, np.diff(np.r_[starts, user.size]))
    keep = np.empty(user.size, dtype=bool)
    keep[order] = rank < bound
    return keep


def window_counts(window: np.ndarray, region: np.ndarray, horizon: int) -> np.ndarray:
    """The difference sequence: horizon × regions counts of the rows given."""
    counts = np.zeros((horizon, REGIONS), dtype=np.int64)
    np.add.at(counts, (window, region), 1)
    return counts


# ---------------------------------------------------------------------------
# Noise draws and errors


def _noise(noise: str, budget: float, sensitivity: float, shape: tuple[int, int], rng: RandomSource):
    """(draws of the exact discrete noise of `shape`, its variance) for one measurement."""
    cal = calibrate(noise, sensitivity, budget)
    draw = discrete_gaussian_vector if noise == GAUSSIAN else discrete_laplace_vector
    return draw(cal.scale, shape[0] * shape[1], rng).reshape(shape).astype(float), cal.variance


def _rmse(errors: np.ndarray, draws: int) -> tuple[float, float]:
    """RMSE over every answer and draw, and the standard error of its square (across draws)."""
    per_draw = (errors.reshape(errors.shape[0], -1, draws) ** 2).mean(axis=(0, 1))
    return float(np.sqrt(per_draw.mean())), float(per_draw.std(ddof=1) / np.sqrt(draws))


def _strategy_runs(strategy: TimeStrategy, estimators: dict[str, str], noise: str, budget: float,
                   sensitivity: float, counts: np.ndarray, draws: int, rng: RandomSource) -> dict[str, dict]:
    """Expected and measured RMSE of a time strategy ⊗ the regions, per estimator."""
    exact = np.asarray(to_numpy(strategy.matrix.matvec(counts.astype(float))))
    z, variance = _noise(noise, budget, sensitivity, (exact.shape[0], REGIONS * draws), rng)
    values = np.tile(exact, draws) + z
    truth_running, truth_window = np.tile(np.cumsum(counts, axis=0), draws), np.tile(counts, draws)
    out = {}
    for method, estimator in estimators.items():
        found = estimate(strategy, estimator, values)
        running_var, window_var = variances(strategy, estimator)
        out[method] = _record(
            variance * running_var.mean(), variance * window_var.mean(),
            _rmse(found.running - truth_running, draws), _rmse(found.window - truth_window, draws),
            strategy=strategy.label, estimator=estimator)
    return out


def _compose_totals(noise: str, budget: float, counts: np.ndarray, draws: int, rng: RandomSource) -> dict:
    """Each running total measured afresh at budget/T (sensitivity k); windows by differences."""
    horizon = counts.shape[0]
    running = np.tile(np.cumsum(counts, axis=0), draws)
    z, variance = _noise(noise, budget / horizon, BOUND, running.shape, rng)
    found = running + z
    window = np.diff(found, axis=0, prepend=0.0)
    return _record(variance, variance * (2 * horizon - 1) / horizon,
                   _rmse(found - running, draws), _rmse(window - np.tile(counts, draws), draws),
                   strategy="running totals", estimator="direct")


def _record(running_mse, window_mse, running_measured, window_measured, **extra) -> dict:
    return {
        "running": {"expected": float(np.sqrt(running_mse)), "measured": running_measured[0],
                    "measured_mse_se": running_measured[1]},
        "window": {"expected": float(np.sqrt(window_mse)), "measured": window_measured[0],
                   "measured_mse_se": window_measured[1]},
        **extra,
    }


def run_horizon(noise: str, horizon: int, draws: int, seed: int) -> dict:
    user, window, region = signups(horizon, seed)
    keep = first_by_arrival(user, BOUND)
    counts = window_counts(window[keep], region[keep], horizon)
    budget, rng = BUDGETS[noise], RandomSource(seed)
    started = time.perf_counter()
    choice = choose(horizon, noise, TimeWorkload(running=1.0, window=1.0, estimator=CAUSAL))
    choose_seconds = time.perf_counter() - started
    sensdiff, binary = identity(horizon), tree(horizon, 2)
    runs = [  # (strategy, methods, budget of each measurement, its sensitivity)
        (sensdiff, {"compose (windows)": OFFLINE}, budget / horizon, BOUND),
        (sensdiff, {"SENSDIFF": OFFLINE}, budget, sensdiff.sensitivity(noise, BOUND)),
        (binary, {"binary tree": BINARY}, budget, binary.sensitivity(noise, BOUND)),
        (choice.strategy, {"dpsql causal": CAUSAL, "dpsql offline": OFFLINE}, budget,
         choice.strategy.sensitivity(noise, BOUND)),
    ]
    methods = {"compose (totals)": _compose_totals(noise, budget, counts, draws, rng)}
    for strategy, estimators, share, sensitivity in runs:
        methods.update(_strategy_runs(strategy, estimators, noise, share, sensitivity, counts, draws, rng))
    return {"noise": noise, "budget": budget, "horizon": horizon, "bound": BOUND, "regions": REGIONS,
            "rows_kept": int(keep.sum()), "rows": int(keep.size), "users": int(user.max() + 1),
            "chosen": choice.strategy.label, "choose_seconds": choose_seconds,
            "methods": {m: methods[m] for m in METHODS}}


def table(records: list[dict], noise: str, answer: str) -> str:
    head = "| T | dpsql's strategy | " + " | ".join(METHODS) + " |"
    lines = [head, "|" + "---|" * (len(METHODS) + 2)]
    for r in (r for r in records if r["noise"] == noise):
        cells = [f"{r['methods'][m][answer]['expected']:.1f} ({r['methods'][m][answer]['measured']:.1f})"
                 for m in METHODS]
        lines.append(f"| {r['horizon']} | {r['chosen']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    records = [run_horizon(noise, horizon, args.draws, args.seed) for noise in BUDGETS for horizon in HORIZONS]
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"draws": args.draws, "seed": args.seed, "machine": platform.machine(),
                                   "seconds": time.perf_counter() - started, "records": records}, indent=1))
    for noise in BUDGETS:
        for answer in ("running", "window"):
            print(f"\n{noise}, {answer}: expected RMSE (measured)\n" + table(records, noise, answer))


if __name__ == "__main__":
    main()
