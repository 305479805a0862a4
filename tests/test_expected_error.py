"""The planner's expected RMSE matches Monte-Carlo RMSE on the demo dashboard."""

import numpy as np

from benchmarks.demo_rmse import simulate

DRAWS = 200


def test_empirical_rmse_matches_expected_rmse():
    _, records, _ = simulate(rows=20_000, draws=DRAWS, epsilon=0.5, delta=1e-9)
    ratios = np.array([r["ratio"] for r in records])
    # One row's RMSE over 200 draws has relative sd ≈ 0.5·sqrt(2/200) = 0.05: 4 sd per block,
    # and the mean over ~25 blocks has sd ≈ 0.01 (3 sd). Seeds are fixed, so this is deterministic.
    assert np.all(np.abs(ratios - 1) < 0.2), records
    assert abs(ratios.mean() - 1) < 0.03
