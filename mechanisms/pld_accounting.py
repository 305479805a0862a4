"""Composition of a mixed history of charges: discrete Gaussians, discrete Laplaces and δ events.

A ledger's charges are `Piece`s: a discrete Gaussian (ρ-zCDP, ρ = Δ²/2σ²), a discrete Laplace
(pure ε-DP, ε = Δ/b) or the δ of a partition selection's threshold. A `History` is what the
order-free composition needs of them: the Gaussians' total ρ, the pure pieces' ε (in charge
order), the δs' sum.

`Accountant` says how much Gaussian budget (ρ) a history leaves inside a declared (ε, δ), by the
best of three certificates, each a valid (ε, δ) guarantee of the whole history (the δs of δ
events add to it, as in approximate zCDP):

- zCDP: every piece in ρ (ε-DP is ε²/2-zCDP), ρ's add; the ledger's zCDP mode
  (`mechanisms.accounting`, the CKS conversion).
- PLD: the pure pieces composed exactly by their privacy-loss distributions (Google's
  `dp-accounting`, pessimistic discretization), the Gaussians in zCDP, and the two
  joined by adding their (ε, δ) at the best split of the δ left. Best for pure histories.
- RDP: Rényi divergences add; each pure piece's is at most randomized response's at its ε
  (every ε-DP mechanism is a post-processing of it: Kairouz, Oh and Viswanath 2015), the
  Gaussians' is αρ, and the sum converts to (ε, δ) by CKS's Proposition 12. Best for
  histories mixing Gaussians and a few pure pieces.

The Gaussian part stays in zCDP on purpose: a discrete Gaussian's privacy loss is *not*
dominated by the continuous Gaussian's at the same σ (at σ = 4, Δ = 1, ε = 1 its exact δ is
3.06e-6 against 2.92e-6, `tests/test_pld_accounting.py`), so accounting it as a continuous
Gaussian would overstate its privacy; the zCDP bound holds for it (Canonne, Kamath, Steinke 2020).
One pure piece alone is exactly (ε, 0); many compose as the optimal composition of ε-DP
mechanisms (Kairouz et al. 2015), far tighter than ε²/2 each. Taking the better certificate
means the PLD mode is never looser than zCDP for the same history.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld

from mechanisms.accounting import epsilon_delta_to_zcdp, pure_dp_to_zcdp

__all__ = ["GAUSSIAN_PIECE", "LAPLACE_PIECE", "Piece", "History", "Accountant", "pure_epsilon"]

GAUSSIAN_PIECE, LAPLACE_PIECE = "discrete_gaussian", "discrete_laplace"
# The privacy-loss grid of the pure pieces' PLDs (dp-accounting rounds pessimistically onto it).
_LOSS_GRID = 1e-4
# The grids of the PLD certificate (`_split_remaining`): the pure part's ε, and the Rényi orders α of
# the Gaussian part's CKS bound. Every point is a valid certificate; finer grids only find more budget.
_EPSILON_POINTS = 256
_ALPHAS = 1.0 + np.geomspace(1e-4, 1e6, 400)
# The declared ε comes back from the ledger's ρ through a conversion rounded to ~1e-12 relative: a pure
# piece of exactly the declared ε fits within this relative slack of ε, paid for in δ (`_slack_delta`): a
# history exceeding ε by s has δ(ε) ≤ δ(ε + s) + e^s − 1, and a pure history over ε by any s has δ(ε) > 0.
_EPSILON_SLACK = 1e-11
# Callers accept a history whose remaining ρ is within TOLERANCE × total below 0 (floating-point sums of
# ρ). The exact certificates' ρ is solved at orders α up to 10⁶, where a ρ short by r is ε over by α·r: they
# report their ρ less this tolerance, so what a caller accepts is what they certify (`Accountant.remaining`).
TOLERANCE = 1e-9


@dataclass(frozen=True)
class Piece:
    """One mechanism of a charge: a discrete Gaussian of noise σ over sensitivity Δ (`value` = ρ =
    Δ²/2σ²) or a discrete Laplace of scale b over sensitivity Δ (`value` = ε = Δ/b). σ (or b) and Δ
    are kept as recorded (None when the charge gave only its ρ or ε)."""

    kind: str
    value: float
    scale: float | None = None
    sensitivity: float | None = None

    @classmethod
    def gaussian(cls, rho: float, sigma: float | None = None, sensitivity: float | None = None) -> "Piece":
        return cls(GAUSSIAN_PIECE, float(rho), sigma, sensitivity)

    @classmethod
    def laplace(cls, epsilon: float, scale: float | None = None, sensitivity: float | None = None) -> "Piece":
        return cls(LAPLACE_PIECE, float(epsilon), scale, sensitivity)

    @property
    def rho(self) -> float:
        """The piece in zCDP: ρ, or ε²/2 for a pure piece (Bun and Steinke 2016)."""
        return self.value if self.kind == GAUSSIAN_PIECE else pure_dp_to_zcdp(self.value)

    def to_json(self) -> dict:
        return {"mechanism": self.kind, "value": self.value, "scale": self.scale, "sensitivity": self.sensitivity}

    @classmethod
    def from_json(cls, spec: dict) -> "Piece":
        if spec.get("mechanism") not in (GAUSSIAN_PIECE, LAPLACE_PIECE):
            raise ValueError(f"unknown mechanism {spec.get('mechanism')!r} in a ledger charge")
        return cls(spec["mechanism"], float(spec["value"]), spec.get("scale"), spec.get("sensitivity"))


@dataclass(frozen=True)
class History:
    """What composition needs of a ledger's charges: the Gaussians' total ρ, the pure pieces' ε in
    charge order, the δs of δ events in all."""

    rho: float = 0.0
    epsilons: tuple[float, ...] = ()
    delta: float = 0.0

    def plus(self, pieces=(), delta: float = 0.0) -> "History":
        rho = self.rho + sum(p.value for p in pieces if p.kind == GAUSSIAN_PIECE)
        pure = tuple(p.value for p in pieces if p.kind == LAPLACE_PIECE)
        return History(rho, self.epsilons + pure, self.delta + delta)

    @property
    def zcdp_rho(self) -> float:
        return self.rho + sum(pure_dp_to_zcdp(e) for e in self.epsilons)


_PURE_PLDS: dict[tuple[float, ...], pld.PrivacyLossDistribution] = {}


def _pure_pld(epsilons: tuple[float, ...]) -> pld.PrivacyLossDistribution:
    """The PLD of the pure pieces composed, built on the longest prefix already composed (a ledger's
    history grows by appending, so each new charge composes once)."""
    known = _PURE_PLDS.get(epsilons)
    if known is not None:
        return known
    start = max((n for n in range(len(epsilons)) if epsilons[:n] in _PURE_PLDS), default=0)
    out = _PURE_PLDS[epsilons[:start]] if start else None
    for i in range(start, len(epsilons)):
        piece = pld.from_privacy_parameters(pld_common.DifferentialPrivacyParameters(epsilons[i], 0.0),
                                            value_discretization_interval=_LOSS_GRID)
        out = piece if out is None else out.compose(piece)
        if len(_PURE_PLDS) > 512:
            _PURE_PLDS.clear()
        _PURE_PLDS[epsilons[: i + 1]] = out
    return out


@lru_cache(maxsize=4096)
def pure_epsilon(epsilons: tuple[float, ...], delta: float) -> float:
    """The ε at `delta` of pure pieces composed by their PLDs (0 for none)."""
    if not epsilons:
        return 0.0
    if len(epsilons) == 1:
        return epsilons[0]  # one ε-DP piece is (ε, 0): no discretization needed
    return min(float(_pure_pld(epsilons).get_epsilon_for_delta(delta)), math.fsum(epsilons))


@dataclass(frozen=True)
class Accountant:
    """The Gaussian budget (ρ) a history leaves inside the declared (`epsilon`, `delta`); `total` caps it
    (the ledger's declared ρ, which the zCDP mode reaches exactly)."""

    epsilon: float
    delta: float
    total: float

    def zcdp_capacity(self, delta_spent: float) -> float:
        """ρ a history with no pure pieces may hold once δ events took `delta_spent` (approximate zCDP)."""
        if delta_spent <= 0:
            return self.total
        if delta_spent >= self.delta:
            return 0.0
        return min(self.total, epsilon_delta_to_zcdp(self.epsilon, self.delta - delta_spent))

    def remaining(self, history: History, exact: bool = True) -> float:
        """ρ of Gaussian noise that still fits (negative: the history is over the budget): the zCDP
        certificate's, or with `exact` the better of it and the PLD certificate's."""
        zcdp = self.zcdp_capacity(history.delta) - history.zcdp_rho
        if not exact or not history.epsilons:
            return zcdp
        certified = max(_split_remaining(self, history), _rdp_remaining(self, history))
        return max(zcdp, certified - TOLERANCE * self.total)

    def fits(self, history: History, exact: bool = True, slack: float = TOLERANCE) -> bool:
        """Whether the history is within the budget (`slack` × total of ρ tolerated: at most `TOLERANCE`)."""
        if slack > TOLERANCE:
            raise ValueError(f"a slack over {TOLERANCE} of the total would let the exact certificates overspend")
        return self.remaining(history, exact) >= -slack * self.total


@lru_cache(maxsize=1024)
def _split_remaining(acc: Accountant, history: History) -> float:
    """The PLD certificate: max over ε_P and α of the ρ that the Gaussian part may hold at (ε − ε_P,
    δ_left − δ_P(ε_P)), less the history's ρ; δ_left is δ less the δ events', δ_P(ε_P) the pure part's
    exact privacy profile (one vectorized PLD query over a grid of ε_P), and the Gaussian part's ρ at
    each α the CKS bound solved for ρ (every grid point is a valid certificate; the grid only
    decides how close to the best one it gets)."""
    left = acc.delta - history.delta - _slack_delta(acc.epsilon)
    if left <= 0:
        return -math.inf
    top = pure_epsilon(history.epsilons, 0.0)  # the pure part's ε at δ_P = 0
    eps_p = np.linspace(0.0, min(top, acc.epsilon), _EPSILON_POINTS, endpoint=False)
    delta_p = np.asarray(_pure_pld(history.epsilons).get_delta_for_epsilon(eps_p), dtype=float) \
        if len(history.epsilons) > 1 else _one_pure_delta(history.epsilons[0], eps_p)
    eps_p, delta_p = np.append(eps_p, top), np.append(delta_p, 0.0)
    eps_g, delta_g = acc.epsilon * (1 + _EPSILON_SLACK) - eps_p, left - delta_p
    if history.rho == 0 and np.any((eps_g >= 0) & (delta_g >= 0)):
        best = 0.0  # the pure part alone fits; a Gaussian part of ρ = 0 needs neither ε nor δ
    else:
        best = -math.inf
    ok = (eps_g > 0) & (delta_g > 0)
    if np.any(ok):
        e, d = eps_g[ok][:, None], np.log(delta_g[ok])[:, None]
        a = _ALPHAS[None, :]
        rho = (e + (d + np.log(a - 1) - a * np.log1p(-1 / a)) / (a - 1)) / a
        best = max(best, float(np.max(rho)))
    return min(best, acc.total) - history.rho


def _slack_delta(epsilon: float) -> float:
    """The δ that accepting ε × (1 + `_EPSILON_SLACK`) for ε costs: δ(ε) ≤ δ(ε') + e^(ε' − ε) − 1."""
    return math.expm1(epsilon * _EPSILON_SLACK)


def _one_pure_delta(epsilon: float, at: np.ndarray) -> np.ndarray:
    """The exact privacy profile δ(ε') of one ε-DP piece (its dominating pair is randomized response)."""
    # (e^ε − e^ε') / (1 + e^ε), divided through by e^ε so that no large ε overflows
    return np.maximum(-np.expm1(at - epsilon) / (1 + math.exp(-epsilon)), 0.0)


@lru_cache(maxsize=1024)
def _rdp_remaining(acc: Accountant, history: History) -> float:
    """The RDP certificate: max over α of the ρ with (α − 1)(αρ + D_α − ε) + log((1 − 1/α)^α / (α − 1))
    ≤ log δ_left (CKS Proposition 12), D_α the pure pieces' Rényi divergences, less the history's ρ."""
    left = acc.delta - history.delta - _slack_delta(acc.epsilon)
    if left <= 0:
        return -math.inf
    a = _ALPHAS
    divergence = sum(_randomized_response_rdp(e) for e in history.epsilons)
    rho = (acc.epsilon * (1 + _EPSILON_SLACK) - divergence
           + (math.log(left) + np.log(a - 1) - a * np.log1p(-1 / a)) / (a - 1)) / a
    return min(float(np.max(rho)), acc.total) - history.rho


@lru_cache(maxsize=4096)
def _randomized_response_rdp(epsilon: float) -> np.ndarray:
    """D_α of randomized response at ε over `_ALPHAS`: log(p^α q^(1−α) + q^α p^(1−α)) / (α − 1)."""
    a = _ALPHAS
    log_p, log_q = -np.logaddexp(0.0, -epsilon), -np.logaddexp(0.0, epsilon)
    out = np.logaddexp(a * log_p + (1 - a) * log_q, a * log_q + (1 - a) * log_p) / (a - 1)
    out.flags.writeable = False
    return out
