"""Continual release over append-only tables: time strategies over the difference sequence.

The data is the T × cells sequence of per-window counts (S004 §6.3's difference sequence
Δ); a unit's at most k rows over the horizon bound its change in L1 by k, whatever the
windows (seed_gaps G3 §3).

- `strategies`: `TimeStrategy` — SENSDIFF (`identity`) and b-ary trees (`tree`) over the
  T windows, their sensitivities, and when each row is released (`due`);
- `estimators`: running totals and per-window values from the releases so far — offline
  least squares, causal least squares, the binary mechanism's sums — with exact variances;
- `choice`: the error's factorisation into cells × time, the exact time factor, and the
  choice of a time strategy for a horizon (`choose`);
- `stream`: `ContinualRelease`, the state of one continual query across its emits.
"""

from mechanisms.continual.choice import TimeChoice, TimeWorkload, choose, expected_error, unit_error
from mechanisms.continual.estimators import BINARY, CAUSAL, OFFLINE, Answers, estimate, variances
from mechanisms.continual.strategies import Node, TimeStrategy, identity, tree
from mechanisms.continual.stream import ContinualRelease, Report

__all__ = ["BINARY", "CAUSAL", "OFFLINE", "Answers", "ContinualRelease", "Node", "Report", "TimeChoice",
           "TimeStrategy", "TimeWorkload", "choose", "estimate", "expected_error", "identity", "tree",
           "unit_error", "variances"]
