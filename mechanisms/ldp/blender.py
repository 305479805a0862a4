"""The hybrid trust model: blending an opt-in group's central estimate with the clients' local one.

Avent's dissertation (seeds/000, Ch. 2): a fraction c of the n users opts in to a trusted
curator (central DP on their raw data, the "TCM" group), the rest report under LDP (the "LM"
group). Each group gives an independent estimate of the same population quantity.

- Counts and frequencies (§2.2, BLENDER): the opt-in estimate p̂_O = (count + Laplace)/|T| with
  the variance estimate of Algorithm 2.3 (line 14, `optin_variance`), the clients' GRR estimate
  with that of Algorithm 2.5 (`client_variance`), blended by `blend` with the weight that
  minimises the blend's variance (Theorem 2.2.7, Algorithm 2.6): w = σ²_C/(σ²_O + σ²_C),
  variance w²σ²_O + (1−w)²σ²_C = σ²_Oσ²_C/(σ²_O + σ²_C), below both groups' own; then, as
  Algorithm 2.6 ends, `project_simplex`.
- Means over [0, m] (§2.3): `MeanSetting` holds n, c, the groups' data variances and means and
  the privacy noise variances s²_T (of the opt-in mean) and s²_L (of one client's report);
  `hybrid_mse(setting, w)` is the exact MSE of w·μ̃_T + (1−w)·μ̃_L against the non-private mean of
  all n users (Lemma 2.3.17; w = 1 is TCM-only, Lemma 2.3.4, w = 0 LM-only, Lemma 2.3.15),
  `full_lm_mse` the all-local baseline (Lemma 2.3.6), `kvh_weight` the minimiser in the
  homogeneous known-variance case (Def. 2.3.18), `pwh_weight` the privacy-only weight for an
  unknown variance (Def. 2.3.22), and `laplace_setting` the ε-DP Laplace noise variances
  s²_T = 2m²/(c²n²ε²), s²_L = 2m²/ε² (replace-one neighbours).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from mechanisms.arrays import to_numpy, xp
from mechanisms.rap.encoding import project_block


class Blend(NamedTuple):
    """A blended estimate, its variance (the error bar's square) and the opt-in group's weight."""

    value: np.ndarray
    variance: np.ndarray
    weight: np.ndarray


def blend(central, central_variance, local, local_variance) -> Blend:
    """w·central + (1 − w)·local with w = σ²_local/(σ²_central + σ²_local) (Theorem 2.2.7), elementwise."""
    central, local = np.asarray(central, dtype=float), np.asarray(local, dtype=float)
    vc, vl = np.asarray(central_variance, dtype=float), np.asarray(local_variance, dtype=float)
    weight = vl / (vc + vl)
    return Blend(weight * central + (1 - weight) * local, weight ** 2 * vc + (1 - weight) ** 2 * vl, weight)


def optin_variance(estimate, size: int, laplace_scale: float) -> np.ndarray:
    """Algorithm 2.3, line 14: p̂(1 − p̂)/(|T| − 1) + 2b²/(|T|(|T| − 1)) for p̂ = (count + Lap(b))/|T|."""
    p = np.asarray(estimate, dtype=float)
    return p * (1 - p) / (size - 1) + 2 * laplace_scale ** 2 / (size * (size - 1))


def client_variance(report_fractions, size: int, p: float, q: float) -> np.ndarray:
    """Algorithm 2.5's query level: r̂(1 − r̂)/((|C| − 1)(p − q)²), r̂ the fraction of the |C| GRR reports."""
    r = np.asarray(report_fractions, dtype=float)
    return r * (1 - r) / ((size - 1) * (p - q) ** 2)


def project_simplex(values) -> np.ndarray:
    """The closest probability vector in Euclidean distance (Algorithm 2.6, line 6)."""
    return to_numpy(project_block(xp().asarray(np.asarray(values, dtype=float)[None, :])))[0]


@dataclass(frozen=True)
class MeanSetting:
    """A hybrid mean-estimation setting (Table 2.4's notation)."""

    n: int
    c: float  # the opt-in fraction |T|/n
    sigma_t2: float  # the opt-in group's data variance σ²_T
    sigma_l2: float  # the clients' data variance σ²_L
    s_t2: float  # variance of the noise on the opt-in mean
    s_l2: float  # variance of the noise on one client's report
    mu_t: float = 0.0
    mu_l: float = 0.0


def laplace_setting(n: int, c: float, m: float, epsilon: float, sigma2: float, mu: float = 0.0) -> MeanSetting:
    """The homogeneous setting with ε-DP Laplace noise on values in [0, m]: s²_T = 2m²/(c²n²ε²), s²_L = 2m²/ε²."""
    return MeanSetting(n, c, sigma2, sigma2, 2 * m ** 2 / (c * n * epsilon) ** 2, 2 * m ** 2 / epsilon ** 2, mu, mu)


def hybrid_mse(s: MeanSetting, w: float) -> float:
    """Lemma 2.3.17: E_H(w) = (w−c)²σ²_T/(cn) + (w−c)²σ²_L/((1−c)n) + w²s²_T + (1−w)²s²_L/((1−c)n)
    + (wμ_T + (1−w)μ_L − μ)², μ = cμ_T + (1−c)μ_L. E_H(1) is TCM-only (Lemma 2.3.4), E_H(0) LM-only (2.3.15)."""
    c, n = s.c, s.n
    mu = c * s.mu_t + (1 - c) * s.mu_l
    return ((w - c) ** 2 * s.sigma_t2 / (c * n) + (w - c) ** 2 * s.sigma_l2 / ((1 - c) * n)
            + w ** 2 * s.s_t2 + (1 - w) ** 2 * s.s_l2 / ((1 - c) * n) + (w * s.mu_t + (1 - w) * s.mu_l - mu) ** 2)


def full_lm_mse(s: MeanSetting) -> float:
    """Lemma 2.3.6: every user reports locally, E_F = s²_L/n."""
    return s.s_l2 / s.n


def kvh_weight(s: MeanSetting) -> float:
    """Def. 2.3.18 (homogeneous, σ² known): w* = c(σ² + s²_L)/(σ² + c(n s²_T(1 − c) + s²_L)), the minimiser of E_H."""
    c, n, sigma2 = s.c, s.n, s.sigma_t2
    return c * (sigma2 + s.s_l2) / (sigma2 + c * (n * s.s_t2 * (1 - c) + s.s_l2))


def pwh_weight(s: MeanSetting) -> float:
    """Def. 2.3.22 (σ² unknown): the minimiser of the privacy error alone, s²_L/(s²_L + (1 − c)n s²_T)."""
    return s.s_l2 / (s.s_l2 + (1 - s.c) * s.n * s.s_t2)
