"""Private-PGM: graphical-model reconstruction from noisy linear measurements over cliques.

- `junction_tree`: greedy triangulation, the junction tree, its size before building;
- `inference`: log-space belief propagation, marginals and Kronecker queries on subtrees;
- `estimation`: the Gaussian log-likelihood of measurements, the total, mirror descent;
- `model`: `GraphicalModel` (fit, answer blocks, the Estimator protocol, sample);
- `sampling`: synthetic rows by randomized rounding;
- `bounds`: AIM's a-posteriori confidence bounds on marginal L1 error.
"""

from mechanisms.pgm.estimation import LinearMeasurement, estimate_total
from mechanisms.pgm.junction_tree import JunctionTree, megabytes, model_size
from mechanisms.pgm.model import GraphicalModel

__all__ = ["GraphicalModel", "JunctionTree", "LinearMeasurement", "estimate_total", "megabytes", "model_size"]
