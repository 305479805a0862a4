"""Range strategies: hierarchical trees, Haar wavelets, and the choice among them.

- `tree_layouts`: `Tree`s of nested intervals (padded, balanced);
- `trees`: `RangeStrategy` (weighted node totals of a tree, with an exact
  implicit solver) and `HierarchicalStrategy` / `hierarchical`;
- `wavelet`: `HaarStrategy` / `haar`;
- `optimize`: range workloads (`Ranges`) and the choice of a strategy and its level
  weights for one (`choose_range_strategy`, `choose_kronecker` for products).
"""

from mechanisms.ranges.optimize import Ranges, choose_kronecker, choose_range_strategy
from mechanisms.ranges.tree_layouts import Tree
from mechanisms.ranges.trees import HierarchicalStrategy, RangeStrategy, hierarchical
from mechanisms.ranges.wavelet import HaarStrategy, haar

__all__ = ["HaarStrategy", "HierarchicalStrategy", "RangeStrategy", "Ranges", "Tree", "choose_kronecker",
           "choose_range_strategy", "haar", "hierarchical"]
