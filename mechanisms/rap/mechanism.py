"""RAP: relaxed adaptive projection (Aydore et al. 2021; Avent & Korolova 2023), in zCDP.

    (optional) release the 1-way marginals of the workload's attributes      (one_way_fraction of rho)
    for t in 1..T:                                  (rho_t = rest of rho / T per round)
        pick K unmeasured queries by one-shot Gumbel top-K on |q(D) - n̂ q̂(D')|,
            K picks at rho_t / (2K) each            (scale sqrt(K / rho_t) counts)
        release their counts with exact discrete Gaussian noise,
            K answers at rho_t / (2K) each          (sigma^2 = K / rho_t counts^2)
        fit D' to all answers released so far (relaxed projection, warm start,
            answers weighted by their precision)

Non-adaptive RAP (T = 1, K = |Q|) measures every query at rho / |Q| instead.
All privacy-relevant quantities are in counts: a count query has sensitivity 1
under adding or removing a row (or replacing one), and so has the score
|count - n̂ q̂(D')|, because n̂ and D' are public (released or post-processed);
a 1-way marginal has L2 sensitivity 1.

The 1-way marginals are an extension of the published algorithm (as AIM and
MST measure them first): sparse workloads leave most of D' unconstrained, and
a D' whose attribute distributions are wrong has mean error above the all-zero
answer. `one_way_fraction = 0` gives the published RAP.

The row count. RAP fits normalized answers; the noisy counts are divided by n̂.
With `rows` given, n is treated as public (as in the RAP papers, whose
replace-one neighbours fix n). Without it, a `count_fraction` of rho releases
the total count with discrete Gaussian noise and n̂ is that noisy count; its
variance enters the reported error estimate.

The (T, K) knob. Both noise scales depend on T·K only (sqrt(T K / rho) counts),
which is why error is governed by T·K (Avent & Korolova 2023, Sec 4.3.4). The
default rule sets c = T·K so that a measured answer has normalized noise
`noise_target`: c = noise_target^2 rho n^2 (capped by the workload and by
`max_measured`), then T = ceil(sqrt(c) / 4) rounds of K = c / T queries.
noise_target = 0.02 was chosen by simulation on domain-shaped synthetic data
(`planner.adaptive.simulation.synthetic_records`), never on a benchmark dataset; the cap
of 2048 measured queries keeps a CPU run to minutes (raise it on a GPU).

The r-aware rule. The T·K banding holds for marginals (r = k) only. For r-of-k
thresholds with r < k, "the only consistent pattern [...] is that RAP achieves its
minimal present error when the number of adaptive rounds is relatively large and
the number of selected queries per round of adaptivity is relatively small"
(Avent 2023, seeds/000 L2846, Fig 4.8; Avent & Korolova 2023, seeds/003 L640; the
banding for r = k: seeds/000 L2719), on the grid T in {1, 4, 16, 64}, K in {4, 16, 64,
256} (Table 4.4, seeds/000 L2815-2828; seeds/003 Table 4, L624), at a runtime "up to
20x" that of r = k (seeds/000 L2865); it states no (T, K) values beyond that. So for
r < k the rule keeps the same c = T·K (the noise per answer) but splits it the other
way: K = the grid's smallest (4), T = c / 4 rounds, at most the grid's largest (64),
K growing past 4 only when c > 256 (c/64 per round then). `tk_rule(..., r=r, k=k)`;
`run_rap` reads r and k from a threshold workload when `config.r_aware` (the default).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from math import ceil, sqrt

import numpy as np

from mechanisms.measurement import GAUSSIAN, Measurement, calibrate
from mechanisms.noise import RandomSource, discrete_gaussian_vector
from mechanisms.rap.counts import CountSource
from mechanisms.rap.encoding import OneHot, uniform_relaxed
from mechanisms.rap.projection import ProjectionConfig, relaxed_projection
from mechanisms.rap.queries import QuerySet
from mechanisms.rap.relaxed import RelaxedData
from mechanisms.rap.top_k import NoisyTopK, exact_scores, gumbel_scale
from mechanisms.rap.sources import QuerySource, ThresholdQueries
from mechanisms.workload import Block, Term
from mechanisms.interruption import checkpoint


@dataclass(frozen=True)
class RAPConfig:
    """RAP's knobs. rounds (T) and per_round (K) default to the T·K rule (see the module doc).

    Each relaxed projection stops once the RMS residual to the noisy answers is
    below `fit` times their noise standard deviation (fitting noise further is moot).
    `r_aware`: r-of-k thresholds with r < k split T·K into many rounds (at most
    `many_rounds`) of few queries (`few_per_round`), the seed's finding (module doc).
    """

    rounds: int | None = None
    per_round: int | None = None
    synthetic_rows: int = 1000
    noise_target: float = 0.02
    max_measured: int = 2048
    count_fraction: float = 0.01
    one_way_fraction: float = 0.1
    fit: float = 0.5
    projection: ProjectionConfig = field(default_factory=ProjectionConfig)
    r_aware: bool = True
    few_per_round: int = 4
    many_rounds: int = 64


# The (T, K) grid of the seed's r-of-k and future-query experiments (Avent 2023, Tables 4.4 and 4.5).
SEED_ROUNDS = (1, 4, 16, 64)
SEED_PER_ROUND = (4, 16, 64, 256)


def tk_rule(
    rho: float,
    rows: float,
    n_queries: int,
    config: RAPConfig = RAPConfig(),
    r: int | None = None,
    k: int | None = None,
) -> tuple[int, int]:
    """(T, K): explicit values, or c = T·K from the noise target, split by the workload's r and k.

    Marginals and conjunctions (r = k, or r not given): T = ceil(sqrt(c) / 4), few rounds
    of many queries. r-of-k thresholds with r < k (and config.r_aware): many rounds of
    few queries, K = config.few_per_round, T = c / K up to config.many_rounds (the seed's
    grid corner, see the module doc), then K = c / T. A given T (or K) is kept and the
    other is c divided by it. With neither given and c reaching the workload size, every
    query is measured: (1, |Q|), non-adaptive RAP.
    """
    if config.rounds is not None and config.per_round is not None:
        t, per = config.rounds, config.per_round
    else:
        c = int(round(config.noise_target**2 * rho * rows**2))
        c = max(1, min(c, config.max_measured, n_queries))
        if config.rounds is not None:
            t = config.rounds
        elif config.per_round is not None:
            t = max(1, c // config.per_round)
        elif c == n_queries:  # every query gets measured: non-adaptive RAP
            return 1, n_queries
        elif config.r_aware and r is not None and k is not None and r < k:
            t = max(1, min(config.many_rounds, c // max(1, config.few_per_round)))
        else:
            t = max(1, ceil(sqrt(c) / 4))
        per = config.per_round if config.per_round is not None else max(1, c // t)
    if t < 1 or per < 1 or t * per > n_queries:
        raise ValueError(f"need T >= 1, K >= 1 and T·K <= |Q| = {n_queries}, got T={t}, K={per}")
    return t, per


def workload_r_of_k(source: QuerySource) -> tuple[int | None, int | None]:
    """(r, k) of the workload's r-of-k thresholds with the smallest r < k, or (None, None).

    Blocks (conjunctions, marginals) and thresholds with r = k give (None, None): the
    marginal rule applies. Other predicates than r-of-k are read as (None, None) too.
    """
    if not isinstance(source, ThresholdQueries):
        return None, None
    below = [(t.r, t.k) for t in source.workload.thresholds if t.r is not None and t.r < t.k]
    return min(below) if below else (None, None)


@dataclass(frozen=True)
class Release:
    """What RAP released: noisy counts of the measured queries and of the 1-way marginals.

    `ids` are the measured query ids in selection order, `values` their noisy
    counts; `variance` and `one_way_variance` are the exact per-answer noise
    variances; `rows` is n̂ (public, or the noisy total with `rows_variance`).
    """

    ids: np.ndarray
    values: np.ndarray
    variance: float
    one_way: dict[str, np.ndarray]
    one_way_variance: float
    rows: float
    rows_variance: float
    rho: float
    rounds: int
    per_round: int

    def one_way_measurements(self) -> list[Measurement]:
        """The noisy 1-way marginals as measurements to store (their cost is the whole release's)."""
        return [Measurement((a,), GAUSSIAN, 0.0, self.one_way_variance, v) for a, v in self.one_way.items()]


@dataclass
class RAPResult:
    release: Release
    model: RelaxedData
    seconds: dict[str, float]


def run_rap(
    source: QuerySource,
    counts: CountSource,
    rho: float,
    rng: RandomSource,
    config: RAPConfig = RAPConfig(),
    rows: float | None = None,
    attributes: tuple[str, ...] | None = None,
) -> RAPResult:
    """Run RAP under rho-zCDP on the queries of `source`; `rows` is a public row count, if any.

    `attributes` (default: the workload's) are those whose 1-way marginals are released
    (with config.one_way_fraction > 0) and which the model then covers: give every
    attribute of the domain for a model that answers queries outside the workload.
    """
    if rho <= 0:
        raise ValueError("RAP needs a positive budget")
    covered = source.attributes
    if attributes is not None and config.one_way_fraction > 0:
        covered = source.domain.canonical(set(attributes) | set(source.attributes))
    clock = {"prepare": 0.0, "select": 0.0, "measure": 0.0, "project": 0.0}
    start = time.perf_counter()
    total = rho
    source.prepare(counts)
    encoding = OneHot(source.domain)
    rows, rows_variance, rho = _row_count(counts, rho, rows, config, rng)
    fit = _Fit(encoding, rows, source.bounded)
    one_way, one_way_variance = {}, 0.0
    if config.one_way_fraction > 0:
        one_way, one_way_variance = _one_way(covered, counts, rho * config.one_way_fraction, rng, fit)
        rho *= 1 - config.one_way_fraction
    t_rounds, k = tk_rule(rho, rows, source.n_queries, config, *workload_r_of_k(source))
    adaptive = k < source.n_queries
    share = rho / (t_rounds * (2 * k if adaptive else k))  # per pick and per answer
    noise = calibrate(GAUSSIAN, 1.0, share)
    scale = gumbel_scale(share)
    relaxed = uniform_relaxed(config.synthetic_rows, encoding, seed=rng.randbelow(2**32))
    projection = replace(config.projection, target_loss=config.fit**2 * noise.variance / rows**2)
    if one_way:
        fit.project(relaxed, noise.variance, projection)
    ids, values = [], []
    clock["prepare"] = time.perf_counter() - start
    for _ in range(t_rounds):
        checkpoint(4.0 * source.n_queries * relaxed.shape[0] if adaptive else 0.0)  # scoring every query
        tick = time.perf_counter()
        if adaptive:
            picked = _select(source, relaxed, encoding, rows, k, scale, rng, np.asarray(ids, dtype=np.int64))
        else:
            picked = np.arange(source.n_queries, dtype=np.int64)
        clock["select"] += time.perf_counter() - tick
        tick = time.perf_counter()
        noisy = source.exact(picked) + discrete_gaussian_vector(noise.scale, len(picked), rng)
        ids.extend(picked.tolist())
        values.extend(noisy.tolist())
        fit.add(source.add_to(fit.queries, picked), noisy, noise.variance)
        clock["measure"] += time.perf_counter() - tick
        tick = time.perf_counter()
        fit.project(relaxed, noise.variance, projection)
        clock["project"] += time.perf_counter() - tick
    release = Release(
        np.asarray(ids, dtype=np.int64), np.asarray(values, dtype=float), noise.variance, one_way,
        one_way_variance, rows, rows_variance, total, t_rounds, k,
    )
    model = RelaxedData(source.domain, relaxed, rows, noise.variance, covered, rows_variance)
    return RAPResult(release, model, clock)


class _Fit:
    """The released answers RP fits: surrogates, normalized targets and precision weights."""

    def __init__(self, encoding: OneHot, rows: float, bounded: bool):
        self.queries = QuerySet(encoding)
        self.rows, self.bounded = rows, bounded
        self.targets = np.zeros(0)
        self.variances = np.zeros(0)

    def add(self, positions: np.ndarray, noisy_counts: np.ndarray, variance: float) -> None:
        grow = self.queries.size - len(self.targets)
        self.targets = np.concatenate([self.targets, np.zeros(grow)])
        self.variances = np.concatenate([self.variances, np.ones(grow)])
        target = np.asarray(noisy_counts, dtype=float) / self.rows
        self.targets[positions] = np.clip(target, 0.0, 1.0) if self.bounded else target
        self.variances[positions] = variance

    def project(self, relaxed, reference_variance: float, config: ProjectionConfig) -> None:
        relaxed_projection(relaxed, self.queries, self.targets, reference_variance / self.variances, config)


def _one_way(attributes: tuple[str, ...], counts: CountSource, rho: float, rng: RandomSource, fit: _Fit):
    """Release the 1-way marginals of `attributes` (L2 sensitivity 1 each, rho / d each)."""
    cal = calibrate(GAUSSIAN, 1.0, rho / len(attributes))
    marginals = counts.marginals([(a,) for a in attributes])
    out = {}
    for a in attributes:
        exact = marginals[(a,)].project((0,))
        noisy = exact + discrete_gaussian_vector(cal.scale, len(exact), rng)
        block = Block(f"1-way {a}", (a,), [Term(1.0, {})])
        fit.add(fit.queries.add_block(block, np.arange(len(exact))), noisy, cal.variance)
        out[a] = noisy.astype(float)
    return out, cal.variance


def _row_count(counts: CountSource, rho: float, rows: float | None, config: RAPConfig, rng: RandomSource):
    """(n̂, Var n̂, budget left): the public count, or a noisy total count at count_fraction of rho."""
    if rows is not None:
        return float(rows), 0.0, rho
    share = rho * config.count_fraction
    total = counts.marginals([()])[()].total
    cal = calibrate(GAUSSIAN, 1.0, share)
    noisy = total + int(discrete_gaussian_vector(cal.scale, 1, rng)[0])
    return float(max(noisy, 1)), cal.variance, rho - share


def _select(source, relaxed, encoding, rows, k, scale, rng, measured: np.ndarray) -> np.ndarray:
    """One-shot Gumbel top-K over the not-yet-measured queries, streamed over chunks."""
    measured = np.sort(measured)
    top = NoisyTopK(k, scale, rng)
    for ids, exact, synthetic in source.scan(relaxed, encoding):
        if measured.size:
            inside = measured[(measured >= ids[0]) & (measured <= ids[-1])] if ids.size else measured[:0]
            keep = ~np.isin(ids, inside)
            ids, exact, synthetic = ids[keep], exact[keep], synthetic[keep]
        top.add(ids, exact_scores(exact, rows * synthetic.astype(np.float64)))
    return top.winners()
