"""The SQL corpus (issue 29 item 11): every statement of tests/corpus/dp_sql.sql is answered or refused with a
dpsql error, never a raw exception or a database engine's error text, and the share answered stays above a floor.

The corpus holds statements written for it in the shapes of other DP SQL engines' docs and tests (SmartNoise SQL,
Google's differential privacy / ZetaSQL / BigQuery, PipelineDP, Tumult Analytics, OpenDP, Qrlew) and of the SQL BI
tools generate (Apache Superset, Metabase, Looker, Tableau, and common dashboard patterns: time series by month,
CASE buckets, ratios, top-N, totals), adapted to dpsql's demo table `people`, a `visits` table with a date column
and a privacy unit, and a public `regions` table; each section of the file names its source.
`python -m benchmarks.sql_corpus` runs every statement end to end and records the rates in RESULTS.md.

Here every statement is compiled as it would be run (`Session.describe`: compiled, and its outer expressions and
any post-processing dry-run on zeros; nothing planned or charged), which takes seconds; a sample of them is also
run end to end.
"""

import pytest

import dpsql
from benchmarks.sql_corpus import ENGINE_TEXT, connect, load, make_database, run

# Floors on the share of each category compiled (the rates on branch h6, before the other helpers of issue 29
# merge: expressions and dates (H4), variances and COUNT(col) (H3), GROUPING SETS). The lead raises them after
# merging; the goal (issue 29) is 90% of each.
FLOORS = {"dp_engine": 0.93, "bi": 0.93}  # 124/130 and 146/152 answered once issue 29 merged (RESULTS.md)
SAMPLE_EVERY = 25  # every 25th statement also runs end to end


@pytest.fixture(scope="module")
def corpus_conn(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("corpus") / "corpus.duckdb")
    make_database(path)
    conn, _ = connect(path, ":memory:")
    yield conn
    conn.close()


def test_the_corpus_is_large_and_labelled():
    statements = load()
    assert len(statements) >= 200
    assert {s.category for s in statements} == {"dp_engine", "bi"}
    assert all(s.source and s.sql.strip() for s in statements)
    assert min(sum(s.category == c for s in statements) for c in FLOORS) >= 100


def test_every_statement_is_compiled_or_refused_clearly(corpus_conn):
    compiled, total, crashes = {c: 0 for c in FLOORS}, {c: 0 for c in FLOORS}, []
    for statement in load():
        total[statement.category] += 1
        try:
            corpus_conn.session.describe(statement.sql)
        except dpsql.Error as e:
            if ENGINE_TEXT.search(str(e)):
                crashes.append((statement.sql, str(e)))
            continue
        except Exception as e:  # noqa: BLE001 - a raw exception is the defect this test looks for
            crashes.append((statement.sql, f"{type(e).__name__}: {e}"))
            continue
        compiled[statement.category] += 1
    assert not crashes, crashes[:5]
    assert corpus_conn.budget.spent.rho == 0  # compiling spends nothing
    for category, floor in FLOORS.items():
        assert compiled[category] / total[category] >= floor, (category, compiled[category], total[category])


def test_a_sample_runs_end_to_end(corpus_conn):
    for statement in load()[::SAMPLE_EVERY]:
        outcome = run(corpus_conn, statement)
        assert not outcome.crash, (statement.sql, outcome.crash)
        try:
            corpus_conn.session.describe(statement.sql)
            compiles = True
        except dpsql.Error:
            compiles = False
        assert outcome.answered == compiles, (statement.sql, outcome.error)
