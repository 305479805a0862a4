"""The Plan: what to measure, with which share of the budget, and the error to expect."""

from __future__ import annotations

from dataclasses import dataclass, field
from math import sqrt

from mechanisms.accounting import zcdp_to_epsilon
from mechanisms.marginals import Clique
from mechanisms.matrices import Matrix
from mechanisms.measurement import GAUSSIAN, Measurement, measure
from mechanisms.workload import Block


@dataclass(frozen=True)
class PlannedMeasurement:
    """One measurement on a clique: the marginal, a strategy matrix, or one block directly."""

    clique: Clique
    block: Block | None
    share: float  # ρ for Gaussian noise, ε for Laplace noise
    sensitivity: float
    variance: float  # exact per-entry variance of the noise it will get
    family: str
    strategy: Matrix | None = None
    label: str | None = None

    def query(self, domain) -> Matrix | None:
        """The matrix applied to the clique's marginal (None: the identity)."""
        if self.block is not None:
            return self.block.matrix(domain)
        return self.strategy

    def release(self, counts, domain, noise: str, rng) -> Measurement:
        """Measure the clique's exact counts with this measurement's noise (after the charge)."""
        values, cal = measure(counts, self.query(domain), noise, self.share, rng)
        key = None if self.block is None else self.block.fingerprint(domain)
        return Measurement(self.clique, noise, self.share, cal.variance, values, key, self.strategy)

    def describe(self) -> str:
        if self.block is not None:
            what = f"query {self.block.name!r}"
        elif self.strategy is not None:
            what = f"{self.label or 'strategy'} on {_clique(self.clique)}"
        else:
            what = f"marginal {_clique(self.clique)}"
        return f"{what}: sensitivity {self.sensitivity:g}, noise std {sqrt(self.variance):.4g}"


@dataclass(frozen=True)
class Alternative:
    """A strategy considered for the whole workload and its expected error."""

    name: str
    total_squared_error: float
    rows: int

    @property
    def rmse(self) -> float:
        return sqrt(self.total_squared_error / max(self.rows, 1))


@dataclass
class Plan:
    """Measurements with their budget shares, and every block's expected RMSE.

    Planning reads no data and spends nothing; `cost` is what executing the
    plan will charge (ρ for Gaussian noise, ε for Laplace noise).
    """

    noise: str
    delta: float
    measurements: list[PlannedMeasurement]
    family_of: dict[str, str]  # block name -> family
    expected_rmse: dict[str, float]  # block name -> RMSE per row
    alternatives: list[Alternative]
    chosen: str
    free: list[str] = field(default_factory=list)  # blocks answered from earlier measurements

    @property
    def cost(self) -> float:
        return sum(m.share for m in self.measurements)

    def cost_text(self, share: float | None = None) -> str:
        share = self.cost if share is None else share
        if self.noise == GAUSSIAN:
            eps = zcdp_to_epsilon(share, self.delta) if share > 0 else 0.0
            return f"ρ={share:.6g} (ε={eps:.4g} at δ={self.delta:g})"
        return f"ε={share:.6g} (pure DP)"

    def explain(self) -> str:
        """A readable plan: strategy, measurements, expected RMSE per query, alternatives."""
        lines = [f"Plan: {self.chosen} with {self.noise} noise, total cost {self.cost_text()}"]
        if self.measurements:
            lines.append("  Measurements:")
            for m in self.measurements:
                lines.append(f"    - [{m.family}] {m.describe()}; cost {self.cost_text(m.share)}")
        else:
            lines.append("  No new measurement: every query is answered from earlier ones, free.")
        lines.append("  Expected RMSE per query (per output row):")
        for name, rmse in self.expected_rmse.items():
            tag = "free" if name in self.free else self.family_of.get(name, "")
            lines.append(f"    - {name}: {rmse:.4g}  [{tag}]")
        if self.alternatives:
            lines.append("  Alternatives (workload RMSE at the same budget):")
            best = min(a.total_squared_error for a in self.alternatives)
            for a in self.alternatives:
                mark = "  <- chosen" if a.name == self.chosen else ""
                ratio = a.total_squared_error / best if best > 0 else 1.0
                lines.append(f"    - {a.name}: {a.rmse:.4g} ({ratio:.3g}x the best squared error){mark}")
        return "\n".join(lines)


def _clique(clique: Clique) -> str:
    return "(" + ", ".join(clique) + ")" if clique else "(total)"
