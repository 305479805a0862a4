"""Tumult Analytics' side of benchmarks.joins_vs_tumult, run in Tumult's own environment (Spark, local mode).

Reads a JSON request on stdin: the two tables' CSVs (`people`, `records`), the unit column (`id`), the
bound K (`max_rows_per_id`), the public keys and value bounds, ρ, `draws` and the queries; writes
{"answers": [draw][query]{group key: value}}. Configuration, as Tumult documents private joins with
privacy IDs ("Doing more with privacy IDs"): both tables are private sources with
`AddRowsWithID(id, "person")` in one ID space (the neighbours differ in one person's rows in every
table, as dpsql's), one `Session` per draw with `RhoZCDPBudget(rho)`; each query is
`QueryBuilder("records").join_private("people", join_columns=[id])`, then
`.enforce(MaxRowsPerID(K))` (Tumult's truncation of each person's joined rows), grouped over
`KeySet.from_dict` of the public keys, `.count()` or `.sum(col, low, high)`, evaluated with an even
share `RhoZCDPBudget(rho / len(queries))`.
"""

import json
import sys

import pandas as pd  # noqa: E402
from local_spark import local_spark  # noqa: E402
from tmlt.analytics import AddRowsWithID, KeySet, MaxRowsPerID, QueryBuilder, RhoZCDPBudget, Session  # noqa: E402

request = json.load(sys.stdin)
spark = local_spark()
frames = {}
for name in ("people", "records"):
    frames[name] = spark.createDataFrame(pd.read_csv(request[name])).cache()
    frames[name].count()
unit, share = request["id"], RhoZCDPBudget(request["rho"] / len(request["queries"]))


def build(query):
    plan = (QueryBuilder("records").join_private("people", join_columns=[unit])
            .enforce(MaxRowsPerID(request["max_rows_per_id"])))
    if query["groups"]:
        plan = plan.groupby(KeySet.from_dict({g: request["keys"][g] for g in query["groups"]}))
    if query["kind"] == "count":
        return plan.count("value")
    low, high = request["bounds"][query["column"]]
    return plan.sum(query["column"], low, high, name="value")


answers = []
for _ in range(request["draws"]):
    builder = Session.Builder().with_privacy_budget(RhoZCDPBudget(request["rho"])).with_id_space("person")
    for name, frame in frames.items():
        builder = builder.with_private_dataframe(name, frame, protected_change=AddRowsWithID(unit, "person"))
    session = builder.build()
    draw = []
    for query in request["queries"]:
        rows = session.evaluate(build(query), share).toPandas().to_dict("records")
        draw.append({"|".join(str(r[g]) for g in query["groups"]): float(r["value"]) for r in rows})
    answers.append(draw)
print(json.dumps({"answers": answers}))
