"""`bayes_front`'s two searches: Bayesian optimization, and random search (DPareto's baseline)."""

import pytest

from planner.bayes_front import BAYES, RANDOM, Knob, bayes_front

KNOBS = [Knob("epsilon", 0.1, 10.0), Knob("x", 0.0, 1.0, log=False)]


def _objective(best: float):
    return lambda s: (1 + 30 * (s["x"] - best) ** 2) / s["epsilon"]


def test_random_search_ignores_the_values_and_bayes_follows_them():
    first = {"epsilon": 1.0, "x": 0.5}
    runs = {(search, best): bayes_front(_objective(best), KNOBS, max_evaluations=8, seed=2, first=first,
                                        search=search)[0]
            for search in (BAYES, RANDOM) for best in (0.1, 0.9)}
    settings = {key: [e.settings for e in done] for key, done in runs.items()}
    assert all(len(s) == 8 and dict(s[0]) == first for s in settings.values())
    assert settings[(RANDOM, 0.1)] == settings[(RANDOM, 0.9)]  # i.i.d. uniform, whatever the objective says
    assert settings[(BAYES, 0.1)] != settings[(BAYES, 0.9)]
    assert settings[(RANDOM, 0.1)] == [e.settings for e in bayes_front(_objective(0.5), KNOBS, max_evaluations=8,
                                                                         seed=2, first=first, search=RANDOM)[0]]


def test_an_unknown_search_is_refused():
    with pytest.raises(ValueError, match="unknown search"):
        bayes_front(_objective(0.3), KNOBS, search="grid")
