"""OpenDP's side of benchmarks.peers, run in OpenDP's own environment (Context API on Polars).

Reads {"csv", "rename", "keys", "bounds", "rho", "draws", "queries"} (and optionally
"privacy": "zcdp" or "pure", with "epsilon" for "pure") as JSON on stdin and writes
{"answers": [draw][query] -> {"k1|k2": value}}; with "sessions": [{"queries", "draws"}, ...]
instead of "queries" and "draws", {"sessions": [session][draw][query] -> ...}, each session a budget of its own. Configuration, as OpenDP documents it for
zCDP: one `Context.compositor` per draw with `privacy_loss=loss_of(rho=...)`,
`privacy_unit=unit_of(contributions=1)` and `split_evenly_over=len(queries)`; for pure
ε-DP the same with `privacy_loss=loss_of(epsilon=...)`, which makes `.dp.noise()` and
`.dp.sum` add Laplace noise (the Gaussian otherwise) and splits ε evenly; GROUP BY
keys released by a right join against the public key set (the declared domain); COUNT is
`len().dp.noise()`, SUM `fill_null(0).dp.sum(bounds)`, and AVG their ratio within one
`agg` (`dp.mean` needs a public length, which a filtered, grouped query does not have); a
quantile `dp.quantile(q, candidates)` over every integer of the column's declared range.
"""

import itertools
import json
import sys

import opendp.prelude as dp
import polars as pl

dp.enable_features("contrib")
request = json.load(sys.stdin)
frame = pl.read_csv(request["csv"], infer_schema_length=None).rename(request["rename"]).lazy()


def build(context, query):
    plan = context.query()
    for column, low, high in query["where"]:
        plan = plan.filter((pl.col(column) >= low) & (pl.col(column) <= high))
    exprs = []
    if query["kind"].startswith("quantile"):
        low, high = request["bounds"][query["column"]]
        candidates = [float(v) for v in range(int(low), int(high) + 1)]
        exprs.append(pl.col(query["column"]).fill_null(low).dp.quantile(float(query["kind"].split()[1]), candidates)
                     .alias("q"))
    if query["kind"] in ("count", "avg"):
        exprs.append(pl.len().dp.noise().alias("n"))
    if query["kind"] in ("sum", "avg"):
        exprs.append(pl.col(query["column"]).fill_null(0).dp.sum(tuple(request["bounds"][query["column"]])).alias("s"))
    groups = query["groups"]
    if not groups:
        return plan.select(*exprs)
    keys = list(itertools.product(*(request["keys"][g] for g in groups)))
    schema = {g: pl.String if isinstance(request["keys"][g][0], str) else pl.Int64 for g in groups}
    public = pl.LazyFrame({g: [k[i] for k in keys] for i, g in enumerate(groups)}, schema=schema)
    return plan.group_by(*groups).agg(*exprs).join(public, on=groups, how="right")


def values(query, frame_out):
    out = {}
    for row in frame_out.to_dicts():
        key = "|".join(str(row[g]) for g in query["groups"])
        if query["kind"].startswith("quantile"):
            value = row["q"]
        elif query["kind"] == "count":
            value = row["n"]
        elif query["kind"] == "sum":
            value = row["s"]
        else:
            value = row["s"] / row["n"] if row["n"] and row["n"] > 0 else None
        out[key] = None if value is None else float(value)
    return out


def session(queries, draws):
    """`draws` runs of one session: the queries at even shares of the whole budget."""
    answers = []
    for _ in range(draws):
        context = dp.Context.compositor(
            data=frame,
            privacy_unit=dp.unit_of(contributions=1),
            privacy_loss=loss,
            split_evenly_over=len(queries),
            margins=[dp.polars.Margin(by=[], max_length=10 * request["rows"])],
        )
        answers.append([values(q, build(context, q).release().collect()) for q in queries])
    return answers


pure = request.get("privacy", "zcdp") == "pure"
loss = dp.loss_of(epsilon=request["epsilon"]) if pure else dp.loss_of(rho=request["rho"])
if "sessions" in request:  # several sessions, each its own budget: {"sessions": [{"queries", "draws"}, ...]}
    json.dump({"sessions": [session(s["queries"], s["draws"]) for s in request["sessions"]]}, sys.stdout)
else:
    json.dump({"answers": session(request["queries"], request["draws"])}, sys.stdout)
