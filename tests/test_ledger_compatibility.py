"""Ledgers written by earlier releases still load: every stored strategy is rebuilt exactly.

`tests/data/ledger-0.1.dpsql-state` was written by dpsql 0.1, whose ledger named each
structured strategy's Python module (`mechanisms.ranges.trees`, `mechanisms.ranges.wavelet`,
`mechanisms.residual`); those modules have since moved. Strategies are found by
their kind name, so the moves cannot make a ledger unreadable.
"""

import shutil
from pathlib import Path

import numpy as np

from dpsql.budget.ledger import Ledger

FIXTURE = Path(__file__).parent / "data" / "ledger-0.1.dpsql-state"


def _expected():
    """The strategies the fixture holds, built with today's code (as /tmp/make_ledger.py built them)."""
    from mechanisms import ranges
    from mechanisms.matrices import Dense, Diagonal, Identity, Kronecker, Ones, Prefix, Sum, Weighted
    from mechanisms.residual import Centering

    return [
        ranges.hierarchical(8, 2, weights=[1.0, 0.5, 0.5, 0.5]),
        ranges.haar(8),
        Centering(4),
        Kronecker([Weighted(Dense(np.arange(16.0).reshape(2, 8)), 0.5), Identity(8)]),
        Kronecker([Prefix(8), Diagonal([1.0, 2.0, 3.0, 4.0])]),
        Sum([Kronecker([Ones(1, 8), Identity(4)]), Kronecker([Dense(np.eye(8)[:1]), Diagonal([1.0, 0.0, 1.0, 2.0])])]),
        None,
    ]


def test_a_ledger_of_release_0_1_loads(tmp_path):
    path = tmp_path / "ledger.dpsql-state"
    shutil.copy(FIXTURE, path)
    ledger = Ledger.existing(str(path))
    assert ledger.verify() == []
    stored = ledger.measurements("t", "sig")
    assert [m.clique for m in stored] == [("a",), ("b",), ("c",), ("a", "b"), ("a", "c"), ("b", "c"), ("a",)]
    for m, expected in zip(stored, _expected()):
        if expected is None:
            assert m.strategy is None and m.is_marginal
            continue
        assert type(m.strategy).__name__ == type(expected).__name__
        np.testing.assert_array_equal(m.strategy.dense(), expected.dense())
        assert m.values.shape == (expected.shape[0],)


def test_every_structured_strategy_is_stored_by_kind():
    """A strategy that describes itself with spec() must be registered, or a ledger could not rebuild it."""
    import mechanisms.ranges  # noqa: F401  (defines the range strategies)
    import mechanisms.residual  # noqa: F401
    from mechanisms.matrices import STORED_KINDS, Matrix

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    described = {c.__name__: c.__module__ for c in subclasses(Matrix) if "spec" in vars(c) or any(
        "spec" in vars(base) for base in c.__mro__[1:-1] if base is not Matrix)}
    assert described == {name: STORED_KINDS[name] for name in described}


def test_a_ledger_of_release_0_2_answers_free_and_the_same(tmp_path):
    """Written before the house step (`tests/data/make_release_ledger.py`: keys stored as a bare list, the
    handlers still in the session): every query is answered again from it, free, with the same values."""
    import json

    import dpsql
    from tests.data.make_release_ledger import CATALOG, QUERIES, ask, write_people

    data = Path(__file__).parent / "data"
    state = tmp_path / "ledger.dpsql-state"
    shutil.copy(data / "ledger-0.2.dpsql-state", state)
    write_people(str(tmp_path / "people.duckdb"))
    conn = dpsql.connect(str(tmp_path / "people.duckdb"), catalog=CATALOG, state=str(state), epsilon=20.0,
                         delta=1e-6, query_epsilon=1.0)
    ledger = conn.session.ledger
    assert ledger.verify() == [] and ledger.key_sets() == {("people", "city"): tuple(f"city-{i}" for i in range(5))}
    spent = ledger.spent()
    cur = conn.cursor()
    for sql, expected in zip(QUERIES, json.loads((data / "ledger-0.2.answers.json").read_text())):
        got = ask(cur, sql)
        assert [[[v for v in row if isinstance(v, str)] for row in s] for s in got] == \
            [[[v for v in row if isinstance(v, str)] for row in s] for s in expected], sql
        numbers = [float(v) for s in got for row in s for v in row if isinstance(v, (int, float))]
        wanted = [float(v) for s in expected for row in s for v in row if isinstance(v, (int, float))]
        assert np.allclose(numbers, wanted, rtol=1e-9, atol=1e-9), sql
    assert ledger.spent() == spent
