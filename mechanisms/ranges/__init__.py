"""Range strategies: hierarchical trees, Haar wavelets, and the choice among them.

- `trees`: `Tree` layouts, `RangeStrategy` (weighted node totals of a tree, with an exact
  implicit solver) and `HierarchicalStrategy` / `hierarchical`;
- `wavelet`: `HaarStrategy` / `haar`;
- `optimize`: range workloads (`Ranges`) and the choice of a strategy and its level
  weights for one (`choose_range_strategy`, `choose_kronecker` for products).
"""

from mechanisms.ranges.optimize import Ranges, choose_kronecker, choose_range_strategy
from mechanisms.ranges.trees import HierarchicalStrategy, RangeStrategy, Tree, hierarchical
from mechanisms.ranges.wavelet import HaarStrategy, haar

__all__ = ["HaarStrategy", "HierarchicalStrategy", "RangeStrategy", "Ranges", "Tree", "choose_kronecker",
           "choose_range_strategy", "haar", "hierarchical"]
