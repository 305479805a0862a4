"""Privacy–utility fronts of a workload: (ε, expected RMSE) for the planner and each strategy (EXPLAIN PARETO).

Planning reads no data and spends nothing, so the whole front is free to compute.

**Linear plans: exact, one costing per strategy.** At a fixed strategy every noise variance
is Δ²/(2ρ) (Gaussian) or 2Δ²/ε² (Laplace), so a linear plan's expected error is its error
at a unit budget times 1/ρ or 1/ε²: its RMSE is an exact power law of the budget,
``rmse(b) = rmse(1) · b^(-k/2)`` (k = `budget_exponent`), and the plan's structure (family
per group, budget fractions) does not depend on the budget either. `linear_front` therefore
plans once at a unit budget and reads every strategy's whole curve from it: each family's
``unit_error`` (the planner's `Alternative`s) and the planner's own choice (its chosen
alternative, `mixed` included). These are the planner's cost model, continuous noise; the
discrete noise it draws has a variance at most 2⁻²⁵ relative above it (σ² rounded up) and
otherwise never more (a discrete Gaussian or Laplace has a smaller variance than the
continuous one: noticeably so only for tiny noise, σ² < 2 or a Laplace scale near 1). ε is
converted to ρ at δ by `mechanisms.accounting` for Gaussian noise; Laplace noise is charged
in ε. With earlier measurements (`existing`) the power law no longer holds (they carry a
fixed part of the accuracy), so every ε is planned anew, as `planner.chart.error_curves` does.
Under the MAX_ERROR objective (the largest normalized per-query RMSE, what
`budget_for_accuracy` targets) each curve is the min-max plan of that strategy at a unit
budget, scaled the same way.

**Adaptive procedures (AIM, RAP): Bayesian optimization on stand-in data.** Their error
depends on the data and on their settings, so it is simulated (`planner.adaptive.simulation`:
public synthetic data of the table's domain and size, never the private table). Following
DPareto (Avent et al.; the seed, ``shared/research/seed_avent.md`` §3), the front over
(ε, settings) is found by Gaussian-process Bayesian optimization with a hypervolume
acquisition, under a bounded number of evaluations and a `PlanningLimit`. The seed fits one GP
per objective (log ε and log/logit error) and picks the next point by hypervolume
probability of improvement, ΔHV(mean)·PoI. Here ε is one of the inputs — the privacy oracle
is the identity, noiseless and known — so only log RMSE needs a GP, and the *expected*
hypervolume improvement in the (log ε, log RMSE) plane has a closed form (a sum over the
front's steps of E[max(0, h − Y)] for Gaussian Y), which is used instead of HVPoI. The GP
is ~60 lines of numpy/scipy (ARD RBF kernel, hyperparameters by maximizing the marginal
likelihood, Nelder–Mead from a few seeded starts): with at most a dozen points a library
(botorch/gpytorch, torch) would add far more than it serves. The first evaluation is the
planner's own configuration (AIM's defaults), then a seeded Latin-hypercube design, then BO
(`planner.bayes_front`) — but BO only from `BAYES_FROM` (24) simulations: measured as DPareto
was (32 points, 10 seeds, `benchmarks.dpareto`), its hypervolume gain over random search is
significant from 24 points and not at 12, so EXPLAIN PARETO's default 12 simulations are the
configuration and a Latin-hypercube design (no GP to fit).

`front_table` gives the rows of a result, `planner.chart.draw_front` the chart, and
`budget_for_rmse` the least ε on a front that reaches an RMSE target (for linear curves in
closed form, so it agrees with `budget_for_accuracy`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Sequence

import numpy as np

from mechanisms.accounting import epsilon_delta_to_zcdp, zcdp_to_epsilon
from mechanisms.aim import aim, workload_candidates
from mechanisms.marginals import Clique
from mechanisms.measurement import GAUSSIAN, LAPLACE, Measurement
from mechanisms.rap import RAPConfig
from mechanisms.workload import Block, Workload
from planner.adaptive import AIMProcedure, PROCEDURES, RAPProcedure, predict
from planner.adaptive.base import AdaptiveRelease
from planner.planning_limit import PlanningLimit, PlanningCancelled
from planner.families import FAMILIES, budget_exponent
from planner.plan import MAX_ERROR, OBJECTIVES, TOTAL_SQUARED, Plan
from planner.bayes_front import BAYES, MAX_EVALUATIONS, Knob, bayes_front
from planner.planner import expected_rmse, plan_workload

PLANNER = "planner"
DEFAULT_EPSILONS = tuple(float(e) for e in np.geomspace(0.01, 10.0, 13))  # quarter decades
# Linear plans are made at this budget (ρ or ε) and scaled: its noise is so large that the discrete noise's variance
# equals the continuous one to double precision, so the min-max objective's reweighting sees the cost model's errors.
REFERENCE_BUDGET = 1e-6
TIE = 1e-6  # relative: a point this close to a preferred one at the same ε is a tie (the planner wins)
ADAPTIVE_SECONDS = 120.0  # default planning budget (seconds of work) of the adaptive search
# Bayesian optimization from this many simulations: its hypervolume gain over random search was
# significant from 24 points over 10 seeds (DPareto's SVT example) and not at 12 (SVT, and AIM's
# space over 3 seeds): `benchmarks.dpareto`, RESULTS.md (issue 35, item 5).
BAYES_FROM = 24
FRONT_COLUMNS = ("epsilon", "budget", "expected_rmse", "strategy", "settings", "source")


@dataclass(frozen=True)
class FrontPoint:
    """One (ε, RMSE) point: the strategy that reaches it and the budget the ledger would charge."""

    epsilon: float
    rmse: float  # TOTAL_SQUARED: weighted RMSE per row; MAX_ERROR: largest normalized RMSE
    strategy: str  # "planner", a family's name, or an adaptive procedure's ("aim", "rap")
    budget: float  # ρ (Gaussian) or ε (Laplace)
    detail: str = ""  # the planner's plan (a family or "mixed"); an adaptive procedure's settings
    exact: bool = True  # False: simulated on public stand-in data
    settings: tuple[tuple[str, float], ...] = ()


@dataclass
class Front:
    """A workload's privacy–utility front: the non-dominated points, and every strategy's curve.

    `points` are non-dominated (ε ascending, RMSE strictly descending): at each ε, which
    strategy wins. `curves` holds every evaluated point per strategy. `laws` holds, for each
    strategy whose RMSE is exactly a power law of the budget, its RMSE at a unit budget.
    """

    noise: str
    delta: float
    objective: str
    points: list[FrontPoint]
    curves: dict[str, list[FrontPoint]]
    laws: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    evaluations: int = 0  # adaptive simulations run

    @property
    def exponent(self) -> int:
        return budget_exponent(self.noise)

    def budget(self, epsilon: float) -> float:
        return to_budget(epsilon, self.noise, self.delta)

    def epsilon(self, budget: float) -> float:
        return to_epsilon(budget, self.noise, self.delta)

    def rmse_at(self, strategy: str, epsilon: float) -> float:
        """The exact RMSE of a power-law strategy at any ε."""
        return self.laws[strategy] * self.budget(epsilon) ** (-self.exponent / 2)

    def table(self) -> list[tuple]:
        return front_table(self.points)

    def merged(self, other: "Front") -> "Front":
        """One front of both (same noise, δ and objective): the envelope is taken again."""
        if (self.noise, self.delta, self.objective) != (other.noise, other.delta, other.objective):
            raise ValueError("fronts of different noise, δ or objective cannot be merged")
        curves = {**self.curves, **other.curves}
        return Front(self.noise, self.delta, self.objective, envelope(curves), curves, {**self.laws, **other.laws},
                     self.notes + other.notes, self.seconds + other.seconds, self.evaluations + other.evaluations)


# --- budgets -----------------------------------------------------------------------------------------


def to_budget(epsilon: float, noise: str, delta: float) -> float:
    """The ledger's budget for ε: ρ at δ (Gaussian noise, `mechanisms.accounting`) or ε itself (Laplace)."""
    if not epsilon > 0 or math.isinf(epsilon):
        raise ValueError(f"ε must be positive and finite, got {epsilon}")
    if noise == LAPLACE:
        return float(epsilon)
    if not 0 < delta < 1:
        raise ValueError("a Gaussian front in ε needs 0 < δ < 1")
    return epsilon_delta_to_zcdp(epsilon, delta)


def to_epsilon(budget: float, noise: str, delta: float) -> float:
    return float(budget) if noise == LAPLACE else zcdp_to_epsilon(budget, delta)


# --- the envelope --------------------------------------------------------------------------------------


def dominates(a: FrontPoint, b: FrontPoint) -> bool:
    """`a` is at least as good in ε and RMSE, and better in one."""
    return a.epsilon <= b.epsilon and a.rmse <= b.rmse and (a.epsilon < b.epsilon or a.rmse < b.rmse)


def envelope(curves: dict[str, list[FrontPoint]]) -> list[FrontPoint]:
    """The non-dominated points of all curves, ε ascending: which strategy wins where.

    Within `TIE` (relative) of the best at one ε, the strategy listed first in `curves`
    wins (the planner, then the families in `FAMILIES` order); a point is kept only if its
    RMSE is lower than every kept point's at a smaller ε by more than `TIE`.
    """
    order = {name: i for i, name in enumerate(curves)}
    by_epsilon: dict[float, list[FrontPoint]] = {}
    for name, points in curves.items():
        for p in points:
            if math.isfinite(p.rmse):
                by_epsilon.setdefault(p.epsilon, []).append(p)
    out: list[FrontPoint] = []
    best = math.inf
    for eps in sorted(by_epsilon):
        here = by_epsilon[eps]
        least = min(p.rmse for p in here)
        winner = min((p for p in here if p.rmse <= least * (1 + TIE)), key=lambda p: (order[p.strategy], p.rmse))
        if winner.rmse < best * (1 - TIE):
            out.append(winner)
            best = winner.rmse
    return out


# --- linear plans: exact -------------------------------------------------------------------------------


def _counted(workload: Workload) -> list[Block]:
    return [b for b in workload.blocks if b.terms]


def workload_rmse(workload: Workload, rmse: dict[str, float], objective: str) -> float:
    """TOTAL_SQUARED: the root of the weighted mean squared error per row (the planner's objective,
    as `planner.chart.error_curves` draws it); MAX_ERROR: the largest per-row RMSE in units of the
    block's L2 sensitivity (as `budget_for_accuracy` targets it)."""
    blocks = _counted(workload)
    domain = workload.domain
    if objective == MAX_ERROR:
        return max((rmse[b.name] / max(b.sensitivity(domain, 2), 1e-300) for b in blocks), default=0.0)
    rows = sum(b.weight * b.num_rows(domain) for b in blocks)
    total = sum(b.weight * b.num_rows(domain) * rmse[b.name] ** 2 for b in blocks)
    return math.sqrt(total / max(rows, 1e-300))


def _continuous_rmse(workload: Workload, plan: Plan) -> dict[str, float]:
    """Each block's expected RMSE under the plan with continuous noise (the cost model's variances)."""
    measurements = []
    for m in plan.measurements:
        variance = m.sensitivity**2 / (2 * m.share) if plan.noise == GAUSSIAN else 2 * m.sensitivity**2 / m.share**2
        measurements.append(replace(m, variance=variance))
    return expected_rmse(workload, measurements)


def linear_front(
    workload: Workload,
    epsilons: Sequence[float] | None = None,
    noise: str = GAUSSIAN,
    delta: float = 0.0,
    existing: Iterable[Measurement | tuple[Clique, float]] = (),
    contribution: int = 1,
    objective: str = TOTAL_SQUARED,
    limit: PlanningLimit | None = None,
) -> Front:
    """The exact (ε, expected RMSE) front of the planner's choice and of each strategy family.

    Without `existing` measurements, one plan (at `REFERENCE_BUDGET`) gives every curve (an
    exact power law, see the module doc); with them, each ε is planned anew (the family curves
    then leave the earlier measurements out, as the planner's alternatives do: an upper
    bound on what they reach). `epsilons` default to `DEFAULT_EPSILONS`.
    """
    started = time.perf_counter()
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}")
    epsilons = sorted({float(e) for e in (DEFAULT_EPSILONS if epsilons is None else epsilons)})
    if not epsilons:
        raise ValueError("a front needs at least one ε")
    budgets = [to_budget(e, noise, delta) for e in epsilons]
    existing = list(existing)
    k = budget_exponent(noise)
    curves: dict[str, list[FrontPoint]] = {PLANNER: []}
    laws: dict[str, float] = {}
    notes: list[str] = []
    family_names = [cls.name for cls in FAMILIES]

    if not existing:
        ref = REFERENCE_BUDGET
        unit = plan_workload(workload, ref, noise, delta, (), objective, contribution=contribution, limit=limit)
        # (the adaptive procedures are `adaptive_front`'s: the planner's note on them is left out here)
        notes.extend(n for n in unit.notes if not n.startswith(tuple(p.name.upper() for p in PROCEDURES)))
        details = {PLANNER: unit.chosen}
        if objective == TOTAL_SQUARED:
            named = {a.name: a.rmse * ref ** (k / 2) for a in unit.alternatives}
            laws[PLANNER] = named.get(unit.chosen, workload_rmse(workload, unit.expected_rmse, objective) * ref ** (k / 2))
            laws.update({name: named[name] for name in family_names if name in named})
        else:
            laws[PLANNER] = workload_rmse(workload, _continuous_rmse(workload, unit), MAX_ERROR) * ref ** (k / 2)
            for name in family_names:
                if name not in {a.name for a in unit.alternatives}:
                    continue  # not costed (or infinite) for this workload
                try:
                    alone = plan_workload(workload, ref, noise, delta, (), MAX_ERROR, families=[name],
                                          contribution=contribution, limit=limit)
                except PlanningCancelled:
                    raise
                except Exception as e:  # the family cannot take the whole workload alone
                    notes.append(f"{name}: no min-max plan of the whole workload ({e.__class__.__name__})")
                    continue
                laws[name] = workload_rmse(workload, _continuous_rmse(workload, alone), MAX_ERROR) * ref ** (k / 2)
        for name, law in laws.items():
            curves[name] = [
                FrontPoint(e, law * b ** (-k / 2), name, b, details.get(name, name))
                for e, b in zip(epsilons, budgets)
            ]
    else:
        notes.append("earlier measurements carry part of the accuracy: every ε planned anew (no power law); "
                     "family curves leave them out (an upper bound for each family)")
        for e, b in zip(epsilons, budgets):
            plan = plan_workload(workload, b, noise, delta, existing, objective, contribution=contribution,
                                 limit=limit)
            curves[PLANNER].append(FrontPoint(e, workload_rmse(workload, plan.expected_rmse, objective), PLANNER, b,
                                              plan.chosen))
            if objective == TOTAL_SQUARED:
                for a in plan.alternatives:
                    if a.name in family_names:
                        curves.setdefault(a.name, []).append(FrontPoint(e, a.rmse, a.name, b, a.name))
        ordered = {PLANNER: curves[PLANNER]}
        ordered.update({n: curves[n] for n in family_names if n in curves})
        curves = ordered
    return Front(noise, delta, objective, envelope(curves), curves, laws, notes, time.perf_counter() - started)


def budget_for_rmse(front: Front, target: float, strategy: str | None = None) -> FrontPoint | None:
    """The least ε on the front (or on one strategy's curve) whose RMSE is at most `target`.

    A power-law curve (a linear plan without earlier measurements) is inverted in closed
    form — b = (rmse(1) / target)^(2/k), at any ε, not only the sampled ones; other curves
    (simulated, or re-planned) offer their evaluated points. None when nothing reaches it.
    Under MAX_ERROR its answer for "planner" is `budget_for_accuracy`'s budget.
    """
    if not target > 0:
        raise ValueError("the RMSE target must be positive")
    k = front.exponent
    found: list[FrontPoint] = []
    for name, points in front.curves.items():
        if strategy is not None and name != strategy:
            continue
        if name in front.laws and front.laws[name] > 0:
            b = (front.laws[name] / target) ** (2 / k)
            detail = points[0].detail if points else name
            found.append(FrontPoint(front.epsilon(b), front.laws[name] * b ** (-k / 2), name, b, detail))
        else:
            reaching = [p for p in points if p.rmse <= target]
            if reaching:
                found.append(min(reaching, key=lambda p: p.epsilon))
    if not found:
        return None
    order = {name: i for i, name in enumerate(front.curves)}
    return min(found, key=lambda p: (p.epsilon, order.get(p.strategy, 0)))


def front_table(points: Iterable[FrontPoint]) -> list[tuple]:
    """Rows for a result, in `FRONT_COLUMNS` order: ε, budget (ρ or ε), RMSE, strategy, settings, source."""
    return [
        (p.epsilon, p.budget, p.rmse, p.strategy, p.detail, "exact" if p.exact else "simulated") for p in points
    ]


# --- adaptive procedures: simulated, searched --------------------------------------------------------------


class _AIMWith:
    """AIM with explicit settings (`AIMProcedure` runs AIM's defaults); named by them, so predictions cache apart."""

    def __init__(self, max_model_size: float, rounds: int):
        self.max_model_size, self.rounds = max_model_size, int(rounds)
        self.name = f"aim[max_model_size={max_model_size:.4g},rounds={self.rounds}]"

    def eligible(self, domain, blocks, noise):
        return AIMProcedure().eligible(domain, blocks, noise)

    def run(self, domain, blocks, rho, fetch, rng, rows=None, progress=None) -> AdaptiveRelease:
        workload: dict[Clique, float] = {}
        for b in blocks:
            clique = b.attributes(domain)
            workload[clique] = workload.get(clique, 0.0) + b.weight
        counts = fetch(list(workload_candidates(domain, workload.items())))
        result = aim(domain, counts.__getitem__, rho, list(workload.items()), rng,
                     max_model_size=self.max_model_size, rounds=self.rounds)
        return AdaptiveRelease(result.measurements, result.model)


def _aim_space(domain, blocks) -> tuple[list[Knob], dict[str, float], Callable[[dict], object]]:
    oneway = len({a for b in blocks for a in b.attributes(domain)})
    default_rounds = 16 * len(domain)  # AIM's T = 16·d
    knobs = [Knob("max_model_size", 1.0, 80.0), Knob("rounds", oneway, max(oneway, default_rounds), integer=True)]
    defaults = {"max_model_size": 80.0, "rounds": float(default_rounds)}
    return knobs, defaults, lambda s: _AIMWith(s["max_model_size"], int(s["rounds"]))


def _rap_space(domain, blocks) -> tuple[list[Knob], dict[str, float] | None, Callable[[dict], object]]:
    queries = sum(b.num_rows(domain) for b in blocks)
    knobs = [Knob("rounds", 1, 32, integer=True), Knob("per_round", 1, max(1, min(512, queries)), integer=True),
             Knob("synthetic_rows", 200, 2000, integer=True)]

    def make(s: dict):
        t = int(s["rounds"])
        k = max(1, min(int(s["per_round"]), queries // t))
        procedure = RAPProcedure(RAPConfig(rounds=t, per_round=k, synthetic_rows=int(s["synthetic_rows"])))
        procedure.name = f"rap[T={t},K={k},rows={int(s['synthetic_rows'])}]"
        return procedure

    return knobs, None, make


SPACES = {"aim": _aim_space, "rap": _rap_space}


def _label(settings: tuple[tuple[str, float], ...]) -> str:
    return ", ".join(f"{n}={v:.4g}" for n, v in settings if n != "epsilon")


def adaptive_front(
    workload: Workload,
    rows: float | None,
    epsilons: Sequence[float] | None = None,
    noise: str = GAUSSIAN,
    delta: float = 0.0,
    objective: str = TOTAL_SQUARED,
    contribution: int = 1,
    procedures: Iterable[str] | None = None,
    max_evaluations: int = MAX_EVALUATIONS,
    initial: int = 4,
    seed: int = 0,
    limit: PlanningLimit | None = None,
    linear: Front | None = None,
    search: str | None = None,
) -> Front:
    """The simulated (ε, RMSE) front of AIM and RAP over ε and their settings, by Bayesian optimization.

    ε ranges over [min, max] of `epsilons`; each evaluation is `planner.adaptive.simulation.predict`
    at ρ(ε) with the procedure's settings on public stand-in data of `rows` rows (never the private
    table). At most `max_evaluations` simulations per procedure, all of them under `limit`
    (default: `ADAPTIVE_SECONDS` of planning work). `linear` (the workload's linear front)
    lets a simulation that clearly loses stop after one run. `search`: BAYES, RANDOM, or None
    for BO only from `BAYES_FROM` simulations, where it measurably beats random search, and
    below that the planner's configuration plus a Latin-hypercube design.
    """
    started = time.perf_counter()
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}")
    epsilons = sorted(float(e) for e in (DEFAULT_EPSILONS if epsilons is None else epsilons))
    limit = limit or PlanningLimit(ADAPTIVE_SECONDS)
    domain = workload.domain
    blocks = _counted(workload)
    curves: dict[str, list[FrontPoint]] = {}
    notes: list[str] = []
    evaluations = 0
    wanted = None if procedures is None else set(procedures)
    reason = None
    if noise != GAUSSIAN:
        reason = "AIM and RAP need a zCDP (Gaussian) budget"
    elif contribution != 1:
        reason = "AIM and RAP are costed only when each privacy unit contributes one row"
    elif any(b.mapped_rows for b in blocks) or not blocks:
        reason = "AIM and RAP answer plain counting workloads over the table's own columns"
    elif rows is None:
        reason = "AIM and RAP not simulated: the table's size is unknown"
    if reason:
        return Front(noise, delta, objective, [], {}, {}, [reason], time.perf_counter() - started)
    low, high = epsilons[0], epsilons[-1]
    weighted_rows = sum(b.weight * b.num_rows(domain) for b in blocks)
    for procedure in PROCEDURES:
        if wanted is not None and procedure.name not in wanted:
            continue
        why = procedure.eligible(domain, blocks, noise)
        if why is not None:
            notes.append(f"{procedure.name.upper()} not on the front: {why}")
            continue
        space, defaults, make = SPACES[procedure.name](domain, blocks)
        knobs = [Knob("epsilon", low, high)] + space
        first = None if defaults is None else {"epsilon": math.sqrt(low * high), **defaults}

        def evaluate(settings: dict[str, float], make=make) -> float:
            rho = to_budget(settings["epsilon"], noise, delta)
            alternative = math.inf
            if linear is not None and PLANNER in linear.laws and objective == TOTAL_SQUARED:
                alternative = (linear.laws[PLANNER] ** 2) * weighted_rows / rho
            prediction = predict(make(settings), domain, blocks, rho, rows, alternative)
            if objective == TOTAL_SQUARED:
                return math.sqrt(prediction.total_squared_error / max(weighted_rows, 1e-300))
            return workload_rmse(workload, prediction.rmse, MAX_ERROR)

        if search is None and max_evaluations < BAYES_FROM:
            done, stopped = bayes_front(evaluate, knobs, max_evaluations, max_evaluations, seed, limit, first)
        else:
            done, stopped = bayes_front(evaluate, knobs, max_evaluations, initial, seed, limit, first,
                                        search=search or BAYES)
        evaluations += len(done)
        curves[procedure.name] = sorted(
            (FrontPoint(e.epsilon, e.rmse, procedure.name, to_budget(e.epsilon, noise, delta), _label(e.settings),
                        False, e.settings) for e in done),
            key=lambda p: (p.epsilon, p.rmse),
        )
        notes.append(f"{procedure.name.upper()}: {len(done)} simulation(s) on public stand-in data "
                     f"({sum(e.seconds for e in done):.1f} s)" + ("; stopped by the planning budget" if stopped else ""))
    return Front(noise, delta, objective, envelope(curves), curves, {}, notes, time.perf_counter() - started,
                 evaluations)


def pareto_front(
    workload: Workload,
    epsilons: Sequence[float] | None = None,
    noise: str = GAUSSIAN,
    delta: float = 0.0,
    existing: Iterable[Measurement | tuple[Clique, float]] = (),
    contribution: int = 1,
    objective: str = TOTAL_SQUARED,
    rows: float | None = None,
    adaptive: bool = True,
    max_evaluations: int = MAX_EVALUATIONS,
    seed: int = 0,
    limit: PlanningLimit | None = None,
) -> Front:
    """EXPLAIN PARETO: the linear front (exact), joined by AIM's and RAP's (simulated) when `rows` is known.

    `limit` bounds the whole computation (the adaptive search gets what the linear front
    leaves; without one, `ADAPTIVE_SECONDS` for the search).
    """
    linear = linear_front(workload, epsilons, noise, delta, existing, contribution, objective, limit)
    if not adaptive:
        return linear
    search = adaptive_front(workload, rows, epsilons, noise, delta, objective, contribution,
                            max_evaluations=max_evaluations, seed=seed, limit=limit, linear=linear)
    return linear.merged(search)


__all__ = [
    "ADAPTIVE_SECONDS", "DEFAULT_EPSILONS", "FRONT_COLUMNS", "PLANNER", "Front", "FrontPoint", "adaptive_front",
    "budget_for_rmse", "dominates", "envelope", "front_table", "linear_front", "pareto_front", "to_budget",
    "to_epsilon", "workload_rmse",
]
