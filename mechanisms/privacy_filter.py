"""Composition of a mixed history of charges, as a privacy filter: discrete Gaussians, discrete Laplaces
and δ events, each chosen after the answers before it.

A ledger's charges are `Piece`s: a discrete Gaussian (ρ-zCDP, ρ = Δ²/2σ²), a discrete Laplace (pure
ε-DP, ε = Δ/b) or the δ of a partition selection's threshold. A `History` is what composition needs
of them: the Gaussians' total ρ, the pure pieces' ε (in charge order), the δs' sum.

Analysts choose each share after seeing earlier answers, so the ledger is a *privacy filter*: its rule
for accepting a charge must keep the declared (ε, δ) for every adaptive strategy, not only for a history
fixed in advance (Rogers, Roth, Ullman and Vadhan 2016). `Accountant` accepts a history when either of
two filters does, each valid under full adaptivity:

- **zCDP** (δ): every piece in ρ (an ε-DP piece is ε²/2-zCDP, Bun and Steinke 2016), the ρs add up to at
  most the ledger's ρ at the δ that δ events left (the CKS conversion, `mechanisms.accounting`); a Rényi
  filter at every order (Feldman and Zrnic 2021). The ledger's zCDP mode is this filter alone.
- **Pure** (δ = 0): no Gaussian piece and no δ event, and the pure pieces' ε add up to at most the
  declared ε (basic composition, a filter: the privacy loss of each piece is at most its ε, on every
  path). Checked in exact rational arithmetic: no slack.

A transcript either filter accepted has P[loss > ε] ≤ δ + 0 (the union of the two events; each is the
transcript its filter alone would have stopped at), so accepting either keeps (ε, δ). This is what makes
one COUNT spending the whole budget as discrete Laplace (std 1.36 at ε = 1, against the Gaussian's 4.53),
or ten Laplace counts of ε/10 each, fit. Tighter certificates of a *fixed* history (composing the pure
pieces by their privacy-loss distributions, or Rényi divergences at the order that suits the history)
are not filters: an analyst choosing the next shares from an answer's sign can make the transcript's δ
1.37 times the declared one while every history it could end with passes them
(`tests/test_red_team_accounting.py`).

The Gaussian part stays in zCDP on purpose: a discrete Gaussian's privacy loss is *not* dominated by the
continuous Gaussian's at the same σ (at σ = 4, Δ = 1, ε = 1 its exact δ is 3.06e-6 against 2.92e-6,
`tests/test_privacy_filter.py`); the zCDP bound holds for it (Canonne, Kamath, Steinke 2020).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from mechanisms.accounting import epsilon_delta_to_zcdp, pure_dp_to_zcdp

__all__ = ["GAUSSIAN_PIECE", "LAPLACE_PIECE", "TOLERANCE", "Piece", "History", "Accountant"]

GAUSSIAN_PIECE, LAPLACE_PIECE = "discrete_gaussian", "discrete_laplace"
# Callers accept a history whose remaining ρ is within TOLERANCE × total below 0 (floating-point sums of
# ρ, in the zCDP filter only; the pure filter is exact).
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


@dataclass(frozen=True)
class Accountant:
    """Whether a history fits inside the declared (`epsilon`, `delta`) by either filter (the module
    docstring), and what it leaves; `total` is the ledger's ρ, which the zCDP filter reaches exactly."""

    epsilon: float
    delta: float
    total: float

    def zcdp_capacity(self, delta_spent: float) -> float:
        """ρ a history may hold once δ events took `delta_spent` (approximate zCDP)."""
        if delta_spent <= 0:
            return self.total
        if delta_spent >= self.delta:
            return 0.0
        return min(self.total, epsilon_delta_to_zcdp(self.epsilon, self.delta - delta_spent))

    def pure_fits(self, history: History) -> bool:
        """The pure filter: no Gaussian piece, no δ event, Σ ε ≤ the declared ε (exactly, in rationals)."""
        return history.rho == 0 and history.delta == 0 and \
            sum(map(Fraction, history.epsilons), Fraction(0)) <= Fraction(self.epsilon)

    def remaining(self, history: History, exact: bool = True) -> float:
        """What the history leaves, in ρ (negative: over the budget): by the zCDP filter, the ρ still free;
        with `exact`, a history only the pure filter accepts leaves the fraction of the budget its unspent ε
        is ((ε − Σ ε) / ε of `total`, the share a Laplace of that ε takes: `planner.noise_choice`). Only
        `fits` says whether a history is accepted: a Gaussian added to a pure history leaves the pure filter."""
        zcdp = self.zcdp_capacity(history.delta) - history.zcdp_rho
        if exact and history.epsilons and self.pure_fits(history):
            return max(zcdp, (1 - sum(history.epsilons) / self.epsilon) * self.total, 0.0)
        return zcdp

    def fits(self, history: History, exact: bool = True, slack: float = TOLERANCE) -> bool:
        """Whether either filter (only the zCDP one unless `exact`) accepts the history (`slack` × total of ρ
        tolerated by the zCDP filter: at most `TOLERANCE`)."""
        if slack > TOLERANCE:
            raise ValueError(f"a slack over {TOLERANCE} of the total is more than the ledger tolerates")
        if exact and history.epsilons and self.pure_fits(history):
            return True
        return self.zcdp_capacity(history.delta) - history.zcdp_rho >= -slack * self.total
