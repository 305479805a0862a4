"""RAP: relaxed adaptive projection for very large workloads of counting queries.

Public API:
- workloads: `Threshold`, `ThresholdWorkload`, `random_thresholds` (implicit r-of-k / marginal workloads)
- data access: `RecordCounts`, `MarginalCounts` (exact sparse marginals, never released)
- sources: `ThresholdQueries`, `BlockQueries`
- mechanism: `run_rap`, `RAPConfig`, `tk_rule` (r-aware), `Release`, `RAPResult`
- model: `RelaxedData` (an `Estimator` of blocks; synthetic rows by randomized rounding;
  `spec()` / `RelaxedData.from_spec` for the ledger)
- future queries: `fit_workload` (RAP fitted to known cliques, answering any other query),
  `augment_cliques`, `independent_model`, the seed's threshold distributions and
  `threshold_errors` (mechanisms.rap.future)
"""

from mechanisms.rap.counts import MarginalCounts, RecordCounts, SparseCounts
from mechanisms.rap.future import augment_cliques, fit_workload, independent_model, threshold_errors
from mechanisms.rap.mechanism import RAPConfig, RAPResult, Release, run_rap, tk_rule
from mechanisms.rap.multilinear import BooleanFunction
from mechanisms.rap.projection import ProjectionConfig
from mechanisms.rap.relaxed import RelaxedData
from mechanisms.rap.sources import BlockQueries, ThresholdQueries
from mechanisms.rap.workloads import Threshold, ThresholdWorkload, random_thresholds

__all__ = [
    "BlockQueries",
    "BooleanFunction",
    "MarginalCounts",
    "ProjectionConfig",
    "RAPConfig",
    "RAPResult",
    "RecordCounts",
    "RelaxedData",
    "Release",
    "SparseCounts",
    "Threshold",
    "ThresholdQueries",
    "ThresholdWorkload",
    "augment_cliques",
    "fit_workload",
    "independent_model",
    "random_thresholds",
    "run_rap",
    "threshold_errors",
    "tk_rule",
]
