"""Workload -> Plan: choose a strategy family per group of blocks and split the budget.

Blocks are grouped by shared attributes (connected components). Each group is
costed under every family at a unit budget; the cheapest wins. Groups that chose
marginals are then optimized jointly (their measurements share residuals in
least squares), per-query groups are split in closed form, and the budget is
divided between the two parts optimally. The expected RMSE of every block is
then computed exactly, including what earlier measurements contribute.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable

import numpy as np

from mechanisms.domain import Domain
from mechanisms.marginals import Clique
from mechanisms.measurement import GAUSSIAN, NOISE_KINDS, Measurement, calibrate, query_step
from mechanisms.reconstruction import LeastSquaresModel
from mechanisms.workload import Block, Workload
from planner.families import FAMILIES, MARGINALS, PER_QUERY, budget_exponent, split
from planner.plan import Alternative, Plan, PlannedMeasurement

MIXED = "mixed"


def _groups(blocks: list[Block], domain: Domain) -> list[list[Block]]:
    """Connected components of blocks linked by shared attributes."""
    parent = list(range(len(blocks)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, b in enumerate(blocks):
        for a in b.attributes(domain):
            if a in owner:
                parent[find(i)] = find(owner[a])
            else:
                owner[a] = i
    groups: dict[int, list[Block]] = {}
    for i, b in enumerate(blocks):
        groups.setdefault(find(i), []).append(b)
    return list(groups.values())


def plan_workload(
    workload: Workload,
    budget: float,
    noise: str = GAUSSIAN,
    delta: float = 0.0,
    existing: Iterable[tuple[Clique, float]] = (),
) -> Plan:
    """Plan the blocks of `workload` under `budget` (ρ for Gaussian, ε for Laplace noise).

    `existing` lists (clique, cell variance) of marginals measured earlier; they
    lower the expected error of the new plan but are not re-measured.
    """
    if noise not in NOISE_KINDS:
        raise ValueError(f"unknown noise {noise!r}")
    if budget <= 0:
        raise ValueError("the budget of a plan must be positive")
    domain = workload.domain
    blocks = [b for b in workload.blocks if b.terms]
    families = {cls.name: cls(domain, noise) for cls in FAMILIES}

    chosen: dict[str, list[Block]] = {name: [] for name in families}
    for group in _groups(blocks, domain):
        costs = {name: fam.unit_error(group) for name, fam in families.items()}
        chosen[min(costs, key=costs.get)].extend(group)
    # A block that is exactly a marginal is the same measurement in both families;
    # optimizing it with the other marginals lets least squares share residuals.
    if chosen[MARGINALS]:
        moved = [b for b in chosen[PER_QUERY] if b.is_marginal()]
        chosen[PER_QUERY] = [b for b in chosen[PER_QUERY] if not b.is_marginal()]
        chosen[MARGINALS].extend(moved)

    parts = [(name, bs) for name, bs in chosen.items() if bs]
    unit_errors = [families[name].unit_error(bs) for name, bs in parts]
    fractions = split(unit_errors, noise) if parts else []
    k = budget_exponent(noise)

    measurements: list[PlannedMeasurement] = []
    family_of: dict[str, str] = {}
    for (name, bs), fraction in zip(parts, fractions):
        for b in bs:
            family_of[b.name] = name
        for alloc in families[name].allocate(bs):
            share = budget * fraction * alloc.fraction
            planned = PlannedMeasurement(
                alloc.clique, alloc.block, share, alloc.sensitivity, 0.0, name, alloc.strategy, alloc.label
            )
            cal = calibrate(noise, alloc.sensitivity, share, query_step(planned.query(domain)))
            measurements.append(replace(planned, variance=cal.variance))

    rows = sum(b.num_rows(domain) * b.weight for b in blocks)
    alternatives = [
        Alternative(name, error / budget**k, rows)
        for name, fam in families.items()
        if (error := fam.unit_error(blocks)) < float("inf")
    ]
    label = parts[0][0] if len(parts) == 1 else MIXED
    if len(parts) > 1:
        total = sum(e ** (1.0 / (k + 1)) for e in unit_errors) ** (k + 1)
        alternatives.append(Alternative(MIXED, total / budget**k, rows))

    expected = expected_rmse(workload, measurements, existing)
    return Plan(noise, delta, measurements, family_of, expected, alternatives, label)


def expected_rmse(
    workload: Workload,
    planned: list[PlannedMeasurement],
    existing: Iterable[tuple[Clique, float]] = (),
) -> dict[str, float]:
    """Exact per-row RMSE of every block once `planned` (and `existing`) are measured.

    It is the variance the reconstruction will report, computed by the same
    model from the measurements' variances alone.
    """
    domain = workload.domain
    model = LeastSquaresModel(domain)
    for clique, variance in existing:
        model.add(Measurement(clique, "", 0.0, variance, np.empty(0)))
    for m in planned:
        key = None if m.block is None else m.block.fingerprint(domain)
        model.add(Measurement(m.clique, "", m.share, m.variance, np.empty(0), key, m.strategy))
    return {
        b.name: float(np.sqrt(np.mean(model.variance(b)))) if b.terms else 0.0 for b in workload.blocks
    }
