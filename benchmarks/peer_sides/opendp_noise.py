"""OpenDP's side of benchmarks.noise, run in OpenDP's own environment: times its exact samplers.

Reads {"cases": [{"kind", "scale", "size"}, ...]} as JSON on stdin; writes the seconds
each took. `scale` is the noise scale (sigma for Gaussian, b for Laplace) on integer
data, OpenDP's vector measurements `make_gaussian` / `make_laplace` on `vector_domain(atom_domain(T=int))`.
"""

import json
import sys
import time

import opendp.prelude as dp

dp.enable_features("contrib")
request = json.load(sys.stdin)
seconds = []
for case in request["cases"]:
    metric = dp.l2_distance(T=int) if case["kind"] == "gaussian" else dp.l1_distance(T=int)
    make = dp.m.make_gaussian if case["kind"] == "gaussian" else dp.m.make_laplace
    measurement = make(dp.vector_domain(dp.atom_domain(T=int), size=case["size"]), metric, scale=case["scale"])
    data = [0] * case["size"]
    start = time.perf_counter()
    measurement(data)
    seconds.append(time.perf_counter() - start)
json.dump({"seconds": seconds}, sys.stdout)
