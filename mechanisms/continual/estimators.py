"""Running totals and per-window values from the releases so far, with exact variances.

The releases up to emit `now` are the rows of the nodes completed by then, which are
exactly the subtrees of the maximal completed nodes (`TimeStrategy.forest(now)`). Those
subtrees hold disjoint windows, so least squares separates over the forest: within each
subtree it is the tree's exact solver (`mechanisms.ranges.trees`: Hay et al.'s
consistency), and nothing links two subtrees. Three estimators:

- `OFFLINE`: least squares on every release up to `now`; at now = T it is the full GLS
  of seed_gaps G3 §3 ("offline answers use full GLS"), refining earlier windows;
- `CAUSAL`: the answers shown at emit t (the running total to t and window t) by least
  squares over the nodes completed by t; they depend on no later release;
- `BINARY`: the standard online estimator (Chan–Shi–Song's binary mechanism): the running
  total is the sum of the noisy nodes of the base-b digits of t (`TimeStrategy.binary`),
  the window its leaf's measurement.

For SENSDIFF all three are S004 Algorithm 5's prefix sums of the noisy differences.
Variances are at unit noise variance per strategy row (times the calibrated variance).
Values are (rows, m): one column per cell (after the cells' least squares) or per draw.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from mechanisms.arrays import to_numpy
from mechanisms.continual.strategies import Node, TimeStrategy
from mechanisms.ranges.trees import HierarchicalStrategy

__all__ = ["BINARY", "CAUSAL", "ESTIMATORS", "OFFLINE", "Answers", "estimate", "variances"]

OFFLINE = "offline"
CAUSAL = "causal"
BINARY = "binary"
ESTIMATORS = (OFFLINE, CAUSAL, BINARY)


@dataclass(frozen=True)
class Answers:
    """Estimates for windows 1..n: running totals and per-window values, (n, m) each."""

    running: np.ndarray
    window: np.ndarray


@lru_cache(maxsize=256)
def _within(sub: HierarchicalStrategy) -> tuple[np.ndarray, np.ndarray]:
    """Variances of a subtree's own least squares: its prefixes [0, s) and its windows."""
    n = sub.tree.n
    return sub.interval_variances(np.zeros(n, dtype=np.int64), np.arange(1, n + 1)), sub.leaf_variances()


def _check(strategy: TimeStrategy, now: int | None) -> int:
    now = strategy.horizon if now is None else now
    if not 1 <= now <= strategy.horizon:
        raise ValueError(f"now must lie in 1..{strategy.horizon}, got {now}")
    return now


def _leaf(strategy: TimeStrategy, t: int) -> Node:
    """Window t's leaf (every window is a leaf at the last depth of a padded tree)."""
    return strategy.nodes(strategy.tree.depth, t - 1, t)[0]


def variances(strategy: TimeStrategy, estimator: str, now: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(running, window) variances for windows 1..now at unit noise per row."""
    now = _check(strategy, now)
    running, window = np.empty(now), np.empty(now)
    if estimator == OFFLINE:
        before = 0.0
        for node in strategy.forest(now):
            prefixes, leaves = _within(strategy.subtree(node))
            running[node.lo : node.hi] = before + prefixes
            window[node.lo : node.hi] = leaves
            before += prefixes[-1]
    elif estimator == CAUSAL:
        for t in range(1, now + 1):
            parts = [_within(strategy.subtree(node)) for node in strategy.forest(t)]
            running[t - 1] = sum(prefixes[-1] for prefixes, _ in parts)
            window[t - 1] = parts[-1][1][-1]
    elif estimator == BINARY:
        precision = strategy.weights**2
        for t in range(1, now + 1):
            running[t - 1] = sum(1.0 / precision[node.depth] for node in strategy.binary(t))
        window[:] = 1.0 / precision[-1]
    else:
        raise ValueError(f"unknown estimator {estimator!r}: one of {ESTIMATORS}")
    return running, window


def _solve(strategy: TimeStrategy, node: Node, values: np.ndarray) -> np.ndarray:
    """Least-squares windows of `node`'s subtree from its own releases."""
    rows = values[strategy.subtree_rows(node)]
    return np.asarray(to_numpy(strategy.subtree(node).pinv().matvec(rows)), dtype=float)


def estimate(strategy: TimeStrategy, estimator: str, values: np.ndarray, now: int | None = None) -> Answers:
    """The estimator's answers for windows 1..now from released rows `values` (rows, m).

    Only rows released by `now` are read (`CAUSAL` and `BINARY`: by each t), so the rows
    of later nodes may hold anything.
    """
    now = _check(strategy, now)
    values = np.asarray(values, dtype=float)
    if values.ndim == 1:
        values = values[:, None]
    if estimator == OFFLINE:
        window = np.concatenate([_solve(strategy, node, values) for node in strategy.forest(now)])
        return Answers(np.cumsum(window, axis=0), window)
    running, window = np.empty((now, values.shape[1])), np.empty((now, values.shape[1]))
    if estimator == CAUSAL:
        solved: dict[Node, np.ndarray] = {}
        for t in range(1, now + 1):
            forest = strategy.forest(t)
            for node in forest:
                if node not in solved:
                    solved[node] = _solve(strategy, node, values)
            running[t - 1] = sum(solved[node].sum(axis=0) for node in forest)
            window[t - 1] = solved[forest[-1]][-1]
    elif estimator == BINARY:
        w = strategy.weights
        for t in range(1, now + 1):
            running[t - 1] = sum(values[strategy.row(node)] / w[node.depth] for node in strategy.binary(t))
            window[t - 1] = values[strategy.row(_leaf(strategy, t))] / w[-1]
    else:
        raise ValueError(f"unknown estimator {estimator!r}: one of {ESTIMATORS}")
    return Answers(running, window)
