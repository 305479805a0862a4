"""CREATE CONTINUAL QUERY, EMIT and SHOW CONTINUAL: releases over a stream (`dpsql.releases.continual`)."""

from __future__ import annotations

from dpsql.answers.result import Result
from dpsql.sql.statements import CreateContinual, Emit, ShowContinual


def run(session, st: CreateContinual | Emit | ShowContinual, params) -> list[Result]:
    s = session
    if isinstance(st, Emit):
        return [s.continual.emit(st.name, s.catalog)]
    if isinstance(st, ShowContinual):
        return [s.continual.show(st.name, s.catalog)]
    given = st.epsilon is not None or st.rho is not None
    share = s.budget_unit.share(st.epsilon, st.rho, delta=st.delta) if given else s.query_share
    budget = f" WITH ({'rho = ' + repr(st.rho) if st.rho is not None else 'epsilon = ' + repr(st.epsilon)})" \
        if given else ""
    text = (f"CREATE CONTINUAL QUERY {st.name} AS {st.sql} EMIT EVERY INTERVAL '{st.interval}' ON {st.time_column} "
            f"FROM '{st.start}' FOR {st.releases} RELEASES{budget}")
    return [s.continual.create(st, s.catalog, share, text)]


def describe(session, st, params) -> None:
    return None  # known once the query runs
