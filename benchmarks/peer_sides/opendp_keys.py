"""OpenDP's side of benchmarks.keys_vs_peers, run in OpenDP's own environment (Context API on Polars).

Reads {"csv", "draws", "privacy", "epsilon", "delta", "rho", "delta_tau"} as JSON on stdin and writes
{"released": [draw] -> {key: noisy count}}. Configuration: one `Context.compositor` per draw over the
table (`user_id`, `k`: one row per unit), `privacy_unit=unit_of(contributions=1)`, and the query
`group_by("k").agg(pl.len().dp.noise())` with no public keys, so OpenDP selects the keys itself by a
threshold on the noisy counts; pure mode `loss_of(epsilon=ε, delta=δ)` (Laplace noise, δ for the
threshold), zCDP mode `loss_of(rho=ρ, delta=δ_τ)` (Gaussian noise, δ_τ for the threshold).
"""

import json
import sys

import opendp.prelude as dp
import polars as pl

dp.enable_features("contrib")
request = json.load(sys.stdin)
frame = pl.read_csv(request["csv"], schema_overrides={"k": pl.String}).lazy()
rows = pl.read_csv(request["csv"]).height
if request["privacy"] == "pure":
    loss = dp.loss_of(epsilon=request["epsilon"], delta=request["delta"])
else:
    loss = dp.loss_of(rho=request["rho"], delta=request["delta_tau"])
released = []
for _ in range(request["draws"]):
    context = dp.Context.compositor(data=frame, privacy_unit=dp.unit_of(contributions=1), privacy_loss=loss,
                                    split_evenly_over=1, margins=[dp.polars.Margin(by=[], max_length=10 * rows)])
    out = context.query().group_by("k").agg(pl.len().dp.noise().alias("n")).release().collect()
    released.append({str(k): float(n) for k, n in zip(out["k"].to_list(), out["n"].to_list())})
json.dump({"released": released}, sys.stdout)
