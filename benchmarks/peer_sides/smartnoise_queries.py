"""SmartNoise SQL's side of benchmarks.sequential_sessions, run in SmartNoise's own environment (snsql on pandas).

Reads the request of opendp_queries.py with "sessions" (and "epsilon", "delta") and writes {"sessions": [session][draw]
[query] -> {"k1|k2": value}}. Configuration, as SmartNoise documents it: `snsql.from_df(frame, privacy=Privacy(ε_q,
δ_q), metadata=...)` with one row per person (`row_privacy`), the SUM/AVG column's declared bounds (clamped), and
`censor_dims: False` (GROUP BY keys treated as public, as the other sides get them: a key with no released row
is answered 0 for COUNT); a k-query session spends (ε/k, δ/k) per query by sequential composition, calibrated so
that `get_privacy_cost` of the query (AVG costs a SUM and a COUNT) is exactly that share. SmartNoise's private
reader has no quantiles: a quantile query is refused (the benchmark does not send them).
"""

import itertools
import json
import sys

import pandas as pd
import snsql
from snsql import Privacy

request = json.load(sys.stdin)
frame = pd.read_csv(request["csv"]).rename(columns=request["rename"])
columns = {c: {"type": "int"} for c in frame.columns}
for column, (low, high) in request["bounds"].items():
    columns[column] = {"type": "int", "lower": low, "upper": high}
metadata = {"c": {"s": {"t": {"row_privacy": True, "censor_dims": False, "rows": request["rows"], **columns}}}}
frame = frame[list(columns)]


def sql(query):
    kind, groups = query["kind"], query["groups"]
    if kind.startswith("quantile"):
        raise ValueError("SmartNoise SQL's private reader answers no quantiles")
    aggregate = {"count": "COUNT(*)", "sum": f"SUM({query['column']})", "avg": f"AVG({query['column']})"}[kind]
    text = f"SELECT {', '.join(groups + [aggregate + ' AS v'])} FROM s.t"
    if query["where"]:
        text += " WHERE " + " AND ".join(f"{c} >= {lo} AND {c} <= {hi}" for c, lo, hi in query["where"])
    return text + (f" GROUP BY {', '.join(groups)}" if groups else "")


def reader(text, epsilon, delta):
    """A reader whose cost for `text` is exactly (epsilon, delta): `get_privacy_cost` is linear in its privacy."""
    first = snsql.from_df(frame, privacy=Privacy(epsilon=epsilon, delta=delta), metadata=metadata)
    cost_epsilon, cost_delta = first.get_privacy_cost(text)
    privacy = Privacy(epsilon=epsilon * epsilon / cost_epsilon, delta=delta * delta / cost_delta if cost_delta else delta)
    return snsql.from_df(frame, privacy=privacy, metadata=metadata)


def values(query, rows):
    header, body = rows[0], rows[1:]
    width = len(query["groups"])
    out = {"|".join(str(int(v)) for v in row[:width]): float(row[width]) for row in body if row[width] is not None}
    if query["kind"] == "count" and query["groups"]:
        keys = itertools.product(*([str(k) for k in request["keys"][g]] for g in query["groups"]))
        out = {key: out.get(key, 0.0) for key in map("|".join, keys)}
    return out


def session(queries, draws):
    """`draws` runs of one session: each query at (ε/k, δ/k)."""
    epsilon, delta = request["epsilon"] / len(queries), request["delta"] / len(queries)
    texts = [sql(q) for q in queries]
    readers = [reader(t, epsilon, delta) for t in texts]
    return [[values(q, r.execute(t)) for q, r, t in zip(queries, readers, texts)] for _ in range(draws)]


print(json.dumps({"sessions": [session(s["queries"], s["draws"]) for s in request["sessions"]]}))
