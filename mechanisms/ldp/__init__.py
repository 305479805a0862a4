"""Local differential privacy: per-user randomizers, their aggregators, and the hybrid blend.

The mathematics of the LDP thesis (seeds/001: Ch. 2 frequency oracles, Ch. 4 marginals, Ch. 5
ranges) and of the hybrid trust model (seeds/000, Ch. 2). Modules:

- `client`: the client side, standard library only (a package vendorable as one folder): `PROTOCOLS`
  (`rr`, `grr`, `oue`, `sue`, `olh`, `hrr`, `inpht`, `inprr`, `inpps`, `margrr`, `margps`,
  `marght`, `inpem`, `hh`, `haar`, `grr2`: BLENDER's two-level GRR over a head list), each with `report(value)` (one JSON row) and the exact
  `probability(payload, value)`; `main` is the command line (`python -m mechanisms.ldp.client`);
- `frequency`: frequency oracles' unbiased estimates and exact variances (`Estimate`,
  `support_estimate`, `hadamard_estimate`, the tallies), `stratified_variance` (users drawing
  one stratum each) and `fwht`;
- `marginals`: INPHT, INPRR, INPPS, MARGRR, MARGPS, MARGHT estimates and exact variances of
  k-way marginals of binary attributes, and INPEM's EM decoding;
- `ranges`: hierarchical histograms with the thesis' consistency step (`consistent_leaves`)
  and HaarHRR (`haar_leaves`), with exact range variances;
- `blender`: the hybrid model's variance-optimal blend of an opt-in (central) estimate and a
  local one (`blend`), and the hybrid mean estimators' exact errors and weights (KVH, PWH);
- `head_list`: BLENDER's estimates over a head list (Alg 2.3 the opt-in group's, Alg 2.5 the
  clients' from grr2 reports, with the seed's variance estimates; `channel`, the reports' law);
- `answering`: the registry of protocols SQL answers (`LOCAL_PROTOCOLS`: payload columns and answering
  family), over `tally` (what is read of the reports), `oracle_answers` (support oracles over the whole
  domain), `stratified_answers` (sampled-strata protocols: exact covariances of any linear queries),
  `range_answers` (hrr, hh, haar), `marginal_answers` (inpht, margrr, margps, marght), `head_list_answers`
  (grr2: P⁻¹ of the counts, exact covariances) and
  `hybrid_answers` (a hybrid table's blend of the opt-in group's central answers with the reports').
Statistically equivalent simulation of the reports' tallies, for tests and benchmarks, is
`benchmarks.ldp_simulation`.
"""

from mechanisms.ldp.blender import Blend, MeanSetting, blend, hybrid_mse, kvh_weight
from mechanisms.ldp.client import PROTOCOLS
from mechanisms.ldp.frequency import Estimate, hadamard_estimate, stratified_variance, support_estimate
from mechanisms.ldp.ranges import consistent_leaves, haar_leaves

__all__ = ["PROTOCOLS", "Blend", "Estimate", "MeanSetting", "blend", "consistent_leaves", "haar_leaves",
           "hadamard_estimate", "hybrid_mse", "kvh_weight", "stratified_variance", "support_estimate"]
