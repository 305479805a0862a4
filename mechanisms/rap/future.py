"""RAP for future queries: relaxed data fitted to a known workload answers other queries.

The partial-knowledge setting (Avent 2023, §4.5, seeds/000 L2873-3017; Avent &
Korolova 2023, §5, seeds/003): the mechanism sees a public workload W_H of
"historical" thresholds (queries posed in the past, or a declared query class),
fits RAP's relaxed data D' to it, and is judged on thresholds drawn later from a
future distribution T_F, by the future error (Def 4.5.3, L2928)

    err_F = E_{M(D), Q <- T_F} ||Q(D) - Q(D')||_inf,

the expected per-threshold max error, estimated as the mean over independently
drawn future thresholds with a 95% interval (§4.5.2, L2932-2936).

- `fit_workload`: RAP on every consistent query of the given cliques (r-of-k
  thresholds over them; r = k by default: the marginals), with the 1-way marginals
  of every attribute of the domain released first so that D' covers the whole
  domain, and the r-aware (T, K) rule. Its `RAPResult.model` (a `RelaxedData`)
  answers any block over the domain; `RelaxedData.spec()` persists it.
- `augment_cliques`: the seed's advice for a small W_H, adding uniformly random
  attribute sets ("in the worst case [...] unaffected; in the best case [...]
  reduced significantly", L2989-2991).
- The seed's threshold distributions (L2902-2910 and its code,
  bavent/large-scale-query-answering `rap/workload_manager.py`): a distribution
  over features (Uniform, Zipf, Geometric, randomly permuted over the features),
  a threshold's probability the normalized product of its k features'
  probabilities over all k-subsets, W_H sampled without replacement and W_F with
  replacement; drift by Def 4.5.2 (L2904-2908).
- `threshold_errors`: per-threshold max and summed absolute errors of answers on
  normalized counts, streamed tile by tile (never materialized).
- `independent_model`: the 1-way baseline, every ρ on the 1-way marginals and D'
  their product (one relaxed row): what is learnable without the workload.

The historical workload is public in the seed's setting ("there exist publicly
known historically posed queries Q_H which are not privacy sensitive", L3039):
only the data is protected, and the relaxed data is post-processing of RAP's
release, so answering future queries from it costs nothing more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Iterable

import numpy as np

from mechanisms.arrays import to_numpy, xp
from mechanisms.domain import Domain
from mechanisms.measurement import GAUSSIAN, calibrate
from mechanisms.noise import RandomSource, discrete_gaussian_vector
from mechanisms.rap.counts import CountSource
from mechanisms.rap.encoding import OneHot, project_block
from mechanisms.rap.evaluation import ThresholdEvaluator
from mechanisms.rap.mechanism import RAPConfig, RAPResult, run_rap
from mechanisms.rap.relaxed import RelaxedData
from mechanisms.rap.sources import ThresholdQueries
from mechanisms.rap.workloads import Threshold, ThresholdWorkload

Clique = tuple[str, ...]


# --- fitting to a known workload -------------------------------------------------------------


def workload_thresholds(domain: Domain, cliques: Iterable[Iterable[str]], r: int | None = None) -> list[Threshold]:
    """One threshold per distinct non-empty clique (domain order): r-of-k, or the marginal (r = k).

    With r given, a clique of fewer than r attributes becomes its marginal.
    """
    out: dict[Clique, None] = {}
    for clique in cliques:
        canonical = domain.canonical(clique)
        if canonical:
            out.setdefault(canonical, None)
    if not out:
        raise ValueError("the workload names no attribute")
    return [Threshold.r_of_k(c, len(c) if r is None else min(r, len(c))) for c in out]


def augment_cliques(domain: Domain, cliques: list[Clique], count: int, seed: int, size: int | None = None) -> list[Clique]:
    """`cliques` plus `count` uniformly random distinct attribute sets of `size` attributes
    (default: the most common size in `cliques`), none already present; public randomness."""
    cliques = [domain.canonical(c) for c in cliques]
    if size is None:
        sizes = [len(c) for c in cliques if c]
        size = max(set(sizes), key=sizes.count) if sizes else min(3, len(domain))
    taken = set(cliques)
    free = [c for c in combinations(domain.attributes, size) if c not in taken]
    rng = np.random.default_rng(seed)
    picked = rng.choice(len(free), size=min(count, len(free)), replace=False) if count > 0 and free else []
    return cliques + [free[i] for i in sorted(int(i) for i in picked)]


def fit_workload(
    domain: Domain,
    cliques: Iterable[Iterable[str]],
    rho: float,
    counts: CountSource,
    rng: RandomSource,
    *,
    r: int | None = None,
    rows: float | None = None,
    config: RAPConfig = RAPConfig(),
    attributes: Iterable[str] | None = None,
) -> RAPResult:
    """RAP under rho-zCDP fitted to every consistent query of `cliques`; its model answers other queries.

    `r`: fit r-of-k thresholds over each clique (None: the marginals, r = k). `rows`:
    a public row count, else a noisy count is released (config.count_fraction of rho).
    `attributes` (default: the whole domain) get their 1-way marginals released first
    (config.one_way_fraction of rho) and are covered by the model. (T, K) follow the
    r-aware rule (`tk_rule`) unless config fixes them. `counts` reads exact marginals
    (e.g. `MarginalCounts(domain, fetch)` over a GROUPING SETS scan): the cliques, and
    the 1-way marginals.
    """
    thresholds = workload_thresholds(domain, cliques, r)
    source = ThresholdQueries(ThresholdWorkload(domain, thresholds))
    covered = domain.attributes if attributes is None else domain.canonical(attributes)
    return run_rap(source, counts, rho, rng, config, rows=rows, attributes=covered)


def independent_model(
    domain: Domain, counts: CountSource, rho: float, rng: RandomSource, rows: float | None = None,
    count_fraction: float = 0.01,
) -> RelaxedData:
    """The 1-way baseline under rho-zCDP: noisy 1-way marginals (rho / d each), D' their product.

    With `rows` public all of rho goes to the marginals; else count_fraction of it
    releases a noisy total first. Each normalized noisy marginal is projected onto
    the simplex (one relaxed row).
    """
    variance_rows = 0.0
    if rows is None:
        share = rho * count_fraction
        cal = calibrate(GAUSSIAN, 1.0, share)
        total = counts.marginals([()])[()].total
        rows = float(max(total + int(discrete_gaussian_vector(cal.scale, 1, rng)[0]), 1))
        variance_rows, rho = cal.variance, rho - share
    cal = calibrate(GAUSSIAN, 1.0, rho / len(domain))
    marginals = counts.marginals([(a,) for a in domain.attributes])
    encoding = OneHot(domain)
    relaxed = np.zeros((1, encoding.width), dtype=np.float32)
    for a in domain.attributes:
        exact = marginals[(a,)].project((0,))
        noisy = (exact + discrete_gaussian_vector(cal.scale, len(exact), rng)) / rows
        relaxed[:, encoding.block(a)] = to_numpy(project_block(xp().asarray(noisy[None, :], dtype=np.float32)))
    return RelaxedData(domain, xp().asarray(relaxed), rows, cal.variance, domain.attributes, variance_rows)


# --- the seed's threshold distributions ------------------------------------------------------


def feature_probabilities(name: str, d: int, seed: int, parameter: float | None = None) -> np.ndarray:
    """P over d features: "uniform", "zipf" (a = parameter, default 1), "geometric" (p = parameter,
    default 1/4), normalized over the d features, then randomly permuted over them (the seed's code,
    "to remove experimental bias")."""
    labels = np.arange(1, d + 1, dtype=float)
    if name == "uniform":
        pmf = np.ones(d)
    elif name == "zipf":
        pmf = labels ** -(1.0 if parameter is None else parameter)
    elif name == "geometric":
        p = 0.25 if parameter is None else parameter
        pmf = (1 - p) ** (labels - 1) * p
    else:
        raise ValueError(f"unknown feature distribution {name!r}: uniform, zipf or geometric")
    pmf = pmf / pmf.sum()
    return np.random.default_rng(seed).permutation(pmf)


def drifted(probabilities: np.ndarray, gamma: float, seed: int) -> np.ndarray:
    """F_F from F_H by drift gamma in [0, 1] (Def 4.5.2): the masses, sorted descending, are
    re-assigned in descending order of keys (1 - 2γ)(d - i)/(d - 1) + (1 - |1 - 2γ|) u_i."""
    if not 0.0 <= gamma <= 1.0:
        raise ValueError("the drift gamma lies in [0, 1]")
    p = np.asarray(probabilities, dtype=float)
    d = len(p)
    order = np.argsort(-p, kind="stable")
    ranks = np.arange(d - 1, -1, -1) / max(d - 1, 1)
    keys = (1 - 2 * gamma) * ranks + (1 - abs(1 - 2 * gamma)) * np.random.default_rng(seed).random(d)
    resorted = p[order][np.argsort(-keys, kind="stable")]
    out = np.empty(d)
    out[order] = resorted
    return out


def total_variation(p: np.ndarray, q: np.ndarray) -> float:
    return 0.5 * float(np.abs(np.asarray(p) - np.asarray(q)).sum())


def subset_probabilities(d: int, k: int, features: np.ndarray) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """Every k-subset of d features and its probability: the normalized product of its features'."""
    subsets = list(combinations(range(d), k))
    weights = np.asarray([np.prod(features[list(s)]) for s in subsets])
    return subsets, weights / weights.sum()


def sample_thresholds(
    domain: Domain, features: np.ndarray, k: int, r: int, count: int, seed: int, replace: bool,
) -> list[Threshold]:
    """`count` r-of-k thresholds from the distribution the feature probabilities induce
    (historical: replace=False, distinct; future: replace=True, i.i.d.)."""
    subsets, p = subset_probabilities(len(domain), k, features)
    if not replace and count > int((p > 0).sum()):
        raise ValueError(f"only {int((p > 0).sum())} distinct {k}-attribute sets can be drawn, asked for {count}")
    picked = np.random.default_rng(seed).choice(len(subsets), size=count, replace=replace, p=p)
    return [Threshold.r_of_k(tuple(domain.attributes[i] for i in subsets[j]), r) for j in picked]


# --- errors on thresholds ---------------------------------------------------------------------


@dataclass(frozen=True)
class ThresholdErrors:
    """Per threshold: max absolute error, summed absolute error, number of consistent queries."""

    max: np.ndarray
    total: np.ndarray
    size: np.ndarray

    @property
    def mean(self) -> float:
        """Mean absolute error over every consistent query of every threshold."""
        return float(self.total.sum() / self.size.sum())

    @property
    def worst(self) -> float:
        """Max absolute error over all the queries (err_P, Def 4.3.1, for a present workload)."""
        return float(self.max.max())

    def future(self) -> tuple[float, float]:
        """(err_F estimate, half-width of its 95% interval): mean and 1.96 sd/sqrt(m) (ddof = 1)."""
        m = len(self.max)
        spread = float(np.std(self.max, ddof=1)) if m > 1 else math.inf
        return float(self.max.mean()), 1.96 * spread / math.sqrt(m)


Answer = object  # a relaxed array (n' x d'), None (All-0), or a callable: normalized truths -> answers


def threshold_errors(
    thresholds: list[Threshold], counts: CountSource, rows: float, answers: dict[str, Answer],
) -> dict[str, ThresholdErrors]:
    """Absolute errors of normalized answers (count / rows) on every consistent query of each threshold.

    Repeated thresholds are evaluated once. Each answer is relaxed data (its D' answers
    every query), None (answers 0), or a callable mapping a tile of true normalized
    answers to answers (e.g. Gaussian noise, for the GM baseline).
    """
    domain = counts.domain
    distinct = list(dict.fromkeys(thresholds))
    marginals = counts.marginals(list(dict.fromkeys(t.attributes for t in distinct)))
    encoding = OneHot(domain)
    per: dict[str, dict[Threshold, tuple[float, float, int]]] = {name: {} for name in answers}
    for t in distinct:
        ev = ThresholdEvaluator(t, domain.shape(t.attributes))
        ev.attach(marginals[t.attributes])
        for name, answer in answers.items():
            worst, total, size = 0.0, 0.0, 0
            if answer is None or callable(answer):
                tiles = ((tile, None) for tile in ev.tiles(1000))
            else:
                tiles = ev.synthetic(answer, encoding)
            for tile, synthetic in tiles:
                truth = ev.exact_tile(tile).ravel() / rows
                if answer is None:
                    guess = 0.0
                elif callable(answer):
                    guess = answer(truth)
                else:
                    guess = to_numpy(synthetic).ravel()
                error = np.abs(truth - guess)
                worst, total, size = max(worst, float(error.max())), total + float(error.sum()), size + truth.size
            per[name][t] = (worst, total, size)
    return {
        name: ThresholdErrors(*(np.asarray([values[t][i] for t in thresholds]) for i in range(3)))
        for name, values in per.items()
    }


__all__ = [
    "ThresholdErrors",
    "augment_cliques",
    "drifted",
    "feature_probabilities",
    "fit_workload",
    "independent_model",
    "sample_thresholds",
    "subset_probabilities",
    "threshold_errors",
    "total_variation",
    "workload_thresholds",
]
