"""The Plan: what to measure, with which share of the budget, and the error to expect."""

from __future__ import annotations

from dataclasses import dataclass, field
from math import sqrt

from mechanisms.accounting import zcdp_to_epsilon
from mechanisms.marginals import Clique
from mechanisms.matrices import Matrix
from mechanisms.measurement import GAUSSIAN, ExactAnswer, Measurement, exact_answer, release
from mechanisms.workload import Block

TOTAL_SQUARED = "total"  # minimize the total weighted squared error
MAX_ERROR = "max"  # minimize the largest normalized per-query RMSE
OBJECTIVES = (TOTAL_SQUARED, MAX_ERROR)


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
    contribution: int = 1  # rows per privacy unit: `sensitivity` already includes it

    def query(self, domain) -> Matrix | None:
        """The matrix applied to the clique's marginal (None: the identity)."""
        if self.block is not None:
            return self.block.matrix(domain)
        return self.strategy

    def release(self, counts, domain, noise: str, rng, exact: ExactAnswer | None = None) -> Measurement:
        """Measure the clique's exact counts with this measurement's noise (after the charge).

        `exact` (from `exact_answer` on the same counts) saves recomputing the exact
        answer when the same measurement is drawn many times (Monte-Carlo checks).
        """
        answer = exact_answer(counts, self.query(domain), noise) if exact is None else exact
        values, cal = release(answer, noise, self.share, rng, self.contribution)
        key = None if self.block is None else self.block.fingerprint(domain)
        return Measurement(self.clique, noise, self.share, cal.variance, values, key, self.strategy)

    def describe(self) -> str:
        if self.block is not None:
            what = f"query {self.block.name!r} directly"
        elif self.strategy is not None:
            what = f"{self.label or 'strategy'} on {_clique(self.clique)}"
        else:
            what = f"marginal {_clique(self.clique)}"
        per_unit = f" ({self.contribution} rows per unit)" if self.contribution > 1 else ""
        return f"{what}: sensitivity {self.sensitivity:g}{per_unit}, noise std {sqrt(self.variance):.4g}"


@dataclass(frozen=True)
class Alternative:
    """A strategy considered for the whole workload and its expected error."""

    name: str
    total_squared_error: float  # weighted (each block normalized by its sensitivity)
    rows: float

    @property
    def rmse(self) -> float:
        return sqrt(self.total_squared_error / max(self.rows, 1e-300))


@dataclass
class GroupPlan:
    """Blocks over connected attributes, the family that won for them, and the runners-up."""

    attributes: tuple[str, ...]
    blocks: list[str]
    family: str
    unit_errors: dict[str, float]  # family -> expected weighted squared error at unit budget


@dataclass(frozen=True)
class AdaptivePlan:
    """An adaptive procedure (AIM, RAP) run on `blocks` with budget `share`, and its simulated error."""

    procedure: object  # a `planner.adaptive.Procedure`
    share: float
    blocks: tuple[Block, ...]
    prediction: object  # a `planner.adaptive.Prediction`

    def describe(self) -> str:
        p = self.prediction
        return (
            f"run {self.procedure.name.upper()} on {len(self.blocks)} queries; error predicted by simulation on "
            f"public synthetic data of the same domain and size ({_spread(p.spread)}, {p.seconds:.1f} s per run; "
            f"the stand-in is a mixture of product distributions, so data with other dependence, e.g. chains, "
            f"can differ by several times)"
        )


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
    groups: list[GroupPlan] = field(default_factory=list)
    objective: str = TOTAL_SQUARED
    free: list[str] = field(default_factory=list)  # blocks answered from earlier measurements
    free_source: dict[str, str] = field(default_factory=dict)  # a free block -> the model answering it
    remeasured: dict[str, str] = field(default_factory=dict)  # a determined block measured again -> why
    planning_seconds: float = 0.0
    adaptive: AdaptivePlan | None = None
    notes: list[str] = field(default_factory=list)  # e.g. why adaptive procedures were not considered
    fit_seconds: float = 0.0  # the least-squares fit on the noise variances alone (predicts reconstruction)
    time: object = None  # a `planner.timing.TimePrediction`, set by whoever knows the backend's speed
    even_split_rmse: dict[str, float] = field(default_factory=dict)  # block -> RMSE per row under an even split

    @property
    def cost(self) -> float:
        return sum(m.share for m in self.measurements) + (self.adaptive.share if self.adaptive else 0.0)

    def cost_text(self, share: float | None = None) -> str:
        share = self.cost if share is None else share
        if self.noise == GAUSSIAN:
            eps = zcdp_to_epsilon(share, self.delta) if share > 0 else 0.0
            return f"ρ={share:.4g} (ε={eps:.4g} at δ={self.delta:g})"
        return f"ε={share:.4g} (pure DP)"

    def explain(self) -> str:
        """A readable plan tree: groups, family, measurements, expected RMSE, alternatives."""
        objective = "total weighted squared error" if self.objective == TOTAL_SQUARED else "largest per-query RMSE"
        if self.even_split_rmse:
            objective += ", no query's error above its even split (each query measured as asked with budget/queries)"
        lines = [
            f"Plan: {self.chosen}, {self.noise} noise, cost {self.cost_text()}",
            f"  objective: minimize the {objective}; "
            + ("" if self.time is not None else f"planned in {self.planning_seconds * 1000:.0f} ms, ")
            + (f"{self.adaptive.procedure.name.upper()} reads its candidate marginals in one scan"
             if self.adaptive is not None else f"{len(self.measurements)} measurement(s) in one scan"),
        ]
        placed: set[int] = set()
        for i, g in enumerate(self.groups):
            last = i == len(self.groups) - 1
            lines.append(f"  {'└' if last else '├'}─ group {{{', '.join(g.attributes) or 'total'}}}: {g.family}"
                         + _runners_up(g))
            pad = "     " if last else "  │  "
            for j, m in enumerate(self.measurements):
                if j in placed or m.family != g.family or not _belongs(m, g, self.groups):
                    continue
                placed.add(j)
                lines.append(f"{pad}• measure {m.describe()}; cost {self.cost_text(m.share)}")
            for name in g.blocks:
                kind = "predicted RMSE (simulated)" if self.adaptive is not None else "expected RMSE"
                even = f" (even split {self.even_split_rmse[name]:.4g})" if name in self.even_split_rmse else ""
                lines.append(f"{pad}  {name}: {kind} {self.expected_rmse.get(name, 0.0):.4g}{even}")
                if name in self.remeasured:
                    lines.append(f"{pad}    ({self.remeasured[name]})")
        for j, m in enumerate(self.measurements):
            if j not in placed:
                lines.append(f"  • measure {m.describe()}; cost {self.cost_text(m.share)}")
        if self.adaptive is not None:
            lines.append(f"  • {self.adaptive.describe()}; cost {self.cost_text(self.adaptive.share)}")
        if self.time is not None:
            lines.append(f"  time: {self.time.describe()}")
        for note in self.notes:
            lines.append(f"  note: {note}")
        if self.free:
            lines.append("  answered free from earlier measurements:")
            for name in self.free:
                rmse = self.expected_rmse.get(name, 0.0)
                source = self.free_source.get(name, "the model")
                error = f"expected RMSE {rmse:.4g}" if rmse == rmse else f"answered by the {source}, no error bound"
                lines.append(f"    {name}: {error}")
        if self.alternatives:
            lines.append("  alternatives for the whole workload (RMSE per row, in units of each query's sensitivity to one row):")
            best = min(a.total_squared_error for a in self.alternatives)
            for a in sorted(self.alternatives, key=lambda a: a.total_squared_error):
                mark = "  <- chosen" if a.name == self.chosen else ""
                ratio = a.total_squared_error / best if best > 0 else 1.0
                lines.append(f"    {a.name}: {a.rmse:.4g} ({ratio:.3g}x the best squared error){mark}")
        return "\n".join(lines)


def _spread(spread: float) -> str:
    return "one run" if spread != spread else f"±{100 * spread:.0f}% across seeds"


def _belongs(m: PlannedMeasurement, g: GroupPlan, groups: list[GroupPlan]) -> bool:
    """A measurement is shown under the group of its own clique, else the first that contains it."""
    if m.clique == g.attributes:
        return True
    if any(other.attributes == m.clique and other.family == m.family for other in groups):
        return False
    return set(m.clique) <= set(g.attributes)


def _runners_up(g: GroupPlan) -> str:
    """How the other families compare on this group alone (squared error, as multiples)."""
    mine = g.unit_errors.get(g.family, 0.0)
    others = sorted((e, n) for n, e in g.unit_errors.items() if n != g.family and e < float("inf"))
    if not others or mine <= 0:
        return ""
    text = ", ".join(f"{n} {e / mine:.3g}x" for e, n in others)
    if others[0][0] < mine * (1 - 1e-9):
        return f" (alone: {text}; joined for measurements shared with other groups)"
    return f" (alone: {text})"


def _clique(clique: Clique) -> str:
    return "(" + ", ".join(clique) + ")" if clique else "(total)"
