"""Error-versus-budget curves of a plan and its runners-up, and privacy–utility fronts, drawn as PNG or SVG.

Each curve re-plans the same workload at a range of budgets (planning is
data-free and spends nothing), so curves bend where earlier measurements
already carry part of the accuracy instead of assuming a power law. `draw_front` draws a
`planner.pareto.Front` (EXPLAIN PARETO) with the same axes code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np

from mechanisms.marginals import Clique
from mechanisms.measurement import Measurement
from mechanisms.workload import Workload
from planner.families import FAMILIES
from planner.plan import TOTAL_SQUARED
from planner.planner import plan_workload


def error_curves(
    workload: Workload,
    budget: float,
    noise: str,
    delta: float,
    existing: Iterable[Measurement | tuple[Clique, float]] = (),
    objective: str = TOTAL_SQUARED,
    points: int = 13,
    contribution: int = 1,
) -> dict[str, list[tuple[float, float]]]:
    """{strategy: [(budget, workload RMSE)]} for the planner's choice and each single family.

    The workload RMSE is the root of the weighted mean squared error per row (each
    query in units of its sensitivity), the quantity the planner minimizes.
    """
    existing = list(existing)
    budgets = budget * np.logspace(-1, 1, points)
    curves: dict[str, list[tuple[float, float]]] = {"planner": []}
    for b in budgets:
        plan = plan_workload(workload, float(b), noise, delta, existing, objective, contribution=contribution)
        rows = sum(x.weight * x.num_rows(workload.domain) for x in workload.blocks if x.terms)
        total = sum(
            x.weight * x.num_rows(workload.domain) * plan.expected_rmse[x.name] ** 2
            for x in workload.blocks
            if x.terms
        )
        curves["planner"].append((float(b), float(np.sqrt(total / max(rows, 1e-300)))))
        for alt in plan.alternatives:
            if alt.name in {cls.name for cls in FAMILIES}:
                curves.setdefault(alt.name, []).append((float(b), alt.rmse))
    return curves


def _pyplot():
    """matplotlib's pyplot on the Agg backend; an optional dependency (`pip install dpsql[chart]`)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:  # optional dependency
        raise RuntimeError("charts need matplotlib: pip install 'dpsql[chart]'") from e
    return plt


def _save(plt, fig, ax, path: str | Path) -> Path:
    """Log-log axes, a grid and a legend; written as PNG or SVG (by the path's suffix)."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    path = Path(path)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def draw_chart(curves: dict[str, list[tuple[float, float]]], budget: float, unit: str, path: str | Path) -> Path:
    """Draw the curves (log-log) with the plan's budget marked; needs matplotlib (`pip install dpsql[chart]`)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, points in curves.items():
        xs, ys = zip(*points)
        ax.plot(xs, ys, marker="o" if name == "planner" else None, linewidth=2.5 if name == "planner" else 1.2,
                label=name)
    ax.axvline(budget, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel(f"budget ({unit})")
    ax.set_ylabel("expected RMSE per row (units of sensitivity)")
    ax.set_title("Expected error vs budget")
    return _save(plt, fig, ax, path)


def draw_front(front, path: str | Path, target: float | None = None) -> Path:
    """Draw a `planner.pareto.Front`: ε (log) against RMSE (log), PNG or SVG by the path's suffix.

    Each linear strategy is a line (exact), each adaptive procedure's simulations are hollow
    markers, and the front (the non-dominated points) is a black step line with each point
    coloured by the strategy that reaches it; `target` marks an RMSE target.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    colours: dict[str, str] = {}
    for i, (name, points) in enumerate(front.curves.items()):
        finite = [p for p in points if p.rmse < float("inf")]
        if not finite:
            continue
        colours[name] = f"C{i % 10}"
        xs, ys = [p.epsilon for p in finite], [p.rmse for p in finite]
        if all(p.exact for p in finite):
            ax.plot(xs, ys, color=colours[name], linewidth=2.2 if name == "planner" else 1.1, label=name)
        else:
            ax.scatter(xs, ys, facecolors="none", edgecolors=colours[name], label=f"{name} (simulated)")
    if front.points:
        xs, ys = [p.epsilon for p in front.points], [p.rmse for p in front.points]
        ax.step(xs, ys, where="post", color="black", linewidth=1, alpha=0.6, label="front")
        ax.scatter(xs, ys, c=[colours.get(p.strategy, "black") for p in front.points], s=22, zorder=3)
    if target is not None:
        ax.axhline(target, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("ε" + (f" (δ = {front.delta:g})" if front.noise == "gaussian" else " (pure DP)"))
    ax.set_ylabel("largest normalized RMSE" if front.objective == "max" else "expected RMSE per row (units of sensitivity)")
    ax.set_title("Privacy–utility front")
    return _save(plt, fig, ax, path)
