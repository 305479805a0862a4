"""Private selection for RAP: one-shot Gumbel top-K under zCDP, streamed over tiles.

Adding i.i.d. Gumbel(beta) noise to every score once and keeping the K largest
has the distribution of K rounds of report-noisy-max "peeling" (Durfee & Rogers
2019), each an exponential mechanism with epsilon = 2 Δ / beta for scores of
sensitivity Δ. By the bounded-range analysis (Cesar & Rogers 2021) each pick is
epsilon^2 / 8 = Δ^2 / (2 beta^2)-zCDP, so K picks at rho_pick each need

    beta = Δ / sqrt(2 rho_pick),

which for RAP's rho_pick = rho_t / (2K) and Δ = 1 count is sqrt(K / rho_t)
(seed report erratum E1: not the sqrt(K / (2 rho_t)) printed for OSAS).

Floating-point safety. The noise uses uniforms from the engine's
`RandomSource` (cryptographic unless seeded for tests), with 106-bit resolution
near 0, turned into Exp(1) by a two-branch inverse CDF that is accurate in both
tails, and G = -log(E): the Gumbel upper tail is represented up to ~75 and the
lower down to ~-4.3 (cut-off probability < 1e-31 per draw), with only
rounding-level (2^-52 relative) deviations elsewhere. Scores are computed
exactly (integer counts minus public values on a 2^-20 grid) and the scale
carries a relative margin, so rounding can only add noise. Only the selected
indices leave this module.
"""

from __future__ import annotations

import math

import numpy as np

from mechanisms.noise import RandomSource

# Relative inflation of the Gumbel scale (as for noise sensitivities in `measurement`).
_SCALE_MARGIN = 1e-9
# Public synthetic answers are rounded to this grid so count - answer is exact in float64.
SCORE_GRID = 2.0**-20


def gumbel_scale(rho_pick: float, sensitivity: float = 1.0) -> float:
    """Gumbel scale making one report-noisy-max pick rho_pick-zCDP (bounded-range analysis)."""
    if rho_pick <= 0:
        raise ValueError("a selection needs a positive budget")
    return sensitivity / math.sqrt(2.0 * rho_pick) * (1.0 + _SCALE_MARGIN)


def standard_gumbel(count: int, rng: RandomSource) -> np.ndarray:
    """`count` standard Gumbel draws, accurate in both tails (see the module docstring)."""
    words = rng.words(2 * count).reshape(count, 2)
    u = (words[:, 0] >> np.uint64(11)).astype(np.float64) * 2.0**-53
    u += (words[:, 1] >> np.uint64(11)).astype(np.float64) * 2.0**-106 + 2.0**-107
    np.minimum(u, 1.0 - 2.0**-53, out=u)  # uniform on (0, 1), fine near 0
    lower = (words[:, 1] & np.uint64(1)).astype(bool)  # E < ln 2 has probability 1/2
    # E | E < ln 2 = -log(1 - u/2) ; E | E >= ln 2 = ln 2 - log(u)   (E ~ Exp(1))
    e = np.where(lower, -np.log1p(-0.5 * u), math.log(2.0) - np.log(u))
    return -np.log(e, out=e)


def exact_scores(counts: np.ndarray, synthetic_counts: np.ndarray) -> np.ndarray:
    """|count - synthetic| with the public synthetic values snapped to SCORE_GRID (exact in float64)."""
    counts = np.asarray(counts, dtype=np.int64)
    if counts.size and np.abs(counts).max() >= 2**31:
        raise OverflowError("counts beyond 2^31 would make scores inexact")
    snapped = np.round(np.asarray(synthetic_counts, dtype=np.float64) / SCORE_GRID) * SCORE_GRID
    return np.abs(counts.astype(np.float64) - snapped)


class NoisyTopK:
    """Streaming one-shot Gumbel top-K: feed score chunks with their ids, read the K winners."""

    def __init__(self, k: int, scale: float, rng: RandomSource):
        self.k, self.scale, self.rng = k, scale, rng
        self.values = np.zeros(0)
        self.ids = np.zeros(0, dtype=np.int64)

    def add(self, ids: np.ndarray, scores: np.ndarray) -> None:
        noisy = np.asarray(scores, dtype=np.float64) + self.scale * standard_gumbel(len(scores), self.rng)
        values = np.concatenate([self.values, noisy])
        ids = np.concatenate([self.ids, np.asarray(ids, dtype=np.int64)])
        if len(values) > self.k:
            keep = np.argpartition(-values, self.k - 1)[: self.k]
            values, ids = values[keep], ids[keep]
        self.values, self.ids = values, ids

    def winners(self) -> np.ndarray:
        """Ids of the K largest noisy scores, best first."""
        return self.ids[np.argsort(-self.values, kind="stable")]
