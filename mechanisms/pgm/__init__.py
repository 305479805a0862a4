"""Private-PGM: graphical-model reconstruction from noisy linear measurements over cliques.

- `junction_tree`: greedy triangulation, the junction tree, its size before building;
- `inference`: log-space belief propagation, marginals and Kronecker queries on subtrees;
- `estimation`: the log-likelihood of any linear measurements, the total,
  mirror descent and its accelerated form;
- `laplace_loss`: the L1 loss (Laplace negative log-likelihood) of Laplace measurements;
- `model`: `GraphicalModel` (fit, answer blocks, the Estimator protocol, sample);
- `estimator`: `GraphicalModelEstimator`, one model over all of a table's measurements
  (marginals, strategies, direct blocks) with least-squares error bars, and
  `AutoEstimator` (the model where it agrees with least squares, else least squares);
- `sampling`: synthetic rows by randomized rounding;
- `bounds`: AIM's a-posteriori confidence bounds on marginal L1 error.
"""

from mechanisms.pgm.estimation import LinearMeasurement, estimate_total
from mechanisms.pgm.junction_tree import JunctionTree, megabytes, model_size
from mechanisms.pgm.model import ACCELERATED, MIRROR, GraphicalModel
from mechanisms.pgm.estimator import GRAPHICAL_MODEL, AutoEstimator, GraphicalModelEstimator

__all__ = [
    "ACCELERATED",
    "AutoEstimator",
    "GRAPHICAL_MODEL",
    "MIRROR",
    "GraphicalModel",
    "GraphicalModelEstimator",
    "JunctionTree",
    "LinearMeasurement",
    "estimate_total",
    "megabytes",
    "model_size",
]
