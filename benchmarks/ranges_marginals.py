"""Range strategies and closed-form marginal strategies: error, SVD-bound ratio, plan and reconstruct time.

Every error is exact (no sampling) and reported as RMSE per workload query at
unit noise per unit of sensitivity — Gaussian: σ = Δ₂ (ρ = 1/2, ResidualPlanner's
privacy cost 1 and HDMM's convention); Laplace: per-row variance Δ₁² (ε = √2).
`svdb` is the SVD lower bound at the same noise scale, where computable.

1-D (n = 256 … 65536): all ranges, prefixes, width-32 ranges under the
identity, H2 and HB (HDMM's layouts), the Haar wavelet (Privelet), and the
planner's choice (branching factor and per-level budget split optimized on the
exact error). 2-D: all ranges and all prefixes on n × n as Kronecker products.
Marginals: all 3-way on Adult, Loans and CPS, all ≤3-way on synthetic domains
of 10 … 100 attributes of size 10, under the residual planner (sum and max
variance), identity marginals over the workload's subsets, OPT_M (any subset,
d ≤ 14) and per-query noise. The end-to-end Adult SQL dashboard closes the run.

    python -m benchmarks.ranges_marginals [--quick]

writes benchmarks/results/ranges_marginals.json (records) and .md (tables).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from itertools import combinations
from pathlib import Path
from typing import Callable

import numpy as np

from mechanisms.domain import Domain
from mechanisms.matrices import AllRange, Prefix
from mechanisms.ranges.optimize import (
    all_range_error,
    choose_kronecker,
    choose_range_strategy,
    identity_strategy,
    prefix_error,
    range_error,
    width_k,
)
from mechanisms.ranges.trees import RangeStrategy, hb, hierarchical
from mechanisms.residual import (
    ResidualTable,
    center,
    downward_closure,
    marginal_bundle_plan,
    max_variance_plan,
    reconstruct_batch,
    residual_scale,
    sum_variance_plan,
    svd_bound,
)
from mechanisms.ranges.wavelet import haar
from mechanisms.workload import Block, Term

RESULTS = Path(__file__).parent / "results"
DATA = Path(__file__).parents[2] / "shared" / "data"
NOISES = {"gaussian": 2, "laplace": 1}
SVD_DENSE_LIMIT = 4096  # eigenvalues of an n × n gram by dense eigvalsh up to here
OPT_M_MAX_ATTRIBUTES = 14


def record(workload, domain, d, mechanism, noise, rmse, svdb, plan_seconds, reconstruct_seconds, **extra) -> dict:
    return {
        "workload": workload,
        "domain": domain,
        "d": d,
        "mechanism": mechanism,
        "noise": noise,
        "rmse": float(rmse),
        "svdb": None if svdb is None else float(svdb),
        "plan_seconds": None if plan_seconds is None else float(plan_seconds),
        "reconstruct_seconds": None if reconstruct_seconds is None else float(reconstruct_seconds),
        **extra,
    }


# ---------------------------------------------------------------------------
# 1-D and 2-D ranges


def _workloads(n: int) -> dict[str, tuple[Callable[[RangeStrategy], float], int]]:
    """name -> (error function of a strategy, number of queries)."""
    width = width_k(n, 32)
    return {
        "all-range": (all_range_error, n * (n + 1) // 2),
        "prefix": (prefix_error, n),
        "width32": (lambda s: range_error(s, width), n - 31),
    }


def _fixed(n: int) -> dict[str, Callable[[], RangeStrategy]]:
    """The published strategies: HDMM's H2 and HB layouts and Privelet's Haar."""
    return {
        "identity": lambda: identity_strategy(n),
        "H2": lambda: hierarchical(n, 2, layout="balanced"),
        "HB": lambda: hb(n),
        "Haar (Privelet)": lambda: haar(n),
    }


def _singular_values(kind: str, n: int) -> np.ndarray | None:
    if kind == "prefix":  # closed form for the lower-triangular ones matrix
        k = np.arange(1, n + 1)
        return 1.0 / (2.0 * np.sin((2 * k - 1) * np.pi / (2 * (2 * n + 1))))
    if n > SVD_DENSE_LIMIT:
        return None
    gram = AllRange(n).gram().dense() if kind == "all-range" else width_k(n, 32).transpose().dense() @ width_k(n, 32).dense()
    return np.sqrt(np.maximum(np.linalg.eigvalsh(gram), 0.0))


def _svdb_rmse(singular: np.ndarray | None, n: int, queries: int) -> float | None:
    return None if singular is None else float(np.sqrt(singular.sum() ** 2 / n / queries))


def _reconstruct_seconds(strategy: RangeStrategy) -> float:
    y = np.random.default_rng(0).normal(size=strategy.shape[0])
    started = time.perf_counter()
    strategy.pinv().matvec(y)
    return time.perf_counter() - started


def one_d(sizes: list[int]) -> list[dict]:
    out = []
    for n in sizes:
        for name, (error, queries) in _workloads(n).items():
            svdb = _svdb_rmse(_singular_values(name, n), n, queries)
            for noise, norm in NOISES.items():
                for label, make in _fixed(n).items():
                    started = time.perf_counter()
                    strategy = make()
                    plan_seconds = time.perf_counter() - started
                    rmse = np.sqrt(strategy.sensitivity(norm) ** 2 * error(strategy) / queries)
                    out.append(record(name, f"[{n}]", 1, label, noise, rmse, svdb, plan_seconds, _reconstruct_seconds(strategy)))
                started = time.perf_counter()
                choice = choose_range_strategy(n, error, norm)
                plan_seconds = time.perf_counter() - started
                out.append(record(
                    name, f"[{n}]", 1, f"planned: {choice.label}", noise, np.sqrt(choice.error / queries), svdb,
                    plan_seconds, _reconstruct_seconds(choice.strategy), weights=choice.strategy.weights.tolist(),
                ))
                print(_line(out[-1]), flush=True)
    return out


def two_d(sizes: list[int]) -> list[dict]:
    out = []
    for n in sizes:
        domain = Domain(("x", "y"), (n, n))
        for name, factor, kind in (("all-range", AllRange(n), "all-range"), ("prefix", Prefix(n), "prefix")):
            queries = factor.shape[0] ** 2
            singular = _singular_values(kind, n)
            svdb = None if singular is None else float(np.sqrt((singular.sum() ** 2 / n) ** 2 / queries))
            block = Block(name, (), [Term(1.0, {"x": factor, "y": factor})])
            for noise, norm in NOISES.items():
                for label in ("H2", "HB", "Haar (Privelet)"):
                    s = _fixed(n)[label]()
                    one = s.sensitivity(norm) ** 2 * range_error(s, factor)
                    both = f"{label}⊗{label}".replace(" (Privelet)", "")
                    out.append(record(f"2-D {name}", f"[{n}, {n}]", 2, both, noise, np.sqrt(one * one / queries), svdb, 0.0, None))
                started = time.perf_counter()
                choices, error = choose_kronecker([block], domain, ("x", "y"), norm)
                plan_seconds = time.perf_counter() - started
                label = " ⊗ ".join(c.label for c in choices)
                out.append(record(f"2-D {name}", f"[{n}, {n}]", 2, f"planned: {label}", noise, np.sqrt(error / queries), svdb, plan_seconds, None))
                print(_line(out[-1]), flush=True)
    return out


# ---------------------------------------------------------------------------
# Marginals


def _all_k_way_codes(d: int, ks: list[int]) -> np.ndarray:
    width = max(ks)
    parts = []
    for k in ks:
        combos = np.fromiter((i for c in combinations(range(d), k) for i in c), dtype=np.int64).reshape(-1, k)
        parts.append(np.pad(combos, ((0, 0), (0, width - k)), constant_values=-1))
    return np.concatenate(parts)


def _reconstruct_all(table: ResidualTable, variance: np.ndarray, seed: int = 0, chunk: int = 4096) -> tuple[float, float]:
    """Reconstruct every workload marginal from simulated residual measurements (zero data,
    so the answers are the errors). Returns (seconds spent reconstructing, empirical RMSE).

    Noise for residual S is measured as the residual strategy would (i.i.d. noise of
    variance v_S·Π n_a² on n(S) values); the timed part is projection (Π_S y / Π n_a)
    and expansion into marginals, batched over marginals of equal shape. Residuals
    of the largest order belong to one marginal each and are drawn chunk by chunk.
    """
    rng = np.random.default_rng(seed)
    domain = table.domain
    top = max(len(s) for s in table.residuals)
    index = {s: i for i, s in enumerate(table.residuals)}
    seconds, squared = 0.0, 0.0

    def estimate(s, values) -> np.ndarray:
        return center(values, range(1, values.ndim)) / residual_scale(domain, s)

    def draw(ss: list[tuple[str, ...]]) -> np.ndarray:
        shape = domain.shape(ss[0])
        scale = np.asarray([np.sqrt(variance[index[s]]) * residual_scale(domain, s) for s in ss])
        return rng.normal(size=(len(ss), *shape)) * scale.reshape(-1, *([1] * len(shape)))

    stored: dict[tuple[str, ...], np.ndarray] = {}
    lower = [s for s in table.residuals if len(s) < top]
    by_shape: dict[tuple, list] = {}
    for s in lower:
        by_shape.setdefault(domain.shape(s), []).append(s)
    for group in by_shape.values():
        noisy = draw(group)
        started = time.perf_counter()
        for s, y in zip(group, estimate(group[0], noisy)):
            stored[s] = y
        seconds += time.perf_counter() - started
    marginals = table.marginals
    groups: dict[tuple, list[int]] = {}
    for i, q in enumerate(marginals):
        groups.setdefault(domain.shape(q), []).append(i)
    for shape, members in groups.items():
        k = len(shape)
        for start in range(0, len(members), chunk):
            rows = members[start : start + chunk]
            cliques = [marginals[i] for i in rows]
            fresh = estimate(cliques[0], draw(cliques)) if k == top else None
            started = time.perf_counter()
            residuals = {}
            for j in range(k + 1):
                for cols in combinations(range(k), j):
                    if j == k == top:
                        residuals[cols] = fresh
                    else:
                        residuals[cols] = np.stack([stored[tuple(q[c] for c in cols)] for q in cliques])
            answers = reconstruct_batch(shape, residuals)
            seconds += time.perf_counter() - started
            squared += float((answers**2).sum())
    return seconds, float(np.sqrt(squared / table.queries()))


def marginal_records(name: str, domain: Domain, ks: list[int], opt_m: bool, reconstruct: bool) -> list[dict]:
    out = []
    workload = ("all " + "/".join(map(str, ks)) + "-way") if len(ks) == 1 else f"all ≤{max(ks)}-way"
    codes = _all_k_way_codes(len(domain), ks)
    started = time.perf_counter()
    table = ResidualTable.from_codes(domain, codes, np.ones(len(codes)))
    plan = sum_variance_plan(table, 0.5)
    plan_seconds = time.perf_counter() - started
    queries = table.queries()
    svdb = float(np.sqrt(svd_bound(table) / queries))
    shape = f"{name} {list(domain.sizes)}" if len(domain) <= 14 else f"{name}: {len(domain)} × [{domain.sizes[0]}]"
    rec_seconds, empirical = _reconstruct_all(table, plan.variance) if reconstruct else (None, None)
    out.append(record(workload, shape, len(domain), "residual planner (sum-var)", "gaussian", plan.rmse(), svdb,
                      plan_seconds, rec_seconds, empirical_rmse=empirical, queries=queries,
                      max_cell_rmse=float(np.sqrt(plan.cell_variances().max()))))
    print(_line(out[-1]), flush=True)
    started = time.perf_counter()
    worst, gap = max_variance_plan(table, 0.5)
    seconds = time.perf_counter() - started
    out.append(record(workload, shape, len(domain), "residual planner (max-var)", "gaussian",
                      np.sqrt(worst.total_squared_error / queries), svdb, seconds, None, duality_gap=gap,
                      max_cell_rmse=float(np.sqrt(worst.cell_variances().max()))))
    if len(domain) <= 20:
        cliques = downward_closure(table.marginals)
        started = time.perf_counter()
        bundle = marginal_bundle_plan(table, cliques)
        seconds = time.perf_counter() - started
        out.append(record(workload, shape, len(domain), "identity marginals over the subsets", "gaussian",
                          np.sqrt(bundle.unit_error / 0.5 / queries), svdb, seconds, None))
    if opt_m and len(domain) <= OPT_M_MAX_ATTRIBUTES:
        every = downward_closure([domain.attributes])
        started = time.perf_counter()
        bundle = marginal_bundle_plan(table, every)
        seconds = time.perf_counter() - started
        out.append(record(workload, shape, len(domain), "OPT_M (weighted marginals, all 2^d)", "gaussian",
                          np.sqrt(bundle.unit_error / 0.5 / queries), svdb, seconds, None))
    # per-query: each marginal measured alone, optimal split: TSE = (Σ_Q √n(Q))² at σ² = Δ²/(2ρ), ρ = 1/2
    cells = table.cells
    out.append(record(workload, shape, len(domain), "per-query (each marginal alone)", "gaussian",
                      np.sqrt(np.sqrt(cells).sum() ** 2 / queries), svdb, 0.0, None))
    for r in out[1:]:
        print(_line(r), flush=True)
    return out


def marginals(quick: bool) -> list[dict]:
    adult = Domain.from_dict(json.loads((DATA / "adult" / "adult-domain.json").read_text()))
    loans = Domain.from_dict(dict(zip([f"l{i}" for i in range(12)], [101, 101, 101, 101, 3, 8, 36, 6, 51, 4, 5, 15])))
    cps = Domain.from_dict(dict(zip(["income", "age", "marital", "race", "sex"], [50, 100, 7, 4, 2])))
    out = []
    out += marginal_records("adult", adult, [3], opt_m=True, reconstruct=True)
    out += marginal_records("adult", adult, [1, 2, 3], opt_m=not quick, reconstruct=not quick)
    out += marginal_records("loans", loans, [3], opt_m=True, reconstruct=not quick)
    out += marginal_records("cps", cps, [3], opt_m=True, reconstruct=True)
    for d in ([10, 20] if quick else [10, 20, 50, 100]):
        synthetic = Domain.from_dict({f"x{i}": 10 for i in range(d)})
        out += marginal_records(f"synthetic d={d}", synthetic, [1, 2, 3], opt_m=d <= 10, reconstruct=True)
    return out


# ---------------------------------------------------------------------------


def dashboard(draws: int) -> list[dict]:
    from benchmarks.adult_dashboard import simulate

    result = simulate(draws=draws)
    out = []
    for name, key in (("dpsql planner (workload)", "planned"), ("per-query", "per_query")):
        s = result[key]
        out.append(record(
            f"Adult SQL dashboard ({result['queries']} range and GROUP BY queries)", "adult (14 columns)", 14, name,
            "gaussian", s["rmse_cells"], None, result["workload_seconds"] if key == "planned" else None, None,
            expected_rmse=s["expected_rmse_cells"], mean_query_rmse=s["mean_query_rmse"],
            coverage_95=s["coverage_95"], epsilon=result["epsilon"], delta=result["delta"], draws=result["draws"],
        ))
    print(f"dashboard: planned RMSE {out[0]['rmse']:.2f} vs per-query {out[1]['rmse']:.2f} "
          f"({result['rmse_ratio_per_query_over_planned']:.2f}x)", flush=True)
    return out


def _line(r: dict) -> str:
    ratio = f"{r['rmse'] / r['svdb']:.3f}" if r["svdb"] else "  -  "
    plan = f"{r['plan_seconds']:.3f}s" if r["plan_seconds"] is not None else "-"
    rec = f"{r['reconstruct_seconds']:.3f}s" if r["reconstruct_seconds"] is not None else "-"
    return f"{r['workload']:<28} {r['domain']:<22} {r['noise']:<8} {r['mechanism']:<44} rmse {r['rmse']:>10.4g}  ×svdb {ratio:>6}  plan {plan:>8}  rec {rec:>8}"


PUBLISHED = [  # (what, published value, how to compute ours)
    ("H_2, D=256, ε=1 Laplace split over levels, avg variance of all ranges", 220.06,
     lambda: _laplace_average(hierarchical(256, 2, root=False))),
    ("H_16, D=256, same", 79.23, lambda: _laplace_average(hierarchical(256, 16, root=False))),
    ("Privelet (Haar), D=1024, same", 410.29, lambda: _laplace_average(haar(1024))),
    ("H2 all-range n=256, Gaussian rootmse", 3.84, lambda: _rootmse(hierarchical(256, 2, layout="balanced"), AllRange(256))),
    ("HB all-range n=256", 4.45, lambda: _rootmse(hb(256), AllRange(256))),
    ("Wavelet all-range n=256", 3.51, lambda: _rootmse(haar(256), AllRange(256))),
    ("H2 all-range n=1024", 4.65, lambda: _rootmse(hierarchical(1024, 2, layout="balanced"), AllRange(1024))),
    ("HB all-range n=1024", 6.41, lambda: _rootmse(hb(1024), AllRange(1024))),
    ("Wavelet all-range n=1024", 4.32, lambda: _rootmse(haar(1024), AllRange(1024))),
    ("H2 prefix n=2048", 3.98, lambda: _rootmse(hierarchical(2048, 2, layout="balanced"), Prefix(2048))),
    ("HB prefix n=2048", 7.71, lambda: _rootmse(hb(2048), Prefix(2048))),
    ("Wavelet prefix n=2048", 3.96, lambda: _rootmse(haar(2048), Prefix(2048))),
]


def _laplace_average(strategy: RangeStrategy) -> float:
    n = strategy.tree.n
    return all_range_error(strategy) / (n * (n + 1) / 2) * 2 * strategy.sensitivity(1) ** 2


def _rootmse(strategy: RangeStrategy, workload) -> float:
    return float(np.sqrt(range_error(strategy, workload) * strategy.sensitivity(2) ** 2 / workload.shape[0]))


def _cell(r: dict | None, ratio: bool = False) -> str:
    if r is None:
        return "–"
    text = f"{r['rmse']:.3g}"
    return f"{text} ({r['rmse'] / r['svdb']:.2f}×)" if ratio and r["svdb"] else text


def markdown(records: list[dict], conditions: str) -> str:
    """The RESULTS.md section: commands, reproduced values, and compact tables of the records."""
    out = [
        "## Range trees, wavelets and closed-form marginal strategies (issue 4)",
        "",
        "```sh",
        "python -m benchmarks.ranges_marginals            # writes benchmarks/results/ranges_marginals.{json,md}",
        "python -m benchmarks.adult_dashboard --draws 3   # the 200-query SQL dashboard alone",
        "pytest tests/test_range_trees.py tests/test_residual_planner.py tests/test_adult_dashboard.py",
        "```",
        "",
        "Errors are exact (no sampling) and given as RMSE per workload query at unit noise per unit of "
        "sensitivity: Gaussian σ = Δ₂ (ρ = 1/2, HDMM's and ResidualPlanner's convention), Laplace per-row "
        "variance Δ₁² (ε = √2). ×SVDB: ratio to the SVD lower bound at the same noise (– where the bound "
        "was not computed: dense eigenvalues up to n = 4096; prefixes use the closed-form singular values). "
        + conditions,
        "",
        "### Published values reproduced (also asserted in tests/test_range_trees.py)",
        "",
        "| value | published | dpsql |",
        "|---|---:|---:|",
    ]
    for what, published, ours in PUBLISHED:
        out.append(f"| {what} | {published} | {ours():.4f} |")
    one = [r for r in records if r["d"] == 1]
    mechanisms = ["identity", "H2", "HB", "Haar (Privelet)"]
    out += ["", "### 1-D ranges (RMSE; planned: with ×SVDB)", "",
            "| workload | n | noise | identity | H2 | HB | Haar (Privelet) | planned (choice) | plan s |",
            "|---|---:|---|---:|---:|---:|---:|---|---:|"]
    keys = list(dict.fromkeys((r["workload"], r["domain"], r["noise"]) for r in one))
    for w, dom, noise in keys:
        rows = {r["mechanism"]: r for r in one if (r["workload"], r["domain"], r["noise"]) == (w, dom, noise)}
        planned = next(r for m, r in rows.items() if m.startswith("planned"))
        choice = planned["mechanism"].removeprefix("planned: ")
        out.append(f"| {w} | {dom.strip('[]')} | {noise} | " + " | ".join(_cell(rows.get(m)) for m in mechanisms)
                   + f" | {_cell(planned, True)} {choice} | {planned['plan_seconds']:.2f} |")
    two = [r for r in records if r["d"] == 2]
    out += ["", "### 2-D ranges (Kronecker products; RMSE)", "",
            "| workload | domain | noise | H2⊗H2 | HB⊗HB | Haar⊗Haar | planned (choice) | plan s |",
            "|---|---|---|---:|---:|---:|---|---:|"]
    for w, dom, noise in dict.fromkeys((r["workload"], r["domain"], r["noise"]) for r in two):
        rows = {r["mechanism"]: r for r in two if (r["workload"], r["domain"], r["noise"]) == (w, dom, noise)}
        planned = next(r for m, r in rows.items() if m.startswith("planned"))
        out.append(f"| {w} | {dom} | {noise} | " + " | ".join(_cell(rows.get(m)) for m in ("H2⊗H2", "HB⊗HB", "Haar⊗Haar"))
                   + f" | {_cell(planned, True)} {planned['mechanism'].removeprefix('planned: ')} | {planned['plan_seconds']:.2f} |")
    marg = [r for r in records if r["d"] > 2 and "dashboard" not in r["workload"]]
    out += ["", "### Marginal workloads (Gaussian, ρ = 1/2)", "",
            "| workload | domain | mechanism | RMSE | worst cell RMSE | ×SVDB | plan s | reconstruct s |",
            "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in marg:
        worst = f"{r['max_cell_rmse']:.4g}" if "max_cell_rmse" in r else "–"
        rec = f"{r['reconstruct_seconds']:.3g}" if r["reconstruct_seconds"] is not None else "–"
        out.append(f"| {r['workload']} | {r['domain']} | {r['mechanism']} | {r['rmse']:.4g} | {worst} | "
                   f"{r['rmse'] / r['svdb']:.3f} | {r['plan_seconds']:.3g} | {rec} |")
    dash = [r for r in records if "dashboard" in r["workload"]]
    if dash:
        p, q = dash
        out += ["", f"### {p['workload']}: ε = {p['epsilon']}, δ = {p['delta']}, {p['draws']} noise draws", "",
                "| mechanism | RMSE over all answer cells | expected (from the reported standard errors) | mean per-query RMSE | 95% CI coverage |",
                "|---|---:|---:|---:|---:|"]
        for r in dash:
            out.append(f"| {r['mechanism']} | {r['rmse']:.2f} | {r['expected_rmse']:.2f} | {r['mean_query_rmse']:.2f} | {r['coverage_95']:.3f} |")
        out.append(f"\nPer-query noise at the same budget has {q['rmse'] / p['rmse']:.2f}× the planner's RMSE; "
                   f"the dashboard (planning, one scan, reconstruction, 200 results through DB-API) took {p['plan_seconds']:.0f} s.")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only (a smoke run)")
    parser.add_argument("--draws", type=int, default=3, help="noise draws for the SQL dashboard")
    parser.add_argument("--render", action="store_true", help="only rewrite the .md from the saved .json")
    args = parser.parse_args()
    suffix = "_quick" if args.quick else ""
    if args.render:
        records = json.loads((RESULTS / f"ranges_marginals{suffix}.json").read_text())
        conditions = records[-1].get("conditions", "") if records else ""
        (RESULTS / f"ranges_marginals{suffix}.md").write_text(markdown(records, conditions))
        return
    sizes = [256, 1024] if args.quick else [256, 1024, 4096, 16384, 65536]
    started = time.perf_counter()
    records = one_d(sizes) + two_d([64] if args.quick else [64, 256]) + marginals(args.quick) + dashboard(args.draws)
    conditions = (
        f"Measured on {platform.machine()} with {__import__('os').cpu_count()} cores "
        f"({'quick run' if args.quick else 'full run'}, {time.perf_counter() - started:.0f} s in all); "
        "timings are wall-clock seconds on a shared machine."
    )
    RESULTS.mkdir(exist_ok=True)
    records[-1]["conditions"] = conditions
    (RESULTS / f"ranges_marginals{suffix}.json").write_text(json.dumps(records, indent=1))
    (RESULTS / f"ranges_marginals{suffix}.md").write_text(markdown(records, conditions))
    print(conditions)


if __name__ == "__main__":
    main()
