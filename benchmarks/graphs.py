"""Node-DP graph statistics on the seed's Synthetic I and II: SENSDIFF and dpsql's chosen time
strategy against the composition baselines at equal budget (S004 §6.6, Fig. 6.1 and 6.2), and
one-shot releases.

Data: `mechanisms.graphs.synthetic_one` / `synthetic_two` (seed 0), each in the seed's two
versions, directed and undirected (L1422). Parameters as the seed chose them (§6.6.1.2,
L1412–1418, non-private choices, as there): the bound D (D_in, D_out) is the largest degree
rounded up to a multiple of 5; τ is the 90th percentile of the final (out-)degrees.

Methods, all at one total budget over the T releases (ε, discrete Laplace as in the seed; and
ρ = ε²/2, discrete Gaussian), in dpsql's exact noise:
- SENSDIFF: the difference sequence once, noise for the whole sequence's sensitivity
  (`mechanisms.graphs.node_release` with the identity strategy; S004 Algorithm 5);
- chosen: `node_release`'s default, `mechanisms.continual.choose` for running totals;
- SENSDIFF (L2): Gaussian only, SENSDIFF calibrated to the L2 bound of the difference
  sequence instead of its L1 bound — what `ContinualRelease` would give with the
  generalisation described in RESULTS.md;
- COMPOSE-D-BOUNDED: each f(G_t) at budget/T with the one-graph sensitivity at D;
- COMPOSE-PROJECTION: each f(G̃_t), G̃ the edge-addition projection to D̃, at budget/T with the
  one-graph sensitivity of the projected graph; D̃ (each of D̃_in, D̃_out) the best of 1..D for
  each ε, with no budget spent on the choice (optimistic, as the seed says, L1416).

Error: the seed's relative L1, Σ_t |A(G_t) − f(G_t)| / f(G_t) (L1459; a histogram's ‖·‖₁, and
max(f, 1) for an empty count), averaged over `--runs` runs (the seed: 100). The horizon sweep
(Fig. 6.2) releases every 20/T years at ε = 5. One-shot: f(G_20) alone.

    python -m benchmarks.graphs [--runs 100]

writes benchmarks/results/graphs.json and prints the tables of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from dataclasses import dataclass
from itertools import product
from pathlib import Path

import numpy as np

from mechanisms.continual import CAUSAL, TimeStrategy, estimate, identity
from mechanisms.graphs import (
    DEGREE,
    IN,
    OUT,
    DegreeBound,
    DegreeHistogram,
    EdgeCount,
    GraphSequence,
    HighDegree,
    KStars,
    Sensitivity,
    Statistic,
    node_release,
    project,
    synthetic_one,
    synthetic_two,
)
from mechanisms.measurement import GAUSSIAN, LAPLACE, Calibration, calibrate
from mechanisms.noise import RandomSource, discrete_gaussian_vector, discrete_laplace_vector

RESULTS = Path(__file__).parent / "results" / "graphs.json"
EPSILONS = (0.5, 1.0, 2.0, 5.0)
HORIZONS = (2, 4, 5, 10, 20)
SWEEP_EPSILON = 5.0
METHODS = ("SENSDIFF", "chosen", "SENSDIFF (L2)", "COMPOSE-PROJECTION", "COMPOSE-D-BOUNDED")


@dataclass(frozen=True)
class Case:
    dataset: str
    version: str
    sequence: GraphSequence
    bound: DegreeBound
    tau: int

    @property
    def kind(self) -> str:
        return OUT if self.bound.directed else DEGREE

    def statistics(self) -> list[Statistic]:
        return [HighDegree(self.tau, self.kind), EdgeCount(), DegreeHistogram(self.kind), KStars(2, self.kind)]

    def projections(self, statistic: Statistic) -> list[DegreeBound]:
        """The list D̃ is tuned over: bounds up to the declared one where the statistic can be non-zero
        (D̃ > τ for highDeg, L1319; D̃ ≥ k for k-stars)."""
        least = statistic.tau + 1 if isinstance(statistic, HighDegree) else getattr(statistic, "k", 1)
        if not self.bound.directed:
            return [DegreeBound(d) for d in range(least, self.bound.degree + 1)]
        return [DegreeBound(in_degree=i, out_degree=o)
                for i, o in product(range(1, self.bound.in_degree + 1), range(least, self.bound.out_degree + 1))]


def round_up(degree: int) -> int:
    return max(5, -(-degree // 5) * 5)


def cases(seed: int) -> list[Case]:
    out = []
    for dataset, generate in (("Synthetic I", synthetic_one), ("Synthetic II", synthetic_two)):
        directed = generate(seed)
        undirected = directed.undirected()
        degrees = undirected.degrees(DEGREE)[-1]
        out.append(Case(dataset, "undirected", undirected, DegreeBound(round_up(int(degrees.max()))),
                        int(np.ceil(np.percentile(degrees, 90)))))
        outs, ins = directed.degrees(OUT)[-1], directed.degrees(IN)[-1]
        bound = DegreeBound(in_degree=round_up(int(ins.max())), out_degree=round_up(int(outs.max())))
        out.append(Case(dataset, "directed", directed, bound, int(np.ceil(np.percentile(outs, 90)))))
    return out


# ---------------------------------------------------------------------------
# Noise draws and errors


def _sample(cal: Calibration, shape: tuple, rng: RandomSource) -> np.ndarray:
    """Draws of the exact discrete noise of a calibration, in answer units."""
    draw = discrete_gaussian_vector if cal.kind == GAUSSIAN else discrete_laplace_vector
    return draw(cal.scale, int(np.prod(shape)), rng).reshape(shape).astype(float) * float(cal.granularity)


def _draws(noise: str, sensitivity: float, budget: float, shape: tuple, rng: RandomSource) -> np.ndarray:
    return _sample(calibrate(noise, sensitivity, budget), shape, rng)


def relative_l1(estimates: np.ndarray, truth: np.ndarray) -> float:
    """Mean over runs of Σ_t ‖A_t − f_t‖₁ / max(‖f_t‖₁, 1); estimates (runs, T, bins)."""
    scale = np.maximum(np.abs(truth).sum(axis=1), 1)
    return float((np.abs(estimates - truth[None]).sum(axis=2) / scale).sum(axis=1).mean())


def _strategy_runs(strategy: TimeStrategy, differences: np.ndarray, cal: Calibration, runs: int,
                   rng: RandomSource) -> np.ndarray:
    """Running totals (runs, T, bins): the causal estimates from the strategy's noisy rows, as emitted."""
    exact = np.asarray(strategy.matrix.matvec(differences.astype(float)))
    bins = differences.shape[1]
    noisy = np.tile(exact, runs) + _sample(cal, (exact.shape[0], bins * runs), rng)
    running = estimate(strategy, CAUSAL, noisy).running
    return running.reshape(running.shape[0], runs, bins).transpose(1, 0, 2)


def continual_errors(case: Case, statistic: Statistic, noise: str, budget: float, runs: int,
                     rng: RandomSource) -> dict:
    sequence, bound = case.sequence, case.bound
    horizon = sequence.horizon
    truth = statistic.values(sequence, bound)
    differences = np.diff(truth, axis=0, prepend=0)
    errors, rmse, chosen = {}, {}, None
    for method, strategy in (("SENSDIFF", identity(horizon)), ("chosen", None)):
        release = node_release(statistic, bound, horizon, noise, budget, strategy)
        found = _strategy_runs(release.strategy, differences, release.calibration, runs, rng)
        errors[method] = relative_l1(found, truth)
        rmse[method] = float(np.sqrt(((found - truth[None]) ** 2).mean()))
        chosen = release.strategy.label
    if noise == GAUSSIAN:
        l2 = statistic.sensitivity(bound, horizon).l2
        noisy = np.cumsum(differences[None] + _draws(noise, l2, budget, (runs,) + truth.shape, rng), axis=1)
        errors["SENSDIFF (L2)"] = relative_l1(noisy, truth)
    per_window = budget / horizon
    one_graph = statistic.sensitivity(bound, 1)
    errors["COMPOSE-D-BOUNDED"] = relative_l1(
        truth[None] + _draws(noise, _norm(one_graph, noise), per_window, (runs,) + truth.shape, rng), truth)
    errors["COMPOSE-PROJECTION"], best = _best_projection(case, statistic, noise, per_window, slice(None), runs, rng)
    return {"errors": errors, "rmse": rmse, "chosen": chosen, "projection": _bound_label(best)}


def _best_projection(case: Case, statistic: Statistic, noise: str, budget: float, windows: slice, runs: int,
                     rng: RandomSource) -> tuple[float, DegreeBound]:
    """COMPOSE-PROJECTION's optimistic tuning: the least error over `Case.projections`, each
    projected graph of `windows` released at `budget` with its one-graph sensitivity."""
    truth = statistic.values(case.sequence, case.bound)[windows]
    best = (np.inf, None)
    for bound in case.projections(statistic):
        values = _padded(statistic.values(project(case.sequence, bound), bound)[windows], truth.shape[1])
        sensitivity = _norm(statistic.sensitivity(bound, 1, projected=True), noise)
        error = relative_l1(values[None] + _draws(noise, sensitivity, budget, (runs,) + truth.shape, rng), truth)
        best = min(best, (error, bound), key=lambda pair: pair[0])
    return best


def _norm(sensitivity: Sensitivity, noise: str) -> float:
    return sensitivity.l2 if noise == GAUSSIAN else sensitivity.l1


def _padded(values: np.ndarray, bins: int) -> np.ndarray:
    return np.pad(values, ((0, 0), (0, bins - values.shape[1])))


def _bound_label(bound: DegreeBound) -> str:
    return str(bound.degree) if not bound.directed else f"({bound.in_degree}, {bound.out_degree})"


def one_shot_errors(case: Case, statistic: Statistic, epsilon: float, runs: int, rng: RandomSource) -> dict:
    """f(G_T) alone under ε: declared bound vs the best projection (no budget for the choice)."""
    truth = statistic.values(case.sequence, case.bound)[-1:]
    declared = statistic.sensitivity(case.bound, 1).l1
    errors = {"declared": relative_l1(truth[None] + _draws(LAPLACE, declared, epsilon, (runs,) + truth.shape, rng),
                                      truth)}
    errors["projected"], best = _best_projection(case, statistic, LAPLACE, epsilon, slice(-1, None), runs, rng)
    return {"errors": errors, "projection": _bound_label(best), "sensitivity": declared}


# ---------------------------------------------------------------------------


def sensitivity_rows(all_cases: list[Case]) -> list[dict]:
    rows = []
    for case in all_cases:
        for statistic in case.statistics():
            rows.append({"dataset": case.dataset, "version": case.version, "statistic": statistic.name,
                         "bound": _bound_label(case.bound), "seed": statistic.seed_sensitivity(case.bound),
                         "ours": statistic.sensitivity(case.bound, 2).l1,
                         "ours_l2": round(statistic.sensitivity(case.bound, 2).l2, 2),
                         "one_graph": statistic.sensitivity(case.bound, 1).l1})
    return rows


def run(runs: int, seed: int) -> dict:
    rng = RandomSource(seed)
    all_cases = cases(seed)
    records = []
    for case in all_cases:
        for statistic in case.statistics():
            base = {"dataset": case.dataset, "version": case.version, "statistic": statistic.name,
                    "bound": _bound_label(case.bound), "tau": case.tau}
            for epsilon in EPSILONS:
                for noise, budget in ((LAPLACE, epsilon), (GAUSSIAN, epsilon**2 / 2)):
                    found = continual_errors(case, statistic, noise, budget, runs, rng)
                    records.append({**base, "kind": "continual", "noise": noise, "epsilon": epsilon,
                                    "budget": budget, "horizon": case.sequence.horizon, **found})
            for horizon in HORIZONS[:-1]:
                coarse = Case(case.dataset, case.version, case.sequence.coarsened(20 // horizon), case.bound, case.tau)
                found = continual_errors(coarse, statistic, LAPLACE, SWEEP_EPSILON, runs, rng)
                records.append({**base, "kind": "sweep", "noise": LAPLACE, "epsilon": SWEEP_EPSILON,
                                "budget": SWEEP_EPSILON, "horizon": horizon, **found})
            for epsilon in EPSILONS:
                records.append({**base, "kind": "one-shot", "noise": LAPLACE, "epsilon": epsilon,
                                **one_shot_errors(case, statistic, epsilon, runs, rng)})
    shapes = [{"dataset": c.dataset, "version": c.version, "nodes": c.sequence.nodes,
               "edges": int(c.sequence.src.size), "bound": _bound_label(c.bound), "tau": c.tau} for c in all_cases]
    return {"runs": runs, "seed": seed, "graphs": shapes, "sensitivities": sensitivity_rows(all_cases),
            "records": records}


# ---------------------------------------------------------------------------
# Tables


def _select(records, **match):
    return [r for r in records if all(r[k] == v for k, v in match.items())]


def _label(r) -> str:
    return f"{r['dataset']} {r['version']} | {r['statistic']}"


def fig_6_1_table(records: list[dict], statistics: tuple[str, ...] = ("high", "edges")) -> str:
    """SENSDIFF / COMPOSE-PROJECTION / COMPOSE-D-BOUNDED per ε (Laplace, T = 20)."""
    lines = ["| data | statistic | " + " | ".join(f"ε = {e:g}" for e in EPSILONS) + " |",
             "|---|---|" + "---|" * len(EPSILONS)]
    rows = _select(records, kind="continual", noise=LAPLACE, epsilon=EPSILONS[0])
    for r in (r for r in rows if r["statistic"].startswith(statistics)):
        cells = []
        for e in EPSILONS:
            found = _select(records, kind="continual", noise=LAPLACE, epsilon=e, dataset=r["dataset"],
                            version=r["version"], statistic=r["statistic"])[0]["errors"]
            cells.append(" / ".join(f"{found[m]:.3g}" for m in ("SENSDIFF", "COMPOSE-PROJECTION",
                                                                  "COMPOSE-D-BOUNDED")))
        lines.append(f"| {_label(r)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def sweep_table(records: list[dict]) -> str:
    """SENSDIFF / COMPOSE-PROJECTION / COMPOSE-D-BOUNDED per T at ε = 5 (Fig. 6.2)."""
    lines = ["| data | statistic | " + " | ".join(f"T = {t}" for t in HORIZONS) + " |",
             "|---|---|" + "---|" * len(HORIZONS)]
    for r in _select(records, kind="continual", noise=LAPLACE, epsilon=SWEEP_EPSILON):
        if not r["statistic"].startswith(("high", "edges")):
            continue
        cells = []
        for t in HORIZONS:
            kind = "continual" if t == 20 else "sweep"
            found = _select(records, kind=kind, noise=LAPLACE, epsilon=SWEEP_EPSILON, horizon=t,
                            dataset=r["dataset"], version=r["version"], statistic=r["statistic"])[0]["errors"]
            cells.append(" / ".join(f"{found[m]:.3g}" for m in ("SENSDIFF", "COMPOSE-PROJECTION",
                                                                  "COMPOSE-D-BOUNDED")))
        lines.append(f"| {_label(r)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def gaussian_table(records: list[dict], epsilon: float = 1.0) -> str:
    """Relative L1 of every method, and the RMSE of the running totals that `choose` minimises."""
    head = " | ".join(METHODS)
    lines = [f"| data | statistic | chosen | {head} | RMSE SENSDIFF / chosen |",
             "|---|---|---|" + "---|" * (len(METHODS) + 1)]
    for r in _select(records, kind="continual", noise=GAUSSIAN, epsilon=epsilon):
        cells = " | ".join(f"{r['errors'][m]:.3g}" for m in METHODS)
        lines.append(f"| {_label(r)} | {r['chosen']} | {cells} | "
                     f"{r['rmse']['SENSDIFF']:.3g} / {r['rmse']['chosen']:.3g} |")
    return "\n".join(lines)


def one_shot_table(records: list[dict], epsilon: float = 1.0) -> str:
    lines = ["| data | statistic | declared bound | best projection (D̃) |", "|---|---|---|---|"]
    for r in _select(records, kind="one-shot", epsilon=epsilon):
        lines.append(f"| {_label(r)} | {r['errors']['declared']:.3g} | "
                     f"{r['errors']['projected']:.3g} ({r['projection']}) |")
    return "\n".join(lines)


def sensitivity_table(rows: list[dict]) -> str:
    lines = ["| data | statistic | bound | seed | ours (L1) | ours (L2) | one graph |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['dataset']} {r['version']} | {r['statistic']} | {r['bound']} | {r['seed']} | "
                     f"{r['ours']} | {r['ours_l2']} | {r['one_graph']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    result = run(args.runs, args.seed)
    result.update(machine=platform.machine(), seconds=time.perf_counter() - started)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1))
    print("graphs:", json.dumps(result["graphs"]))
    print("\nsensitivities\n" + sensitivity_table(result["sensitivities"]))
    print("\nFig 6.1 (Laplace, T = 20): SENSDIFF / COMPOSE-PROJECTION / COMPOSE-D-BOUNDED\n"
          + fig_6_1_table(result["records"]))
    print("\nother statistics, same\n" + fig_6_1_table(result["records"], ("degree", "out_degree", "2_", "out_2")))
    print("\nFig 6.2 (ε = 5)\n" + sweep_table(result["records"]))
    print("\nGaussian, ρ = 0.5 (ε = 1)\n" + gaussian_table(result["records"]))
    print("\none-shot, ε = 1\n" + one_shot_table(result["records"]))
    print(f"\n{result['seconds']:.0f} s")


if __name__ == "__main__":
    main()
