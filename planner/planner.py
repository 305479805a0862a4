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
from typing import Iterable

import numpy as np

from mechanisms.arrays import to_numpy
from mechanisms.domain import Domain
from mechanisms.marginals import Clique
from mechanisms.matrices import Dense, Diagonal
from mechanisms.measurement import GAUSSIAN, NOISE_KINDS, Measurement, calibrate, query_step
from mechanisms.reconstruction import LeastSquaresModel
from mechanisms.workload import Block, Workload
from planner.planning_limit import PlanningLimit, OutOfTime
from planner.families import FAMILIES, MARGINALS, PER_QUERY, budget_exponent, combined_unit_error, split
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
) -> Plan:
    """Plan the blocks of `workload` under `budget` (ρ for Gaussian, ε for Laplace noise).

    `existing` lists what was measured earlier — `Measurement`s (their values are not
    needed), or (clique, cell variance) pairs for marginals; they lower the expected
    error of the new plan but are not re-measured, and the expected errors are those
    of the very model that will answer (a block it would not determine raises
    `NotInSpan` here, before anything is measured).
    `objective` is TOTAL_SQUARED (weighted sum of squared errors, each block
    weighted by 1/sensitivity² unless the caller set other weights) or
    MAX_ERROR (the largest normalized per-query RMSE, by reweighting).
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
    direct = None if families is not None or existing else _direct_reason(workload, noise)
    if direct:
        allowed = [cls for cls in allowed if cls.name in ESSENTIAL]
    if objective == TOTAL_SQUARED:
        plan = _plan(workload, budget, noise, delta, existing, allowed, contribution, limit)
        # Adaptive procedures (AIM, RAP) are not linear strategies, so the lower bound of `_separable_blocks`
        # does not cover them: only the single product query (which they never take) skips them.
        if families is None and direct != _ONE_PRODUCT and contribution == 1 \
                and not any(b.mapped_rows for b in workload.blocks):
            plan = _with_adaptive(plan, workload, budget, rows, limit)
    else:
        plan = _plan_min_max(workload, budget, noise, delta, existing, allowed, contribution, limit)
    if direct:
        plan.notes.append(direct)
    if limit.note():
        plan.notes.append(limit.note())
    plan.planning_seconds = time.perf_counter() - started
    return plan


_ONE_PRODUCT = ("a single product query whose rows do not overlap: measured as asked, which no strategy beats "
                "(other families not costed)")
_SEPARABLE = ("queries whose rows are uncorrelated on the cells where each is largest: measured as asked, which no "
              "linear strategy beats (other families not costed)")
# The separability certificate densifies each block's per-attribute factors: beyond these sizes it is not tried.
_CERTIFICATE_MAX_BLOCKS = 8
_CERTIFICATE_MAX_ENTRIES = 1 << 20  # per factor (rows × values of one attribute)


def _direct_reason(workload: Workload, noise: str) -> str | None:
    """Why measuring the workload as asked (per query) is optimal, so no other family need be costed; None if
    that is not known."""
    if _direct_is_optimal(workload.blocks):
        return _ONE_PRODUCT
    if noise == GAUSSIAN and _separable_blocks(workload.blocks, workload.domain):
        return _SEPARABLE
    return None


def _direct_is_optimal(blocks: list[Block]) -> bool:
    """Whether measuring the workload as asked is optimal among all strategies, so no family need be costed.

    True for one block (no lookup rows) of one Kronecker term whose every factor is a
    single row (any values), or has exactly one nonzero per column and per row, all of one
    magnitude: a filter or value row, a GROUP BY's identity. Such a factor's rows have
    disjoint supports, equal weight and no row known to be zero, so measuring it directly
    attains its factorization bound, and the bound of a Kronecker product is the product
    of its factors' (gamma-2 is multiplicative under tensor products).
    """
    live = [b for b in blocks if b.terms]
    if len(live) != 1 or len(live[0].terms) != 1 or live[0].mapped_rows:
        return False
    for factor in live[0].terms[0].factors.values():
        if isinstance(factor, Diagonal):
            entries = np.abs(to_numpy(factor.values))
        elif isinstance(factor, Dense):
            array = np.abs(to_numpy(factor.array))
            if array.shape[0] == 1:
                continue
            if (np.count_nonzero(array, axis=0) != 1).any() or (np.count_nonzero(array, axis=1) != 1).any():
                return False
            entries = array.max(axis=0)
        else:
            return False
        if not entries.size or not np.allclose(entries, entries[0], rtol=1e-12, atol=0) or entries[0] == 0:
            return False
    return True


def _separable_blocks(blocks: list[Block], domain: Domain) -> bool:
    """Whether measuring every block as asked, with the optimal budget split, is optimal among all linear
    strategies under Gaussian noise (L2 sensitivity): a certificate for workloads of several blocks.

    **The bound.** Let W stack the blocks' rows, each block's scaled by √weight. Any linear strategy A
    (any family's measurements together, budget split included, being rows of one A) answering W as
    W = B·A has total squared error ‖B‖²_F·Δ₂(A)²/(2ρ). For any distribution p over the cells,
    ‖W·D_p^½‖_* = ‖B·A·D_p^½‖_* ≤ ‖B‖_F·‖A·D_p^½‖_F (Hölder) and ‖A·D_p^½‖²_F = Σ_j p_j‖A e_j‖² ≤ Δ₂(A)²,
    so no linear strategy has an error below ‖W·D_p^½‖²_*/(2ρ). (Attributes outside the blocks' cliques
    take a uniform p and drop out: the bound is over the whole table's cells.)

    **Per query meets it** when p can be chosen so that (a) the blocks' rows are uncorrelated under p,
    W_i·D_p·W_jᵀ = 0 for i ≠ j, so W·D_p^½ is a direct sum and ‖W·D_p^½‖_* = Σ_i √w_i·‖W_i·D_p^½‖_*; and
    (b) each block is isotropic on the cells where its column norm is largest, W_i·D_p·W_iᵀ = (Δ_i²/m_i)·I
    with p on those cells, so ‖W_i·D_p^½‖_* = √m_i·Δ_i (m_i rows, Δ_i its L2 sensitivity). Then the bound
    is (Σ_i √(w_i·m_i)·Δ_i)²/(2ρ), exactly the per-query family's error under its optimal split: no family
    (marginals, range trees, HDMM, residuals, factorization) can be lower, for any weights — so the
    min-max objective's reweighting keeps it too. The certificate is one choice of p: the product over
    attributes of the uniform distribution on the values where every block's factor has its largest column
    norm (Kronecker products factor the conditions attribute by attribute: (a) needs one attribute whose
    factors are uncorrelated, (b) every attribute's factor isotropic). It holds, e.g., for AVG's sum
    (values centred on the declared range) and count over the same groups: on the two extreme values the
    centred sum is ±c and the count 1, uncorrelated. It fails (and every family is costed) for overlapping
    or nested queries, or ones that leave cells out where another block reads them.

    It is tried only when one block's clique holds every other's (AVG's count reads a subset of its sum's
    clique when the column is not nullable): the argument holds for any cliques, with Total factors, but
    workloads spread over many attributes rarely pass and densifying them costs planning time. Laplace
    noise (L1 sensitivity) has no such bound here, and adaptive procedures (AIM, RAP) are not linear: the
    caller still costs those.
    """
    live = [b for b in blocks if b.terms]
    if not 2 <= len(live) <= _CERTIFICATE_MAX_BLOCKS or any(b.mapped_rows for b in live):
        return False
    cliques = {b.attributes(domain) for b in live}
    attributes = domain.canonical(a for c in cliques for a in c)
    if not attributes or attributes not in cliques:  # one clique holding the others (AVG's sum and count)
        return False
    factors = [_product_factors(b, domain, attributes) for b in live]
    if any(f is None for f in factors):
        return False
    uncorrelated = np.zeros((len(live), len(live)), dtype=bool)
    for a in attributes:
        mats = [f[a] for f in factors]
        norms = [np.sqrt((m * m).sum(axis=0)) for m in mats]
        largest = [float(n.max()) for n in norms]
        if min(largest) <= 0:
            return False
        cells = np.logical_and.reduce([n >= top * (1 - 1e-9) for n, top in zip(norms, largest)])
        if not cells.any():
            return False
        parts = [m[:, cells] for m in mats]
        count = int(cells.sum())
        for i, (part, top) in enumerate(zip(parts, largest)):
            gram = np.einsum("ij,kj->ik", part, part) / count  # no BLAS: its threads cost more than tiny products
            if not np.allclose(gram, np.eye(part.shape[0]) * (top**2 / part.shape[0]), rtol=0, atol=1e-9 * top**2):
                return False  # not isotropic on those cells: not every row is as large as the largest
            for j in range(i + 1, len(parts)):
                cross = np.einsum("ij,kj->ik", part, parts[j]) / count
                if np.allclose(cross, 0.0, rtol=0, atol=1e-9 * top * largest[j]):
                    uncorrelated[i, j] = uncorrelated[j, i] = True
    np.fill_diagonal(uncorrelated, True)
    return bool(uncorrelated.all())


def _product_factors(block: Block, domain: Domain, attributes: tuple[str, ...]) -> dict[str, np.ndarray] | None:
    """The block as one Kronecker product over `attributes`: a dense matrix per attribute (Total for those
    it does not read), or None when its terms do not collapse into one product (they may differ in one
    attribute's factor only, e.g. AVG's centred sum: values − centre·ones) or a factor is too large."""
    clique = block.attributes(domain)
    terms = []
    for term in block.terms:
        own = dict(zip(clique, block.term_factors(term, domain, clique)))
        dense = {}
        for a in attributes:
            n = domain.size_of(a)
            if a not in own:
                dense[a] = np.ones((1, n))
                continue
            if own[a].shape[0] * n > _CERTIFICATE_MAX_ENTRIES:
                return None
            dense[a] = np.asarray(to_numpy(own[a].dense()), dtype=float)
        terms.append((term.coef, dense))
    first = terms[0][1]
    differing = {a for _, fs in terms[1:] for a in attributes
                 if fs[a].shape != first[a].shape or not np.array_equal(fs[a], first[a])}
    if len(differing) > 1:
        return None
    out = dict(first)
    axis = differing.pop() if differing else attributes[0]
    out[axis] = sum(coef * fs[axis] for coef, fs in terms)
    return out


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
    limit: PlanningLimit,
) -> Plan:
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
    parts = [(name, bs) for name, bs in pools().items() if bs]
    unit_errors = [cost(name, bs) for name, bs in parts]
    fractions = split(unit_errors, noise) if parts else []
    k = budget_exponent(noise)

    measurements: list[PlannedMeasurement] = []
    family_of = {name: g.family for g in groups for name in g.blocks}
    for (name, bs), fraction in zip(parts, fractions):
        with limit.essential():  # the winner's solution is cached by its costing: this completes it
            allocations = families[name].allocate(bs)
        for alloc in allocations:
            share = budget * fraction * alloc.fraction
            planned = PlannedMeasurement(
                alloc.clique, alloc.block, share, alloc.sensitivity * contribution, 0.0, name, alloc.strategy,
                alloc.label, contribution,
            )
            cal = calibrate(noise, planned.sensitivity, share, query_step(planned.query(domain)))
            measurements.append(replace(planned, variance=cal.variance))

    rows = sum(b.num_rows(domain) * b.weight for b in blocks)
    scale = contribution**2 / budget**k  # every noise variance is Δ²k²/(2ρ) or 2Δ²k²/ε²
    alternatives = [
        Alternative(name, error * scale, rows)
        for name in families
        if (error := cost(name, blocks)) < float("inf")
    ]
    label = parts[0][0] if len(parts) == 1 else MIXED
    if len(parts) > 1:
        alternatives.append(Alternative(MIXED, combined_unit_error(unit_errors, noise) * scale, rows))

    fitting = time.perf_counter()
    with limit.essential():
        expected = expected_rmse(workload, measurements, existing)
    plan = Plan(noise, delta, measurements, family_of, expected, alternatives, label, groups)
    plan.fit_seconds = time.perf_counter() - fitting  # the same fit reconstruction runs (see planner.timing)
    return plan


def _with_adaptive(plan: Plan, workload: Workload, budget: float, rows: float | None, limit: PlanningLimit) -> Plan:
    """The plan, or an adaptive procedure's plan when its simulated error is lower."""
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
        if _lower(prediction.total_squared_error, best_error):
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
