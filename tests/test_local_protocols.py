"""SQL over the reports of every answerable LDP protocol (ranges: hrr, hh, haar; marginals: inpht, margrr,
margps, marght; oracles: olh, inprr, inpps), and the hybrid (BLENDER) table: unbiased answers whose stated
variances match Monte-Carlo, range sums with their cells' covariances, and the opt-in part charged."""

import random

import duckdb
import numpy as np
import pytest

import dpsql
from dpsql.tables.catalog import Catalog, CatalogError
from mechanisms.domain import Domain
from mechanisms.ldp.answering import client_protocol, local_answers, payload_of
from benchmarks import ldp_simulation as simulate
from mechanisms.ldp.ranges import haar_variance, range_query
from mechanisms.ldp.stratified_answers import StratifiedAnswers, sign_strata
from mechanisms.ldp.tally import ReportTally, tally_payloads
from mechanisms.matrices import Dense
from mechanisms.workload import Block, Term

FLAT = Domain(("a",), (8,))
FLAT_TRUTH = np.array([300, 50, 0, 120, 200, 80, 40, 10])
# Three binary columns x, y, z (a record's flat index is its cell; the first column is its highest bit).
BINARY = Domain(("x", "y", "z"), (2, 2, 2))
RANGES = np.array([[1, 1, 1, 0, 0, 0, 0, 0], [0, 0, 1, 1, 1, 1, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0],
                   [0, 0, 0, 0, 0, 1, 1, 1.0]])
FIRST, SECOND = np.array([[1.0, 1.0], [0.0, 1.0]]), np.array([[1.0, 0.0], [1.0, 1.0]])
PAIRS = (FIRST, SECOND)  # rows kron(FIRST, SECOND) over a pair of binary columns: cells and sums of cells
CASES = [  # protocol, options, domain, the queried attributes and rows over them
    ("hrr", {}, FLAT, ("a",), RANGES),
    ("hh", {"branching": 2}, FLAT, ("a",), RANGES),
    ("hh", {"branching": 2, "oracle": "hrr"}, FLAT, ("a",), RANGES),
    ("haar", {}, FLAT, ("a",), RANGES),
    ("olh", {}, FLAT, ("a",), RANGES),
    ("inpht", {"order": 2}, BINARY, ("x", "z"), PAIRS),
    ("margrr", {"order": 2}, BINARY, ("y", "z"), PAIRS),
    ("margps", {"order": 2}, BINARY, ("x", "y"), PAIRS),
    ("marght", {"order": 2}, BINARY, ("x", "y"), PAIRS),
    ("inprr", {}, BINARY, ("y",), np.array([[1.0, 0.0], [1.0, 1.0]])),
    ("inpps", {}, BINARY, ("x",), np.array([[0.0, 1.0]])),
]


def _block(attributes, rows):
    """The block of `rows` over one attribute, or of a pair of factors' Kronecker product over two; its dense rows."""
    factors = rows if isinstance(rows, tuple) else (rows,)
    block = Block("w", (), [Term(1.0, {a: Dense(f) for a, f in zip(attributes, factors)})],
                  mapped_rows={a: f.shape[0] for a, f in zip(attributes, factors)})
    dense = factors[0] if len(factors) == 1 else np.kron(*factors)
    return block, dense


def _payloads(protocol, rng):
    values = np.repeat(np.arange(FLAT_TRUTH.size), FLAT_TRUTH)
    return [protocol.randomize(int(v), rng) for v in values]


@pytest.mark.parametrize("name, options, domain, attributes, rows", CASES,
                         ids=[f"{c[0]}{'-' + c[1].get('oracle', '') if 'oracle' in c[1] else ''}" for c in CASES])
def test_stated_variance_matches_monte_carlo(name, options, domain, attributes, rows):
    """200 draws of every user's report (the real client): answers are unbiased and the stated variance of each
    row (a range or a sum of marginal cells, covariances included) is the answers' spread."""
    protocol = client_protocol(name, 1.0, domain, options)
    payload, rng = payload_of(protocol), random.Random(11)
    clique = domain.canonical(attributes)
    axes = tuple(i for i, a in enumerate(domain.attributes) if a not in clique)
    block, dense = _block(clique, rows)
    exact = dense @ FLAT_TRUTH.reshape(domain.sizes).sum(axis=axes).reshape(-1)
    answers, variances = [], []
    for _ in range(200):
        tally = tally_payloads(_payloads(protocol, rng), payload, protocol if name == "olh" else None)
        estimate, variance = local_answers(domain, protocol, tally).answer(block)
        answers.append(estimate)
        variances.append(variance)
    answers, variances = np.array(answers), np.array(variances)
    spread = answers.var(axis=0, ddof=1)
    varying = spread > 1e-6 * FLAT_TRUTH.sum() ** 2  # COUNT(*) of a marginal protocol is exact
    assert np.all(np.abs(answers.mean(axis=0) - exact) <= 4.5 * np.sqrt(spread / len(answers)) + 1e-6)
    # 200 draws: a sample variance is within ±10% (1 sd); the plug-in adds a few %: 40% is beyond 3.5 sd
    assert np.allclose(variances.mean(axis=0)[varying], spread[varying], rtol=0.4)
    assert np.all(variances.mean(axis=0)[~varying] < 1e-3 * FLAT_TRUTH.sum())


def _table(con, name, payloads):
    """A table of report rows, one column per payload key."""
    keys = list(payloads[0])
    columns = ", ".join(f"unnest(${i + 1}) AS {k}" for i, k in enumerate(keys))
    con.execute(f"CREATE TABLE {name} AS SELECT {columns}", [[p[k] for p in payloads] for k in keys])


SQL_CASES = [
    ("hh", 'branching = 2\noracle = "hrr"', "a"), ("haar", "", "a"), ("olh", "", "a"), ("hrr", "", "a"),
    ("inpht", "order = 2", "b"), ("margps", "order = 2", "b"),
]


@pytest.mark.parametrize("name, options, columns", SQL_CASES, ids=[c[0] for c in SQL_CASES])
def test_sql_over_the_reports_is_within_its_error_bars_and_free(name, options, columns):
    """The real client's reports in DuckDB: a range and a GROUP BY answered in SQL, free, EXPLAIN says local DP."""
    domain = FLAT if columns == "a" else BINARY
    declared = 'a = { type = "integer", min = 0, max = 7 }' if columns == "a" else \
        "\n".join(f'{c} = {{ type = "integer", min = 0, max = 1 }}' for c in "xyz")
    protocol = client_protocol(name, 2.0, domain, dict(line.split(" = ") for line in options.split("\n") if line)
                               and {k: (v.strip('"') if '"' in v else int(v)) for k, v in
                                    (line.split(" = ") for line in options.split("\n") if line)})
    con = duckdb.connect()
    _table(con, "reports", _payloads(protocol, random.Random(4)))
    catalog = f'[tables.reports]\nmodel = "local"\nprotocol = "{name}"\nepsilon = 2.0\n{options}\n' \
              f"[tables.reports.columns]\n{declared}\n"
    cur = dpsql.connect(con=con, catalog=catalog, epsilon=1.0, delta=1e-6).cursor()
    cur.execute("SET dpsql.stderr = on")
    if columns == "a":
        (n, err), = cur.execute("SELECT COUNT(*) FROM reports WHERE a BETWEEN 2 AND 5").fetchall()
        assert abs(n - FLAT_TRUTH[2:6].sum()) < 5 * err
        rows = cur.execute("SELECT a, COUNT(*) FROM reports GROUP BY a").fetchall()
        truth = FLAT_TRUTH
    else:
        rows = cur.execute("SELECT x, z, COUNT(*) FROM reports GROUP BY x, z").fetchall()
        truth = FLAT_TRUTH.reshape(2, 2, 2).sum(axis=1).reshape(-1)
    assert "no charge" in cur.result.charge_text
    if columns != "a":
        with pytest.raises(dpsql.NotSupportedError, match="at most 2 columns"):
            cur.execute("SELECT x, y, z, COUNT(*) FROM reports GROUP BY x, y, z")
    estimates, errors = np.array([r[-2] for r in rows]), np.array([r[-1] for r in rows])
    assert np.all(np.abs(estimates - truth) < 5 * errors)
    assert cur.connection.session.ledger.spent() == 0
    assert "local DP" in cur.execute("EXPLAIN SELECT COUNT(*) FROM reports").fetchall()[0][0]


def test_protocol_options_and_shapes_are_checked_by_the_catalog():
    base = '[tables.t]\nmodel = "local"\nepsilon = 1.0\n'
    with pytest.raises(CatalogError, match="every column needs exactly 2 cells"):
        Catalog.from_toml(base + 'protocol = "inpht"\norder = 1\n[tables.t.columns]\na = { type = "integer", min = 0, '
                          'max = 2 }')
    with pytest.raises(CatalogError, match="takes no option order"):
        Catalog.from_toml(base + 'protocol = "oue"\norder = 1\n[tables.t.columns]\na = { type = "integer", min = 0, '
                          'max = 2 }')
    with pytest.raises(CatalogError, match="needs protocol, one of"):
        Catalog.from_toml(base + 'protocol = "inpem"\n[tables.t.columns]\na = { type = "integer", min = 0, max = 1 }')
    with pytest.raises(CatalogError, match="at most 4096 cells"):  # a dense estimator's memory is bounded
        Catalog.from_toml(base + 'protocol = "haar"\n[tables.t.columns]\na = { type = "integer", min = 0, '
                          'max = 8191 }')
    Catalog.from_toml(base + 'protocol = "oue"\n[tables.t.columns]\na = { type = "integer", min = 0, max = 8191 }')


HYBRID = """
[tables.survey_optin]
rows = {optin}
[tables.survey_optin.columns]
a = {{ type = "integer", min = 0, max = 7 }}
[tables.survey]
model = "local"
protocol = "grr"
epsilon = {epsilon}
opt_in = "survey_optin"
[tables.survey.columns]
a = {{ type = "integer", min = 0, max = 7 }}
"""


def _hybrid(optin, local, epsilon, seed=0):
    """Opt-in users' raw rows and the others' grr reports, from one population (`FLAT_TRUTH` fractions)."""
    rng = np.random.default_rng(seed)
    fractions = FLAT_TRUTH / FLAT_TRUTH.sum()
    con = duckdb.connect()
    con.execute("CREATE TABLE survey_optin AS SELECT unnest(?) AS a", [rng.choice(8, optin, p=fractions).tolist()])
    grr = client_protocol("grr", epsilon, FLAT)
    python_rng = random.Random(seed)
    _table(con, "survey", [grr.randomize(int(v), python_rng) for v in rng.choice(8, local, p=fractions)])
    conn = dpsql.connect(con=con, catalog=HYBRID.format(optin=optin, epsilon=epsilon), epsilon=1.0, delta=1e-6,
                         state=":memory:")
    return conn, conn.cursor()


def test_hybrid_table_blends_the_charged_opt_in_group_with_the_reports():
    """BLENDER: COUNT and AVG over both groups, the opt-in part charged first, the blend's variance below each
    group's own (here both groups matter: 400 opt-in users at ε = 1 central, 4000 clients at ε = 1 local)."""
    conn, cur = _hybrid(400, 4000, 1.0)
    cur.execute("SET dpsql.stderr = on")
    rows = cur.execute("SELECT a, COUNT(*) AS n FROM survey GROUP BY a").fetchall()
    charged = conn.session.ledger.spent()
    assert charged > 0  # the opt-in users' rows were measured centrally, charged through the ledger
    total = 4400 * FLAT_TRUTH / FLAT_TRUTH.sum()
    estimates, errors = np.array([r[1] for r in rows]), np.array([r[2] for r in rows])
    assert np.all(np.abs(estimates - total) < 5 * errors + 1e-9)
    (mean, err), = cur.execute("SELECT AVG(a) FROM survey").fetchall()
    assert abs(mean - (np.arange(8) * FLAT_TRUTH).sum() / FLAT_TRUTH.sum()) < 5 * err
    plan = cur.execute("EXPLAIN SELECT a, COUNT(*) FROM survey GROUP BY a").fetchall()[0][0]
    assert "survey_optin" in plan
    # the blend against each group alone, on the same blocks
    executor = conn.session.executor
    table = conn.session.catalog.get("survey")
    query = conn.session.compile("SELECT a, COUNT(*) FROM survey GROUP BY a")
    central = executor.answering(conn.session.catalog.opt_in(table))
    from mechanisms.ldp.hybrid_answers import HybridAnswers
    model = HybridAnswers(table.domain, central, executor.local_answers(table), 400)
    block = query.blocks[0]
    blended = model.variance(block)
    alone_central, alone_local = model.groups(block)
    assert np.all(blended < alone_central) and np.all(blended < alone_local)
    assert np.allclose(blended, alone_central * alone_local / (alone_central + alone_local))


def test_a_hybrid_table_names_a_central_opt_in_table_of_public_size():
    with pytest.raises(CatalogError, match="must declare its size"):
        Catalog.from_toml(HYBRID.format(optin=10, epsilon=1.0).replace("rows = 10\n", ""))
    with pytest.raises(CatalogError, match="must be a central protected table"):
        Catalog.from_toml(HYBRID.format(optin=10, epsilon=1.0).replace('opt_in = "survey_optin"', 'opt_in = "nope"'))
    with pytest.raises(CatalogError, match="same columns"):
        Catalog.from_toml(HYBRID.format(optin=10, epsilon=1.0).replace("max = 7 }}\n[tables.survey]", "")
                          .replace('[tables.survey_optin.columns]\na = { type = "integer", min = 0, max = 7 }',
                                   '[tables.survey_optin.columns]\na = { type = "integer", min = 0, max = 6 }'))


def _sign_tally(strata: list[tuple[int, np.ndarray, np.ndarray]], reports: int) -> ReportTally:
    """The tally of ±1 reports: per stratum, the reports and the sum of their bits per coefficient."""
    keep = [(s, np.flatnonzero(c), c, t) for s, c, t in strata]
    return ReportTally(reports, np.concatenate([np.full(len(k), s) for s, k, _, _ in keep]),
                       np.concatenate([k for _, k, _, _ in keep]), np.concatenate([c[k] for _, k, c, _ in keep]),
                       np.concatenate([t[k] for _, k, _, t in keep]), {s: int(c.sum()) for s, c, _ in strata})


def _haar_draw(protocol, histogram, rng):
    leaves = np.pad(histogram, (0, (1 << protocol.height) - len(histogram)))
    plus, minus = simulate.haar_signs(simulate.level_split(leaves, protocol.height, rng), rng)
    return [(level, *simulate.flip_tallies(up, down, float(protocol.truth), rng))
            for level, (up, down) in enumerate(zip(plus, minus), start=1)]


def _hrr_draw(protocol, histogram, rng):
    counts, sums = simulate.hadamard_tallies(simulate.expand_histogram(histogram), protocol.size,
                                             float(protocol.truth), rng)
    return [(0, counts, sums)]


def _ranges(size, rng, count=12):
    rows = [range_query(size, a, rng.integers(a, size)) for a in rng.integers(0, size, count)]
    return np.array(rows + [range_query(size, j, j) for j in rng.integers(0, size, 4)])


def test_haar_variance_is_exact_in_expectation():
    """HaarHRR at D = 32, every coefficient reported: the stated variances average to the exact variance given
    the counts (the plug-in 1 − θ̂² made them 5% low: E θ̂² = F² + Var θ̂; here ±1% is 2 sd of the mean)."""
    rng = np.random.default_rng(3)
    domain, n = Domain(("a",), (32,)), 1500
    protocol = client_protocol("haar", 3.0, domain)
    histogram = rng.multinomial(n, rng.dirichlet(np.full(32, 0.05)))
    rows = _ranges(32, rng)
    block, _ = _block(("a",), rows)
    stated, exact = [], []
    for _ in range(50):
        strata = _haar_draw(protocol, histogram, rng)
        assert all(c.min() > 0 for _, c, _ in strata)
        stated.append(local_answers(domain, protocol, _sign_tally(strata, n)).variance(block))
        exact.append([n ** 2 * haar_variance(histogram / n, q, [c for _, c, _ in strata], float(protocol.truth), n)
                      for q in rows])
    stated, exact = np.mean(stated, axis=0), np.mean(exact, axis=0)
    assert np.all(np.abs(stated / exact - 1) < 0.05) and abs(stated.sum() / exact.sum() - 1) < 0.01


def _reanswer(answers: StratifiedAnswers, strata, reports: int, first: int) -> StratifiedAnswers:
    """`answers`' reconstruction from other ±1 tallies (what `hrr_answers`/`haar_answers` build, without
    probing the reconstruction again): coefficients `first` on of each stratum, grouped by stratum."""
    counts, sums = (np.concatenate([part[i][first:] for part in strata]) for i in (1, 2))
    group = np.concatenate([np.full(len(c) - first, i) for i, (_, c, _) in enumerate(strata)])
    return StratifiedAnswers(answers.domain, sign_strata(counts, sums, answers.strata.p, group), reports,
                             answers.marginal)


@pytest.mark.parametrize("name, size, reports", [("haar", 64, 200), ("hrr", 64, 120), ("haar", 16, 40)])
def test_sparse_tables_have_unbiased_answers_and_finite_honest_variances(name, size, reports):
    """Few reports for the coefficients (most of HaarHRR's finest level, a fifth of HRR's have none): the
    answers stay unbiased (an empty coefficient is not read as 0), the stated variances are finite (they were
    infinite) and average to the answers' mean squared error."""
    rng = np.random.default_rng(7)
    domain = Domain(("a",), (size,))
    protocol = client_protocol(name, 1.5, domain)
    histogram = rng.multinomial(reports, rng.dirichlet(np.full(size, 0.2)))
    rows = _ranges(size, rng)
    block, _ = _block(("a",), rows)
    draw, first = (_haar_draw, 0) if name == "haar" else (_hrr_draw, 1)
    strata = draw(protocol, histogram, rng)
    model = local_answers(domain, protocol, _sign_tally(strata, reports))
    np.testing.assert_allclose(_reanswer(model, strata, reports, first).answer(block), model.answer(block))
    answers, stated, empty = [], [], 0
    for _ in range(400):
        strata = draw(protocol, histogram, rng)
        empty += sum(int((c[first:] == 0).sum()) for _, c, _ in strata)
        estimate, variance = _reanswer(model, strata, reports, first).answer(block)
        answers.append(estimate)
        stated.append(variance)
    answers, stated = np.array(answers), np.array(stated)
    assert empty > 400 and np.all(np.isfinite(stated))
    error = answers - rows @ histogram
    mse = (error ** 2).mean(axis=0)
    assert np.all(np.abs(error.mean(axis=0)) <= 4 * np.sqrt(mse / len(answers)))
    # 400 draws: each row's mean squared error is within ±7% (1 sd), their pooled ratio well inside 10%
    varying = mse > 1e-9 * reports ** 2  # the whole domain's count is exact
    ratio = stated.mean(axis=0)[varying] / mse[varying]
    assert np.all(np.abs(ratio - 1) < 0.25) and abs(stated.mean(axis=0).sum() / mse.sum() - 1) < 0.1
    assert np.all(stated[:, ~varying] < 1e-6)
