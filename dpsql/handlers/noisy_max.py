"""A query answered by report-noisy-max (`dpsql.sql.noisy_max`): MODE(x), or the top group of x.

The compiled query counts rows per value of x (its WHERE and joins as written, every unit bounded
to the table's k rows); its COUNT block's matrix, over its clique's marginal, gives the candidates'
exact counts. The ledger is checked first for the most the release can cost; then, inside
`Executor.charged` (the one place noise is drawn), the marginal is scanned and GNMax picks a value,
or Confident-GNMax picks one or none; the release is charged what it cost (the check alone when
Confident-GNMax answers none: `mechanisms.noisy_max`) with its pick kept as a record, so asking the
same question at the same share again is answered free from the record. Only the picked value is
released: no count, no standard error, and no measurement other queries could reuse. Counts that
earlier measurements already determine are not measured again: the pick is then the largest of
their least-squares estimates (post-processing, free).
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from dpsql.errors import NotSupportedError
from dpsql.executor import Pending, Release
from dpsql.budget.ledger_entries import NOISY_MAX, Record
from dpsql.answers.result import Result
from dpsql.sql.compiler import CompiledQuery
from mechanisms.noisy_max import ConfidentNoisyMax, NoisyMax, confident_noisy_max, noisy_max


def _candidates(query: CompiledQuery) -> list[int]:
    """The rows of the COUNT block that are candidates: every value of x (NULL only when grouped by)."""
    labels = query.groups[0].labels
    return [i for i, label in enumerate(labels) if label is not None or query.noisy_max.nulls]


def _mechanism(session, query: CompiledQuery) -> NoisyMax | ConfidentNoisyMax:
    """The calibrated mechanism for the session's query share, refusing what it cannot answer."""
    s, asked, table = session, query.noisy_max, query.table
    if table.holds_reports or table.counts_distinct_units:
        raise NotSupportedError(f"{asked.describe(query.group_by[0])} by report-noisy-max reads a central table's "
                                "rows; local-DP reports are answered by GROUP BY (their frequency estimates)")
    if s.max_rmse is not None:
        raise NotSupportedError("report-noisy-max is sized by a budget, not by max_rmse: SET dpsql.max_rmse = 0 first")
    m = len(_candidates(query))
    if m == 0:
        raise NotSupportedError(f"{query.group_by[0]!r} has no value to pick (no key of it is released)")
    kind, k = s.budget_unit.noise, table.contribution
    if asked.threshold is None:
        return noisy_max(kind, s.query_share, m, k)
    if not table.confident_mode:
        raise NotSupportedError(
            f"HAVING COUNT(*) >= {asked.threshold} with ORDER BY COUNT(*) DESC LIMIT 1 is Confident-GNMax, whose "
            f"answer (a row or none) depends on a noisy threshold check; the owner of {table.name!r} has not allowed "
            "it (confident_mode = true in the catalog); drop the HAVING for plain report-noisy-max")
    return confident_noisy_max(kind, s.query_share, m, k, asked.threshold)


def counting(query: CompiledQuery, rows: list[int], what: str) -> tuple[tuple[str, ...], np.ndarray]:
    """(clique, 0/1 matrix): the counts of the COUNT block's `rows` are the matrix times the clique's marginal.
    Refuses weighted counts (a join that counts a row more than once), which are not counts of rows."""
    domain = query.table.domain
    block = query.aggregates[0].blocks[0]
    clique = block.attributes(domain)
    matrix = np.asarray(block.matrix(domain, clique).dense(), dtype=float)[rows]
    if not np.all((matrix == 0) | (matrix == 1)):
        raise NotSupportedError(f"{what} counts each row once: this query's joins or conditions weight "
                                "rows; ask for its GROUP BY counts instead")
    return clique, matrix.astype(np.int64)


def record_name(session, query: CompiledQuery, sql: str, params, *more) -> str:
    """Names the question: the statement, its parameters, the table's declaration and keys, the share (and
    `more` that the answer depends on)."""
    parts = [sql, repr(params), query.table.signature(), query.table.key_counts(), session.query_share,
             session.budget_unit.noise, *more]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


def answer(session, query: CompiledQuery, sql: str, params) -> Result:
    """Release the picked value (charged first), or the recorded one when the same question was asked."""
    s, table, asked = session, query.table, query.noisy_max
    mechanism = _mechanism(s, query)
    name = record_name(s, query, sql, params)
    recorded = [p for _, n, p in s.ledger.records(NOISY_MAX, table.name) if n == name]
    if recorded:
        return s.executor.answered(lambda: _result(s, query, recorded[-1]["pick"], mechanism, 0.0, recorded=True))
    counts = query.aggregates[0].blocks[0]
    exact = s.executor.model(table)
    if exact.covers(counts):
        return s.executor.answered(lambda: _measured(s, query, exact.answer(counts)[0], mechanism))
    clique, matrix = counting(query, _candidates(query), "report-noisy-max")
    s.executor.check_affordable(mechanism.cost)
    detail = f"report-noisy-max ({'Confident-GNMax' if asked.threshold is not None else 'GNMax'}) of {query.group_by[0]}"

    def draw() -> Release:
        marginal = s.backend.marginals(table, [clique], s.executor.bounding_key(table))[clique]
        counts = matrix @ np.asarray(marginal, dtype=np.int64)
        if isinstance(mechanism, ConfidentNoisyMax):
            pick = mechanism.run(counts, s.rng)
            cost = mechanism.charged(pick is not None)
        else:
            pick, cost = mechanism.pick(counts, s.rng), mechanism.cost
        return Release(table, cost, sql, [], None, detail, Record(NOISY_MAX, name, {"pick": pick}))

    [release] = s.executor.charged([Pending(table, mechanism.cost, sql, detail, draw)])
    return s.executor.answered(lambda: _result(s, query, release.record.payload["pick"], mechanism, release.cost))


def _measured(session, query: CompiledQuery, estimates: np.ndarray, mechanism) -> Result:
    """The pick from counts measured before: the largest estimate (reaching the threshold, if one is asked)."""
    estimates = np.asarray(estimates, dtype=float)[_candidates(query)]
    best = int(np.argmax(estimates))
    threshold = query.noisy_max.threshold
    pick = None if threshold is not None and estimates[best] < threshold else best
    result = _result(session, query, pick, mechanism, 0.0)
    result.notes = [n for n in result.notes if "only the check" not in n] + [
        "answered free from earlier measurements of these counts: the value of the largest estimate"]
    return result


def _result(session, query: CompiledQuery, pick: int | None, mechanism, charged: float,
            recorded: bool = False) -> Result:
    asked, key = query.noisy_max, query.groups[0]
    column = query.table.columns.get(key.attribute) if not key.mapped else None
    rows = [] if pick is None and asked.threshold is not None else [(
        None if pick is None else key.labels[_candidates(query)[pick]],)]
    result = Result([asked.output], rows, [(None,)] * len(rows), types=[column.sql_type if column else "VARCHAR"],
                    dp=[True], plan=plan(session, query, mechanism))
    result.charged = charged
    result.charge_text = session.executor.charge_text(charged)
    if recorded:
        result.notes.append("the same question was answered before at this share: its recorded answer, free")
    if pick is None and asked.threshold is not None:
        result.notes.append(f"no row: the largest count, with noise, did not reach {asked.threshold} "
                            "(Confident-GNMax); only the check was charged")
    return result


def plan(session, query: CompiledQuery, mechanism=None) -> str:
    """What EXPLAIN says: the candidates, the noise on each count, the cost (none of it data)."""
    s, table, asked = session, query.table, query.noisy_max
    mechanism = mechanism or _mechanism(s, query)
    m, k = len(_candidates(query)), table.contribution
    noise = "discrete Gaussian" if s.budget_unit.noise == "gaussian" else "discrete Laplace"
    pick = mechanism if isinstance(mechanism, NoisyMax) else mechanism.argmax
    lines = [f"[{table.name}] Report-noisy-max: {asked.describe(query.group_by[0])} among {m} declared value(s), "
             f"one unit changing the counts by at most {k} in L1",
             f"  each count gets {noise} noise of std {pick.std:.4g}; only the largest noisy count's value is "
             f"released (cost {s.amount(pick.cost)})"]
    if isinstance(mechanism, ConfidentNoisyMax):
        lines.append(f"  first the largest count gets noise of std {mechanism.check.std:.4g}: below "
                     f"{asked.threshold}, no row is released and only this check is charged "
                     f"({s.amount(mechanism.check.cost)})")
    remaining = s.ledger.remaining()
    if s.executor.model(table).covers(query.aggregates[0].blocks[0]):
        lines.append(f"Total cost 0: earlier measurements determine these counts, and the pick is the largest of "
                     f"their estimates; remaining budget {s.amount(remaining)}")
        return "\n".join(lines)
    verdict = "fits in" if mechanism.cost <= remaining * (1 + 1e-9) else "EXCEEDS"
    lines.append(f"Total cost at most {s.amount(mechanism.cost)}; {verdict} the remaining budget {s.amount(remaining)}")
    return "\n".join(lines)


def explain(session, query: CompiledQuery) -> Result:
    text = plan(session, query)
    return Result(["plan"], [(line,) for line in text.splitlines()], kind="explain", plan=text)


def describe(query: CompiledQuery) -> Result:
    """The result's one column (no rows)."""
    key = query.groups[0]
    column = query.table.columns.get(key.attribute) if not key.mapped else None
    return Result([query.noisy_max.output], [], types=[column.sql_type if column else "VARCHAR"], dp=[True])


__all__ = ["answer", "counting", "describe", "explain", "plan", "record_name"]
