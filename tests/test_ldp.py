"""Local DP (mechanisms.ldp): the clients' exact laws and ε-LDP, the estimators' unbiasedness and exact variances.

- every client randomizer: its `probability` sums to 1 over the enumerated reports and its likelihood
  ratios are at most e^ε exactly (Fractions); sampled reports follow `probability`;
- the client file imports only the standard library (a subprocess, loaded by path as a vendored copy);
- `stratified_variance` (HRR, HaarHRR, TreeOUECI, TreeHRRCI) against exact enumeration of every
  assignment and coin flip of a tiny population, conditional on the stratum counts;
- every estimator against Monte-Carlo (fixed seeds, thousands of draws, 5 standard errors);
- the hybrid model: the blend's weights and variance, KVH's optimality and Corollary 2.3.21's bounds.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import json
import math
import os
import random
import shutil
import subprocess
import sys
from contextlib import redirect_stdout
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from benchmarks import ldp_simulation as simulate
from mechanisms.ldp import blender, client, frequency, marginals, ranges

CLIENT = Path(client.__file__).parent


# ---------------------------------------------------------------- the clients: exact laws and ε-LDP

def _subsets(size):
    return [list(c) for r in range(size + 1) for c in itertools.combinations(range(size), r)]


def _signed(indices):
    return [{"index": k, "bit": b} for k in indices for b in (1, -1)]


def _payloads(p: client.Protocol) -> list[dict]:
    """Every report of a small protocol instance (OLH: every y for a few hash seeds)."""
    if isinstance(p, client.RandomizedResponse):
        return [{"bit": b} for b in (0, 1)]
    if isinstance(p, (client.DirectEncoding, client.InputPS)):
        return [{"value": v} for v in range(p.values)]
    if isinstance(p, (client.UnaryEncoding, client.InputRR)):
        return [{"ones": s} for s in _subsets(p.values)]
    if isinstance(p, client.LocalHashing):
        seeds = [(1 + 7919 * i % (client.HASH_PRIME - 1), 104729 * i) for i in range(1, 6)]
        return [{"a": a, "b": b, "y": y} for a, b in seeds for y in range(p.range)]
    if isinstance(p, client.HadamardResponse):
        return _signed(range(1, p.size))
    if isinstance(p, client.InputHadamard):
        return _signed(int(a) for a in marginals.inpht_coefficients(p.attributes, p.order))
    if isinstance(p, client.InputEM):
        return [{"bits": v} for v in range(p.values)]
    if isinstance(p, client.TwoLevelGRR):
        return [{"value": v} for v in range(p.values)]
    if isinstance(p, client.SampledMarginal):
        out = []
        for beta in (int(b) for b in marginals.marginal_masks(p.attributes, p.order)):
            if isinstance(p, client.MarginalRR):
                cells = [{"ones": s} for s in _subsets(1 << p.order)]
            elif isinstance(p, client.MarginalPS):
                cells = [{"value": v} for v in range(1 << p.order)]
            else:
                cells = _signed(int(a) for a in marginals.subcube(beta)[1:])
            out += [{"marginal": beta, **c} for c in cells]
        return out
    if isinstance(p, client.HierarchicalHistogram):
        return [{"level": level, **inner} for level in range(1, p.height + 1)
                for inner in _payloads(p.level_oracle(level))]
    if isinstance(p, client.HaarHRR):
        return [{"level": level, **r} for level in range(1, p.height + 1)
                for r in _signed(range(1 << (p.height - level)))]
    raise AssertionError(type(p))


SMALL = [
    client.RandomizedResponse(0.7), client.DirectEncoding(1.3, 4), client.OptimizedUnaryEncoding(1.0, 4),
    client.SymmetricUnaryEncoding(2.0, 4), client.LocalHashing(1.1, 5), client.HadamardResponse(1.0, 5),
    client.InputHadamard(1.0, 3, 2), client.InputRR(1.0, 2), client.InputPS(0.5, 2), client.MarginalRR(1.0, 3, 2),
    client.MarginalPS(1.0, 3, 2), client.MarginalHadamard(1.0, 3, 2), client.InputEM(1.0, 3),
    client.HierarchicalHistogram(1.0, 8, 2, "oue"), client.HierarchicalHistogram(1.2, 9, 3, "hrr"),
    client.HaarHRR(0.9, 8), client.TwoLevelGRR(1.5, (3, 1, 2), 0.7),
]


def test_every_protocol_is_tested():
    assert {type(p) for p in SMALL} == set(client.PROTOCOLS.values())


@pytest.mark.parametrize("protocol", SMALL, ids=lambda p: f"{p.name}")
def test_reports_are_epsilon_ldp_exactly(protocol):
    payloads = _payloads(protocol)
    table = [[protocol.probability(pl, v) for v in range(protocol.values)] for pl in payloads]
    if not isinstance(protocol, client.LocalHashing):
        for v in range(protocol.values):  # the enumeration is the whole law
            assert sum(row[v] for row in table) == 1
    else:  # for a fixed hash, the y's carry the seed's whole probability
        seed = Fraction(1, client.HASH_PRIME * (client.HASH_PRIME - 1))
        for block in range(0, len(table), protocol.range):
            assert all(sum(row[v] for row in table[block:block + protocol.range]) == seed
                       for v in range(protocol.values))
    worst = max(max(row) / min(row) for row in table)
    assert min(min(row) for row in table) > 0
    assert float(worst) <= math.exp(protocol.epsilon)
    if isinstance(protocol, client.TwoLevelGRR):  # Lemma 2.2.4 composes the two levels: the bound is not tight
        return
    assert float(worst) > math.exp(protocol.epsilon) * (1 - 1e-9)  # tight: the full budget is used


def _key(payload):
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in payload.items()))


@pytest.mark.parametrize("protocol", [p for p in SMALL if not isinstance(p, client.LocalHashing)],
                         ids=lambda p: p.name)
def test_randomizers_follow_their_probabilities(protocol):
    draws, value = 3000, protocol.values - 1
    rng = random.Random(11)
    seen = {}
    for _ in range(draws):
        report = protocol.report(value, rng)
        assert report["protocol"] == protocol.name
        key = _key(report["payload"])
        seen[key] = seen.get(key, 0) + 1
    expected = {_key(pl): float(protocol.probability(pl, value)) * draws for pl in _payloads(protocol)}
    assert set(seen) <= set(expected)
    for key, e in expected.items():
        assert abs(seen.get(key, 0) - e) <= 6 * math.sqrt(e) + 1, key


def test_local_hashing_unbiases_with_the_exact_collision_probability():
    p = client.LocalHashing(1.0, 7)
    rng = random.Random(3)
    a, b = zip(*[(1 + rng.randrange(client.HASH_PRIME - 1), rng.randrange(client.HASH_PRIME)) for _ in range(4000)])
    hashes = [(p.hash(x, y, 2), p.hash(x, y, 5)) for x, y in zip(a, b)]
    collisions = sum(h == g for h, g in hashes) / len(hashes)
    assert abs(collisions - float(p.collision)) <= 5 * math.sqrt(float(p.collision) / len(hashes))
    assert abs(float(p.collision) - 1 / p.range) < 1e-8


def test_client_package_imports_only_the_standard_library(tmp_path):
    """An application vendors the client folder alone (here as `ldp_client`): it imports, reports and runs
    as a command without numpy, scipy, duckdb, pandas or the rest of the project."""
    shutil.copytree(CLIENT, tmp_path / "ldp_client", ignore=shutil.ignore_patterns("__pycache__"))
    code = """
import sys
import ldp_client
ldp_client.HaarHRR(1.0, 64).report(5)
heavy = [m for m in ("numpy", "scipy", "duckdb", "pandas", "mechanisms") if m in sys.modules]
print(heavy)
"""
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env,
                         cwd=tmp_path)
    assert out.stdout.strip() == "[]"
    row = subprocess.run([sys.executable, "-m", "ldp_client", "--protocol", "oue", "--epsilon", "1", "--domain", "16",
                          "--value", "3"], capture_output=True, text=True, check=True, env=env, cwd=tmp_path)
    report = json.loads(row.stdout)
    assert report["protocol"] == "oue" and report["domain"] == 16
    assert all(0 <= j < 16 for j in report["payload"]["ones"])


def test_cli_main_prints_one_row_and_refuses_bad_arguments(capsys):
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        assert client.main(["--protocol", "inpht", "--epsilon", "1.1", "--attributes", "8", "--order", "2",
                            "--value", "0b1011"]) == 0
    row = json.loads(buffer.getvalue())
    protocol = client.InputHadamard(1.1, 8, 2)
    assert row == {**dataclasses.asdict(protocol), "protocol": "inpht", "payload": row["payload"]}
    assert protocol.probability(row["payload"], 0b1011) > 0
    for argv in (["--protocol", "grr", "--epsilon", "1", "--value", "1"],
                 ["--protocol", "rr", "--epsilon", "1", "--value", "1", "--domain", "3"],
                 ["--protocol", "grr", "--epsilon", "1", "--value", "9", "--domain", "3"],
                 ["--protocol", "oue", "--epsilon", "-1", "--value", "1", "--domain", "3"]):
        with pytest.raises(SystemExit):
            client.main(argv)


# ---------------------------------------------------------------- exact enumeration of tiny populations

def _enumerate_signs(values, strata, probabilities, sign, estimate, truth):
    """Exact E and Var of `estimate(counts, sums)` given each count vector, over every stratum
    assignment and RR flip of the users (±1 reports)."""
    groups = {}
    n = len(values)
    for assignment in itertools.product(range(len(strata)), repeat=n):
        weight = math.prod(probabilities[s] for s in assignment)
        signs = [sign(strata[s], z) for s, z in zip(assignment, values)]
        counts = np.bincount(assignment, minlength=len(strata))
        for flips in itertools.product((0, 1), repeat=n):
            w = weight * math.prod(1 - truth if f else truth for f in flips)
            sums = np.zeros(len(strata))
            for s, g, f in zip(assignment, signs, flips):
                sums[s] += -g if f else g
            groups.setdefault(tuple(counts), []).append((w, estimate(counts, sums)))
    out = {}
    for counts, rows in groups.items():
        w = np.array([r[0] for r in rows])
        x = np.array([r[1] for r in rows])
        w = w / w.sum()
        mean = w @ x
        out[counts] = (mean, w @ (x - mean) ** 2)
    return out


def test_hadamard_response_variance_is_exact_given_the_counts():
    truth = float(client.rr_truth(1.3))
    values, size = [0, 1, 1, 3], 4
    f = np.bincount(values, minlength=size) / len(values)
    strata = [1, 2, 3]
    for j in range(size):
        exact = _enumerate_signs(values, strata, [1 / 3] * 3, lambda k, z: client.parity(k & z),
                                 lambda c, s: frequency.hadamard_estimate(np.r_[0, c], np.r_[0, s], truth, size,
                                                                          len(values)).values[j], truth)
        for counts, (mean, var) in exact.items():
            if min(counts) == 0:
                continue
            assert mean == pytest.approx(f[j], abs=1e-12)
            formula = frequency.hadamard_variance(f, np.r_[0, counts], truth, len(values))[j]
            assert var == pytest.approx(formula, rel=1e-10)


def test_haar_range_variance_is_exact_given_the_counts():
    truth = float(client.rr_truth(0.8))
    values = [0, 2, 3, 3]
    leaves = np.bincount(values, minlength=4) / len(values)
    strata = [(1, 0), (1, 1), (2, 0)]
    haar = client.HaarHRR(0.8, 4)
    for a, b in [(0, 0), (1, 2), (0, 2), (2, 3)]:
        query = ranges.range_query(4, a, b)

        def estimate(c, s):
            return query @ ranges.haar_leaves([c[:2], c[2:]], [s[:2], s[2:]], truth)

        exact = _enumerate_signs(values, strata, [0.25, 0.25, 0.5], lambda st, z: haar.sign(z, *st), estimate, truth)
        for counts, (mean, var) in exact.items():
            if min(counts) == 0:
                continue
            assert mean == pytest.approx(query @ leaves, abs=1e-12)
            c = np.array(counts)
            assert var == pytest.approx(ranges.haar_variance(leaves, query, [c[:2], c[2:]], truth, len(values)),
                                        rel=1e-10)


def test_tree_hrr_variance_is_exact_given_the_counts():
    truth = float(client.rr_truth(1.0))
    values = [0, 1, 3, 3]
    leaves = np.bincount(values, minlength=4) / len(values)
    strata = [(1, 1), (2, 1), (2, 2), (2, 3)]
    query = ranges.range_query(4, 1, 2)

    def estimate(c, s):
        levels = ranges.hrr_levels([np.r_[0, c[0]], np.r_[0, c[1:]]], [np.r_[0, s[0]], np.r_[0, s[1:]]], truth, 2)
        return query @ ranges.consistent_leaves(levels, 2)

    exact = _enumerate_signs(values, strata, [0.5, 1 / 6, 1 / 6, 1 / 6],
                             lambda st, z: client.parity(st[1] & (z >> (2 - st[0]))), estimate, truth)
    for counts, (mean, var) in exact.items():
        if min(counts) == 0:
            continue
        assert mean == pytest.approx(query @ leaves, abs=1e-12)
        c = np.array(counts)
        formula = ranges.hh_hrr_variance(leaves, query, [np.r_[0, c[0]], np.r_[0, c[1:]]], truth, 2, len(values))
        assert var == pytest.approx(formula, rel=1e-10)


def test_tree_oue_variance_is_exact_given_the_level_counts():
    p, q = (float(x) for x in client.OptimizedUnaryEncoding(1.0, 2).support_probabilities)
    values = [0, 2, 3]
    leaves = np.bincount(values, minlength=4) / len(values)
    query = ranges.range_query(4, 1, 3)
    options = []  # per user: (level, bits) with probability
    for z in values:
        user = []
        for level in (1, 2):
            node, width = z >> (2 - level), 1 << level
            for bits in itertools.product((0, 1), repeat=width):
                prob = 0.5 * math.prod((p if j == node else q) if bit else (1 - (p if j == node else q))
                                       for j, bit in enumerate(bits))
                user.append((level, np.array(bits), prob))
        options.append(user)
    groups = {}
    for combo in itertools.product(*options):
        counts = [sum(1 for level, _, _ in combo if level == lv) for lv in (1, 2)]
        if min(counts) == 0:
            continue
        ones = [sum((bits for level, bits, _ in combo if level == lv), np.zeros(1 << lv)) for lv in (1, 2)]
        x = query @ ranges.consistent_leaves(ranges.oue_levels(ones, counts, p, q), 2)
        groups.setdefault(tuple(counts), []).append((math.prod(c[2] for c in combo), x))
    for counts, rows in groups.items():
        w = np.array([r[0] for r in rows])
        x = np.array([r[1] for r in rows])
        w /= w.sum()
        mean = w @ x
        assert mean == pytest.approx(query @ leaves, abs=1e-12)
        formula = ranges.hh_oue_variance(leaves, query, list(counts), p, q, 2, len(values))
        assert w @ (x - mean) ** 2 == pytest.approx(formula, rel=1e-10)


def test_consistency_is_least_squares_with_the_root_fixed_and_its_adjoint_is_exact():
    rng = np.random.default_rng(5)
    branching, height = 3, 3
    levels = [rng.normal(size=branching ** level) for level in range(1, height + 1)]
    leaves = ranges.consistent_leaves(levels, branching)
    # the least-squares solution over the leaves, with Σ leaves = 1 as a constraint
    design = np.vstack([np.kron(np.eye(branching ** level), np.ones(branching ** (height - level)))
                        for level in range(1, height + 1)])
    kkt = np.block([[design.T @ design, np.ones((27, 1))], [np.ones((1, 27)), np.zeros((1, 1))]])
    solution = np.linalg.solve(kkt, np.r_[design.T @ np.concatenate(levels), 1.0])[:27]
    np.testing.assert_allclose(leaves, solution, atol=1e-12)
    query = rng.normal(size=27)
    constant, weights = ranges.consistency_weights(query, branching, height)
    assert query @ leaves == pytest.approx(constant + sum(w @ x for w, x in zip(weights, levels)), abs=1e-12)


def test_haar_leaves_invert_exact_coefficients():
    rng = np.random.default_rng(2)
    truth_leaves = rng.dirichlet(np.ones(16))
    truth = 0.75
    counts, sums = [], []
    for level in range(1, 5):
        s = 1 - 2 * ((np.arange(16) >> (level - 1)) & 1)
        w = (s * truth_leaves).reshape(-1, 1 << level).sum(axis=1)
        coefficients = frequency.fwht(w)
        counts.append(np.full(len(w), 1000))
        sums.append(1000 * (2 * truth - 1) * coefficients)
    np.testing.assert_allclose(ranges.haar_leaves(counts, sums, truth), truth_leaves, atol=1e-12)


# ---------------------------------------------------------------- Monte-Carlo: unbiased, with the exact variance

def _check(draws, truth, variances):
    """Mean within 5 standard errors of the truth; sample variance within 5 of its standard errors of the
    mean exact (conditional) variance. `draws`, `variances`: (R, m); `truth`: (m,)."""
    draws, variances = np.asarray(draws, dtype=float), np.asarray(variances, dtype=float)
    r = len(draws)
    v = variances.mean(axis=0)
    assert np.all(np.abs(draws.mean(axis=0) - truth) <= 5 * np.sqrt(v / r)), (draws.mean(axis=0), truth)
    centred = (draws - draws.mean(axis=0)) ** 2
    se = np.sqrt(centred.var(axis=0) / r)
    assert np.all(np.abs(centred.mean(axis=0) * r / (r - 1) - v) <= 5 * se + 1e-15), (centred.mean(axis=0), v)


POPULATION = np.repeat(np.arange(6), [120, 60, 30, 0, 150, 40])  # 400 users over [6]
F6 = np.bincount(POPULATION, minlength=6) / len(POPULATION)


@pytest.mark.parametrize("protocol", [client.RandomizedResponse(1.0), client.DirectEncoding(2.0, 6),
                                      client.OptimizedUnaryEncoding(1.5, 6), client.SymmetricUnaryEncoding(1.5, 6),
                                      client.LocalHashing(2.0, 6)], ids=lambda p: p.name)
def test_support_oracles_are_unbiased_with_exact_variance(protocol):
    rng = np.random.default_rng(17)
    p, q = (float(x) for x in protocol.support_probabilities)
    values = POPULATION % protocol.values
    f = np.bincount(values, minlength=protocol.values) / len(values)
    histogram = np.bincount(values, minlength=protocol.values)
    draws = []
    for _ in range(3000 if not isinstance(protocol, client.LocalHashing) else 1500):
        if isinstance(protocol, (client.UnaryEncoding, client.RandomizedResponse)):
            support = simulate.unary_support(histogram, p, q, rng)
            if isinstance(protocol, client.RandomizedResponse):
                support = np.r_[len(values) - support[1], support[1]]  # a bit's reports: ones = support of 1
        elif isinstance(protocol, client.DirectEncoding):
            support = frequency.tally_values(simulate.direct_reports(values, protocol.domain, p, rng), protocol.domain)
        else:
            a, b, y = simulate.hash_reports(values, protocol, rng)
            support = frequency.tally_hashes(a, b, y, protocol.domain, protocol.range)
        draws.append(frequency.support_estimate(support, len(values), p, q).values)
    exact = frequency.support_variance(f, len(values), p, q)
    _check(draws, f, np.tile(exact, (len(draws), 1)))


def test_hadamard_response_is_unbiased_with_exact_variance():
    rng = np.random.default_rng(23)
    truth = float(client.rr_truth(2.5))
    draws, variances = [], []
    padded = np.r_[F6, 0, 0]
    for _ in range(3000):
        counts, sums = simulate.hadamard_tallies(POPULATION, 8, truth, rng)
        draws.append(frequency.hadamard_estimate(counts, sums, truth, 6, len(POPULATION)).values)
        variances.append(frequency.hadamard_variance(padded, counts, truth, len(POPULATION))[:6])
    _check(draws, F6, variances)


RECORDS = np.random.default_rng(1).choice(16, size=600, p=np.r_[np.full(8, 0.02), np.full(8, 0.105)])
BETA = 0b0110


def test_inpht_marginals_are_unbiased_with_exact_variance():
    rng = np.random.default_rng(29)
    protocol = client.InputHadamard(2.0, 4, 2)
    truth = float(protocol.truth)
    coefficients = marginals.inpht_coefficients(4, 2)
    true_cells = marginals.true_marginal(RECORDS, BETA)
    draws, variances = [], []
    for _ in range(3000):
        counts, sums = simulate.inpht_tallies(RECORDS, coefficients, truth, rng)
        draws.append(marginals.inpht_marginal(counts, sums, coefficients, truth, BETA, len(RECORDS)).values)
        variances.append(marginals.inpht_variance(true_cells, counts, coefficients, truth, BETA, len(RECORDS)))
    _check(draws, true_cells, variances)


@pytest.mark.parametrize("exclusive", [False, True], ids=["inprr", "inpps"])
def test_full_table_marginals_are_unbiased_with_exact_variance(exclusive):
    rng = np.random.default_rng(31)
    protocol = (client.InputPS if exclusive else client.InputRR)(1.5, 4)
    p, q = (float(x) for x in protocol.oracle.support_probabilities)
    true_cells = marginals.true_marginal(RECORDS, BETA)
    histogram = np.bincount(RECORDS, minlength=16)
    draws = []
    for _ in range(3000):
        if exclusive:
            support = frequency.tally_values(simulate.direct_reports(RECORDS, 16, p, rng), 16)
        else:
            support = simulate.unary_support(histogram, p, q, rng)
        draws.append(marginals.full_table_marginal(support, len(RECORDS), p, q, BETA, exclusive).values)
    exact = marginals.full_table_variance(true_cells, len(RECORDS), p, q, BETA, 16, exclusive)
    _check(draws, true_cells, np.tile(exact, (len(draws), 1)))


@pytest.mark.parametrize("name", ["margrr", "margps", "marght"])
def test_sampled_marginals_are_unbiased_with_exact_variance(name):
    rng = np.random.default_rng(37)
    protocol = client.PROTOCOLS[name](2.0, 4, 2)
    masks = marginals.marginal_masks(4, 2)
    row = int(np.searchsorted(masks, BETA))
    true_cells = marginals.true_marginal(RECORDS, BETA)
    n = len(RECORDS)
    draws, variances = [], []
    for _ in range(3000):
        if name == "marght":
            truth = float(protocol.truth)
            counts, sums = simulate.marght_tallies(RECORDS, masks, 2, truth, rng)
            draws.append(marginals.marght_marginal(counts[row], sums[row], truth, n).values)
            variances.append(frequency.hadamard_variance(true_cells, counts[row], truth, n))
            continue
        p, q = (float(x) for x in protocol.oracle.support_probabilities)
        if name == "margrr":
            support, counts = simulate.margrr_tallies(RECORDS, masks, 2, p, q, rng)
        else:
            support, counts = simulate.margps_tallies(RECORDS, masks, 2, p, rng)
        draws.append(marginals.sampled_support_marginal(support[row], counts[row], n, p, q).values)
        variances.append(marginals.sampled_support_variance(true_cells, counts[row], n, p, q))
    _check(draws, true_cells, variances)


LEAVES = np.repeat(np.arange(16), [0, 5, 20, 40, 60, 80, 50, 30, 25, 20, 10, 5, 0, 3, 2, 50])  # 400 users
TRUE_LEAVES = np.bincount(LEAVES, minlength=16) / len(LEAVES)
QUERIES = [(0, 15), (3, 9), (5, 5), (0, 6)]


@pytest.mark.parametrize("method", ["hh2-oue", "hh4-oue", "hh4-hrr", "haar"])
def test_range_estimators_are_unbiased_with_exact_variance(method):
    rng = np.random.default_rng(41)
    epsilon, n = 1.5, len(LEAVES)
    histogram = np.bincount(LEAVES, minlength=16)
    queries = np.array([ranges.range_query(16, a, b) for a, b in QUERIES])
    draws, variances = [], []
    truth = float(client.rr_truth(epsilon))
    for draw in range(2000):
        if method == "haar":
            plus, minus = simulate.haar_signs(simulate.level_split(histogram, 4, rng), rng)
            tallies = [simulate.flip_tallies(u, d, truth, rng) for u, d in zip(plus, minus)]
            counts, sums = [t[0] for t in tallies], [t[1] for t in tallies]
            answers = queries @ ranges.haar_leaves(counts, sums, truth)
            variances.append([ranges.haar_variance(TRUE_LEAVES, qv, counts, truth, n) for qv in queries])
            estimate = lambda: ranges.haar_estimate(counts, sums, truth, queries)  # noqa: E731
        else:
            branching = int(method[2])
            split = simulate.level_split(histogram, ranges.tree_height(16, branching), rng)
            if method.endswith("oue"):
                p, q = (float(x) for x in client.OptimizedUnaryEncoding(epsilon, 2).support_probabilities)
                ones, counts = simulate.hh_oue_tallies(split, branching, p, q, rng)
                answers = queries @ ranges.consistent_leaves(ranges.oue_levels(ones, counts, p, q), branching)
                variances.append([ranges.hh_oue_variance(TRUE_LEAVES, qv, counts, p, q, branching, n)
                                  for qv in queries])
                estimate = lambda: ranges.hh_oue_estimate(ones, counts, p, q, branching, queries)  # noqa: E731
            else:
                counts, sums = simulate.hh_hrr_tallies(split, branching, truth, rng)
                levels = ranges.hrr_levels(counts, sums, truth, branching)
                answers = queries @ ranges.consistent_leaves(levels, branching)
                variances.append([ranges.hh_hrr_variance(TRUE_LEAVES, qv, counts, truth, branching, n)
                                  for qv in queries])
                estimate = lambda: ranges.hh_hrr_estimate(counts, sums, truth, branching, queries)  # noqa: E731
        if draw < 20:  # the one-call estimators agree, their plug-in variances near the exact ones
            est = estimate()
            np.testing.assert_allclose(est.values, answers, atol=1e-12)
            np.testing.assert_allclose(est.variances, variances[-1], rtol=0.5, atol=1e-12)
        draws.append(answers)
    _check(draws, queries @ TRUE_LEAVES, variances)


def test_client_reports_feed_the_aggregators():
    """End to end: reports from the client itself, tallied and estimated, land within 5 standard deviations."""
    rng = random.Random(5)
    values = [int(v) for v in POPULATION]
    oue = client.OptimizedUnaryEncoding(2.0, 6)
    rows = [oue.report(v, rng)["payload"]["ones"] for v in values]
    p, q = (float(x) for x in oue.support_probabilities)
    est = frequency.support_estimate(frequency.tally_ones(rows, 6), len(values), p, q)
    assert np.all(np.abs(est.values - F6) <= 5 * np.sqrt(frequency.support_variance(F6, len(values), p, q)))
    hrr = client.HadamardResponse(2.0, 6)
    payloads = [hrr.report(v, rng)["payload"] for v in values]
    counts, sums = frequency.tally_signs([r["index"] for r in payloads], [r["bit"] for r in payloads], hrr.size)
    est = frequency.hadamard_estimate(counts, sums, float(hrr.truth), 6, len(values))
    exact = frequency.hadamard_variance(np.r_[F6, 0, 0], counts, float(hrr.truth), len(values))[:6]
    assert np.all(np.abs(est.values - F6) <= 5 * np.sqrt(exact))
    haar = client.HaarHRR(2.0, 16)
    payloads = [haar.report(int(v), rng)["payload"] for v in LEAVES]
    counts = [np.zeros(16 >> level) for level in range(1, 5)]
    sums = [np.zeros(16 >> level) for level in range(1, 5)]
    for r in payloads:
        counts[r["level"] - 1][r["index"]] += 1
        sums[r["level"] - 1][r["index"]] += r["bit"]
    queries = np.array([ranges.range_query(16, a, b) for a, b in QUERIES])
    est = ranges.haar_estimate(counts, sums, float(haar.truth), queries)
    exact = [ranges.haar_variance(TRUE_LEAVES, qv, counts, float(haar.truth), len(LEAVES)) for qv in queries]
    assert np.all(np.abs(est.values - queries @ TRUE_LEAVES) <= 5 * np.sqrt(exact))
    np.testing.assert_allclose(est.variances, exact, rtol=0.5, atol=1e-12)  # plug-in variances near the exact ones
    masks = marginals.marginal_masks(4, 2)
    row = int(np.searchsorted(masks, BETA))
    true_cells = marginals.true_marginal(RECORDS, BETA)
    margps = client.MarginalPS(2.0, 4, 2)
    p, q = (float(x) for x in margps.oracle.support_probabilities)
    payloads = [margps.report(int(r), rng)["payload"] for r in RECORDS]
    support = marginals.tally_sampled([r["marginal"] for r in payloads], masks, [r["value"] for r in payloads], 4)
    count = int(support[row].sum())
    est = marginals.sampled_support_marginal(support[row], count, len(RECORDS), p, q)
    sd = np.sqrt(marginals.sampled_support_variance(true_cells, count, len(RECORDS), p, q))
    assert np.all(np.abs(est.values - true_cells) <= 5 * sd)
    marght = client.MarginalHadamard(2.0, 4, 2)
    payloads = [marght.report(int(r), rng)["payload"] for r in RECORDS]
    betas = [r["marginal"] for r in payloads]
    alphas = [client.compact(r["index"], r["marginal"]) for r in payloads]
    counts = marginals.tally_sampled(betas, masks, alphas, 4)
    sums = marginals.tally_sampled(betas, masks, alphas, 4, weights=[r["bit"] for r in payloads])
    est = marginals.marght_marginal(counts[row], sums[row], float(marght.truth), len(RECORDS))
    sd = np.sqrt(frequency.hadamard_variance(true_cells, counts[row], float(marght.truth), len(RECORDS)))
    assert np.all(np.abs(est.values - true_cells) <= 5 * sd)


def test_em_decoding_recovers_marginals_and_fails_at_tiny_epsilon():
    rng = np.random.default_rng(43)
    records = rng.choice(8, size=20000, p=[0.3, 0.05, 0.05, 0.1, 0.1, 0.1, 0.05, 0.25])
    masks = marginals.marginal_masks(3, 2)
    truth = float(client.InputEM(6.0, 3).truth)
    estimates, iterations = marginals.em_marginals(simulate.em_bits(records, 3, truth, rng), masks, truth)
    for beta, est in zip(masks, estimates):
        assert marginals.total_variation(est, marginals.true_marginal(records, int(beta))) < 0.03
    assert iterations.min() > 1
    tiny = float(client.InputEM(0.03, 3).truth)
    estimates, iterations = marginals.em_marginals(simulate.em_bits(records, 3, tiny, rng), masks, tiny)
    assert np.all(iterations == 1) and np.allclose(estimates, 0.25, atol=1e-4)


# ---------------------------------------------------------------- the hybrid model

def test_blend_weights_minimise_the_variance():
    out = blender.blend([0.2, 0.5], [0.01, 0.04], [0.3, 0.4], [0.03, 0.01])
    np.testing.assert_allclose(out.weight, [0.75, 0.2])
    np.testing.assert_allclose(out.variance, [0.01 * 0.03 / 0.04, 0.04 * 0.01 / 0.05])
    for w in np.linspace(0, 1, 101):
        assert w ** 2 * 0.01 + (1 - w) ** 2 * 0.03 >= out.variance[0] - 1e-15
    np.testing.assert_allclose(blender.project_simplex([0.5, 0.7, -0.1]), [0.4, 0.6, 0.0])


def test_kvh_minimises_the_hybrid_error_and_beats_both_baselines():
    for n, c, epsilon in [(48842, 0.05, 1.0), (48842, 0.005, 0.1), (1000, 0.5, 1.0), (10 ** 5, 0.05, 0.1)]:
        s = blender.laplace_setting(n, c, 1.0, epsilon, 0.05)
        w = blender.kvh_weight(s)
        grid = min(blender.hybrid_mse(s, x) for x in np.linspace(0, 1, 2001))
        assert blender.hybrid_mse(s, w) <= grid + 1e-18
        assert blender.hybrid_mse(s, w) < min(blender.hybrid_mse(s, 1.0), blender.full_lm_mse(s))  # Thm 2.3.20


def test_corollary_2_3_21_bounds_kvh_improvement():
    """17/8 ≤ max R(E_KVH) ≤ 16/7 for Laplace, ε ≤ 1: the lower bound's instance, the upper bound on a grid."""
    def improvement(s):
        return min(blender.hybrid_mse(s, 1.0), blender.full_lm_mse(s)) / blender.hybrid_mse(s, blender.kvh_weight(s))

    n = 10 ** 12
    c = (1 + math.sqrt((288 + n) / n)) / 18
    assert improvement(blender.laplace_setting(n, c, 1.0, 1.0, 0.25)) == pytest.approx(17 / 8, rel=1e-5)
    worst = max(improvement(blender.laplace_setting(n, c, 1.0, eps, var))
                for n in (10 ** 3, 10 ** 5, 10 ** 8) for c in np.linspace(0.01, 0.99, 50)
                for eps in (0.1, 0.5, 1.0) for var in (0.01, 0.1, 0.25))
    assert 2.0 < worst <= 16 / 7


def test_hybrid_mse_matches_monte_carlo():
    rng = np.random.default_rng(47)
    n, c, m, epsilon = 400, 0.1, 1.0, 1.0
    data = rng.beta(2, 5, size=n)
    optin = np.zeros(n, dtype=bool)
    optin[: int(c * n)] = True
    sigma2 = data.var()
    s = blender.laplace_setting(n, c, m, epsilon, sigma2)
    w = blender.kvh_weight(s)
    squares = []
    for _ in range(4000):
        x = rng.permutation(data)  # a fresh random split of the population into the two groups
        tcm = x[optin].mean() + rng.laplace(0, m / (c * n * epsilon))
        local = (x[~optin] + rng.laplace(0, m / epsilon, size=(~optin).sum())).mean()
        squares.append((w * tcm + (1 - w) * local - x.mean()) ** 2)
    # a random split's sampling term is the lemma's times n/(n − 1) (without replacement)
    sampling = (w - c) ** 2 * sigma2 / (c * (1 - c) * n)
    expected = blender.hybrid_mse(s, w) + sampling / (n - 1)
    assert abs(np.mean(squares) - expected) <= 5 * np.std(squares) / math.sqrt(len(squares))
