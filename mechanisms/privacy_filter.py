"""Composition of a mixed history of charges, as a privacy filter: discrete Gaussians, discrete Laplaces
and δ events, each chosen after the answers before it.

A ledger's charges are `Piece`s: a discrete Gaussian (ρ-zCDP, ρ = Δ²/2σ²) or a discrete Laplace (pure
ε-DP, ε = Δ/b), and δ events: the δ of a partition selection's threshold. A `History` is what composition needs
of them: the Gaussians' total ρ, the pure pieces' ε (in charge order), the δs' sum.

Analysts choose each share after seeing earlier answers, so the ledger is a *privacy filter*: its rule
for accepting a charge must keep the declared (ε, δ) for every adaptive strategy, not only for a history
fixed in advance (Rogers, Roth, Ullman and Vadhan 2016). The declared δ is split *in advance* (fixed
when the ledger is created) into `events`, the most that δ events (partition selections' thresholds) may
spend in all, and δ − `events` for converting the zCDP filter's ρ. `Accountant` accepts a history when
either of two filters does, each valid under full adaptivity, and both cap the δ events at `events`:

- **zCDP**: every piece in ρ (an ε-DP piece is ε²/2-zCDP, Bun and Steinke 2016), the ρs add up to at
  most `total`, the ρ whose ε at δ − `events` is the declared ε (the CKS conversion,
  `mechanisms.accounting`); a Rényi filter at every order (Feldman and Zrnic 2021). The ledger's zCDP
  mode is this filter alone.
- **Pure**: no Gaussian piece, and the pure pieces' ε add up to at most the declared ε (basic
  composition, a filter: outside the δ events the privacy loss of each piece is at most its ε, on every
  path). Checked in exact rational arithmetic: no slack.

Why the union keeps (ε, δ): each δ event happens with probability at most its δ given the past, and
on every path the δs add up to at most `events`, so some δ event happens with probability at most
`events` (a union bound over the steps, each conditioned on the past). Outside them, a path with a
Gaussian piece had every prefix accepted by the zCDP filter (histories only grow), so it is the path
the zCDP filter alone would produce, and its loss exceeds ε with probability at most δ − `events`; a
path without one has loss at most ε. P[loss > ε] ≤ (δ − `events`) + `events` = δ. The split must be
fixed in advance: lowering the zCDP filter's ρ only on paths that released keys (the δ left after
the events, chosen as the analyst goes) is not a filter, as the tighter certificates below are not.

This is what makes one COUNT spending the whole budget as discrete Laplace (std 1.36 at ε = 1, against
the Gaussian's 4.53), ten Laplace counts of ε/10 each, or a key release by discrete Laplace beside
them fit. Tighter certificates of a *fixed* history (composing the pure pieces by their privacy-loss
distributions, or Rényi divergences at the order that suits the history) are not filters: an analyst
choosing the next shares from an answer's sign can make the transcript's δ 1.37 times the declared one
while every history it could end with passes them (`tests/test_red_team_accounting.py`).

The Gaussian part stays in zCDP on purpose: a discrete Gaussian's privacy loss is *not* dominated by the
continuous Gaussian's at the same σ (at σ = 4, Δ = 1, ε = 1 its exact δ is 3.06e-6 against 2.92e-6,
`tests/test_privacy_filter.py`); the zCDP bound holds for it (Canonne, Kamath, Steinke 2020).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from mechanisms.accounting import epsilon_delta_to_zcdp, pure_dp_to_zcdp, zcdp_to_epsilon

__all__ = ["GAUSSIAN_PIECE", "LAPLACE_PIECE", "TOLERANCE", "Piece", "History", "Accountant", "events_within", "zcdp_total"]

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


def events_within(delta: float, events: float) -> bool:
    """Whether δ events adding up to `delta` stay within the `events` set apart for them (floating-point sums of
    δ tolerated to 1e-12 relative)."""
    return delta <= events * (1 + 1e-12)


def zcdp_total(total: float, delta: float, events: float) -> float:
    """The zCDP filter's ρ for a ledger declared as ρ `total` at `delta` with `events` of δ set apart for δ
    events: the ρ whose ε at δ − `events` is the declared ε(`total`, `delta`)."""
    if events <= 0:
        return total
    if events >= delta:
        return 0.0
    return min(total, epsilon_delta_to_zcdp(zcdp_to_epsilon(total, delta), delta - events))


@dataclass(frozen=True)
class Accountant:
    """Whether a history fits inside the declared (`epsilon`, `delta`) by either filter (the module
    docstring), and what it leaves; `total` is the zCDP filter's ρ (`zcdp_total`), which it reaches exactly,
    and `events` the δ set apart for δ events."""

    epsilon: float
    delta: float
    total: float
    events: float = 0.0

    def events_fit(self, history: History) -> bool:
        """Whether the history's δ events stay within the δ set apart for them (both filters ask it)."""
        return events_within(history.delta, self.events)

    def pure_fits(self, history: History) -> bool:
        """The pure filter: no Gaussian piece, δ events within `events`, Σ ε ≤ the declared ε (exactly)."""
        return history.rho == 0 and self.events_fit(history) and \
            sum(map(Fraction, history.epsilons), Fraction(0)) <= Fraction(self.epsilon)

    def remaining(self, history: History, exact: bool = True) -> float:
        """What the history leaves, in ρ (negative: over the budget): by the zCDP filter, the ρ still free;
        with `exact`, a history only the pure filter accepts leaves the fraction of the budget its unspent ε
        is ((ε − Σ ε) / ε of `total`, the share a Laplace of that ε takes: `planner.noise_choice`). Only
        `fits` says whether a history is accepted: a Gaussian added to a pure history leaves the pure filter,
        and δ events past `events` fit neither."""
        zcdp = self.total - history.zcdp_rho
        if exact and history.epsilons and self.pure_fits(history):
            return max(zcdp, (1 - sum(history.epsilons) / self.epsilon) * self.total, 0.0)
        return zcdp

    def fits(self, history: History, exact: bool = True, slack: float = TOLERANCE) -> bool:
        """Whether either filter (only the zCDP one unless `exact`) accepts the history (`slack` × total of ρ
        tolerated by the zCDP filter: at most `TOLERANCE`)."""
        if slack > TOLERANCE:
            raise ValueError(f"a slack over {TOLERANCE} of the total is more than the ledger tolerates")
        if not self.events_fit(history):
            return False
        if exact and history.epsilons and self.pure_fits(history):
            return True
        return self.total - history.zcdp_rho >= -slack * self.total
