"""Workload -> Plan: choose a strategy family per group of blocks and split the budget.

Blocks are grouped by shared attributes (connected components). Each group is
costed under every family at a unit budget; the cheapest wins. Groups that chose
marginals are then optimized jointly (their measurements share residuals in
least squares), per-query groups are split in closed form, and the budget is
divided between the two parts optimally. The expected RMSE of every block is
then computed exactly, including what earlier measurements contribute.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Iterable, Sequence

import numpy as np

from mechanisms.domain import Domain
from mechanisms.marginals import Clique
from mechanisms.measurement import GAUSSIAN, NOISE_KINDS, Measurement, calibrate, query_step
from mechanisms.reconstruction import LeastSquaresModel
from mechanisms.workload import Block, Workload
from planner.certificates import ONE_PRODUCT, direct_reason
from planner.fairness import EvenSplit, block_needs, even_split, floored_split, pool_floor, topup
from planner.planning_limit import PlanningLimit, OutOfTime
from planner.families import FAMILIES, MARGINALS, PER_QUERY, PerQuery, budget_exponent, combined_unit_error, split
from planner.adaptive import PROCEDURES, predict
from planner.plan import (
    MAX_ERROR,
    OBJECTIVES,
    TOTAL_SQUARED,
    AdaptivePlan,
    Alternative,
    GroupPlan,
    Plan,
    PlannedMeasurement,
)

MIXED = "mixed"
_MIN_MAX_ROUNDS = 12


def _groups(blocks: list[Block], domain: Domain) -> list[list[Block]]:
    """Blocks grouped by clique (the attribute set they read), in first-seen order."""
    groups: dict[tuple[str, ...], list[Block]] = {}
    for b in blocks:
        groups.setdefault(b.attributes(domain), []).append(b)
    return list(groups.values())


def plan_workload(
    workload: Workload,
    budget: float,
    noise: str = GAUSSIAN,
    delta: float = 0.0,
    existing: Iterable[Measurement | tuple[Clique, float]] = (),
    objective: str = TOTAL_SQUARED,
    families: Iterable[str] | None = None,
    rows: float | None = None,
    contribution: int = 1,
    limit: PlanningLimit | None = None,
    queries: Sequence[Sequence[str]] | None = None,
) -> Plan:
    """Plan the blocks of `workload` under `budget` (ρ for Gaussian, ε for Laplace noise).

    `existing` lists what was measured earlier — `Measurement`s (their values are not
    needed), or (clique, cell variance) pairs for marginals; they lower the expected
    error of the new plan but are not re-measured, and the expected errors are those
    of the very model that will answer (a block it would not determine raises
    `NotInSpan` here, before anything is measured).
    `objective` is TOTAL_SQUARED (weighted sum of squared errors, each block
    weighted by 1/sensitivity² unless the caller set other weights, with no query's
    error above its even split: `planner.fairness`) or MAX_ERROR (the largest
    normalized per-query RMSE, by reweighting). `queries` groups block names into the
    analyst's queries for the even split (default: each block is one query).
    `families` restricts the strategy families considered (default: all).
    `rows` is the table's public (or already released) size: with it, adaptive
    procedures (AIM, RAP) are costed by simulation and win the whole workload
    when their predicted total squared error is lower (TOTAL_SQUARED only).
    `contribution` is the most rows one privacy unit may contribute (the table's
    bound k): every measurement's sensitivity is multiplied by it. `limit`
    bounds the optional, costly part of planning (see `planner.planning_limit`; default:
    no limit, no cancellation); the plan's notes say what it left out.
    """
    if noise not in NOISE_KINDS:
        raise ValueError(f"unknown noise {noise!r}")
    if budget <= 0:
        raise ValueError("the budget of a plan must be positive")
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}: use {' or '.join(OBJECTIVES)}")
    started = time.perf_counter()
    existing = list(existing)
    allowed = [cls for cls in FAMILIES if families is None or cls.name in set(families)]
    if not allowed:
        raise ValueError(f"no strategy family among {families}")
    limit = limit or PlanningLimit()
    direct = None if families is not None or existing else direct_reason(workload, noise)
    if direct:
        allowed = [cls for cls in allowed if cls.name in ESSENTIAL]
    if objective == TOTAL_SQUARED and not any(cls is PerQuery for cls in allowed):
        plan = _plan(workload, budget, noise, delta, existing, allowed, contribution, limit)  # a family alone
    elif objective == TOTAL_SQUARED:
        reference = even_split(workload.blocks, workload.domain, budget, noise, contribution, queries)
        plan = _plan_fair(workload, budget, noise, delta, existing, allowed, contribution, limit, reference)
        # Adaptive procedures (AIM, RAP) are not linear strategies, so the lower bound of `certificates.separable_blocks`
        # does not cover them: only the single product query (which they never take) skips them.
        if families is None and direct != ONE_PRODUCT and contribution == 1 \
                and not any(b.mapped_rows for b in workload.blocks):
            plan = _with_adaptive(plan, workload, budget, rows, limit, reference)
    else:
        plan = _plan_min_max(workload, budget, noise, delta, existing, allowed, contribution, limit)
    if direct:
        plan.notes.append(direct)
    if limit.note():
        plan.notes.append(limit.note())
    plan.planning_seconds = time.perf_counter() - started
    return plan


# Costs within this relative distance are ties; a tie goes to the family listed first in FAMILIES.
TIE_TOLERANCE = 1e-9


def cheapest(costs: dict[str, float]) -> str:
    """The first key (in FAMILIES order) whose cost ties with the least."""
    least = min(costs.values())
    return next(name for name, c in costs.items() if c <= least + TIE_TOLERANCE * abs(least))


def _lower(cost: float, than: float) -> bool:
    """`cost` is lower than `than` by more than a tie."""
    return cost < than - TIE_TOLERANCE * abs(than)


# Families cheap enough to cost whatever the planning budget: a plan always exists.
ESSENTIAL = (PER_QUERY, MARGINALS)


class _Costs:
    """Memoized unit errors of (family, set of blocks) within one planning call; a family that is not
    essential and runs out of the planning budget costs infinity (it is left out)."""

    def __init__(self, families, limit: PlanningLimit):
        self.families, self.limit = families, limit
        self._cache: dict[tuple[str, tuple[int, ...]], float] = {}

    def __call__(self, name: str, blocks: list[Block]) -> float:
        key = (name, tuple(sorted(id(b) for b in blocks)))
        if key not in self._cache:
            self._cache[key] = self._cost(name, blocks)
        return self._cache[key]

    def _cost(self, name: str, blocks: list[Block]) -> float:
        if name in ESSENTIAL:
            with self.limit.essential():
                return self.families[name].unit_error(blocks)
        try:
            with self.limit.optional():
                return self.families[name].unit_error(blocks)
        except OutOfTime:
            self.limit.skip(name)
            return float("inf")

    def pooled(self, pools: dict[str, list[Block]], noise: str) -> float:
        """Unit error of a whole plan: each family's pool optimized jointly, budget split optimally."""
        errors = [self(name, bs) for name, bs in pools.items() if bs]
        return combined_unit_error(errors, noise) if errors else 0.0


def _plan(
    workload: Workload, budget: float, noise: str, delta: float, existing, allowed, contribution: int,
    limit: PlanningLimit, fair: tuple[EvenSplit, dict[str, float]] | None = None,
) -> Plan:
    """The plan; with `fair` (the even-split reference and the objective's weights), split so that no block's
    error exceeds its even split (`_floored`)."""
    domain = workload.domain
    blocks = [b for b in workload.blocks if b.terms]
    families = {cls.name: cls(domain, noise) for cls in allowed}
    cost = _Costs(families, limit)

    # 1. Each group (a clique's blocks) takes the family that is cheapest for it alone.
    groups: list[GroupPlan] = []
    members: list[list[Block]] = []
    for group in _groups(blocks, domain):
        costs = {name: cost(name, group) for name in families}
        attrs = group[0].attributes(domain)
        groups.append(GroupPlan(attrs, [b.name for b in group], cheapest(costs), costs))
        members.append(group)

    def pools() -> dict[str, list[Block]]:
        out: dict[str, list[Block]] = {name: [] for name in families}
        for g, bs in zip(groups, members):
            out[g.family].extend(bs)
        return out

    # 1b. A family may take each group alone but not all of them together (its size limits):
    #     the groups of such a pool move to their next-cheapest family, per-query last.
    for _ in range(len(families)):
        infeasible = {name for name, bs in pools().items() if bs and cost(name, bs) == float("inf")}
        if not infeasible:
            break
        for g in groups:
            if g.family in infeasible:
                options = {n: e for n, e in g.unit_errors.items() if n not in infeasible and e < float("inf")}
                g.family = cheapest(options) if options else PER_QUERY

    # 2. Families whose measurements serve several groups at once (marginals share
    #    residuals in least squares) may win a group that lost alone: move a group
    #    into such a family's pool whenever that lowers the error of the whole plan.
    current = cost.pooled(pools(), noise)
    sharing = [name for name, fam in families.items() if getattr(fam, "shares_across_groups", False)]
    for g in groups:
        for name in sharing:
            if g.family == name or g.unit_errors.get(name, float("inf")) == float("inf"):
                continue
            previous, g.family = g.family, name
            trial = cost.pooled(pools(), noise)
            if _lower(trial, current):
                current = trial
            else:
                g.family = previous
    # 3. The whole workload in one family can beat every regrouping of the greedy steps.
    whole = {name: cost(name, blocks) for name in families}
    best = cheapest(whole)
    if _lower(whole[best], current):
        for g in groups:
            g.family = best

    # 4. A pool first costed here may have run out of the planning budget: its groups are measured
    #    per query, which is always available (essential).
    for name, bs in pools().items():
        if bs and cost(name, bs) == float("inf"):
            for g in groups:
                if g.family == name:
                    g.family = PER_QUERY
    # Parts share the budget: each pool of a family, except per-query pools, whose blocks are parts alone
    # (the same optimal split, and the even-split floors of `planner.fairness` bind per block).
    parts: list[tuple[str, list[Block]]] = []
    for name, bs in pools().items():
        parts += [(name, [b]) for b in bs] if name == PER_QUERY else [(name, bs)] if bs else []
    unit_errors = [cost(name, bs) for name, bs in parts]
    with limit.essential():  # the winner's solution is cached by its costing: this completes it
        allocations = [families[name].allocate(bs) for name, bs in parts]
    fractions = split(unit_errors, noise) if parts else []
    chosen = list(dict.fromkeys(name for name, _ in parts))
    label = chosen[0] if len(chosen) == 1 else MIXED
    floors_note = None
    if fair is not None and parts:
        floored = _fairest(parts, allocations, fractions, families, cost, blocks, budget, noise, contribution,
                           domain, fair, limit)
        if floored[0] != parts or any(abs(a - b) > 1e-9 for a, b in zip(floored[2], fractions)):
            parts, allocations, fractions = floored
            floors_note = _floors_note(parts, chosen)
            kept = {name for name, _ in parts}
            whole = next(iter(kept)) if len(kept) == 1 and len(parts) == 1 else None
            for g in groups:
                g.family = whole or (g.family if g.family in kept else PER_QUERY)
    k = budget_exponent(noise)

    measurements = [m for (name, _), allocs, fraction in zip(parts, allocations, fractions)
                    for m in _measurements(name, allocs, budget * fraction, noise, contribution, domain)]
    family_of = {name: g.family for g in groups for name in g.blocks}
    rows = sum(b.num_rows(domain) * b.weight for b in blocks)
    scale = contribution**2 / budget**k  # every noise variance is Δ²k²/(2ρ) or 2Δ²k²/ε²
    alternatives = [
        Alternative(name, error * scale, rows)
        for name in families
        if (error := cost(name, blocks)) < float("inf")
    ]
    if len(chosen) > 1:
        alternatives.append(Alternative(MIXED, combined_unit_error(unit_errors, noise) * scale, rows))
    if floors_note:
        families_left = list(dict.fromkeys(name for name, _ in parts))
        label = families_left[0] if len(families_left) == 1 else MIXED

    fitting = time.perf_counter()
    with limit.essential():
        expected = expected_rmse(workload, measurements, existing)
    plan = Plan(noise, delta, measurements, family_of, expected, alternatives, label, groups)
    plan.fit_seconds = time.perf_counter() - fitting  # the same fit reconstruction runs (see planner.timing)
    if floors_note:  # the chosen plan's line is its own (floored) error; the others are unconstrained
        total = sum(b.weight * b.num_rows(domain) * expected[b.name] ** 2 for b in blocks)
        mine = Alternative(label, total, rows)
        plan.alternatives = [mine if a.name == label else a for a in alternatives]
        plan.alternatives += [] if any(a.name == label for a in alternatives) else [mine]
        plan.notes.append(floors_note)
    return plan


def _floors_note(parts, before: list[str]) -> str:
    """What the even-split floors changed in the plan (for EXPLAIN)."""
    pooled = {b.name for name, bs in parts if name != PER_QUERY for b in bs}
    topped = [bs[0].name for name, bs in parts if name == PER_QUERY and bs[0].name in pooled]
    dropped = [name for name in before if name not in {n for n, _ in parts}]
    said = [f"topped up by a direct measurement of {', '.join(topped)}" if topped else "",
            f"{', '.join(dropped)} replaced by direct measurements" if dropped else ""]
    return ("the budget split keeps every query's error within its even split"
            + "".join(f"; {s}" for s in said if s) + " (the other alternatives below are unconstrained)")


def _measurements(family: str, allocations, share: float, noise: str, contribution: int,
                  domain: Domain) -> list[PlannedMeasurement]:
    """A part's measurements when it gets `share` of the budget, with their exact noise variances."""
    out = []
    for alloc in allocations:
        planned = PlannedMeasurement(alloc.clique, alloc.block, share * alloc.fraction, alloc.sensitivity * contribution,
                                     0.0, family, alloc.strategy, alloc.label, contribution)
        cal = calibrate(noise, planned.sensitivity, planned.share, query_step(planned.query(domain)))
        out.append(replace(planned, variance=cal.variance))
    return out


_TOP_UP_ROUNDS = 20  # re-splits after shrinking top-ups to their pools' final fractions


def _fairest(parts, allocations, fractions, families, cost, blocks, budget, noise, contribution, domain, fair,
             limit: PlanningLimit):
    """The floored split (`_floored`) of the greedy parts, or, when their floors bind, of the whole workload
    in one family, whichever has the least total error (families tie unconstrained but not under floors)."""
    with limit.essential():
        best = _floored(parts, allocations, fractions, budget, noise, contribution, domain, *fair,
                        PerQuery(domain, noise))
        if best[0] == parts and all(abs(a - b) <= 1e-9 for a, b in zip(best[2], fractions)):
            return best[:3]
        for name in families:
            if name == PER_QUERY or cost(name, blocks) == float("inf"):
                continue
            whole = [(name, blocks)]
            trial = _floored(whole, [families[name].allocate(blocks)], [1.0], budget, noise, contribution, domain,
                             *fair, PerQuery(domain, noise))
            if _lower(trial[3], best[3]):
                best = trial
    return best[:3]


def _floored(parts, allocations, fractions: list[float], budget: float, noise: str, contribution: int,
             domain: Domain, reference: EvenSplit, weights: dict[str, float], per_query):
    """Parts, allocations and the split meeting every block's even-split floor at the least total error
    under the objective's `weights` (`planner.fairness`), and that total error: a shared pool that leaves a
    block short is topped up by measuring that block as asked too, or, where that costs more than its
    queries' even shares, replaced by measuring its blocks as asked."""
    k = budget_exponent(noise)
    out_parts, out_allocations, floors, errors = [], [], [], []

    def add(name, bs, allocs, floor, error):
        out_parts.append((name, bs))
        out_allocations.append(allocs)
        floors.append(floor)
        errors.append(error)

    def alone(b):  # one block measured as asked, at least its even share
        share = reference.share.get(b.name, 0.0)
        allocs = per_query.allocate([b])
        rmse = expected_rmse(Workload(domain, [b]), _measurements(PER_QUERY, allocs, share, noise, contribution, domain))
        add(PER_QUERY, [b], allocs, share / budget, weights[b.name] * b.num_rows(domain) * rmse[b.name] ** 2 * share**k)

    topped = []  # (top-up's part, its pool's part, block, the pool's needs)
    variances = []  # per part: {block: (rows × weight, variance at the part's unconstrained fraction, fraction)}
    for (name, bs), allocs, fraction in zip(parts, allocations, fractions):
        if name == PER_QUERY:
            alone(bs[0])
            continue
        share = budget * fraction
        rmse = expected_rmse(Workload(domain, bs), _measurements(name, allocs, share, noise, contribution, domain))
        needs = block_needs(fraction, rmse, reference, noise)
        floor = pool_floor(needs, {b.name: reference.share.get(b.name, 0.0) / budget for b in bs}, noise)
        if floor is None:
            for b in bs:
                alone(b)
            continue
        x, topups = floor
        add(name, bs, allocs, x, sum(weights[b.name] * b.num_rows(domain) * rmse[b.name] ** 2 for b in bs) * share**k)
        pool = len(floors) - 1
        variances.append((len(floors) - 1, {b.name: (weights[b.name] * b.num_rows(domain), rmse[b.name] ** 2)
                                            for b in bs}, fraction))
        for b in bs:
            if b.name in topups:  # its error is the pool's too: the top-up keeps its floor, slack goes elsewhere
                add(PER_QUERY, [b], per_query.allocate([b]), topups[b.name], 0.0)
                topped.append((len(floors) - 1, pool, b.name, needs))
    floored = floored_split(errors, floors, noise)
    for _ in range(_TOP_UP_ROUNDS):  # a pool given more than its floor needs smaller top-ups: give the rest back
        if floored is None or not topped:
            break
        for i, pool, name, needs in topped:
            floors[i] = topup(needs[name], reference.share.get(name, 0.0) / budget, floored[pool], k)
        again = floored_split(errors, floors, noise)
        if again is None or all(abs(a - b) <= 1e-12 for a, b in zip(again, floored)):
            break
        floored = again
    if floored is None:  # the floors sum to at most the even split's total by construction; rounding only
        return parts, allocations, fractions, float("inf")
    kept = [i for i, f in enumerate(floored) if f > 0 or errors[i] > 0]  # top-ups the pool made unneeded go
    if len(kept) < len(floored):
        index = {old: new for new, old in enumerate(kept)}
        variances = [(index[i], pool, fraction) for i, pool, fraction in variances]
        out_parts, out_allocations = [out_parts[i] for i in kept], [out_allocations[i] for i in kept]
        errors, floored = [errors[i] for i in kept], [floored[i] for i in kept]
    # The total error of the split (least squares does at least as well): parts alone, a topped block's pool and
    # direct estimates mixed by inverse variance.
    total = sum(e / max(f, 1e-300) ** k for e, f in zip(errors, floored)) / budget**k
    direct = {bs[0].name: reference.rmse.get(bs[0].name, 0.0) ** 2 * (reference.share.get(bs[0].name, 0.0)
              / (budget * f)) ** k for (name, bs), f, e in zip(out_parts, floored, errors) if name == PER_QUERY and e == 0}
    for i, pool, fraction in variances:
        for name, (weight, variance) in pool.items():
            if name in direct:
                scaled = variance * (fraction / floored[i]) ** k
                total -= weight * scaled
                total += weight / (1 / max(scaled, 1e-300) + 1 / max(direct[name], 1e-300))
    return out_parts, out_allocations, floored, total


def _plan_fair(workload: Workload, budget: float, noise: str, delta: float, existing, allowed, contribution: int,
               limit: PlanningLimit, reference: EvenSplit) -> Plan:
    """The least total weighted error with no block above its even split (`planner.fairness`); the even
    split itself where calibration rounding leaves a block a hair above it."""
    weights = {b.name: b.weight for b in workload.blocks}
    plan = _plan(workload, budget, noise, delta, existing, allowed, contribution, limit, (reference, weights))
    if not reference.meets(plan.expected_rmse):
        plan = _plan(workload, budget, noise, delta, existing, [PerQuery], contribution, limit, (reference, weights))
        plan.notes.append("the strategies found served some query worse than an even split of the budget would: "
                          "every query is measured directly with its even share")
    plan.even_split_rmse = dict(reference.rmse)
    return plan


def _with_adaptive(plan: Plan, workload: Workload, budget: float, rows: float | None, limit: PlanningLimit,
                   reference: EvenSplit) -> Plan:
    """The plan, or an adaptive procedure's plan when its simulated error is lower and no query's simulated
    error is above its even split."""
    blocks = [b for b in workload.blocks if b.terms]
    domain = workload.domain
    reasons = {p.name: p.eligible(domain, blocks, plan.noise) for p in PROCEDURES}
    eligible = [p for p in PROCEDURES if reasons[p.name] is None]
    if not blocks or not eligible:
        return plan
    if rows is None:
        plan.notes.append(
            f"{', '.join(p.name.upper() for p in eligible)} not costed: the table's size is unknown "
            f"(declare `rows` in the catalog, or measure a COUNT(*) first)"
        )
        return plan
    linear = sum(b.weight * b.num_rows(domain) * plan.expected_rmse[b.name] ** 2 for b in blocks)
    weighted_rows = sum(b.weight * b.num_rows(domain) for b in blocks)
    best, best_error = None, linear
    for procedure in eligible:
        try:
            with limit.optional():
                prediction = predict(procedure, domain, blocks, budget, rows, linear)
        except OutOfTime:
            limit.skip(f"{procedure.name.upper()} (simulation)")
            continue
        plan.alternatives.append(Alternative(f"{procedure.name} (simulated)", prediction.total_squared_error, weighted_rows))
        if _lower(prediction.total_squared_error, best_error) and reference.meets(dict(prediction.rmse)):
            best, best_error = (procedure, prediction), prediction.total_squared_error
    if best is None:
        return plan
    procedure, prediction = best
    group = GroupPlan(domain.canonical(a for b in blocks for a in b.attributes(domain)), [b.name for b in blocks],
                      procedure.name, {})
    return replace(
        plan, measurements=[], family_of={b.name: procedure.name for b in blocks}, expected_rmse=dict(prediction.rmse),
        chosen=f"{procedure.name} (simulated)", groups=[group],
        adaptive=AdaptivePlan(procedure, budget, tuple(blocks), prediction),
    )


def _normalized_rmse(plan: Plan, workload: Workload) -> dict[str, float]:
    """Each block's expected RMSE in units of its sensitivity (what MAX_ERROR equalizes)."""
    return {
        b.name: plan.expected_rmse[b.name] / max(b.sensitivity(workload.domain, 2), 1e-300)
        for b in workload.blocks
        if b.terms
    }


def _plan_min_max(
    workload: Workload, budget: float, noise: str, delta: float, existing, allowed, contribution: int,
    limit: PlanningLimit,
) -> Plan:
    """Minimize the largest normalized RMSE by multiplicative reweighting of the blocks."""
    base = {b.name: b.weight for b in workload.blocks}
    multiplier = {b.name: 1.0 for b in workload.blocks}
    best: Plan | None = None
    best_value = float("inf")
    for _ in range(_MIN_MAX_ROUNDS):
        reweighted = Workload(
            workload.domain, [replace(b, weight=base[b.name] * multiplier[b.name]) for b in workload.blocks]
        )
        plan = _plan(reweighted, budget, noise, delta, existing, allowed, contribution, limit)
        errors = _normalized_rmse(plan, workload)
        if not errors:
            return plan
        value = max(errors.values())
        if value < best_value:
            best, best_value = plan, value
        mean = float(np.mean([e**2 for e in errors.values()]))
        for name, e in errors.items():
            multiplier[name] *= e**2 / mean
    best.objective = MAX_ERROR
    return best


def budget_for_accuracy(
    workload: Workload,
    max_rmse: float,
    noise: str = GAUSSIAN,
    delta: float = 0.0,
    existing: Iterable[Measurement | tuple[Clique, float]] = (),
    contribution: int = 1,
    limit: PlanningLimit | None = None,
) -> tuple[float, Plan]:
    """The smallest budget whose MAX_ERROR plan gives every block a normalized RMSE ≤ max_rmse.

    Normalized RMSE is the RMSE divided by the block's L2 sensitivity per row:
    counts are in rows, a SUM in units of its largest per-row value; with a
    privacy unit of `contribution` rows the budget grows to match. Without
    earlier measurements every error scales as budget^(-1/2) (Gaussian) or
    budget^(-1) (Laplace), so one plan at a unit budget gives the answer; the
    result is then checked and nudged up until the target holds.
    """
    if not max_rmse > 0:
        raise ValueError("the accuracy target must be positive")
    existing = list(existing)
    unit = plan_workload(workload, 1.0, noise, delta, existing, MAX_ERROR, contribution=contribution, limit=limit)
    worst = max(_normalized_rmse(unit, workload).values(), default=0.0)
    if worst == 0:
        return 0.0, unit
    power = 2.0 if noise == GAUSSIAN else 1.0
    try:
        budget = (worst / max_rmse) ** power
    except OverflowError:
        raise ArithmeticError("could not reach the accuracy target: it needs an unbounded budget") from None
    if not 0 < budget < float("inf"):
        raise ArithmeticError(f"could not reach the accuracy target: it needs a budget of {budget:g}")
    for _ in range(20):
        plan = plan_workload(workload, budget, noise, delta, existing, MAX_ERROR, contribution=contribution,
                             limit=limit)
        achieved = max(_normalized_rmse(plan, workload).values())
        if achieved <= max_rmse * (1 + 1e-9):
            return budget, plan
        budget *= (achieved / max_rmse) ** power * (1 + 1e-6)
    raise ArithmeticError("could not reach the accuracy target")


def expected_rmse(
    workload: Workload,
    planned: list[PlannedMeasurement],
    existing: Iterable[Measurement | tuple[Clique, float]] = (),
) -> dict[str, float]:
    """Exact per-row RMSE of every block once `planned` (and `existing`) are measured.

    It is the variance the reconstruction will report, computed by the same
    model from the measurements' variances alone.
    """
    domain = workload.domain
    model = LeastSquaresModel(domain)
    for m in existing:
        if isinstance(m, Measurement):
            model.add(replace(m, values=np.empty(0)))
        else:
            clique, variance = m
            model.add(Measurement(clique, "", 0.0, variance, np.empty(0)))
    for m in planned:
        key = None if m.block is None else m.block.fingerprint(domain)
        model.add(Measurement(m.clique, "", m.share, m.variance, np.empty(0), key, m.strategy))
    return {
        b.name: float(np.sqrt(np.mean(model.variance(b)))) if b.terms else 0.0 for b in workload.blocks
    }
