"""Node-DP statistics of graphs that arrive online (S004 Ch. 6; seed_gaps G11).

- `sequence`: `GraphSequence` (nodes with arrival windows, edges arriving with their later
  endpoint, node neighbours) and `DegreeBound` (the declared bound of Def 6.2.1);
- `statistics`: edge count, highDeg_τ, degree histogram, k-stars (and out/in versions),
  their difference sequences and node-DP sensitivities, one graph or the whole sequence;
- `triangles`: triangle counts and their sensitivity under a declared bound (none after projection);
- `projection`: the edge-addition projection to a degree bound in arrival order, stable
  for one graph, unstable over a sequence (S004 Lemma 6.4.2);
- `generators`: the seed's Synthetic I and II transmission graphs;
- `release`: the adapter to `mechanisms.continual` (SENSDIFF or a chosen time strategy).
"""

from mechanisms.graphs.generators import synthetic_one, synthetic_two
from mechanisms.graphs.projection import project
from mechanisms.graphs.release import emit, node_release
from mechanisms.graphs.sequence import DEGREE, IN, OUT, DegreeBound, GraphSequence
from mechanisms.graphs.statistics import DegreeHistogram, EdgeCount, HighDegree, KStars, Sensitivity, Statistic
from mechanisms.graphs.triangles import Triangles, triangle_windows

__all__ = ["DEGREE", "IN", "OUT", "DegreeBound", "DegreeHistogram", "EdgeCount", "GraphSequence", "HighDegree",
           "KStars", "Sensitivity", "Statistic", "Triangles", "emit", "node_release", "project", "synthetic_one",
           "synthetic_two", "triangle_windows"]
