"""Adaptive procedures (AIM, RAP): planned as a budget and a procedure, costed by simulation.

A linear strategy's error is an exact formula; an adaptive mechanism's is not: it depends
on the data through what it selects. The planner predicts it by running the procedure on
public stand-in data (`simulation.predict`), never on the private table, and lets it win a
workload when the prediction beats the best linear plan. `PROCEDURES` is the registry.

Each procedure implements `base.Procedure`: ``name``; ``eligible(domain, blocks, noise)``
(None, or why not); ``run(domain, blocks, rho, fetch, rng, rows, progress)``, which
executes under ρ-zCDP on exact counts from ``fetch`` (called once, with every clique it
may read, so the backend scans once) and returns an `AdaptiveRelease`: the measurements to
record in the ledger and an estimator answering later blocks over its attributes.

To add a procedure: implement the protocol in a module here (its mechanism in
`mechanisms`, with `mechanisms.interruption.checkpoint()` in its rounds, so the planning
planning budget and Ctrl-C can stop a simulation), and add an instance to `PROCEDURES`.
"""

from planner.adaptive.aim import AIM, AIMProcedure
from planner.adaptive.base import AdaptiveRelease, Fetch, Prediction, Procedure
from planner.adaptive.rap import RAP, RAP_MIN_QUERIES, RAPProcedure, counting_blocks
from planner.adaptive.simulation import STAND_IN_ROWS, predict, synthetic_records

PROCEDURES: tuple[Procedure, ...] = (AIMProcedure(), RAPProcedure())

__all__ = ["AIM", "PROCEDURES", "RAP", "RAP_MIN_QUERIES", "STAND_IN_ROWS", "AIMProcedure", "AdaptiveRelease", "Fetch",
           "Prediction", "Procedure", "RAPProcedure", "counting_blocks", "predict", "synthetic_records"]
