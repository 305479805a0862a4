"""COUNTs per group of a categorical column whose group sizes are public (`sizes = [...]` in its declaration),
released by the LDP thesis' small-group mechanisms (`mechanisms.small_counts`) under
`SET dpsql.small_counts = 'fair'` (EM) or `'geometric'` (GM).

Each group g of declared size n_g holds a count in 0..n_g (the rows of g that the query's WHERE and the
COUNT's FILTER keep; clamped to n_g should the data hold more rows than declared); its answer is one exact
draw of the mechanism, an integer in 0..n_g. A row is in one group and moves its count by at most one, so
the groups compose in parallel: the release is ε-DP (ε/k per group step for a table whose units keep up to k
rows), charged as one pure piece of ε. Its standard error is the mechanism's largest RMSE over the true
counts (public: it depends on n_g and ε only).

While the setting is on, every DP statement must be such a count: anything else (no sizes declared, a
grouping by several columns or by an expression, whose group sizes are not declared, an aggregate other than
one COUNT, subqueries, joins that weight rows, local-DP reports) is refused before anything is read or
charged. The release is answered as report-noisy-max picks are (`dpsql.handlers.noisy_max`): the ledger is
checked first, then inside `Executor.charged` the counts are scanned and drawn, and the charge carries them
as a record named by the question, so asking again is answered from the record, free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpsql.answers.result import Result, assemble
from dpsql.budget.ledger_entries import SMALL_COUNTS, Record
from dpsql.budget.noise_charges import fits, laplace_eligible, laplace_epsilon
from dpsql.errors import NotSupportedError
from dpsql.executor import Pending, Release
from dpsql.handlers.noisy_max import counting, record_name
from dpsql.sql.compiler import CompiledQuery
from dpsql.tables.columns import CATEGORICAL
from mechanisms import LAPLACE
from mechanisms.privacy_filter import Piece
from mechanisms.small_counts import FAIR, MAX_SIZE, alpha_for, epsilon_of, release, standard_error

NAMES = {FAIR: "the explicit fair mechanism EM", "geometric": "the truncated geometric mechanism GM"}


@dataclass(frozen=True)
class Question:
    """A query the setting answers: the mechanism, its parameters and cost, each result row's group size."""

    kind: str
    epsilon: float  # what is charged (pure DP)
    alpha: Fraction  # e^{-ε/k} rounded up to a rational: the mechanism's own ε/k is at most the charged one's
    cost: float  # in the ledger's unit
    pieces: tuple[Piece, ...] | None
    column: str
    sizes: tuple[int, ...]  # per group, in the COUNT block's row order


def _refusal(query) -> str | None:
    """Why the query is not a COUNT per group of a column with declared sizes (None: it is)."""
    if not isinstance(query, CompiledQuery):
        return "this query has several DP parts (subqueries, UNION or SQL over them)"
    table = query.table
    if query.noisy_max is not None:
        return "MODE and the top group are answered by report-noisy-max"
    if table.holds_reports or table.counts_distinct_units:
        return "its table holds local-DP reports or counts distinct units, not rows"
    if len(query.groups) != 1 or query.grouping_sets:
        return "it must GROUP BY one column alone: the sizes of other groups are not declared"
    key = query.groups[0]
    column = table.columns.get(key.attribute)
    if key.mapped or key.slices is not None or column is None or key.name != column.name:
        return "it groups by an expression, whose groups' sizes are not declared"
    if column.kind != CATEGORICAL or column.sizes is None:
        return f"column {column.name!r} declares no sizes"
    if len(query.aggregates) != 1 or query.aggregates[0].kind != "count" or len(query.aggregates[0].blocks) != 1:
        return "it must ask for one COUNT (of rows, or of a column) per group"
    if max(column.sizes) > MAX_SIZE:
        return f"a group of {max(column.sizes)} rows is above the {MAX_SIZE} these mechanisms release exactly"
    return None


def question(session, query) -> Question:
    """The release the setting makes of `query`, or a NotSupportedError that spends nothing."""
    s = session
    why = _refusal(query)
    if why is None and s.max_rmse is not None:
        why = "these counts are sized by a budget, not by max_rmse (SET dpsql.max_rmse = 0 first)"
    if why is not None:
        raise NotSupportedError(
            f"dpsql.small_counts = '{s.small_counts}' answers COUNT(*) or COUNT(col) [FILTER (WHERE …)] [WHERE …] "
            f"GROUP BY one categorical column with declared sizes, and nothing else: {why}; nothing was charged "
            "(SET dpsql.small_counts = 'off' for other queries)")
    column = query.table.column(query.groups[0].attribute)
    sizes = tuple(column.sizes[column.values.index(label)] for label in query.groups[0].labels)
    if s.budget_unit.noise == LAPLACE:  # a pure-DP ledger: the share is ε
        epsilon, cost, pieces = s.query_share, s.query_share, None
    else:  # a zCDP ledger: the ε a Laplace share of the same budget gets, one pure piece (ρ = ε²/2)
        epsilon = laplace_epsilon(s.ledger, s.query_share) if laplace_eligible(s.budget_unit, s.ledger) else \
            math.sqrt(2 * s.query_share)
        piece = Piece.laplace(epsilon, None, float(query.table.contribution))
        cost, pieces = piece.rho, (piece,)
    alpha = alpha_for(epsilon / query.table.contribution)
    return Question(s.small_counts, epsilon, alpha, cost, pieces, column.name, sizes)


def answer(session, query, sql: str, params) -> Result:
    """Release the counts (charged first), or the recorded ones when the same question was asked."""
    s = session
    asked = question(s, query)
    table = query.table
    name = record_name(s, query, sql, params, asked.kind)
    recorded = [p for _, n, p in s.ledger.records(SMALL_COUNTS, table.name) if n == name]
    if recorded:
        return s.executor.answered(lambda: _result(s, query, asked, recorded[-1]["counts"], 0.0, recorded=True))
    clique, matrix = counting(query, list(range(len(asked.sizes))), "a small-group count")
    s.executor.check_affordable(asked.cost, pieces=asked.pieces)
    detail = f"small-group counts ({NAMES[asked.kind]}, α = {asked.alpha}) per {asked.column}"

    def draw() -> Release:
        marginal = s.backend.marginals(table, [clique], s.executor.bounding_key(table))[clique]
        counts = matrix @ np.asarray(marginal, dtype=np.int64)
        released = release(asked.kind, asked.sizes, [int(c) for c in counts], asked.alpha, s.rng)
        return Release(table, asked.cost, sql, [], None, detail,
                       Record(SMALL_COUNTS, name, {"counts": released, "mechanism": asked.kind,
                                                   "alpha": str(asked.alpha)}), pieces=asked.pieces)

    [done] = s.executor.charged([Pending(table, asked.cost, sql, detail, draw, pieces=asked.pieces)])
    return s.executor.answered(lambda: _result(s, query, asked, done.record.payload["counts"], asked.cost))


def _result(session, query: CompiledQuery, asked: Question, counts: list[int], charged: float,
            recorded: bool = False) -> Result:
    errors = np.array([standard_error(asked.kind, n, asked.alpha) for n in asked.sizes])
    result = _integers(query, assemble(query, [(np.asarray(counts, dtype=float), errors)]))
    result.plan = plan(session, query, asked)
    result.charged = charged
    remaining = session.amount(session.ledger.status()[2])
    spent = "no charge (the same question's recorded answer)" if charged == 0 else \
        f"charged ε={asked.epsilon:.4g} of pure DP ({NAMES[asked.kind]})"
    result.charge_text = f"{spent}; remaining {remaining}"
    result.notes.append(f"counts per {asked.column} by {NAMES[asked.kind]} (integers in 0..n for a group of n "
                        "rows; standard error: its largest RMSE over the true counts)")
    if recorded:
        result.notes.append("the same question was answered before at this share: its recorded answer, free")
    return result


def _integers(query: CompiledQuery, result: Result) -> Result:
    """The result with its bare COUNT columns as the integers they are (BIGINT)."""
    bare = [j for j, k in enumerate(query.output_aggregate) if k is not None]
    result.rows = [tuple(int(v) if j in bare and v is not None else v for j, v in enumerate(row))
                   for row in result.rows]
    result.types = ["BIGINT" if j in bare else t for j, t in enumerate(result.types)]
    return result


def describe(session, query) -> Result | None:
    """The columns the answer will have (no rows); None for a query the setting will refuse when run."""
    if _refusal(query) is not None:
        return None
    shape = _integers(query, assemble(query, query.zero_answers()))
    shape.rows, shape.stderr = [], []
    return shape.with_stderr_columns() if session.stderr_columns else shape


def plan(session, query, asked: Question | None = None) -> str:
    """What EXPLAIN says: the mechanism, α, the groups' sizes and errors, the cost (none of it data)."""
    s = session
    asked = asked or question(s, query)
    k = query.table.contribution
    errors = [standard_error(asked.kind, n, asked.alpha) for n in asked.sizes]
    lines = [f"[{query.table.name}] Small-group counts: COUNT per {asked.column} by {NAMES[asked.kind]}, "
             f"{len(asked.sizes)} group(s) of declared sizes {min(asked.sizes)}..{max(asked.sizes)}",
             f"  α = {asked.alpha} (the mechanism is {epsilon_of(asked.alpha) * k:.6g}-DP"
             + (f", ε/{k} per row of a unit of up to {k}" if k > 1 else "") + "); each released count is an "
             f"integer in 0..n, standard error (largest RMSE over the true counts) "
             f"{min(errors):.4g}..{max(errors):.4g}"]
    verdict = "fits in" if fits(s.ledger, asked.cost, asked.pieces) else "EXCEEDS"
    rho = f" (ρ = {asked.cost:.4g})" if asked.pieces else ""
    lines.append(f"Total cost ε={asked.epsilon:.4g} of pure DP{rho}; {verdict} the remaining budget "
                 f"{s.amount(s.ledger.remaining())}")
    return "\n".join(lines)


def explain(session, query) -> Result:
    text = plan(session, query)
    return Result(["plan"], [(line,) for line in text.splitlines()], kind="explain", plan=text)


__all__ = ["Question", "answer", "describe", "explain", "plan", "question"]
