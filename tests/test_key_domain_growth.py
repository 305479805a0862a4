"""A key column's domain grows across releases: a release filtered by WHERE never freezes it.

Before: the first release fixed the column's keys for everyone, so a release over one analyst's WHERE (say
the young visitors) hid every key frequent only elsewhere from every later query of every analyst.
"""

import math

import numpy as np
import pytest

import dpsql
from dpsql.tables.catalog import Catalog
from dpsql.errors import OperationalError
from dpsql.tables.key_domains import ALL_ROWS, covered, over_current, rows_counted
from dpsql.budget.ledger import Ledger
from dpsql.budget.ledger_entries import KEYS, Entry, Record
from mechanisms.coarsening import key_growth
from mechanisms.matrices import Identity
from mechanisms.measurement import GAUSSIAN, Measurement
from tests.test_key_columns import _rows, write_visits

CATALOG = """
[tables.visits]
privacy_unit = "user_id"
max_rows_per_unit = 1
[tables.visits.columns]
url = { type = "key" }
age = { type = "integer", min = 0, max = 9 }
"""
EVERYWHERE = {"/home": 3000, "/cart": 2000}  # ages 0..9 evenly
OLD_ONLY = {"/pension": 1500}  # ages 5..9 only: frequent, but not among the young


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("growth") / "visits.duckdb")
    rows, user = [], 0
    for url, n in EVERYWHERE.items():
        for i in range(n):
            rows.append((user, url, i % 10))
            user += 1
    for url, n in OLD_ONLY.items():
        for i in range(n):
            rows.append((user, url, 5 + i % 5))
            user += 1
    return write_visits(path, rows)


def _connect(database, tmp_path, **kwargs):
    options = {"epsilon": 4.0, "delta": 1e-6, "query_epsilon": 0.5, "seed": 11, **kwargs}
    return dpsql.connect(database, catalog=CATALOG, state=str(tmp_path / "ledger.duckdb"), **options)


def test_a_filtered_release_does_not_freeze_the_column_for_later_releases(database, tmp_path):
    alice = _connect(database, tmp_path).cursor()
    young = dict(_rows(alice, "SELECT url, COUNT(*) FROM visits WHERE age < 5 GROUP BY url"))
    assert set(young) == set(EVERYWHERE)  # nobody young visits /pension
    ledger = alice.connection.session.ledger
    assert ledger.key_sets() == {("visits", "url"): tuple(sorted(EVERYWHERE))}

    bob = _connect(database, tmp_path).cursor()  # another analyst, all rows: the column grows
    spent = ledger.spent()
    plan = "\n".join(r[0] for r in _rows(bob, "EXPLAIN SELECT url, COUNT(*) FROM visits GROUP BY url"))
    assert "grows the domain" in plan and ledger.spent() == spent
    everyone = dict(_rows(bob, "SELECT url, COUNT(*) FROM visits GROUP BY url"))
    assert set(everyone) == {*EVERYWHERE, *OLD_ONLY}
    assert any("1 more keys of url released (it had 2" in n for n in bob.result.notes)
    sigma = math.sqrt(1 / (2 * bob.connection.session.query_share))
    for url, n in {**EVERYWHERE, **OLD_ONLY}.items():
        assert abs(everyone[url] - n) < 6 * sigma
    # the domain keeps the earlier keys first, the new ones appended
    assert ledger.key_sets() == {("visits", "url"): (*sorted(EVERYWHERE), *OLD_ONLY)}
    assert ledger.verify() == [] and ledger.delta_spent() == pytest.approx(2e-7)

    spent = ledger.spent()  # asked again, by either analyst: free and the same
    assert dict(_rows(bob, "SELECT url, COUNT(*) FROM visits GROUP BY url")) == everyone
    assert dict(_rows(alice, "SELECT url, COUNT(*) FROM visits GROUP BY url")) == everyone
    assert ledger.spent() == spent


def test_rows_already_counted_are_not_released_again_however_the_where_is_written(database, tmp_path):
    cur = _connect(database, tmp_path).cursor()
    first = dict(_rows(cur, "SELECT url, COUNT(*) FROM visits WHERE age < 5 GROUP BY url"))
    ledger = cur.connection.session.ledger
    spent, delta = ledger.spent(), ledger.delta_spent()
    for same in ("age <= 4", "NOT (age >= 5)", "age IN (0, 1, 2, 3, 4)", "age < 5 AND age >= 0"):
        assert dict(_rows(cur, f"SELECT url, COUNT(*) FROM visits WHERE {same} GROUP BY url")) == first
    assert ledger.spent() == spent and ledger.delta_spent() == delta


def test_after_a_full_release_a_filtered_query_is_answered_over_its_keys(database, tmp_path):
    cur = _connect(database, tmp_path).cursor()
    _rows(cur, "SELECT url, COUNT(*) FROM visits GROUP BY url")
    ledger = cur.connection.session.ledger
    delta = ledger.delta_spent()
    old = dict(_rows(cur, "SELECT url, COUNT(*) FROM visits WHERE age >= 5 GROUP BY url"))
    assert set(old) == {*EVERYWHERE, *OLD_ONLY} and ledger.delta_spent() == delta  # measured, not released


def test_measurements_taken_before_a_growth_still_answer_after_it(database, tmp_path):
    """The young visitors' counts were measured over two keys; read over three, they answer as before, free."""
    cur = _connect(database, tmp_path).cursor()
    young = dict(_rows(cur, "SELECT url, COUNT(*) FROM visits WHERE age < 5 GROUP BY url"))
    ledger = cur.connection.session.ledger
    spent = ledger.spent()
    home = "SELECT COUNT(*) FROM visits WHERE age < 5 AND url = '/home'"
    assert _rows(cur, home)[0][0] == pytest.approx(young["/home"]) and ledger.spent() == spent
    _rows(_connect(database, tmp_path).cursor(), "SELECT url, COUNT(*) FROM visits GROUP BY url")  # grows url
    assert len(ledger.key_sets()[("visits", "url")]) == 3
    spent = ledger.spent()
    for reader in (cur, _connect(database, tmp_path).cursor()):
        assert _rows(reader, home)[0][0] == pytest.approx(young["/home"], abs=1e-6)
    assert ledger.spent() == spent


def test_a_charge_over_a_domain_grown_meanwhile_is_refused(tmp_path):
    ledger = Ledger(str(tmp_path / "l.duckdb"), "gaussian", 1.0, 1e-6, events=5e-7)
    grow = Record(KEYS, "url", {"keys": ["/a"], "rows": ALL_ROWS}, 1e-7)
    ledger.charge_all([Entry(0.01, "release", "visits", "sig", [], None, grow, None, (("url", 0),))])
    with pytest.raises(OperationalError, match="released meanwhile"):  # computed over no keys: stale
        ledger.charge_all([Entry(0.01, "q", "visits", "sig", [], None, None, None, (("url", 0),))])
    ledger.charge_all([Entry(0.01, "q", "visits", "sig", [], None, None, None, (("url", 1),))])
    more = Record(KEYS, "url", {"keys": ["/b"], "rows": "abc"}, 1e-7)
    ledger.charge_all([Entry(0.01, "grow", "visits", "sig", [], None, more, None, (("url", 1),))])
    assert ledger.key_sets() == {("visits", "url"): ("/a", "/b")}
    m = Measurement(("url",), GAUSSIAN, 0.01, 1.0, np.zeros(2))
    ledger.charge_all([Entry(0.01, "m", "visits", "sig", [m], None, None, None, (("url", 2),))])
    assert [then for _, then in ledger.stored_measurements("visits", "sig")] == [{"url": 2}]


def test_coverage_counts_releases_once_the_column_has_keys():
    assert not covered([{"keys": [], "rows": ALL_ROWS}], ALL_ROWS)  # found nothing while the column had none
    assert covered([["/a"]], "abc")  # a release before domains grew counted every row
    assert covered([{"keys": ["/a"], "rows": "abc"}, {"keys": [], "rows": "def"}], "def")
    assert not covered([{"keys": ["/a"], "rows": "abc"}], "def")


def test_a_measurement_is_read_over_the_grown_domain_by_coarsening_its_key_axis():
    table = Catalog.from_toml(CATALOG).get("visits")
    grown = table.with_keys({"url": ("/a", "/b", "/c", "/d")})
    x = np.random.default_rng(3).integers(0, 50, size=grown.domain.size(("url", "age"))).astype(float)
    cells = x.reshape(5, 10)  # url (4 keys and every other key) × age
    then = np.vstack([cells[:2], cells[2:].sum(axis=0)])  # when only /a and /b were released
    m = Measurement(("url", "age"), GAUSSIAN, 0.1, 1.0, then.reshape(-1))
    read = over_current(m, grown, {"url": 2})
    assert np.allclose(read.strategy.matvec(x), then.reshape(-1))
    assert over_current(m, table.with_keys({"url": ("/a",)}), {"url": 2}) is None  # the table predates it
    assert over_current(m, grown, {"url": 4}) is m
    direct = Measurement(("url",), GAUSSIAN, 0.1, 1.0, np.zeros(2), key="fingerprint")
    assert over_current(direct, grown, {"url": 2}) is None
    c = key_growth(2, 4)
    assert np.allclose(c.dense(), [[1, 0, 0, 0, 0], [0, 1, 0, 0, 0], [0, 0, 1, 1, 1]])
    assert np.allclose(c.pinv().dense(), np.linalg.pinv(c.dense()))
    assert np.allclose(c.transpose().dense(), c.dense().T) and c.sensitivity(2) == 1.0
    assert isinstance(Identity(3).pinv(), Identity)


def test_rows_counted_names_the_cells_a_where_keeps():
    table = Catalog.from_toml(CATALOG).get("visits")

    class Selection:
        def __init__(self, clique, where):
            self.table, self.clique, self.where = table, clique, np.asarray(where)

    assert rows_counted(Selection((), 1.0)) == ALL_ROWS
    assert rows_counted(Selection(("age",), np.ones(10))) == ALL_ROWS
    young = np.r_[np.ones(5), np.zeros(5)]
    assert rows_counted(Selection(("age",), young)) == rows_counted(Selection(("age",), young.copy()))
    assert rows_counted(Selection(("age",), young)) != rows_counted(Selection(("age",), 1 - young))
