"""HDMM's optimizers against the reference hdmm, side by side: CPU time and error (issue 34, item 2).

For thesis workloads under Laplace noise (L1 sensitivity, where the reference's templates
apply), each case runs dpsql's operator through `mechanisms.hdmm.optimize` with its
defaults and the reference's template (github.com/dpcomp-org/hdmm, its defaults: one
L-BFGS-B run at ftol 1e-4 per template), alternating the two sides `--repeats` times in
one process, and reports CPU seconds (median) and the error ‖A‖₁² tr[(AᵀA)⁺WᵀW] at unit
noise (lower is better; both sides' objectives are this quantity):

- OPT₀ on 1-D workloads (explicit gram, as `optimize` runs it up to 1024 cells): WIDTH 16
  RANGE, PREFIX and ALL RANGE at n = 1024 (reference: its p-Identity template with
  p = n/16, the template its OPT0 optimizes; its fixed Identity/Total templates fail under
  current NumPy and cost nothing anyway);
- OPT⊗ on 2-D Kronecker workloads, ALL RANGE ⊗ ALL RANGE and PREFIX ⊗ PREFIX at 64 × 64
  (reference: `templates.Kronecker` of p-Identity templates);
- the marginals strategy on CPS (50×100×7×4×2), all 1- and 2-way and all 1- to 3-way
  marginals (reference: `templates.Marginals`; at ADULT's 14 attributes its gradient, a
  Python loop over 2^14 × 2^14 subsets, does not finish in minutes).

The reference is not part of dpsql: clone it and pass its source folder,

    git clone https://github.com/dpcomp-org/hdmm /tmp/hdmm
    OPENBLAS_NUM_THREADS=1 python -m benchmarks.hdmm_reference --reference /tmp/hdmm/src [--repeats 3]

Both sides are seeded with 0 (ours through `optimize(seed=...)`, the reference through numpy's
global generator). One seed is one draw of each side's random starts: `--vary-seed` seeds
repeat r with r on both sides and reports the median and worst error over the seeds.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # both sides single-threaded, as dpsql runs

import argparse
import json
import statistics
import sys
import time
from itertools import combinations
from pathlib import Path

import numpy as np

from mechanisms.hdmm import OPT0, OPT_KRON, OPT_M, optimize
from mechanisms.hdmm.workload import (
    KronGram,
    all_range_gram,
    marginals_workload,
    prefix_gram,
    width_range_gram,
)

CPS = (50, 100, 7, 4, 2)


def _seeded(run, seed: int):
    """The reference draws its templates' seeds from numpy's global generator: seed it first."""
    np.random.seed(seed)
    return run()


def cases(ref) -> list[tuple[str, str, object, object]]:
    """(operator, workload, ours: seed -> error, reference: seed -> error)."""
    rw, rt = ref.workload, ref.templates
    out = []
    n = 1024
    one_d = {
        "WIDTH 16 RANGE": (width_range_gram(n, 16), lambda: rw.WidthKRange(n, 16), n - 15),
        "PREFIX": (prefix_gram(n), lambda: rw.Prefix(n), n),
        "ALL RANGE": (all_range_gram(n), lambda: rw.AllRange(n), n * (n + 1) // 2),
    }
    for name, (gram, reference_workload, rows) in one_d.items():
        kron = KronGram.product([gram], rows)
        out.append((OPT0, f"{name} n={n}", lambda s, kron=kron: optimize(kron, 1, operators=(OPT0,), seed=s).best.error,
                    lambda s, w=reference_workload: _seeded(lambda: rt.PIdentity(n // 16, n).optimize(w()), s)))
    m = 64
    two_d = {
        "ALL RANGE ⊗ ALL RANGE": (all_range_gram(m), lambda: rw.AllRange(m), m * (m + 1) // 2),
        "PREFIX ⊗ PREFIX": (prefix_gram(m), lambda: rw.Prefix(m), m),
    }
    for name, (gram, reference_factor, rows) in two_d.items():
        kron = KronGram.product([gram, gram], rows * rows)
        out.append((OPT_KRON, f"{name} {m}x{m}",
                    lambda s, kron=kron: optimize(kron, 1, operators=(OPT_KRON,), seed=s).best.error,
                    lambda s, f=reference_factor: _seeded(lambda: rt.Kronecker([rt.PIdentity(m // 16, m) for _ in range(2)]).optimize(ref.matrix.Kronecker([f(), f()])), s)))
    for ways in ((1, 2), (1, 2, 3)):
        subsets = [s for k in ways for s in combinations(range(len(CPS)), k)]
        kron = marginals_workload(CPS, subsets)
        out.append((OPT_M, f"CPS {'/'.join(map(str, ways))}-way marginals",
                    lambda s, kron=kron: optimize(kron, 1, operators=(OPT_M,), seed=s).best.error,
                    lambda s, ways=ways: _seeded(
                        lambda: rt.Marginals(CPS).optimize(rw.DimKMarginals(CPS, list(ways))), s)))
    return out


def _cpu(run) -> tuple[float, float]:
    started = time.process_time()
    value = float(run())
    return time.process_time() - started, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference", required=True, help="the reference hdmm's source folder (holding hdmm/)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--vary-seed", action="store_true",
                        help="repeat r seeds both sides with r (default: seed 0 every time); errors: median and worst")
    parser.add_argument("--only", nargs="*", help="operators to run (OPT0, OPT⊗, OPT_M)")
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args()
    sys.path.insert(0, args.reference)
    import hdmm.matrix  # noqa: F401  (the reference)
    import hdmm.templates  # noqa: F401
    import hdmm.workload  # noqa: F401

    ref = sys.modules["hdmm"]
    rows = []
    print(f"{'operator':8} {'workload':34} {'ours CPU s':>10} {'ref CPU s':>10} {'CPU ratio':>9} "
          f"{'ours error':>12} {'ref error':>12} {'error ratio':>11}")
    for operator, name, ours, reference in cases(ref):
        if args.only and operator not in args.only:
            continue
        ours_runs, ref_runs = [], []
        for r in range(args.repeats):
            seed = r if args.vary_seed else 0
            ref_runs.append(_cpu(lambda: reference(seed)))
            ours_runs.append(_cpu(lambda: ours(seed)))
        ours_cpu, ref_cpu = (statistics.median(c for c, _ in runs) for runs in (ours_runs, ref_runs))
        ours_error, ref_error = (statistics.median(e for _, e in runs) for runs in (ours_runs, ref_runs))
        row = {"operator": operator, "workload": name, "ours_cpu_s": ours_cpu, "reference_cpu_s": ref_cpu,
               "ours_error": ours_error, "reference_error": ref_error, "repeats": args.repeats,
               "load": os.getloadavg()[0]}
        if args.vary_seed:
            row |= {"seeds": args.repeats, "ours_worst_error": max(e for _, e in ours_runs),
                    "reference_worst_error": max(e for _, e in ref_runs),
                    "ours_cpu_s_each": [c for c, _ in ours_runs], "reference_cpu_s_each": [c for c, _ in ref_runs]}
        rows.append(row)
        print(f"{operator:8} {name:34} {ours_cpu:10.2f} {ref_cpu:10.2f} {ours_cpu / ref_cpu:9.2f} "
              f"{ours_error:12.6g} {ref_error:12.6g} {ours_error / ref_error:11.4f}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
