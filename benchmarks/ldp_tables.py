"""The LDP thesis' tables (seeds/001) and the hybrid model's comparison (seeds/000), beside dpsql's values.

    python -m benchmarks.ldp_tables [--parts fo ranges marginals blender] [--runs 5] [--sizes 8 16 20 22]

Every record of benchmarks/results/ldp_tables.json is one value: table, setting, published (None
where the thesis shows only a figure or a claim, given in `claim`), dpsql, metric, method (exact,
or Monte-Carlo with its draws); lower is better except where the metric says otherwise.

- `fo`: N·Var of each frequency oracle at e^ε = 3 (eqs. 2.4, 2.6, 2.7, Lemma 4; §5.2's V_F for OLH
  and HRR), exact, from dpsql's variance functions with the clients' exact probabilities.
- `ranges`: Tables 5.2 (arbitrary ranges) and 5.3 (prefixes) at the thesis' settings (§5.5):
  N = 2²⁶ users, Cauchy data (location D/2, scale D/32, truncated to [0, D)), D ∈ {2⁸, 2¹⁶, 2²⁰,
  2²²}, ε ∈ {0.2 … 1.4}, HH^c_B = TreeOUE with consistency (B = 2, 4, 16 where log_B D is an
  integer) and HaarHRR; all ranges for D ≤ 2¹⁶ (and, for D = 2¹⁶, also from start points every
  2⁸), all ranges from start points every 2¹⁴ (D = 2²⁰) and 2¹⁷ (D = 2²²), all prefixes.
  Monte-Carlo with `--runs` fresh populations (the thesis: 5), each simulated exactly in
  distribution (level choices as a multinomial split, OUE's counts as
  binomials, HaarHRR user by user), averaged exactly over the query set; the value is
  sqrt(mean squared error)·10³ — the published "MSE ×1000" behaves as RMSE ×1000 (see RESULTS.md).
  For D = 2⁸ also the exact expectation from `mechanisms.ldp.ranges`' variances.
- `marginals`: Table 4.2 (INPEM's one-step failures; taxi data absent, so nltcs, resampled with
  replacement as §4.4.1 does, d > 16 by duplicating columns), and the method comparison of
  Figs 4.3/4.6 (mean total variation over all k-way marginals, nltcs, N = 2¹⁸, ε = ln 3).
- `blender`: the hybrid model on adult (§2.2–2.3 of seeds/000): counts of one attribute blended
  from a 5% (1%, 10%) opt-in group's Laplace counts and the clients' GRR reports, against each
  group alone (Fig. 2.9's claim), with the blend's error bars' coverage; means of age and
  hours-per-week with the KVH/PWH weights, exact (Lemmas 2.3.4–2.3.19) and Monte-Carlo; and
  Corollary 2.3.21's 17/8 instance.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from benchmarks.datasets import DATA, domain_sizes
from benchmarks import ldp_simulation as simulate
from mechanisms.ldp import blender, client, frequency, marginals, ranges

RESULTS = Path(__file__).parent / "results" / "ldp_tables.json"
SEED = 0
N_RANGES = 1 << 26
EPSILONS = (0.2, 0.4, 0.6, 0.8, 1.0, 1.1, 1.2, 1.4)
# §5.5: all ranges (step 1), or all ranges from start points this far apart; D = 2¹⁶ both ways (RESULTS.md)
START_STEPS = {8: (1,), 16: (1, 1 << 8), 20: (1 << 14,), 22: (1 << 17,)}
COLUMNS = {8: (2, 4, 16, "haar"), 16: (2, 4, 16, "haar"), 20: (2, 4, 16, "haar"), 22: (2, 4, "haar")}
# Tables 5.2 / 5.3 as printed (log₂D -> ε -> one value per column of COLUMNS);
# panel (c)'s D is OCR'd "2%", read as 2²⁰
PUBLISHED_52 = {
    8: {0.2: (4.269, 4.037, 4.176, 3.684), 0.4: (2.024, 2.193, 2.590, 1.831), 0.6: (1.388, 1.341, 1.535, 1.278),
        0.8: (1.002, 0.950, 1.130, 0.987), 1.0: (0.844, 0.744, 0.844, 0.811), 1.1: (0.722, 0.667, 0.820, 0.748),
        1.2: (0.684, 0.658, 0.642, 0.732), 1.4: (0.571, 0.542, 0.592, 0.601)},
    16: {0.2: (6.745, 7.129, 8.692, 6.666), 0.4: (3.616, 3.424, 4.648, 3.526), 0.6: (2.333, 2.360, 2.793, 2.342),
         0.8: (1.644, 1.728, 2.075, 1.711), 1.0: (1.356, 1.377, 1.642, 1.484), 1.1: (1.303, 1.270, 1.597, 1.345),
         1.2: (1.090, 1.140, 1.433, 1.201), 1.4: (0.922, 0.995, 1.158, 1.130)},
    20: {0.2: (10.043, 10.493, 11.511, 9.285), 0.4: (5.378, 4.751, 5.617, 5.261), 0.6: (3.605, 3.603, 4.483, 3.693),
         0.8: (3.047, 3.042, 3.352, 3.316), 1.0: (2.522, 2.690, 3.131, 2.915), 1.1: (2.556, 2.540, 2.729, 2.722),
         1.2: (2.619, 2.488, 2.757, 2.640), 1.4: (2.339, 2.304, 2.652, 2.505)},
    22: {0.2: (8.629, 8.889, 8.422), 0.4: (4.546, 4.951, 4.470), 0.6: (3.181, 3.420, 3.085),
         0.8: (2.657, 2.692, 2.462), 1.0: (2.247, 2.358, 2.254), 1.1: (1.979, 2.252, 2.139),
         1.2: (2.120, 2.066, 1.946), 1.4: (1.650, 1.885, 1.990)},
}
PUBLISHED_53 = {
    8: {0.2: (4.306, 2.968, 4.282, 2.857), 0.4: (1.859, 1.439, 1.828, 1.377), 0.6: (1.366, 0.957, 1.758, 1.031),
        0.8: (0.937, 0.778, 0.896, 0.758), 1.0: (0.802, 0.561, 0.637, 0.613), 1.1: (0.684, 0.533, 0.666, 0.626),
        1.2: (0.658, 0.437, 0.670, 0.568), 1.4: (0.573, 0.420, 0.478, 0.494)},
    16: {0.2: (7.701, 6.172, 7.014, 5.870), 0.4: (3.266, 3.101, 3.744, 2.880), 0.6: (2.402, 2.176, 2.426, 2.018),
         0.8: (1.663, 1.503, 1.834, 1.511), 1.0: (1.338, 1.220, 1.426, 1.244), 1.1: (1.202, 1.051, 1.259, 1.120),
         1.2: (1.080, 0.978, 1.147, 1.054), 1.4: (0.973, 0.848, 0.981, 0.973)},
    20: {0.2: (8.874, 8.255, 10.462, 7.237), 0.4: (4.734, 4.395, 5.754, 4.271), 0.6: (3.788, 3.485, 4.055, 3.377),
         0.8: (3.287, 3.094, 3.268, 3.108), 1.0: (3.022, 2.848, 2.826, 2.920), 1.1: (3.053, 2.756, 2.727, 2.727),
         1.2: (3.145, 2.627, 2.914, 2.754), 1.4: (2.975, 2.659, 2.543, 2.696)},
    22: {0.2: (8.620, 8.638, 8.099), 0.4: (4.181, 4.330, 4.233), 0.6: (2.932, 3.077, 3.063),
         0.8: (2.215, 2.590, 2.528), 1.0: (1.958, 2.246, 2.326), 1.1: (1.777, 2.319, 2.181),
         1.2: (1.929, 2.174, 2.205), 1.4: (1.613, 1.868, 2.156)},
}
# Table 4.2: INPEM's failed/total marginals on the taxi data, (N, d, k, ε) -> failed
PUBLISHED_42 = {(1 << 16, 8, 1, 0.2): 3, (1 << 18, 8, 2, 0.1): 15, (1 << 16, 8, 2, 0.2): 3, (1 << 16, 12, 2, 0.2): 19,
                (1 << 18, 16, 2, 0.1): 120, (1 << 18, 16, 2, 0.2): 72, (1 << 19, 24, 2, 0.2): 276}


def rec(table, setting, published, dpsql, metric, method, **extra):
    return {"table": table, "setting": setting, "published": published, "dpsql": dpsql, "metric": metric,
            "method": method, **extra}


def column_name(column) -> str:
    return "HaarHRR" if column == "haar" else f"HH^c_{column}"


# --------------------------------------------------------------------------- frequency oracles

def fo_records() -> list[dict]:
    epsilon, n = math.log(3), 1
    e = 3.0
    out = []
    p, q = (float(x) for x in client.RandomizedResponse(epsilon).support_probabilities)
    out.append(rec("§2.4 FO variance", "RR (binary), e^ε = 3", e / (e - 1) ** 2,
                   float(frequency.support_variance(0.0, n, p, q)), "N·Var", "exact (eq. 2.4)"))
    p, q = (float(x) for x in client.SymmetricUnaryEncoding(epsilon, 2).support_probabilities)
    out.append(rec("§2.4 FO variance", "SUE / INPRR, f_j = 0", math.sqrt(e) / (math.sqrt(e) - 1) ** 2,
                   float(frequency.support_variance(0.0, n, p, q)), "N·Var", "exact (eq. 2.6)"))
    p, q = (float(x) for x in client.OptimizedUnaryEncoding(epsilon, 2).support_probabilities)
    out.append(rec("§2.4 FO variance", "OUE, f_j = 0", 4 * e / (e - 1) ** 2,
                   float(frequency.support_variance(0.0, n, p, q)), "N·Var", "exact (eq. 2.7)"))
    out.append(rec("§2.4 FO variance", "OUE, f_j = 1", 4 * e / (e - 1) ** 2 + 1,
                   float(frequency.support_variance(1.0, n, p, q)), "N·Var", "exact ((2.5) with f_j = 1)"))
    for d in (16, 256):
        p, q = (float(x) for x in client.DirectEncoding(epsilon, d).support_probabilities)
        out.append(rec("§2.4 FO variance", f"GRR, D = {d}, f_j = 0", (e + d - 2) / (e - 1) ** 2,
                       float(frequency.support_variance(0.0, n, p, q)), "N·Var", "exact (Lemma 4)"))
    p, q = (float(x) for x in client.LocalHashing(epsilon, 256).support_probabilities)
    out.append(rec("§2.4 FO variance", "OLH (g = 4), f_j = 0", 4 * e / (e - 1) ** 2,
                   float(frequency.support_variance(0.0, n, p, q)), "N·Var", "exact (V_F as §2.4 states)"))
    size, users = 256, 1 << 26
    hrr = client.HadamardResponse(epsilon, size)
    uniform = np.full(size, 1 / size)
    counts = np.r_[0, np.full(size - 1, users / (size - 1))]
    var = frequency.hadamard_variance(uniform, counts, float(hrr.truth), users)[0] * users
    out.append(rec("§2.4 FO variance", "HRR, D = 256, uniform data, expected counts", 4 * e / (e - 1) ** 2, float(var),
                   "N·Var", "exact (V_F as §5.2 states)"))
    return out


# --------------------------------------------------------------------------- Tables 5.2 / 5.3

def cauchy_population(size: int, users: int, rng) -> np.ndarray:
    """A histogram of `users` draws from Cauchy(size/2, size/32) truncated to [0, size), by bucket."""
    edges = np.arange(size + 1)
    cdf = np.arctan((edges - size / 2) / (size / 32)) / np.pi
    return rng.multinomial(users, np.diff(cdf) / (cdf[-1] - cdf[0]))


def range_mse(errors: np.ndarray, step: int) -> float:
    """Mean squared error of all ranges [a, b], b ≥ a, a ∈ {0, step, 2·step, …}, from the leaf errors (O(D))."""
    size = len(errors)
    prefix = np.concatenate([[0.0], np.cumsum(errors)])  # prefix[i]: error of [0, i)
    tail1 = np.concatenate([np.cumsum(prefix[::-1])[::-1], [0.0]])  # tail1[j] = Σ_{i≥j} prefix[i]
    tail2 = np.concatenate([np.cumsum(prefix[::-1] ** 2)[::-1], [0.0]])
    a = np.arange(0, size, step)
    total = tail2[a + 1] - 2 * prefix[a] * tail1[a + 1] + (size - a) * prefix[a] ** 2
    return float(total.sum() / (size - a).sum())


def prefix_mse(errors: np.ndarray) -> float:
    """Mean squared error of the prefixes [0, b], b = 0 … D − 1."""
    return float(np.mean(np.cumsum(errors) ** 2))


def simulate_ranges(log_size: int, runs: int, rng) -> dict:
    """(column, ε) -> [(range MSE per START_STEPS entry …, prefix MSE) per run]."""
    size = 1 << log_size
    out = {}
    for _ in range(runs):
        histogram = cauchy_population(size, N_RANGES, rng)
        truth = histogram / N_RANGES
        for column in COLUMNS[log_size]:
            if column == "haar":
                plus, minus = simulate.haar_signs(simulate.level_split(histogram, log_size, rng), rng)
            else:
                height = ranges.tree_height(size, column)
                nodes = [simulate.node_histogram(leaves, column ** level)
                         for level, leaves in enumerate(simulate.level_split(histogram, height, rng), start=1)]
            for epsilon in EPSILONS:
                if column == "haar":
                    truth_p = float(client.rr_truth(epsilon))
                    tallies = [simulate.flip_tallies(u, d, truth_p, rng) for u, d in zip(plus, minus)]
                    leaves = ranges.haar_leaves([t[0] for t in tallies], [t[1] for t in tallies], truth_p)
                else:
                    p, q = (float(x) for x in client.OptimizedUnaryEncoding(epsilon, 2).support_probabilities)
                    ones, counts = simulate.hh_oue_tallies(nodes, column, p, q, rng)
                    leaves = ranges.consistent_leaves(ranges.oue_levels(ones, counts, p, q), column)
                errors = leaves - truth
                out.setdefault((column, epsilon), []).append(
                    tuple(range_mse(errors, step) for step in START_STEPS[log_size]) + (prefix_mse(errors),))
    return out


def _exact_covariance(column, epsilon: float, truth: np.ndarray, users: int) -> np.ndarray:
    """The leaf estimates' exact covariance (D = 2⁸), level/coefficient counts at their expectations."""
    size = len(truth)
    population = np.diag(truth) - np.outer(truth, truth)
    cov = -population / (users - 1)
    if column == "haar":
        height = size.bit_length() - 1
        c2 = 1 / (2 * float(client.rr_truth(epsilon)) - 1) ** 2
        x = np.arange(size)
        for level in range(1, height + 1):
            k_count = size >> level
            s = 1 - 2 * ((x >> (level - 1)) & 1)
            chars = simulate.parity((x >> level)[:, None] & np.arange(k_count)[None, :])  # [x, k]
            g = s[:, None] * chars / (k_count * (1 << level))  # leaf weights of θ̂_{l,k}
            coefficient = (s * truth) @ chars
            per = (c2 - 1 + users / (users - 1) * (1 - coefficient ** 2)) / (users / (height * k_count))
            cov += (g * per) @ g.T
        return cov
    height = ranges.tree_height(size, column)
    p, q = (float(x) for x in client.OptimizedUnaryEncoding(epsilon, 2).support_probabilities)
    rows = [ranges.consistency_weights(np.eye(size)[x], column, height)[1] for x in range(size)]
    for level in range(1, height + 1):
        f = truth.reshape(column ** level, -1).sum(axis=1)
        weights = np.array([r[level - 1] for r in rows])  # [leaf, node]
        inner = np.diag((q * (1 - q) + f * (p - q) * (1 - p - q)) / (p - q) ** 2)
        inner += users / (users - 1) * (np.diag(f) - np.outer(f, f))
        cov += weights @ inner @ weights.T / (users / height)
    return cov


def exact_ranges(column, epsilon: float, truth: np.ndarray) -> tuple[float, float]:
    """Exact expected (range MSE over all ranges, prefix MSE) for D = 2⁸ (trace of covariance × query gram)."""
    size = len(truth)
    cov = _exact_covariance(column, epsilon, truth, N_RANGES)
    x = np.arange(size)
    lo, hi = np.minimum.outer(x, x), np.maximum.outer(x, x)
    all_ranges = (lo + 1) * (size - hi)  # #ranges containing both x and y
    prefixes = size - hi
    return (float(np.sum(cov * all_ranges) / (size * (size + 1) / 2)), float(np.sum(cov * prefixes) / size))


def range_records(sizes, runs: int, rng) -> list[dict]:
    out = []
    for log_size in sizes:
        started = time.perf_counter()
        results = simulate_ranges(log_size, runs, rng)
        print(f"  D = 2^{log_size}: {time.perf_counter() - started:.0f} s", flush=True)
        expected_truth = np.diff(np.arctan((np.arange((1 << log_size) + 1) - (1 << log_size) / 2)
                                           / ((1 << log_size) / 32)))
        expected_truth /= expected_truth.sum()
        for i, column in enumerate(COLUMNS[log_size]):
            for epsilon in EPSILONS:
                mse = np.array(results[(column, epsilon)])
                setting = f"D = 2^{log_size}, ε = {epsilon}, {column_name(column)}"
                steps = START_STEPS[log_size]
                cells = [("Table 5.2", PUBLISHED_52, j, "all ranges" if step == 1 else
                          f"all ranges from every 2^{step.bit_length() - 1}-th start")
                         for j, step in enumerate(steps)] + [("Table 5.3", PUBLISHED_53, len(steps), "all prefixes")]
                for table, published, j, queries in cells:
                    out.append(rec(table, setting, published[log_size][epsilon][i], 1e3 * math.sqrt(mse[:, j].mean()),
                                   "RMSE ×10³", f"MC, {runs} runs of N = 2^26; {queries}",
                                   mse=float(mse[:, j].mean()),
                                   run_rmse=[round(1e3 * math.sqrt(v), 4) for v in mse[:, j]]))
                if log_size == 8:
                    exact = exact_ranges(column, epsilon, expected_truth)
                    for table, published, j, queries in (("Table 5.2", PUBLISHED_52, 0, "all ranges"),
                                                         ("Table 5.3", PUBLISHED_53, 1, "all prefixes")):
                        out.append(rec(table, setting, published[log_size][epsilon][i], 1e3 * math.sqrt(exact[j]),
                                       "RMSE ×10³", f"exact expectation (Cauchy bucket probabilities as the data); "
                                       f"{queries}", mse=exact[j]))
    return out


# --------------------------------------------------------------------------- marginals (Ch. 4)

def nltcs_records(attributes: int) -> np.ndarray:
    """nltcs' rows as d-bit integers; d > 16 appends copies of the first d − 16 attributes (§4.4.4)."""
    bits = np.loadtxt(DATA / "nltcs" / "nltcs.csv", delimiter=",", skiprows=1, dtype=np.int64)
    bits = np.concatenate([bits, bits[:, : max(0, attributes - bits.shape[1])]], axis=1)[:, :attributes]
    return bits @ (1 << np.arange(attributes, dtype=np.int64))


def em_failure_records(draws: int, rng) -> list[dict]:
    out = []
    for (users, d, k, epsilon), published in PUBLISHED_42.items():
        population = nltcs_records(d)
        masks = marginals.marginal_masks(d, k)
        truth = float(client.InputEM(epsilon, d).truth)
        failures = []
        for _ in range(draws):
            records = rng.choice(population, size=users)
            _, iterations = marginals.em_marginals(simulate.em_bits(records, d, truth, rng), masks, truth)
            failures.append(int((iterations == 1).sum()))
        out.append(rec("Table 4.2", f"N = 2^{users.bit_length() - 1}, d = {d}, k = {k}, ε = {epsilon} "
                                    f"(of {len(masks)} marginals)", published, float(np.mean(failures)),
                       "INPEM marginals failed (EM stops at step 1)", f"MC, {draws} draws; nltcs (published: taxi)",
                       draws_failed=failures))
    return out


def marginal_errors(method: str, records, d: int, k: int, epsilon: float, rng) -> float:
    """Mean TV over all k-way marginals of one draw of `method` on `records`."""
    n = len(records)
    masks = marginals.marginal_masks(d, k)
    truths = [marginals.true_marginal(records, int(b)) for b in masks]
    if method == "INPHT":
        protocol = client.InputHadamard(epsilon, d, k)
        coefficients = marginals.inpht_coefficients(d, k)
        counts, sums = simulate.inpht_tallies(records, coefficients, float(protocol.truth), rng)
        estimates = [marginals.inpht_marginal(counts, sums, coefficients, float(protocol.truth), int(b), n).values
                     for b in masks]
    elif method in ("INPRR", "INPPS"):
        exclusive = method == "INPPS"
        oracle = (client.InputPS if exclusive else client.InputRR)(epsilon, d).oracle
        p, q = (float(x) for x in oracle.support_probabilities)
        if exclusive:
            support = frequency.tally_values(simulate.direct_reports(records, 1 << d, p, rng), 1 << d)
        else:
            support = simulate.unary_support(np.bincount(records, minlength=1 << d), p, q, rng)
        estimates = [marginals.full_table_marginal(support, n, p, q, int(b), exclusive).values for b in masks]
    elif method == "MARGHT":
        truth = float(client.MarginalHadamard(epsilon, d, k).truth)
        counts, sums = simulate.marght_tallies(records, masks, k, truth, rng)
        estimates = [marginals.marght_marginal(c, s, truth, n).values for c, s in zip(counts, sums)]
    else:
        protocol = client.PROTOCOLS[method.lower()](epsilon, d, k)
        p, q = (float(x) for x in protocol.oracle.support_probabilities)
        if method == "MARGRR":
            support, counts = simulate.margrr_tallies(records, masks, k, p, q, rng)
        else:
            support, counts = simulate.margps_tallies(records, masks, k, p, rng)
        estimates = [marginals.sampled_support_marginal(s, c, n, p, q).values for s, c in zip(support, counts)]
    return float(np.mean([marginals.total_variation(e, t) for e, t in zip(estimates, truths)]))


MARGINAL_METHODS = ("INPHT", "MARGPS", "MARGHT", "MARGRR", "INPRR", "INPPS")


def marginal_records(draws: int, rng) -> list[dict]:
    out = []
    users, epsilon = 1 << 18, math.log(3)
    for d in (4, 8, 16):
        population = nltcs_records(d)
        for k in (1, 2, 3):
            tv = {m: [] for m in MARGINAL_METHODS}
            for _ in range(draws):
                records = rng.choice(population, size=users)
                for method in MARGINAL_METHODS:
                    tv[method].append(marginal_errors(method, records, d, k, epsilon, rng))
            ranking = sorted(MARGINAL_METHODS, key=lambda m: np.mean(tv[m]))
            for method in MARGINAL_METHODS:
                out.append(rec("Figs 4.3/4.6", f"d = {d}, k = {k}, N = 2^18, ε = ln 3, {method}", None,
                               float(np.mean(tv[method])), "mean TV over all k-way marginals",
                               f"MC, {draws} draws; nltcs (published: movielens)", rank=ranking.index(method) + 1,
                               claim="INPHT lowest or near-lowest everywhere; then MARGPS ≈ MARGHT (§4.4.5)"))
    return out


# --------------------------------------------------------------------------- the hybrid model on adult

def adult_column(name: str) -> np.ndarray:
    header = (DATA / "adult" / "adult.csv").read_text().split("\n", 1)[0].split(",")
    return np.loadtxt(DATA / "adult" / "adult.csv", delimiter=",", skiprows=1, usecols=header.index(name),
                      dtype=np.int64)


def blender_count_records(draws: int, rng) -> list[dict]:
    out = []
    name = "education-num"
    values = adult_column(name)
    size, n = domain_sizes("adult")[name], len(values)
    truth = np.bincount(values, minlength=size) / n
    for share in (0.01, 0.05, 0.10):
        for epsilon in (1.0, 4.0):
            p, q = (float(x) for x in client.DirectEncoding(epsilon, size).support_probabilities)
            scale = 2 / epsilon  # Algorithm 2.3's b_T with δ = 0, m_O = 1 (replace-one neighbours)
            l1 = {"opt-in": [], "clients": [], "blend": [], "blend, projected": []}
            covered = []
            for _ in range(draws):
                order = rng.permutation(n)
                optin, clients = values[order[: int(share * n)]], values[order[int(share * n):]]
                central = (np.bincount(optin, minlength=size) + rng.laplace(0, scale, size)) / len(optin)
                reports = np.bincount(simulate.direct_reports(clients, size, p, rng), minlength=size) / len(clients)
                local = (reports - q) / (p - q)
                mixed = blender.blend(central, blender.optin_variance(np.clip(central, 0, 1), len(optin), scale),
                                      local, blender.client_variance(reports, len(clients), p, q))
                for key, estimate in (("opt-in", central), ("clients", local), ("blend", mixed.value),
                                      ("blend, projected", blender.project_simplex(mixed.value))):
                    l1[key].append(np.abs(estimate - truth).sum())
                covered.append(np.mean(np.abs(mixed.value - truth) <= 1.96 * np.sqrt(mixed.variance)))
            for key, errors in l1.items():
                out.append(rec("BLENDER counts (adult)", f"{name}, opt-in {share:.0%}, ε = {epsilon}: {key}", None,
                               float(np.mean(errors)), "ℓ1 error vs all users' distribution", f"MC, {draws} draws",
                               claim="blended ℓ1 below both groups' (Fig. 2.9)",
                               **({"coverage_95": float(np.mean(covered))} if key == "blend" else {})))
    return out


def blender_mean_records(draws: int, rng) -> list[dict]:
    out = []
    for name in ("age", "hours-per-week"):
        data = adult_column(name).astype(float)
        n, m = len(data), float(domain_sizes("adult")[name] - 1)
        sigma2 = float(data.var())
        for share in (0.005, 0.05):
            optin = np.zeros(n, dtype=bool)
            optin[: round(share * n)] = True
            c = optin.sum() / n
            for epsilon in (0.1, 1.0):
                s = blender.laplace_setting(n, c, m, epsilon, sigma2)
                weights = {"TCM-only": 1.0, "LM-only": 0.0, "KVH blend": blender.kvh_weight(s),
                           "PWH blend": blender.pwh_weight(s)}
                best = min(blender.hybrid_mse(s, 1.0), blender.full_lm_mse(s))
                setting = f"{name}, c = {c:.1%}, ε = {epsilon}"
                for key, w in weights.items():
                    out.append(rec("Hybrid means (adult)", f"{setting}: {key} (w = {w:.4f})", None,
                                   blender.hybrid_mse(s, w), "MSE vs the non-private mean", "exact (Lemma 2.3.17)",
                                   claim="KVH beats both baselines: R(E_KVH) > 1 (Thm 2.3.20)",
                                   improvement=best / blender.hybrid_mse(s, w)))
                out.append(rec("Hybrid means (adult)", f"{setting}: Full-LM", None, blender.full_lm_mse(s),
                               "MSE vs the non-private mean", "exact (Lemma 2.3.6)"))
                w = weights["KVH blend"]
                squares = []
                for _ in range(draws):
                    x = rng.permutation(data)
                    tcm = x[optin].mean() + rng.laplace(0, m / (optin.sum() * epsilon))
                    local = (x[~optin] + rng.laplace(0, m / epsilon, (~optin).sum())).mean()
                    squares.append((w * tcm + (1 - w) * local - data.mean()) ** 2)
                out.append(rec("Hybrid means (adult)", f"{setting}: KVH blend, simulated", None,
                               float(np.mean(squares)), "MSE vs the non-private mean",
                               f"MC, {draws} draws (random split of adult)",
                               standard_error=float(np.std(squares) / math.sqrt(draws))))
    size = 10 ** 12
    c = (1 + math.sqrt((288 + size) / size)) / 18
    s = blender.laplace_setting(size, c, 1.0, 1.0, 0.25)
    ratio = min(blender.hybrid_mse(s, 1.0), blender.full_lm_mse(s)) / blender.hybrid_mse(s, blender.kvh_weight(s))
    out.append(rec("Corollary 2.3.21", "R(E_KVH) at m = 1, ε = 1, σ² = 1/4, c = (1+√((288+n)/n))/18, n = 10¹²",
                   17 / 8, ratio, "improvement ratio R (higher is better)", "exact"))
    return out


# --------------------------------------------------------------------------- output

def markdown(records: list[dict]) -> str:
    lines = ["| table | setting | published | dpsql | metric | method |", "|---|---|---:|---:|---|---|"]
    for r in records:
        published = "–" if r["published"] is None else f"{r['published']:.4g}"
        extra = f" (rank {r['rank']})" if "rank" in r else ""
        lines.append(f"| {r['table']} | {r['setting']} | {published} | {r['dpsql']:.4g}{extra} | {r['metric']} | "
                     f"{r['method']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=["fo", "ranges", "marginals", "blender"],
                        choices=["fo", "ranges", "marginals", "blender"])
    parser.add_argument("--runs", type=int, default=5, help="Monte-Carlo runs per range table cell (the thesis: 5)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 20, 22], choices=[8, 16, 20, 22],
                        help="log₂ D of the range tables' panels")
    parser.add_argument("--draws", type=int, default=10, help="draws per marginal setting (the thesis: 10)")
    args = parser.parse_args()
    rng = np.random.default_rng(SEED)
    previous = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    parts = {"fo": ("§2.4",), "ranges": ("Table 5.2", "Table 5.3"), "marginals": ("Table 4.2", "Figs 4.3/4.6"),
             "blender": ("BLENDER", "Hybrid", "Corollary")}
    def rerun(r):  # records this invocation replaces (range panels only for the sizes given)
        if "ranges" in args.parts and r["table"] in parts["ranges"]:
            return any(r["setting"].startswith(f"D = 2^{log_size},") for log_size in args.sizes)
        return any(r["table"].startswith(t) for p in args.parts if p != "ranges" for t in parts[p])

    records = [r for r in previous if not rerun(r)]
    for part in args.parts:
        started = time.perf_counter()
        print(f"{part} …", flush=True)
        if part == "fo":
            records += fo_records()
        elif part == "ranges":
            records += range_records(args.sizes, args.runs, rng)
        elif part == "marginals":
            records += em_failure_records(args.draws, rng) + marginal_records(args.draws, rng)
        else:
            records += blender_count_records(200, rng) + blender_mean_records(2000, rng)
        print(f"{part}: {time.perf_counter() - started:.0f} s", flush=True)
    RESULTS.write_text(json.dumps(records, indent=1, ensure_ascii=False) + "\n")
    print(markdown(records))


if __name__ == "__main__":
    main()
