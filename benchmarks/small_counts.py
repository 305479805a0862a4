"""The LDP thesis' small-group count mechanisms (S001 ch. 6): its Fig. 6.5 and Fig. 6.9 reproduced.

Fig. 6.5 ("Properties of named mechanisms") compares GM, WM, EM and UM by the properties S, RM, CM, F, WH and
by L₀. GM, EM and UM are `mechanisms.small_counts`' exact rational matrices (properties checked exactly);
WM is the thesis' LP (BASICDP with WH + RM + CM, L₀ minimized, symmetrized as its Thm 8 allows), and "WH
only" the LP with WH alone, both solved by scipy's HiGHS (properties checked to 1e-7, its tolerance). Every property is
checked on a grid of n and α; a cell is Y (holds everywhere), N (nowhere) or "—" (depends), and the "—"
cells are checked against the thesis' conditions (GM: CM iff α <= 1/2, WH iff n >= 2α/(1-α)).

Fig. 6.9: the first 32,561 rows of adult (the thesis' 32K; `shared/data/adult`, file order) gathered into
consecutive groups of n, binary targets income>50K, sex and young (age < 30; the file's age code is age - 16),
α = 0.9: the fraction of groups whose released count is not the true one. For each mechanism it is computed
exactly (the mean over groups of 1 - P[j][j]), with the standard error of a mean of 50 repetitions (from the
exact per-group Bernoulli variances); GM, EM and UM are also sampled by the exact sampler, `--reps` times.

    python -m benchmarks.small_counts [--reps 10]

writes benchmarks/results/small_counts.json and prints the tables of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.optimize import linprog

from mechanisms.noise import RandomSource
from mechanisms.small_counts import FAIR, GEOMETRIC, PROPERTIES, UNIFORM, l0, matrix, properties, release

ALPHAS = (Fraction(1, 4), Fraction(1, 2), Fraction(2, 3), Fraction(19, 25), Fraction(9, 10), Fraction(10, 11),
          Fraction(99, 100))
SIZES = (2, 3, 4, 6, 8, 12, 20, 30)
NAMED = ("GM", "WM", "EM", "UM")
TOL = 1e-7  # HiGHS' feasibility tolerance: the LP solutions' properties are checked to it
ADULT = Path("/work/shared/data/adult/adult.csv")
ADULT_ROWS = 32_561
GROUPS = (2, 4, 6, 8, 10, 12, 16, 20)
FIG_ALPHA = Fraction(9, 10)
EXACT = {"GM": GEOMETRIC, "EM": FAIR, "UM": UNIFORM}


def lp(n: int, alpha: Fraction, column_properties: bool) -> np.ndarray:
    """The thesis' LP: BASICDP (column sums 1, adjacent columns within α) with WH, and RM + CM when
    `column_properties` (WM), minimizing L₀ (maximizing the trace); symmetrized (Thm 8)."""
    size = n + 1
    var = lambda i, j: i * size + j  # noqa: E731
    rows, cols, vals, bound = [], [], [], []

    def le(terms: list[tuple[int, float]], rhs: float) -> None:  # Σ coef·p <= rhs
        r = len(bound)
        for v, c in terms:
            rows.append(r), cols.append(v), vals.append(c)
        bound.append(rhs)

    a = float(alpha)
    for i in range(size):
        le([(var(i, i), -1.0)], -1.0 / size)  # WH
        for j in range(n):
            le([(var(i, j + 1), a), (var(i, j), -1.0)], 0.0)
            le([(var(i, j), a), (var(i, j + 1), -1.0)], 0.0)
    if column_properties:
        for i in range(size):
            for j in range(size):
                if 1 <= j <= i:
                    le([(var(i, j - 1), 1.0), (var(i, j), -1.0)], 0.0)  # RM
                if i <= j < n:
                    le([(var(i, j + 1), 1.0), (var(i, j), -1.0)], 0.0)
                if 1 <= i <= j:
                    le([(var(i - 1, j), 1.0), (var(i, j), -1.0)], 0.0)  # CM
                if j <= i < n:
                    le([(var(i + 1, j), 1.0), (var(i, j), -1.0)], 0.0)
    a_ub = sparse.csr_matrix((vals, (rows, cols)), shape=(len(bound), size * size))
    a_eq = sparse.csr_matrix(([1.0] * size * size, ([j for i in range(size) for j in range(size)],
                                                     [var(i, j) for i in range(size) for j in range(size)])),
                             shape=(size, size * size))
    c = np.zeros(size * size)
    c[[var(i, i) for i in range(size)]] = -1.0
    res = linprog(c, A_ub=a_ub, b_ub=bound, A_eq=a_eq, b_eq=np.ones(size), bounds=(0, 1), method="highs")
    if res.status != 0:
        raise RuntimeError(f"the LP at n = {n}, α = {alpha} failed: {res.message}")
    p = res.x.reshape(size, size)
    return (p + p[::-1, ::-1]) / 2


def named(n: int, alpha: Fraction) -> dict[str, tuple[object, float]]:
    """Each named mechanism's matrix and the tolerance its properties are checked with."""
    out = {name: (matrix(kind, n, alpha), 0) for name, kind in EXACT.items()}
    out["WM"] = (lp(n, alpha, True).tolist(), TOL)
    out["WH only"] = (lp(n, alpha, False).tolist(), TOL)
    return out


def grid() -> list[dict]:
    rows = []
    for alpha in ALPHAS:
        for n in SIZES:
            for name, (p, tol) in named(n, alpha).items():
                props = properties(p, alpha, tol)
                rows.append({"mechanism": name, "n": n, "alpha": str(alpha), "l0": float(l0(p)), **props})
    return rows


def summary(rows: list[dict]) -> dict:
    """Fig. 6.5's cells (Y / N / —) and the checks of its conditions and L₀ column."""
    table = {}
    for name in (*NAMED, "WH only"):
        mine = [r for r in rows if r["mechanism"] == name]
        table[name] = {p: ("Y" if all(r[p] for r in mine) else "N" if not any(r[p] for r in mine) else "—")
                       for p in PROPERTIES}
    gm = [r for r in rows if r["mechanism"] == "GM"]
    by = {(r["mechanism"], r["n"], r["alpha"]): r for r in rows}
    checks = {
        "GM CM iff α <= 1/2": all(r["CM"] == (Fraction(r["alpha"]) <= Fraction(1, 2)) for r in gm),
        "GM WH iff n >= 2α/(1-α)": all(r["WH"] == (r["n"] >= 2 * Fraction(r["alpha"]) / (1 - Fraction(r["alpha"])))
                                       for r in gm),
        "GM L0 = 2α/(1+α)": max(abs(r["l0"] - 2 * float(Fraction(r["alpha"])) / (1 + float(Fraction(r["alpha"]))))
                                for r in gm),
        "UM L0 = 1": max(abs(r["l0"] - 1) for r in rows if r["mechanism"] == "UM"),
        "L0: GM <= WH only <= WM <= EM <= UM (to 1e-7)": all(
            by[("GM", n, a)]["l0"] <= by[("WH only", n, a)]["l0"] + TOL <= by[("WM", n, a)]["l0"] + 2 * TOL
            <= by[("EM", n, a)]["l0"] + 3 * TOL <= by[("UM", n, a)]["l0"] + 4 * TOL
            for n in SIZES for a in map(str, ALPHAS)),
        "WH only = GM where GM has WH": max(abs(by[("WH only", r["n"], r["alpha"])]["l0"] - r["l0"])
                                           for r in gm if r["WH"]),
        "WM = GM where GM has WH and CM": max([abs(by[("WM", r["n"], r["alpha"])]["l0"] - r["l0"])
                                               for r in gm if r["WH"] and r["CM"]]),
        "WM - GM where GM has WH but not CM (min)": min(by[("WM", r["n"], r["alpha"])]["l0"] - r["l0"]
                                                        for r in gm if r["WH"] and not r["CM"]),
        "WM = EM where EM is WH-optimal (α = 0.99, max gap)": max(
            abs(by[("WM", n, "99/100")]["l0"] - by[("EM", n, "99/100")]["l0"]) for n in SIZES),
    }
    return {"table": table, "checks": checks}


def adult_targets() -> dict[str, np.ndarray]:
    data = pd.read_csv(ADULT, nrows=ADULT_ROWS)
    return {"income": data["income>50K"].to_numpy(), "sex": data["sex"].to_numpy(),
            "young": (data["age"].to_numpy() + 16 < 30).astype(int)}


def adult(reps: int) -> list[dict]:
    rows = []
    rng = RandomSource(0)
    targets = adult_targets()
    for n in GROUPS:
        mechanisms = {name: np.array(p, dtype=float) for name, (p, _) in named(n, FIG_ALPHA).items()
                      if name in NAMED}
        for target, bits in targets.items():
            groups = len(bits) // n
            counts = bits[: groups * n].reshape(groups, n).sum(axis=1)
            for name, p in mechanisms.items():
                right = p[counts, counts]  # P[j][j] per group
                expected = float(np.mean(1 - right))
                se50 = math.sqrt(float(np.sum(right * (1 - right))) / groups ** 2 / 50)
                row = {"n": n, "target": target, "mechanism": name, "groups": groups, "expected": expected,
                       "se_of_50": se50}
                if name in EXACT:
                    start = time.process_time()
                    wrong = [np.mean(np.array(release(EXACT[name], [n] * groups, counts.tolist(), FIG_ALPHA, rng))
                                     != counts) for _ in range(reps)]
                    row.update(sampled=float(np.mean(wrong)), sampled_se=float(np.std(wrong, ddof=1) / math.sqrt(reps))
                               if reps > 1 else None, sample_cpu_s=time.process_time() - start)
                rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10, help="sampled repetitions of Fig. 6.9 (exact sampler)")
    parser.add_argument("--output", default="benchmarks/results/small_counts.json")
    args = parser.parse_args()
    start = time.process_time()
    rows = grid()
    result = {"alphas": [str(a) for a in ALPHAS], "sizes": list(SIZES), "grid": rows, **summary(rows)}
    result["adult"] = adult(args.reps)
    result.update(reps=args.reps, adult_rows=ADULT_ROWS, fig_alpha=str(FIG_ALPHA), cpu_s=time.process_time() - start)
    Path(args.output).write_text(json.dumps(result, indent=1))
    print("| property | " + " | ".join((*NAMED, "WH only")) + " |")
    for p in PROPERTIES:
        print(f"| {p} | " + " | ".join(result["table"][m][p] for m in (*NAMED, "WH only")) + " |")
    for name, value in result["checks"].items():
        print(f"- {name}: {value}")
    print("\n| n | target | " + " | ".join(NAMED) + " |")
    for n in GROUPS:
        for target in ("income", "sex", "young"):
            cells = {r["mechanism"]: r for r in result["adult"] if r["n"] == n and r["target"] == target}
            print(f"| {n} | {target} | " + " | ".join(
                f"{cells[m]['expected']:.3f} ± {cells[m]['se_of_50']:.3f}"
                + (f" ({cells[m]['sampled']:.3f})" if "sampled" in cells[m] else "") for m in NAMED) + " |")


if __name__ == "__main__":
    main()
