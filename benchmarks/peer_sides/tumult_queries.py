"""Tumult Analytics' side of benchmarks.peers, run in Tumult's own environment (Spark, local mode).

Reads the same request as opendp_queries.py (one workload, or "sessions") and writes the same answers. Configuration,
as Tumult documents it for zCDP: one `Session.from_dataframe` per draw with
`RhoZCDPBudget(rho)` and `AddOneRow()`, each query evaluated with an even share
`RhoZCDPBudget(rho / len(queries))`; for pure ε-DP ("privacy": "pure") the same with
`PureDPBudget(epsilon)` and `PureDPBudget(epsilon / len(queries))` (Laplace/geometric
noise); GROUP BY over `KeySet.from_dict` of the public keys
(the declared domain); COUNT `.count()`, SUM `.sum(col, low, high)`, AVG
`.average(col, low, high)` (Tumult's own sum-and-count average), a quantile
`.quantile(col, q, low, high)`.
"""

import json
import sys

import pandas as pd  # noqa: E402
from local_spark import local_spark  # noqa: E402
from tmlt.analytics import AddOneRow, KeySet, PureDPBudget, QueryBuilder, RhoZCDPBudget, Session  # noqa: E402

request = json.load(sys.stdin)
spark = local_spark()
table = pd.read_csv(request["csv"]).rename(columns=request["rename"])
frame = spark.createDataFrame(table).cache()  # kept in memory: not re-read from pandas per query
frame.count()
pure = request.get("privacy", "zcdp") == "pure"
total = PureDPBudget(request["epsilon"]) if pure else RhoZCDPBudget(request["rho"])


def share(queries: int):
    return PureDPBudget(request["epsilon"] / queries) if pure else RhoZCDPBudget(request["rho"] / queries)


def build(query):
    plan = QueryBuilder("t")
    for column, low, high in query["where"]:
        plan = plan.filter(f"{column} >= {low} AND {column} <= {high}")
    if query["groups"]:
        plan = plan.groupby(KeySet.from_dict({g: request["keys"][g] for g in query["groups"]}))
    if query["kind"] == "count":
        return plan.count("value")
    low, high = request["bounds"][query["column"]]
    if query["kind"].startswith("quantile"):
        return plan.quantile(query["column"], float(query["kind"].split()[1]), low, high, name="value")
    if query["kind"] == "sum":
        return plan.sum(query["column"], low, high, name="value")
    return plan.average(query["column"], low, high, name="value")


def session(queries, draws):
    """`draws` runs of one session: the queries at even shares of the whole budget."""
    answers = []
    for _ in range(draws):
        session = Session.from_dataframe(total, "t", frame, protected_change=AddOneRow())
        draw = []
        for query in queries:
            rows = session.evaluate(build(query), share(len(queries))).toPandas().to_dict("records")
            draw.append({"|".join(str(r[g]) for g in query["groups"]): float(r["value"]) for r in rows})
        answers.append(draw)
    return answers


if "sessions" in request:  # several sessions, each its own budget (as opendp_queries.py)
    print(json.dumps({"sessions": [session(s["queries"], s["draws"]) for s in request["sessions"]]}))
else:
    print(json.dumps({"answers": session(request["queries"], request["draws"])}))
