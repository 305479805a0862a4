"""Report-noisy-max over counts: which of m candidates is the most frequent, and nothing else.

GNMax and Confident-GNMax (Song, S004 Ch. 5: §5.3.1, L981; Algorithm 3, L1003–1013; after
Papernot et al. 2018). GNMax adds noise to every count and releases only the argmax;
Confident-GNMax first checks that the largest count, with noise of its own, reaches a
threshold T, and releases ⊥ (nothing) otherwise. The noise is exact (`mechanisms.noise`):
the discrete Gaussian on zCDP ledgers, the discrete Laplace on pure-ε ones. Ties among the
noisy maxima are broken uniformly at random (post-processing).

**Neighbours.** One privacy unit changes the candidates' counts by an integer vector u
with ‖u‖₁ ≤ k, k the `contribution` (k rows of one unit, all added or all removed; or a
graph node's signed change of a degree histogram, `dpsql.tables.edge_tables`).

**The pick's cost (Gaussian).** The seed's data-independent bound is the Gaussian
mechanism's on the counts (λ/σ² RDP for one replaced vote, L2 sensitivity √2): the pick
is post-processing of the noisy counts. Its tighter bounds (Thm 5.3.1 with Prop 5.3.2)
are data-dependent, so a charge by them would itself depend on the data; the seed
sanitises that with smooth sensitivity (§5.2.4), which is not built here, so they are not
used. One data-independent improvement is sound and used: the argmax is unchanged when
one number is added to every count. With the counts scaled by m (`lattice`) and discrete
Gaussian noise Z of variance σ'² on the integers, the pick on D' = D + u is the pick of
m·n + (m·u − (Σu)·1) + Z, an integer shift of the noisy vector that D gives; by
post-processing and the multivariate discrete Gaussian's zCDP (Canonne–Kamath–Steinke
2020, ρ = ‖shift‖²/(2σ'²)), ρ = m²‖u − ū1‖²/(2σ'²). ‖u − ū1‖² is convex in u, so over
‖u‖₁ ≤ k it is largest at a vertex ±k·e_i: k²(1 − 1/m). On the count scale (σ = σ'/m),
ρ = k²(1 − 1/m)/(2σ²): half the histogram's for two candidates, the histogram's as m
grows. With Laplace noise the same shift has L1 norm 2k(1 − 1/m) ≥ k, no gain, so the pick
costs the noisy histogram's ε = k/b.

**The check (Confident-GNMax).** max_i n_i moves by at most ‖u‖∞ ≤ k, an integer, so the
check max_i n_i + Z₁ ≥ T costs k²/(2σ₁²) (Laplace: k/b₁). It is paid always; the pick only
when the check passes. The check's outcome is released (⊥ or a value), and a cost chosen
from released outputs within the total is adaptive composition under a privacy filter
(Feldman & Zrnic 2021, "Individual privacy accounting via a Rényi filter"); the seed's
accountant charges the GNMax cost per answered query in the same way (S004 §5.3). σ₁ is
`CHECK_RATIO` × σ₂ (the seed's Table 5.1 configurations have σ₁/σ₂ from 3.75 to 5).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import sqrt

import numpy as np

from mechanisms.measurement import GAUSSIAN, LAPLACE
from mechanisms.noise import RandomSource, gaussian_sigma2_upper, laplace_scale_upper
from mechanisms.partition_selection import DiscreteGaussian, DiscreteLaplace, Noise

__all__ = ["CHECK_RATIO", "ConfidenceCheck", "ConfidentNoisyMax", "NoisyMax", "confident_noisy_max", "noisy_max"]

CHECK_RATIO = 4  # σ₁ / σ₂ (Laplace: b₁ / b₂) of Confident-GNMax


def _check_inputs(kind: str, share: float, candidates: int, contribution: int) -> None:
    if kind not in (GAUSSIAN, LAPLACE):
        raise ValueError(f"unknown noise kind {kind!r}")
    if not share > 0:
        raise ValueError(f"the budget share must be > 0, got {share}")
    for name, value in (("candidates", candidates), ("contribution", contribution)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


@dataclass(frozen=True)
class NoisyMax:
    """Report-noisy-max of `candidates` counts, each unit changing them by ‖u‖₁ ≤ `contribution`.

    `noise` is drawn on the counts times `lattice`: m (Gaussian, the shift-invariant bound) or 1
    (the noisy histogram's argmax, charged as the histogram); None when there is one candidate
    (the answer is public: nothing to hide, nothing charged).
    """

    kind: str
    candidates: int
    contribution: int
    noise: Noise | None
    lattice: int = 1

    def __post_init__(self):
        if self.lattice not in (1, self.candidates) or (self.lattice > 1 and self.kind != GAUSSIAN):
            raise ValueError("the lattice is 1, or the number of candidates with Gaussian noise")

    @property
    def cost(self) -> float:
        """ρ = k²·m(m − 1)/(2σ'²) on the lattice m (module doc), k²/(2σ²) on the lattice 1, or ε = k/b
        (Laplace): exact for the rounded noise."""
        if self.noise is None:
            return 0.0
        k, m = self.contribution, self.candidates
        if self.kind == GAUSSIAN:
            shift = k * k * m * (m - 1) if self.lattice == m > 1 else k * k
            return float(Fraction(shift, 2) / self.noise.sigma2)
        return float(Fraction(k) / self.noise.scale)

    @property
    def std(self) -> float:
        """The noise's standard deviation on the counts' scale."""
        return 0.0 if self.noise is None else sqrt(self.noise.variance) / self.lattice

    def pick(self, counts: np.ndarray, rng: RandomSource | None = None) -> int:
        """The index of the largest noisy count (ties broken uniformly at random)."""
        return int(self.picks(counts, 1, rng)[0])

    def picks(self, counts: np.ndarray, runs: int, rng: RandomSource | None = None) -> np.ndarray:
        """`runs` independent picks from the same counts (one call to the sampler for all of them)."""
        counts = np.asarray(counts, dtype=np.int64)
        if counts.shape != (self.candidates,):
            raise ValueError(f"expected {self.candidates} counts, got shape {counts.shape}")
        if self.noise is None:
            return np.zeros(runs, dtype=np.int64)
        rng = _source(rng)
        noisy = counts * self.lattice + self.noise.sample(runs * self.candidates, rng).reshape(runs, -1)
        tied = noisy == noisy.max(axis=1, keepdims=True)
        if np.all(tied.sum(axis=1) == 1):
            return np.argmax(tied, axis=1)
        priority = np.where(tied, rng.words(tied.size).reshape(tied.shape), 0)  # uniform among the tied
        return np.argmax(priority, axis=1)


@dataclass(frozen=True)
class ConfidenceCheck:
    """Whether the largest count plus noise reaches `threshold` (Confident-GNMax's first step)."""

    kind: str
    contribution: int
    threshold: int
    noise: Noise

    @property
    def cost(self) -> float:
        """ρ = k²/(2σ₁²) or ε = k/b₁: the largest count moves by at most k."""
        k = self.contribution
        if self.kind == GAUSSIAN:
            return float(Fraction(k * k, 2) / self.noise.sigma2)
        return float(Fraction(k) / self.noise.scale)

    @property
    def std(self) -> float:
        return sqrt(self.noise.variance)

    def passes(self, counts: np.ndarray, runs: int, rng: RandomSource | None = None) -> np.ndarray:
        """Whether the check passes, in each of `runs` independent runs."""
        largest = int(np.max(np.asarray(counts, dtype=np.int64)))
        return largest + self.noise.sample(runs, rng) >= self.threshold


@dataclass(frozen=True)
class ConfidentNoisyMax:
    """Confident-GNMax: the `check`, then, if it passes, the `argmax`'s pick; else None (⊥)."""

    check: ConfidenceCheck
    argmax: NoisyMax

    @property
    def cost(self) -> float:
        """The most it costs: the check and the pick."""
        return self.check.cost + self.argmax.cost

    def charged(self, answered: bool) -> float:
        """What a run costs: the check always, the pick only when answered (module doc)."""
        return self.cost if answered else self.check.cost

    def run(self, counts: np.ndarray, rng: RandomSource | None = None) -> int | None:
        """The pick, or None (⊥) when the check fails."""
        found = int(self.runs(counts, 1, rng)[0])
        return None if found < 0 else found

    def runs(self, counts: np.ndarray, runs: int, rng: RandomSource | None = None) -> np.ndarray:
        """`runs` independent outcomes: a pick, or −1 for ⊥ (the pick is drawn only where the check passes)."""
        rng = _source(rng)
        passed = self.check.passes(counts, runs, rng)
        out = np.full(runs, -1, dtype=np.int64)
        if passed.any():
            out[passed] = self.argmax.picks(counts, int(passed.sum()), rng)
        return out


def _gaussian(variance: float) -> DiscreteGaussian:
    return DiscreteGaussian(gaussian_sigma2_upper(variance))


def _laplace(scale: float) -> DiscreteLaplace:
    return DiscreteLaplace(laplace_scale_upper(scale))


def noisy_max(kind: str, share: float, candidates: int, contribution: int) -> NoisyMax:
    """GNMax (or its Laplace twin) calibrated to cost at most `share` (ρ, or ε)."""
    _check_inputs(kind, share, candidates, contribution)
    k, m = contribution, candidates
    if m == 1:
        return NoisyMax(kind, m, k, None)
    if kind == LAPLACE:
        return NoisyMax(kind, m, k, _laplace(k / share))
    return NoisyMax(kind, m, k, _gaussian(k * k * m * (m - 1) / (2 * share)), lattice=m)


def confident_noisy_max(kind: str, share: float, candidates: int, contribution: int, threshold: int,
                        ratio: float = CHECK_RATIO) -> ConfidentNoisyMax:
    """Confident-GNMax costing at most `share` when it answers, with σ₁ = `ratio`·σ₂ (b₁ = `ratio`·b₂)."""
    _check_inputs(kind, share, candidates, contribution)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, np.integer)):
        raise ValueError(f"the threshold must be an integer, got {threshold!r}")
    if not ratio > 0:
        raise ValueError(f"ratio must be > 0, got {ratio}")
    k, m = contribution, candidates
    picks = m > 1
    if kind == GAUSSIAN:  # ρ = k²/(2r²σ₂²) + k²(1 − 1/m)/(2σ₂²)
        sigma2 = k * k * (1 / ratio**2 + (1 - 1 / m)) / (2 * share)
        check = _gaussian(ratio**2 * sigma2)
        pick = _gaussian(m * m * sigma2) if picks else None
    else:  # ε = k/(r·b₂) + k/b₂
        scale = k * (1 / ratio + picks) / share
        check = _laplace(ratio * scale)
        pick = _laplace(scale) if picks else None
    lattice = m if kind == GAUSSIAN else 1
    return ConfidentNoisyMax(ConfidenceCheck(kind, k, int(threshold), check), NoisyMax(kind, m, k, pick, lattice))


def _source(rng: RandomSource | None) -> RandomSource:
    return rng if rng is not None else RandomSource()
