"""RAP for future queries on ADULT: the seed's partial-knowledge experiment (Avent 2023 §4.5).

The setting of [D] Table 4.5 (seeds/000 L2955-2971): ADULT, ε = 0.1, δ = 1/n² (n public),
n' = 1000, 1-of-3 thresholds (r = 1, k = 3), historical and future threshold
distributions T_H = T_F induced by a Uniform, Zipf or Geometric distribution over the
14 features (a threshold's probability the normalized product of its features', the
feature masses randomly permuted; Zipf a = 1 and Geometric p = 1/4, the seed not
stating them: p = 1/4 is its code's drift base). W_H is drawn without replacement
(so |W_H| <= C(14, 3) = 364), or i.i.d. as the seed does with `--iid` (|W_H| up to 1024,
repeats allowed: a repeated threshold is the same queries), W_F i.i.d. RAP is fitted to every consistent query of W_H (`mechanisms.rap.fit_workload`:
1-way marginals of all 14 attributes first, then the r-aware (T, K) rule) and scored
on W_F by the future error err_F (Def 4.5.3): the mean over future thresholds of each
threshold's max absolute error on normalized answers, with its 95% interval (1.96
sd/sqrt(|W_F|), ddof = 1; one RAP run per point, so the interval covers the future
thresholds' sampling, not the mechanism's noise). Also reported: the mean absolute error
over every future consistent query, and RAP's present error (max over W_H's queries).

Baselines: All-0 (the seed's only baseline here); GM with full knowledge (every
consistent query of the distinct future thresholds answered with Gaussian noise at ρ/m
each, clipped to [0, 1], simulated at the exact variance as in `benchmarks.rap`: it
knows W_F, which RAP does not); the 1-way model (all of ρ on the 1-way marginals, D'
their product: what is learnable without any workload). `--rules` adds RAP with the
marginal T·K rule (few rounds, many queries) beside the r-aware one.

Drift (Def 4.5.2, Fig 4.16): Geometric F_H, |W_H| = 4, one RAP fit; future workloads
from F_F drifted by γ, with the expected TV(F_H, F_F) over the drift's randomness.

Beyond the seed: the same exact-setting protocol on 3-way marginals (3-of-3, Uniform and
Geometric, |W_H| in {4, 16, 64}): dpsql's own use, past marginal queries fitting D' for
future marginal queries (`dpsql synth --mechanism rap --workload past`).

    python -m benchmarks.rap_future [--quick] [--runs 1] [--seed 7] [--epsilons 0.1] [--rules] [--iid] [--grid T,K ...]
        [--settings exact marginals drift] [--distributions ...] [--history ...] [--output FILE] [--append]

writes benchmarks/results/rap_future.json (a list of records; not with --quick unless --output) and
prints the tables.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from benchmarks.datasets import DATA, FILES, domain_sizes
from benchmarks.rap import device
from mechanisms.accounting import epsilon_delta_to_zcdp
from mechanisms.domain import Domain
from mechanisms.noise import RandomSource
from mechanisms.rap import RAPConfig, RecordCounts
from mechanisms.rap.future import (
    drifted,
    feature_probabilities,
    fit_workload,
    independent_model,
    sample_thresholds,
    threshold_errors,
    total_variation,
)

RESULTS = Path(__file__).parent / "results" / "rap_future.json"
K = 3
FULL = {
    "distributions": ("uniform", "zipf", "geometric"),
    "history": (1, 4, 16, 64),
    "future": 64,
    "gammas": (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 1.0),
    "drift_history": 4,
    "config": RAPConfig(),
    # dpsql's own use (past marginals -> future marginals), beside the seed's 1-of-3 setting
    "marginals": {"distributions": ("uniform", "geometric"), "history": (4, 16, 64)},
}
QUICK = {
    "distributions": ("uniform", "geometric"),
    "history": (1, 4),
    "future": 8,
    "gammas": (0.0, 1.0),
    "drift_history": 4,
    "config": RAPConfig(synthetic_rows=100, max_measured=32),
    "marginals": None,
}


def load_adult() -> tuple[Domain, np.ndarray]:
    domain = Domain.from_dict(domain_sizes("adult"))
    records = np.loadtxt(DATA / FILES["adult"][0], delimiter=",", skiprows=1, dtype=np.int64, ndmin=2)
    return domain, records


def expected_tv(features: np.ndarray, gamma: float, draws: int = 2000) -> float:
    """E TV(F_H, F_F) over the drift's uniforms (Fig 4.12)."""
    return float(np.mean([total_variation(features, drifted(features, gamma, seed)) for seed in range(draws)]))


def gm(m: int, rho: float, n: int, seed: int):
    """GM on m queries at rho / m each: normalized answers + N(0, m / (2 rho n^2)), clipped to [0, 1]."""
    sigma = math.sqrt(m / (2 * rho)) / n
    rng = np.random.default_rng(seed)
    return lambda truth: np.clip(truth + sigma * rng.standard_normal(truth.size), 0.0, 1.0)


def summarize(errors, present=None) -> dict:
    estimate, half = errors.future()
    out = {"err_F": estimate, "ci95": half, "mean_error": errors.mean, "max_error": errors.worst}
    if present is not None:
        out["present_max_error"] = present.worst
    return out


def fit(domain, counts, history, rho, n, config):
    tick, cpu = time.perf_counter(), time.process_time()
    r = history[0].r
    result = fit_workload(domain, [t.attributes for t in history], rho, counts, RandomSource(), r=r, rows=n, config=config)
    seconds, cpu = time.perf_counter() - tick, time.process_time() - cpu
    return result, {
        "rounds": result.release.rounds,
        "per_round": result.release.per_round,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "phases": result.seconds,
        "history_queries": sum(math.prod(domain.shape(t.attributes)) for t in history),
        "load_average": os.getloadavg()[0],
    }


def exact_setting(domain, counts, n, epsilon, setup, seed, run, rules, r=1, distributions=None, sizes=None,
                  iid=False, grid=()) -> list[dict]:
    rho = epsilon_delta_to_zcdp(epsilon, 1.0 / n**2)
    config = setup["config"]
    kind = f"{r}-of-{K}" if r < K else f"{K}-way marginals"
    records = []
    for d_index, name in enumerate(distributions or setup["distributions"]):
        features = feature_probabilities(name, len(domain), seed=seed + 100 * run + d_index)
        future = sample_thresholds(domain, features, K, r, setup["future"], seed=seed + 100 * run + 50 + d_index, replace=True)
        m_future = sum(math.prod(domain.shape(t.attributes)) for t in dict.fromkeys(future))
        independent = independent_model(domain, counts, rho, RandomSource(), rows=n)
        base = threshold_errors(future, counts, n, {
            "all-0": None, "1-way model": independent.relaxed, "GM (knows W_F)": gm(m_future, rho, n, seed + run),
        })
        common = {"experiment": "exact", "workload": kind, "distribution": name, "epsilon": epsilon, "rho": rho, "run": run,
                  "future_thresholds": len(future), "future_queries": m_future}
        for h in sizes or setup["history"]:
            history = sample_thresholds(domain, features, K, r, h, seed=seed + 100 * run + 10 * h + d_index, replace=iid)
            # for marginals (r = k) the T·K rule is RAP's own: the variant is a second run of the same (T, K)
            variants = {"RAP": config} | ({"RAP (T·K rule)": replace(config, r_aware=False)} if rules else {})
            variants |= {f"RAP (T={t}, K={k})": replace(config, rounds=t, per_round=k) for t, k in grid}
            for label, variant in variants.items():
                result, detail = fit(domain, counts, history, rho, n, variant)
                present = threshold_errors(history, counts, n, {"rap": result.model.relaxed})["rap"]
                errors = threshold_errors(future, counts, n, {"rap": result.model.relaxed})["rap"]
                records.append(common | {"history": h, "mechanism": label, "iid_history": iid,
                                         "distinct_history": len({t.attributes for t in history})} | summarize(errors, present) | detail)
                print(f"{kind} {name:9s} |W_H|={h:4d} eps={epsilon:g} {label}: T={detail['rounds']} K={detail['per_round']} "
                      f"err_F {records[-1]['err_F']:.4f} ± {records[-1]['ci95']:.4f}  present {present.worst:.4f}  "
                      f"{detail['seconds']:.0f}s", flush=True)
            for label, errors in base.items():
                records.append(common | {"history": h, "mechanism": label} | summarize(errors))
        print(f"{kind} {name:9s} baselines: " + ", ".join(f"{k} {v.future()[0]:.4f}" for k, v in base.items()), flush=True)
    return records


def drift_setting(domain, counts, n, epsilon, setup, seed, run) -> list[dict]:
    rho = epsilon_delta_to_zcdp(epsilon, 1.0 / n**2)
    features = feature_probabilities("geometric", len(domain), seed=seed + 100 * run + 7)
    h = setup["drift_history"]
    history = sample_thresholds(domain, features, K, 1, h, seed=seed + 100 * run + 8, replace=False)
    result, detail = fit(domain, counts, history, rho, n, setup["config"])
    independent = independent_model(domain, counts, rho, RandomSource(), rows=n)
    records = []
    for g_index, gamma in enumerate(setup["gammas"]):
        future_features = drifted(features, gamma, seed=seed + 100 * run + 20 + g_index)
        future = sample_thresholds(domain, future_features, K, 1, setup["future"], seed=seed + 100 * run + 40 + g_index, replace=True)
        errors = threshold_errors(future, counts, n, {
            "RAP": result.model.relaxed, "all-0": None, "1-way model": independent.relaxed,
        })
        common = {"experiment": "drift", "workload": f"1-of-{K}", "distribution": "geometric", "history": h, "gamma": gamma, "epsilon": epsilon,
                  "rho": rho, "run": run, "future_thresholds": len(future),
                  "tv": total_variation(features, future_features), "expected_tv": expected_tv(features, gamma)}
        for label, e in errors.items():
            records.append(common | {"mechanism": label} | summarize(e) | (detail if label == "RAP" else {}))
        print(f"drift γ={gamma:<4g} (E TV {common['expected_tv']:.2f}): " +
              ", ".join(f"{k} {v.future()[0]:.4f}±{v.future()[1]:.4f}" for k, v in errors.items()), flush=True)
    return records


def tables(records: list[dict]) -> str:
    lines = ["Exact setting (T_H = T_F), err_F ± 95% half-width (mean abs error); RAP: T, K, present max error", "",
             "| workload | distribution | ε | \\|W_H\\| | RAP | T, K | RAP present | RAP (T·K rule) | 1-way model | GM (knows W_F) | All-0 |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    exact = [r for r in records if r["experiment"] == "exact"]
    keyed: dict = {}
    for r in exact:
        key = (r["workload"], r["distribution"], r["epsilon"], r["history"])
        keyed.setdefault(key, {}).setdefault(r["mechanism"], []).append(r)

    def cell(rs):
        if not rs:
            return "—"
        f = np.mean([r["err_F"] for r in rs])
        return f"{f:.4f} ± {np.mean([r['ci95'] for r in rs]):.4f} ({np.mean([r['mean_error'] for r in rs]):.1e})"

    for (kind, name, eps, h), by in keyed.items():
        rap = by.get("RAP", [])
        tk = "; ".join(f"{r['rounds']},{r['per_round']}" for r in rap)
        lines.append(
            f"| {kind} | {name} | {eps:g} | {h} | {cell(rap)} | {tk} | "
            f"{np.mean([r['present_max_error'] for r in rap]):.4f} | {cell(by.get('RAP (T·K rule)', []))} | "
            f"{cell(by.get('1-way model', []))} | {cell(by.get('GM (knows W_F)', []))} | {cell(by.get('all-0', []))} |"
        )
    drift = [r for r in records if r["experiment"] == "drift"]
    if drift:
        lines += ["", "Drift (Geometric F_H, |W_H| = 4), err_F ± 95% half-width", "",
                  "| γ | E TV | RAP | 1-way model | All-0 |", "|---|---|---|---|---|"]
        by_gamma: dict = {}
        for r in drift:
            by_gamma.setdefault((r["epsilon"], r["gamma"]), {}).setdefault(r["mechanism"], []).append(r)
        for (eps, gamma), by in by_gamma.items():
            tv = by["RAP"][0]["expected_tv"]
            lines.append(f"| {gamma:g} | {tv:.2f} | {cell(by['RAP'])} | {cell(by['1-way model'])} | {cell(by['all-0'])} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small settings, n' = 100 (a smoke run, not the reported figures)")
    parser.add_argument("--runs", type=int, default=1, help="independent repetitions (workloads and RAP noise)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the feature permutations and workloads")
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.1])
    parser.add_argument("--rules", action="store_true", help="also run RAP with the marginal T·K rule")
    parser.add_argument("--settings", nargs="+", choices=("exact", "marginals", "drift"),
                        default=["exact", "marginals", "drift"], help="which experiments (default: all)")
    parser.add_argument("--distributions", nargs="+", choices=("uniform", "zipf", "geometric"), default=None,
                        help="override the distributions of the exact and marginal settings")
    parser.add_argument("--history", type=int, nargs="+", default=None, help="override the |W_H| values")
    parser.add_argument("--output", type=Path, default=None, help=f"default {RESULTS} (not written by --quick)")
    parser.add_argument("--iid", action="store_true", help="draw W_H i.i.d. as the seed does (|W_H| up to 1024)")
    parser.add_argument("--grid", type=lambda v: tuple(int(x) for x in v.split(",")), nargs="+", default=(),
                        help="(T, K) settings run beside the rule, e.g. --grid 1,256 4,64 16,16 64,4")
    parser.add_argument("--append", action="store_true", help="add the records to those already in the output file")
    args = parser.parse_args()
    setup = QUICK if args.quick else FULL
    domain, records_ = load_adult()
    n = len(records_)
    counts = RecordCounts(domain, records_)
    started = time.perf_counter()
    records = []
    for run in range(args.runs):
        for epsilon in args.epsilons:
            if "exact" in args.settings:
                records += exact_setting(domain, counts, n, epsilon, setup, args.seed, run, args.rules, 1,
                                         args.distributions, args.history, args.iid, args.grid)
            if setup["marginals"] and "marginals" in args.settings:
                m = setup["marginals"]
                records += exact_setting(domain, counts, n, epsilon, setup, args.seed, run, args.rules, K,
                                         args.distributions or m["distributions"], args.history or m["history"])
            if "drift" in args.settings:
                records += drift_setting(domain, counts, n, epsilon, setup, args.seed, run)
    where = device()
    for r in records:
        r["device"] = where
        r["quick"] = args.quick
    output = args.output or (None if args.quick else RESULTS)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        earlier = json.loads(output.read_text()) if args.append and output.exists() else []
        output.write_text(json.dumps(earlier + records, indent=2) + "\n")
    print(tables(records))
    print(f"\n{time.perf_counter() - started:.0f}s in all" + (f", written to {output}" if output else ""))


if __name__ == "__main__":
    main()
