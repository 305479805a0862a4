"""RAP: relaxed adaptive projection for very large workloads of counting queries.

Public API:
- workloads: `Threshold`, `ThresholdWorkload`, `random_thresholds` (implicit r-of-k / marginal workloads)
- data access: `RecordCounts`, `MarginalCounts` (exact sparse marginals, never released)
- sources: `ThresholdQueries`, `BlockQueries`
- mechanism: `run_rap`, `RAPConfig`, `tk_rule`, `Release`, `RAPResult`
- model: `RelaxedData` (an `Estimator` of blocks; synthetic rows by randomized rounding)
"""

from mechanisms.rap.counts import MarginalCounts, RecordCounts, SparseCounts
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
    "random_thresholds",
    "run_rap",
    "tk_rule",
]
