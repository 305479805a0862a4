"""The mathematics of dpsql: domains, linear queries, exact noise, accounting, strategies, models.

It knows nothing of SQL, catalogs or databases (it never imports `planner` or `dpsql`).
Each module is one concept:

- core types: `domain` (attributes and sizes), `matrices` (implicit linear operators),
  `workload` (blocks of Kronecker linear queries), `measurement` (a released measurement,
  and exact release on an integer lattice), `marginals` (the residual-basis algebra);
- noise and accounting: `noise` (exact discrete Gaussian/Laplace samplers), `accounting`
  (zCDP ↔ (ε, δ), amounts, the optimal budget split), `exponential`
  (exact exponential mechanism and selection budgets), `interruption` (checkpoints where
  long computations may be stopped), `work_cache` (pure optimizations kept across calls of a
  process, announcing their work again when reused);
- strategies: `hdmm/` (HDMM's optimizers), `ranges/` (trees, wavelets, their choice),
  `residual` (ResidualPlanner's residual-basis strategies), `factorization` (the optimal
  linear strategy, with its dual certificate);
- models: `reconstruction/` (least squares and the answering model), `pgm/` (graphical
  models: Private-PGM), `rap/` (relaxed adaptive projection);
- post-processing: `quantiles` (quantiles and rank intervals from noisy prefix counts);
- small groups of public size: `small_counts` (the LDP thesis' truncated geometric and fair count
  mechanisms, their exact rational matrices and sampling);
- open domains: `partition_selection` (thresholds that release only keys whose noisy count
  clears them: Laplace and Gaussian, exact discrete tails);
- adaptive mechanisms: `aim`, `mst`, `rap`;
- continual release: `continual/` (time strategies over a stream's windows, causal and
  offline estimators, the per-emit state of one continual query);
- local and hybrid trust: `ldp/` (the clients' randomizers, frequency oracles, LDP marginals and
  ranges, the hybrid model's blend);
- graphs: `graphs/` (node-DP statistics of growing graphs: degree bounds, projection, their
  sensitivities over a stream, the seed's synthetic graphs).
"""

from mechanisms.domain import Domain
from mechanisms.measurement import GAUSSIAN, LAPLACE, Measurement
from mechanisms.workload import Block, Term, Workload

__all__ = ["GAUSSIAN", "LAPLACE", "Block", "Domain", "Measurement", "Term", "Workload"]
