"""BLENDER as published (seeds/000, Alg 2.1–2.6) against its opt-in-only and client-only baselines, on adult.

The seed's comparison (Figs 2.4 and 2.6, Table 2.3's parameters) run on the shared adult data: a
user's record is ⟨query, URL⟩ = ⟨native-country, occupation⟩ (42 × 15 pairs, a heavy head: one
country holds 90% of the rows). 5% (and 10%, as Fig 2.5 varies it) of the users opt in; f_O = 0.95 of them discover the head list
(Alg 2.2: noisy record counts above τ), the rest estimate its records (Alg 2.3), the M most
frequent queries are kept; the clients report with grr2 over it (Alg 2.4, f_C = 0.85) and are
estimated by Alg 2.5; the two are blended record by record (Alg 2.6) and projected on the simplex.
The baselines, as in §2.2.3: TCM, the opt-in group alone (discovery and estimation, i.e. BLENDER
without clients), and LM, every user reporting locally. The metric is the seed's ℓ1 error of the
query probabilities over the true top-M queries and the head list's (0 for a query not in the
list), and its NDCG of NDCGs over records (2^rel − 1 gains, rel the true probability).

What differs from the seed (RESULTS.md says so too): adult, not AOL/Yandex (48,842 users, 630
records, not millions); noise is dpsql's exact discrete Laplace of scale 2/ε (replace-one
neighbours, m_O = 1), with the threshold exact for it (`partition_selection.laplace_selection` at
ε/2, δ = 10⁻⁵) rather than the seed's continuous τ; δ = 0 in the clients' randomizer; the LM
baseline is OUE over the declared record domain (Qin et al.'s mechanism is not in dpsql; knowing the
domain favours it). The clients' reports are drawn from grr2's exact law (`head_list.channel`),
one multinomial per record, which is the same distribution as running `TwoLevelGRR.randomize` per user.

`sql_records` runs the comparison again through SQL (one key column: the opt-in table's key release,
grr2 reports loaded into the hybrid table, its GROUP BY), each draw a fresh connection.

    PYTHONPATH=. python -m benchmarks.blender_head_list [--draws 20] [--sql-draws 10]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from benchmarks.datasets import DATA, domain_sizes
from mechanisms.ldp.blender import blend, project_simplex
from mechanisms.ldp.client import OptimizedUnaryEncoding, TwoLevelGRR
from mechanisms.ldp.head_list import channel, client_estimates, optin_estimates
from mechanisms.noise import RandomSource
from mechanisms.partition_selection import laplace_selection, select_partitions

RESULTS = Path(__file__).parent / "results" / "blender_head_list.json"
QUERY, URL = "native-country", "occupation"
OPT_INS, F_O, F_C, DELTA = (0.05, 0.10), 0.95, 0.85, 1e-5
EPSILONS = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)
HEAD_SIZES = (5, 10)


def records() -> tuple[np.ndarray, int]:
    """Each user's record as q·|URLs| + u, and |URLs| (the declared domain's, as the LM baseline knows it)."""
    header = (DATA / "adult" / "adult.csv").read_text().split("\n", 1)[0].split(",")
    data = np.loadtxt(DATA / "adult" / "adult.csv", delimiter=",", skiprows=1, dtype=np.int64,
                      usecols=(header.index(QUERY), header.index(URL)))
    sizes = domain_sizes("adult")
    urls = sizes[URL]
    return data[:, 0] * urls + data[:, 1], urls


def head_list(counts: np.ndarray, epsilon: float, rng: RandomSource, urls: int) -> dict[int, list[int]]:
    """Alg 2.2 on S: the records whose count + Laplace(2/ε) clears τ, as {query: [URLs]}."""
    selection = laplace_selection(epsilon / 2, DELTA)  # replace-one neighbours: b = 2/ε
    present = np.flatnonzero(counts)
    kept, _ = select_partitions(counts[present], selection.threshold, selection.noise, rng)
    out: dict[int, list[int]] = {}
    for record in sorted(present[kept].tolist()):
        out.setdefault(record // urls, []).append(record % urls)
    return out


def flat(tree: dict[int, list[int]], urls: int) -> tuple[TwoLevelGRR, np.ndarray]:
    """The grr2 protocol of a head list and each data record's flat index in it (⋆s last at both levels)."""
    queries = sorted(tree)
    sizes = [len(tree[q]) + 1 for q in queries] + [1]
    index = np.full(urls * domain_sizes("adult")[QUERY], sum(sizes) - 1)  # ⟨⋆, ⋆⟩ by default
    offset = 0
    for q, size in zip(queries, sizes):
        index[q * urls:(q + 1) * urls] = offset + size - 1  # ⟨q, ⋆⟩
        for j, u in enumerate(tree[q]):
            index[q * urls + u] = offset + j
        offset += size
    return sizes, index


def query_probabilities(p: np.ndarray, sizes: list[int]) -> np.ndarray:
    return np.add.reduceat(p, np.cumsum([0] + sizes[:-1]))


def l1(estimate: dict[int, float], truth: np.ndarray, top: np.ndarray) -> float:
    """Σ_q |p̂_q − p_q| over the true top queries and the estimated ones (p̂ = 0 outside the list)."""
    keys = set(top.tolist()) | set(estimate)
    return float(sum(abs(estimate.get(q, 0.0) - truth[q]) for q in keys))


def ndcg(ranked: list[int], truth: np.ndarray, size: int) -> float:
    """NDCG of the first `size` items of `ranked` with gains 2^rel − 1, rel the true probability."""
    def dcg(items):
        return sum((2 ** truth[i] - 1) / np.log2(k + 2) for k, i in enumerate(items[:size]))
    ideal = dcg(list(np.argsort(-truth)))
    return float(dcg(ranked) / ideal) if ideal > 0 else 1.0


def run(share: float, epsilon: float, head: int, values: np.ndarray, urls: int, rng: RandomSource, gen) -> dict[str, tuple]:
    n, cells = len(values), urls * domain_sizes("adult")[QUERY]
    order = gen.permutation(n)
    optin = order[: int(share * n)]
    s, t, clients = optin[: int(F_O * len(optin))], optin[int(F_O * len(optin)):], order[int(share * n):]
    truth_records = np.bincount(values, minlength=cells) / n
    truth_queries = truth_records.reshape(-1, urls).sum(axis=1)
    top = np.argsort(-truth_queries)[:head]
    tree = head_list(np.bincount(values[s], minlength=cells), epsilon, rng, urls)
    sizes, index = flat(tree, urls)
    # Alg 2.3 on T: noisy counts of the head list's records, the M most probable queries kept, the rest ⋆
    scale = 2 / epsilon
    counts_t = np.bincount(index[values[t]], minlength=sum(sizes)).astype(np.int64)
    noise = laplace_selection(epsilon / 2, DELTA).noise
    p_o, _ = optin_estimates(counts_t + noise.sample(len(counts_t), rng), len(t), 2 * scale ** 2)
    queries = sorted(tree)
    kept = sorted(np.argsort(-query_probabilities(p_o, sizes)[:-1])[:head].tolist()) if queries else []
    tree = {queries[i]: tree[queries[i]] for i in kept}
    sizes, index = flat(tree, urls)
    counts_t = np.bincount(index[values[t]], minlength=sum(sizes)).astype(np.int64)
    p_o, v_o = optin_estimates(counts_t + noise.sample(len(counts_t), rng), len(t), 2 * scale ** 2)
    # grr2 reports of the clients over the final head list (Alg 2.4), estimated by Alg 2.5
    protocol = TwoLevelGRR(epsilon, tuple(sizes), F_C)
    law = channel(protocol)
    held = np.bincount(index[values[clients]], minlength=sum(sizes))
    reported = sum(gen.multinomial(c, law[:, v]) for v, c in enumerate(held) if c)
    estimate = client_estimates(protocol, reported)
    blended = project_simplex(blend(p_o, v_o, estimate.record, estimate.record_variance).value)
    # the same with the opt-in variance estimate (Alg 2.3 line 14) at p̂ clipped to [0, 1]: never below its noise
    _, v_clipped = optin_estimates(np.clip(p_o, 0, 1) * len(t), len(t), 2 * scale ** 2)
    clipped = project_simplex(blend(p_o, v_clipped, estimate.record, estimate.record_variance).value)
    queries = sorted(tree)
    out = {}
    for name, p in (("BLENDER", blended), ("BLENDER, opt-in variance at clipped p̂", clipped),
                    ("opt-in only (TCM)", project_simplex(p_o))):
        per_query = dict(zip(queries, query_probabilities(p, sizes)[:-1].tolist()))
        ranked = [queries[i] for i in np.argsort(-query_probabilities(p, sizes)[:-1])]
        out[name] = (l1(per_query, truth_queries, top), ndcg(ranked, truth_queries, head), len(queries))
    # LM baseline: every user reports its record with OUE over the declared domain (42 × 15 records)
    domain = len(truth_queries) * urls
    oue = OptimizedUnaryEncoding(epsilon, domain)
    p, q = (float(x) for x in oue.support_probabilities)
    held = np.bincount((values // urls) * urls + values % urls, minlength=domain)
    support = gen.binomial(held, p) + gen.binomial(n - held, q)
    local = project_simplex((support - n * q) / (p - q) / n).reshape(-1, urls).sum(axis=1)
    ranked = list(np.argsort(-local)[:head])
    out["client only (LM, OUE)"] = (l1({int(k): float(local[k]) for k in ranked}, truth_queries, top),
                                    ndcg(ranked, truth_queries, head), head)
    return out


SQL_CATALOG = """
[tables.countries_optin]
rows = {optin}
[tables.countries_optin.columns]
country = {{ type = "key" }}
[tables.countries]
model = "local"
protocol = "grr2"
epsilon = {epsilon}
opt_in = "countries_optin"
[tables.countries.columns]
country = {{ type = "key" }}
[tables.everyone]
model = "local"
protocol = "oue"
epsilon = {epsilon}
[tables.everyone.columns]
country = {{ type = "integer", min = 0, max = {last} }}
"""


def sql_run(share: float, epsilon: float, head: int, countries: np.ndarray, gen) -> dict[str, float]:
    """The same comparison through SQL, one key column (the query: native-country): the opt-in group's key
    release discovers the list (central ε = `epsilon`, its query share), the clients report with grr2
    over it, and the hybrid table's GROUP BY is the blend; the baselines are the discovery's own counts and
    an OUE table of every user's report over the declared 42 countries. ℓ1 as in `run`."""
    import random

    import duckdb

    import dpsql
    n, queries = len(countries), domain_sizes("adult")[QUERY]
    truth = np.bincount(countries, minlength=queries) / n
    top = np.argsort(-truth)[:head]
    order = gen.permutation(n)
    optin, clients = countries[order[: int(share * n)]], countries[order[int(share * n):]]
    con = duckdb.connect()
    con.execute("CREATE TABLE countries_optin AS SELECT CAST(unnest(?) AS VARCHAR) AS country", [optin.tolist()])
    con.execute("CREATE TABLE countries (value BIGINT)")
    oue = OptimizedUnaryEncoding(epsilon, queries)
    p, q = (float(x) for x in oue.support_probabilities)
    held = np.eye(queries, dtype=bool)[countries]
    ones = np.where(held, gen.random(held.shape) < p, gen.random(held.shape) < q)
    con.execute("CREATE TABLE everyone AS SELECT unnest(?) AS ones", [[np.flatnonzero(r).tolist() for r in ones]])
    conn = dpsql.connect(con=con, catalog=SQL_CATALOG.format(optin=len(optin), epsilon=epsilon, last=queries - 1),
                         epsilon=2 * epsilon, query_epsilon=epsilon, delta=1e-5, state=":memory:",
                         seed=int(gen.integers(1 << 31)))
    cur = conn.cursor()
    found = cur.execute("SELECT country, COUNT(*) FROM countries_optin GROUP BY country").fetchall()
    opt_in = {int(k): c / len(optin) for k, c in sorted(found, key=lambda r: -r[1])[:head]}
    table = conn.session.catalog.get("countries")
    keys = [int(k) for k in table.column("country").values] if found else []
    client, python_rng = table.client, random.Random(int(gen.integers(1 << 31)))
    reports = [client.randomize(keys.index(v) if v in keys else len(keys), python_rng)["value"] for v in clients]
    con.execute("INSERT INTO countries SELECT unnest(?)", [reports])
    blended = {int(k): c / n for k, c in cur.execute("SELECT country, COUNT(*) FROM countries GROUP BY country")
               .fetchall()} if keys else {}
    blended = dict(sorted(blended.items(), key=lambda kv: -kv[1])[:head])
    local = {int(k): c / n for k, c in cur.execute("SELECT country, COUNT(*) FROM everyone GROUP BY country")
             .fetchall()}
    local = dict(sorted(local.items(), key=lambda kv: -kv[1])[:head])
    return {"BLENDER (SQL)": l1(blended, truth, top), "opt-in only (SQL key release)": l1(opt_in, truth, top),
            "client only (SQL, OUE)": l1(local, truth, top), "list": len(keys)}


def sql_records(draws: int, gen) -> list[dict]:
    header = (DATA / "adult" / "adult.csv").read_text().split("\n", 1)[0].split(",")
    countries = np.loadtxt(DATA / "adult" / "adult.csv", delimiter=",", skiprows=1, dtype=np.int64,
                           usecols=header.index(QUERY))
    out = []
    for epsilon in (1.0, 4.0):
        started = time.process_time()
        runs = [sql_run(0.05, epsilon, 10, countries, gen) for _ in range(draws)]
        for name in runs[0]:
            if name == "list":
                continue
            values = np.array([r[name] for r in runs])
            out.append({"path": "SQL", "opt-in": 0.05, "head list": 10, "epsilon": epsilon, "mechanism": name,
                        "draws": draws, "l1": values.mean(), "l1_se": values.std(ddof=1) / np.sqrt(draws),
                        "queries in list": float(np.mean([r["list"] for r in runs]))})
            print(f"SQL ε={epsilon:g} {name:32s} ℓ1 {out[-1]['l1']:.4f} ± {out[-1]['l1_se']:.4f}  "
                  f"list {out[-1]['queries in list']:.1f}", flush=True)
        print(f"  ({time.process_time() - started:.1f} s CPU)", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--sql-draws", type=int, default=10, help="draws of the SQL path (each a connection)")
    args = parser.parse_args()
    values, urls = records()
    rng, gen = RandomSource(0), np.random.default_rng(0)
    out = []
    for share, head, epsilon in ((s, h, e) for s in OPT_INS for h in HEAD_SIZES for e in EPSILONS):
        started = time.process_time()
        draws = [run(share, epsilon, head, values, urls, rng, gen) for _ in range(args.draws)]
        for name in draws[0]:
            l1s, ndcgs, sizes = (np.array([d[name][i] for d in draws]) for i in range(3))
            row = {"opt-in": share, "head list": head, "epsilon": epsilon, "mechanism": name, "draws": args.draws,
                   "l1": l1s.mean(), "l1_se": l1s.std(ddof=1) / np.sqrt(len(l1s)), "ndcg": ndcgs.mean(),
                   "ndcg_se": ndcgs.std(ddof=1) / np.sqrt(len(ndcgs)), "queries in list": sizes.mean()}
            out.append(row)
            print(f"opt-in {share:.0%} M={head} ε={epsilon:g} {name:38s} ℓ1 {row['l1']:.4f} ± {row['l1_se']:.4f}  "
                  f"NDCG {row['ndcg']:.3f} ± {row['ndcg_se']:.3f}  list {row['queries in list']:.1f}", flush=True)
        print(f"  ({time.process_time() - started:.1f} s CPU)", flush=True)
    out += sql_records(args.sql_draws, gen)
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
