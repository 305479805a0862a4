"""Tumult Analytics' side of benchmarks.keys_vs_peers, run in Tumult's own environment (Spark, local mode).

Reads the request of opendp_keys.py and writes the same reply. Configuration: Tumult's own partition
selection, the `auto_partition_selection` feature (`tmlt.analytics.config`), one
`Session.from_dataframe(ApproxDPBudget(ε, δ), protected_change=AddOneRow())` per draw and
`QueryBuilder("t").groupby(["k"]).count()` evaluated with `ApproxDPBudget(ε, δ)`: Tumult spends ε/2 and
all of δ on the keys and ε/2 on their counts (`_split_auto_partition_budget`). Pure ε-DP and zCDP
budgets cannot select keys in Tumult, so only this mode runs.
"""

import json
import sys

import pandas as pd  # noqa: E402
from local_spark import local_spark  # noqa: E402
from tmlt.analytics import AddOneRow, ApproxDPBudget, QueryBuilder, Session  # noqa: E402
from tmlt.analytics.config import config  # noqa: E402

request = json.load(sys.stdin)
config.features.auto_partition_selection.enable()
spark = local_spark()
frame = spark.createDataFrame(pd.read_csv(request["csv"], dtype={"k": str})).cache()
frame.count()
budget = ApproxDPBudget(request["epsilon"], request["delta"])
released = []
for _ in range(request["draws"]):
    session = Session.from_dataframe(budget, "t", frame, protected_change=AddOneRow())
    rows = session.evaluate(QueryBuilder("t").groupby(["k"]).count(), budget).toPandas()
    released.append({str(k): float(n) for k, n in zip(rows["k"], rows["count"])})
print(json.dumps({"released": released}))
