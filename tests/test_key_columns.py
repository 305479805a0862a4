"""Key columns: GROUP BY keys nobody declared, released by DP partition selection.

A key column has no domain until a query grouped by it releases the keys whose noisy count
clears τ; the key set is charged (ρ and δ_τ), recorded in the ledger and is the column's
domain from then on, for every connection of the ledger.
"""

import math

import duckdb
import numpy as np
import pandas
import pytest

import dpsql
from dpsql.tables.catalog import Catalog, CatalogError
from dpsql.errors import BudgetExceededError, NotSupportedError, ProgrammingError
from dpsql.budget.ledger import Ledger
from mechanisms.accounting import epsilon_delta_to_zcdp, zcdp_to_epsilon
from mechanisms.partition_selection import _worst_new_key_chance, gaussian_selection, laplace_selection

CATALOG = """
[tables.visits]
privacy_unit = "user_id"
max_rows_per_unit = 2
[tables.visits.columns]
url = { type = "key" }
age = { type = "integer", min = 0, max = 9 }
"""
# Frequent keys (thousands of rows, far above τ) and rare ones (one unit each, far below).
FREQUENT = {"/home": 6000, "/cart": 4000, "/help": 3000}
RARE = [f"/secret/{i}" for i in range(50)]


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("keys") / "visits.duckdb")
    rows, user = [], 0
    for url, n in FREQUENT.items():
        for i in range(n):
            rows.append((user, url, i % 10))
            user += 1
    for url in RARE:
        rows.append((user, url, 3))
        user += 1
    return write_visits(path, rows)


def write_visits(path: str, rows: list[tuple[int, str, int]]) -> str:
    """A DuckDB file holding `visits (user_id, url, age)` with these rows."""
    con = duckdb.connect(path)
    con.execute("CREATE TABLE visits (user_id INTEGER, url VARCHAR, age INTEGER)")
    con.register("given", pandas.DataFrame(rows, columns=["user_id", "url", "age"]))  # single-row inserts took seconds
    con.execute("INSERT INTO visits SELECT * FROM given")
    con.close()
    return path


def _connect(database, tmp_path, **kwargs):
    options = {"epsilon": 1.0, "delta": 1e-6, "query_epsilon": 0.5, "seed": 7, **kwargs}
    return dpsql.connect(database, catalog=CATALOG, state=str(tmp_path / "ledger.duckdb"), **options)


def _rows(cur, sql):
    cur.execute(sql)
    return cur.fetchall()



def test_grouping_by_position_releases_keys_and_a_key_without_count_is_refused(database, tmp_path):
    """GROUP BY 1 on an unreleased key column releases its keys as GROUP BY url does (it raised a raw KeyError);
    selecting the key with no aggregate is refused before anything is spent (it raised an IndexError)."""
    conn = _connect(database, tmp_path)
    cur = conn.cursor()
    with pytest.raises(ProgrammingError, match="GROUP BY without an aggregate"):
        cur.execute("SELECT url FROM visits GROUP BY url")
    assert conn.budget.spent.epsilon == 0
    rows = dict(_rows(cur, "SELECT url, COUNT(*) FROM visits GROUP BY 1"))
    assert set(FREQUENT) <= set(rows) and not any(u.startswith("/secret") for u in rows if u)

def test_a_key_column_is_declared_without_values_and_has_no_domain_until_released():
    table = Catalog.from_toml(CATALOG).get("visits")
    assert table.column("url").is_open and table.domain.attributes == ("age",)
    released = table.with_keys({"url": ("/a", "/b")})
    assert released.domain.size_of("url") == 3  # the released keys and every other key
    assert released.signature() == table.signature()  # measurements stay valid after the release
    with pytest.raises(CatalogError, match="unknown keys"):
        Catalog.from_toml('[tables.t.columns]\nk = { type = "key", values = ["a"] }')


def test_group_by_a_key_column_releases_the_frequent_keys_and_charges_rho_and_delta(database, tmp_path):
    conn = _connect(database, tmp_path)
    cur = conn.cursor()
    released = dict(_rows(cur, "SELECT url, COUNT(*) AS n FROM visits GROUP BY url"))
    assert set(released) == set(FREQUENT)  # no key held by one unit shows
    for url, n in FREQUENT.items():
        assert abs(released[url] - n) < 6 * math.sqrt(2**2 / (2 * conn.session.query_share))
    ledger = conn.session.ledger
    assert ledger.key_sets() == {("visits", "url"): tuple(sorted(FREQUENT))}
    assert ledger.delta_spent() == pytest.approx(1e-7)
    assert ledger.verify() == []
    spent = ledger.spent()
    # Asked again (another order, a top-k), and by a new connection: free, the same counts.
    top = _rows(cur, "SELECT url, COUNT(*) AS n FROM visits GROUP BY url ORDER BY n DESC LIMIT 2")
    assert [u for u, _ in top] == ["/home", "/cart"] and dict(top)["/home"] == released["/home"]
    other = _connect(database, tmp_path).cursor()
    assert dict(_rows(other, "SELECT url, COUNT(*) FROM visits GROUP BY url")) == released
    assert ledger.spent() == spent


def test_released_keys_are_a_domain_for_later_queries(database, tmp_path):
    cur = _connect(database, tmp_path).cursor()
    cur.execute("SELECT url, COUNT(*) FROM visits GROUP BY url")
    rows = _rows(cur, "SELECT url, AVG(age) AS a FROM visits WHERE url <> '/help' GROUP BY url")
    assert [u for u, _ in rows] == sorted(FREQUENT)  # one row per released key, never the other keys
    assert abs(dict(rows)["/home"] - 4.5) < 1.0
    with pytest.raises(dpsql.Error, match="not a released key"):
        cur.execute("SELECT COUNT(*) FROM visits WHERE url = '/secret/1'")


def test_misuse_of_an_unreleased_key_column_spends_nothing(database, tmp_path):
    conn = _connect(database, tmp_path)
    cur = conn.cursor()
    for sql, message in [
        ("SELECT url, AVG(age) FROM visits GROUP BY url", "not been released"),
        ("SELECT url, age, COUNT(*) FROM visits GROUP BY url, age", "grouped by alone"),
        ("SELECT COUNT(*) FROM visits WHERE url = '/home'", "not been released"),
        ("BEGIN WORKLOAD; SELECT url, COUNT(*) FROM visits GROUP BY url; END WORKLOAD", "outside a workload"),
    ]:
        with pytest.raises(dpsql.Error, match=message):
            cur.execute(sql)
    assert conn.session.ledger.spent() == 0 and conn.session.ledger.key_sets() == {}


def test_explain_shows_the_threshold_and_spends_nothing(database, tmp_path):
    conn = _connect(database, tmp_path)
    plan = "\n".join(r[0] for r in _rows(conn.cursor(), "EXPLAIN SELECT url, COUNT(*) FROM visits GROUP BY url"))
    chosen = gaussian_selection(conn.session.query_share, 1e-7, 2, 2, 2)
    assert f"τ = {chosen.threshold}" in plan and "probability 5% / 50% / 95%" in plan
    assert conn.session.ledger.spent() == 0


def test_a_share_whose_laplace_threshold_is_lower_releases_keys_with_discrete_laplace(database, tmp_path):
    """The whole budget of ε = 1 in one key release: on a ledger composed exactly the discrete Laplace of ε = 1
    has a lower threshold than the Gaussian's (k = 2 rows per unit), so it is chosen, charged as a pure piece of
    ε and δ_τ (from the δ set apart for key releases), and the budget is then spent; a zCDP ledger keeps the
    Gaussian."""
    conn = _connect(database, tmp_path, query_epsilon=1.0)
    cur = conn.cursor()
    plan = "\n".join(r[0] for r in _rows(cur, "EXPLAIN SELECT url, COUNT(*) FROM visits GROUP BY url"))
    laplace = laplace_selection(1.0, 1e-7, 2, 2, 2)
    gaussian = gaussian_selection(conn.session.query_share, 1e-7, 2, 2, 2)
    assert laplace.threshold < gaussian.threshold
    assert "discrete Laplace noise" in plan and f"τ = {laplace.threshold}" in plan and "fits in" in plan
    released = dict(_rows(cur, "SELECT url, COUNT(*) AS n FROM visits GROUP BY url"))
    assert set(released) == set(FREQUENT)
    for url, n in FREQUENT.items():
        assert abs(released[url] - n) < 6 * math.sqrt(laplace.noise.variance)
    assert "pure DP" in cur.result.charge_text and f"τ = {laplace.threshold}" in " ".join(cur.result.notes)
    ledger = conn.session.ledger
    [charge] = ledger.charges()
    assert charge.pure_epsilon == pytest.approx(laplace.cost) and laplace.cost <= 1.0
    assert ledger.delta_spent() == pytest.approx(1e-7) and ledger.verify() == []
    with pytest.raises(BudgetExceededError):  # ε = 1 spent: nothing more fits
        cur.execute("SELECT COUNT(*) FROM visits WHERE age < 3")
    assert dict(_rows(cur, "SELECT url, COUNT(*) FROM visits GROUP BY url")) == released  # free
    zcdp = dpsql.connect(database, catalog=CATALOG, state=str(tmp_path / "zcdp.duckdb"), epsilon=1.0, delta=1e-6,
                         query_epsilon=1.0, seed=7, accounting="zcdp")
    plan = "\n".join(r[0] for r in _rows(zcdp.cursor(), "EXPLAIN SELECT url, COUNT(*) FROM visits GROUP BY url"))
    assert "discrete Gaussian noise" in plan and f"τ = {gaussian.threshold}" in plan


def test_a_where_selects_the_rows_whose_keys_are_counted(database, tmp_path):
    cur = _connect(database, tmp_path).cursor()
    released = dict(_rows(cur, "SELECT url, COUNT(*) FROM visits WHERE age < 5 GROUP BY url"))
    assert set(released) == set(FREQUENT)
    assert abs(released["/home"] - 3000) < 60


def test_the_threshold_holds_the_chance_of_a_unit_s_own_keys_under_delta():
    # With a total of k rows per unit, the worst split is found exactly: brute force agrees.
    chosen = gaussian_selection(0.05, 1e-6, max_keys=4, max_per_key=4, max_rows=4)
    splits = [[4], [3, 1], [2, 2], [2, 1, 1], [1, 1, 1, 1]]
    def chance(tau):
        return max(sum(math.exp(chosen.noise.log_tail(tau + 1 - c)) for c in split) for split in splits)
    assert chance(chosen.threshold) <= 1e-6 < chance(chosen.threshold - 1)
    assert math.exp(_worst_new_key_chance(chosen.noise, chosen.threshold, 4, 4, 4)) == pytest.approx(
        chance(chosen.threshold))
    assert float(chosen.noise.sigma2) >= 4**2 / (2 * 0.05)  # L2 sensitivity k, not k^1.5


def test_the_delta_set_apart_for_key_releases_is_fixed_when_the_ledger_is_created(tmp_path):
    """The charges' ρ converts at δ − events from the start, so the declared ε holds whatever keys are released
    later; the split cannot change afterwards, and all of δ cannot be set apart."""
    path, total = str(tmp_path / "l.duckdb"), epsilon_delta_to_zcdp(1.0, 1e-6)
    ledger = Ledger(path, "gaussian", total, 1e-6, events=3e-7)
    assert ledger.events == 3e-7 and ledger.capacity < ledger.total
    assert zcdp_to_epsilon(ledger.capacity, 1e-6 - 3e-7) == pytest.approx(1.0, rel=1e-9)
    assert ledger.unit.amount(ledger.capacity).epsilon == pytest.approx(1.0, rel=1e-9)
    assert Ledger(path, "gaussian", total, 1e-6, default_events=1e-7).events == 3e-7  # a default changes nothing
    with pytest.raises(ProgrammingError, match="fixed"):
        Ledger(path, "gaussian", total, 1e-6, events=5e-7)
    assert Ledger(str(tmp_path / "none.duckdb"), "gaussian", total, 1e-6).capacity == total
    with pytest.raises(ProgrammingError, match="below the ledger's δ"):
        Ledger(str(tmp_path / "all.duckdb"), "gaussian", total, 1e-6, events=1e-6)
    assert ledger.verify() == []


def test_key_releases_past_the_delta_set_apart_are_refused_and_spend_nothing(database, tmp_path):
    conn = dpsql.connect(database, catalog=CATALOG, state=str(tmp_path / "s.duckdb"), epsilon=1.0, delta=1e-6,
                         query_epsilon=0.2, seed=7, key_release_delta=3e-7)
    cur = conn.cursor()
    cur.execute("SET dpsql.key_delta = 2e-7")
    cur.execute("SELECT url, COUNT(*) FROM visits WHERE age < 5 GROUP BY url")
    ledger = conn.session.ledger
    spent = ledger.spent()
    with pytest.raises(BudgetExceededError, match="set apart"):  # the rows of age ≥ 5 need a second release
        cur.execute("SELECT url, COUNT(*) FROM visits GROUP BY url")
    assert ledger.spent() == spent and ledger.delta_spent() == pytest.approx(2e-7)
    none = dpsql.connect(database, catalog=CATALOG, state=str(tmp_path / "none.duckdb"), epsilon=1.0, delta=1e-6,
                         query_epsilon=0.2, seed=7, key_release_delta=0)
    with pytest.raises(ProgrammingError, match="set apart"):
        none.cursor().execute("SET dpsql.key_delta = 1e-7")
    with pytest.raises(BudgetExceededError, match="set apart no δ"):
        none.cursor().execute("SELECT url, COUNT(*) FROM visits GROUP BY url")
    assert none.session.ledger.spent() == 0 and none.session.ledger.key_sets() == {}


def test_a_pure_epsilon_ledger_refuses_to_release_keys(database, tmp_path):
    conn = _connect(database, tmp_path, delta=0)
    with pytest.raises(NotSupportedError, match="pure ε-DP"):
        conn.cursor().execute("SELECT url, COUNT(*) FROM visits GROUP BY url")
    assert conn.session.ledger.spent() == 0


def test_a_release_that_does_not_fit_is_refused_before_the_scan(database, tmp_path):
    conn = _connect(database, tmp_path, query_epsilon=5.0)
    with pytest.raises(BudgetExceededError):
        conn.cursor().execute("SELECT url, COUNT(*) FROM visits GROUP BY url")
    assert conn.session.ledger.key_sets() == {}


def test_show_budget_and_key_delta(database, tmp_path):
    conn = _connect(database, tmp_path)
    cur = conn.cursor()
    cur.execute("SET dpsql.key_delta = 2e-7")
    cur.execute("SELECT url, COUNT(*) FROM visits GROUP BY url")
    budget = {r[0]: r[1:] for r in _rows(cur, "SHOW dpsql.budget")}
    assert budget["key_releases_spent"][1] == pytest.approx(2e-7)
    assert budget["key_releases_total"][1] == pytest.approx(5e-7)  # a key column in the catalog: δ / 2 by default
    assert budget["total"][0] == pytest.approx(1.0, rel=1e-6)  # ε at the δ not set apart: what was declared
    assert budget["total"][1] == pytest.approx(5e-7)
    with pytest.raises(ProgrammingError, match="at most the δ the ledger set apart"):
        cur.execute("SET dpsql.key_delta = 1e-5")


def _profile(database, tmp_path, key_delta=""):
    (tmp_path / "catalog.toml").write_text(CATALOG)
    (tmp_path / "p.toml").write_text(f"""
[data]
database = "{database}"
catalog = "catalog.toml"
ledger = "ledger.duckdb"
[budget]
epsilon = 1.0
delta = 1e-6
query_epsilon = 0.2
{key_delta}
[analysts.alice]
epsilon = 0.5
[analysts.bob]
""")
    return str(tmp_path / "p.toml")


def test_an_analyst_cannot_choose_the_delta_of_key_releases(database, tmp_path):
    conn = dpsql.connect(profile=_profile(database, tmp_path, "key_delta = 3e-7"), analyst="bob")
    assert _rows(conn.cursor(), "SHOW dpsql.key_delta") == [(3e-7,)]
    with pytest.raises(ProgrammingError, match="data owner's setting"):
        conn.cursor().execute("SET dpsql.key_delta = 9e-7")
    assert conn.session.ledger.spent() == 0


def test_key_releases_take_delta_from_the_part_set_apart_and_analysts_pay_only_their_charges(database, tmp_path):
    """δ spent on keys comes out of the part of δ set apart when the ledger was created: nobody's capacity
    changes, and an analyst's limit counts their charges alone."""
    path = _profile(database, tmp_path, "key_delta = 5e-7\nkey_release_delta = 5e-7")
    alice = dpsql.connect(profile=path, analyst="alice")
    ledger = alice.session.ledger
    full = ledger.capacity
    alice.cursor().execute("SELECT url, COUNT(*) FROM visits GROUP BY url")
    assert ledger.capacity == full and ledger.delta_spent() == pytest.approx(5e-7)
    limit, mine, remaining = ledger.status()
    assert mine == pytest.approx(ledger.spent()) and remaining == pytest.approx(limit - mine)
    bob = dpsql.connect(profile=path, analyst="bob")  # no own limit: the ledger's
    total, spent, left = bob.session.ledger.status()
    assert total == pytest.approx(full) and left == pytest.approx(full - spent)

def test_a_tampered_key_set_breaks_the_chain(database, tmp_path):
    conn = _connect(database, tmp_path)
    conn.cursor().execute("SELECT url, COUNT(*) FROM visits GROUP BY url")
    conn.close()
    con = duckdb.connect(str(tmp_path / "ledger.duckdb"))
    con.execute("UPDATE dpsql_records SET payload = replace(payload, ']', ',\"/secret/1\"]')")
    con.close()
    problems = Ledger.existing(str(tmp_path / "ledger.duckdb")).verify()
    assert any("altered" in p for p in problems)


def test_describe_gives_the_columns_before_the_keys_exist(database, tmp_path):
    conn = _connect(database, tmp_path)
    shape = conn.session.describe("SELECT url, COUNT(*) AS n FROM visits GROUP BY url")
    assert shape.columns == ["url", "n"] and conn.session.ledger.spent() == 0
    assert np.isfinite(conn.session.query_share)


def test_a_release_where_no_key_clears_the_threshold_answers_no_rows_and_freezes_nothing(database, tmp_path):
    """Before: charged, then a raw ValueError, and the empty key set broke every later query on the table."""
    conn = _connect(database, tmp_path)
    cur = conn.cursor()
    cur.execute("SELECT url, COUNT(*) FROM visits WHERE age > 8 AND age < 9 GROUP BY url")  # no row meets it
    assert cur.fetchall() == [] and cur.result.charged > 0
    assert any("none was released" in note for note in cur.result.notes)
    assert conn.session.ledger.key_sets() == {} and conn.session.ledger.verify() == []
    spent = conn.session.ledger.spent()
    assert abs(_rows(cur, "SELECT COUNT(*) FROM visits")[0][0] - 13050) < 200  # the table still answers
    released = dict(_rows(cur, "SELECT url, COUNT(*) FROM visits GROUP BY url"))  # a later release finds keys
    assert set(released) == set(FREQUENT) and conn.session.ledger.spent() > spent


def test_a_ledger_written_before_the_split_keeps_its_capacity_and_releases_no_more_keys(tmp_path):
    """A ledger whose budget row has no `events` (written before the split was stored): the δ its key releases
    spent becomes its part set apart, so its capacity is what it was and another release is refused."""
    from dpsql.budget.ledger_entries import KEYS, Entry, Record, chain_digest

    path, total = str(tmp_path / "old.duckdb"), epsilon_delta_to_zcdp(1.0, 1e-6)
    Ledger(path, "gaussian", total, 1e-6).close()
    con = duckdb.connect(path)  # as the earlier release wrote it: no events, a digest without them
    noise, stored, delta, created = con.execute("SELECT noise, total, delta, created FROM dpsql_budget").fetchone()
    con.execute("UPDATE dpsql_budget SET events = NULL, hash = ?", [chain_digest(noise, stored, delta, created)])
    con.close()
    earlier = Ledger(path, "gaussian", total, 1e-6)
    earlier.events = 5e-7  # the earlier release had no split: it let key releases spend δ as they went
    earlier.charge_all([Entry(0.001, "release", "visits", "sig", [], None,
                              Record(KEYS, "url", {"keys": ["/a"], "rows": "all"}, 2e-7))])
    earlier.close()
    old = Ledger(path, "gaussian", total, 1e-6)
    assert old.events == pytest.approx(2e-7) and old.verify() == []
    assert zcdp_to_epsilon(old.capacity, 1e-6 - 2e-7) == pytest.approx(1.0, rel=1e-9)
    with pytest.raises(BudgetExceededError, match="set apart"):
        old.check_delta(0.001, 1e-8)
    with pytest.raises(ProgrammingError, match="fixed"):  # a split cannot be chosen after the fact
        Ledger(path, "gaussian", total, 1e-6, events=5e-7)


def test_a_profile_s_key_delta_on_a_ledger_without_delta_for_keys_still_connects(database, tmp_path):
    """A profile whose ledger set apart no δ for key releases (or less than its key_delta) still connects; a
    release is then refused, spending nothing."""
    path = _profile(database, tmp_path, "key_delta = 3e-7\nkey_release_delta = 0")
    conn = dpsql.connect(profile=path, analyst="bob")
    with pytest.raises(BudgetExceededError, match="set apart no δ"):
        conn.cursor().execute("SELECT url, COUNT(*) FROM visits GROUP BY url")
    assert conn.session.ledger.spent() == 0
