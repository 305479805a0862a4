"""How well the planning budget's work estimates track CPU time, per checkpoint site.

The planning budget (`planner.planning_limit`) counts the operations each checkpoint announces
for the iteration that follows, at `REFERENCE_RATE` operations per second of budget. This plans
(EXPLAIN, no budget) the peers benchmark's adult workloads in zCDP and pure DP and the
AIM/RAP-costed two-query workload of `tests/test_planning_bounds.py`, and reports per site the
iterations, the announced operations per CPU second of the time until the next checkpoint
(near `REFERENCE_RATE` when the site's estimate is right), and that CPU time; and per workload
the CPU time against the budget seconds its work counts. Work between the last checkpoint of a
family and the next one elsewhere (essential work, the final fit) is attributed to the former.

    python -m benchmarks.planning_work
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict

import dpsql
from benchmarks import peers
from planner import planning_limit
from planner.planning_limit import CALL_WORK, REFERENCE_RATE, PlanningLimit

_sites: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])  # iterations, operations, CPU seconds
_last: dict = {"site": None, "at": 0.0, "work": 0.0}
_counted = PlanningLimit.check_cancelled


def _recording(self: PlanningLimit, work: float = 0.0) -> None:
    now = time.thread_time()
    if _last["site"] is not None:
        site = _sites[_last["site"]]
        site[0] += 1
        site[1] += _last["work"]
        site[2] += now - _last["at"]
    frame = sys._getframe(1)
    while frame and frame.f_code.co_filename.endswith(("planning_limit.py", "interruption.py", "contextlib.py")):
        frame = frame.f_back
    name = f"{frame.f_code.co_filename.rsplit('/', 2)[-2:][-1]}:{frame.f_code.co_name}" if frame else "?"
    if frame and frame.f_code.co_name == "_cost":
        name += f" ({frame.f_locals['name']} setup)"
    _last.update(site=name, at=time.thread_time(), work=work + CALL_WORK)
    _counted(self, work)


def _explain(conn, sql: str) -> tuple[float, float]:
    """(CPU seconds, budget seconds of announced work) of planning `sql` with no budget."""
    conn.execute("SET dpsql.planning_seconds = 0")
    before = sum(s[1] for s in _sites.values()) + _last["work"]
    started = time.thread_time()
    conn.execute(sql)
    return time.thread_time() - started, (sum(s[1] for s in _sites.values()) + _last["work"] - before) / REFERENCE_RATE


def main() -> None:
    planning_limit.PlanningLimit.check_cancelled = _recording
    data, con = peers.adult()
    print(f"{'workload':28s} {'CPU s':>7s} {'work (budget s)':>16s}")
    for name, queries in peers.workloads(data).items():
        if name == "reask":
            continue
        script = ";\n".join(peers.sql(q, data.table) for q in queries)
        for mode, budget in (("zcdp", {"rho": 0.0244}), ("pure", {"epsilon": 1.0, "delta": 0})):
            conn = dpsql.connect(con=con, catalog=data.catalog, **budget)
            cpu, work = _explain(conn, f"EXPLAIN BEGIN WORKLOAD;\n{script};\nEND WORKLOAD;")
            print(f"{'adult ' + name + ' ' + mode:28s} {cpu:7.2f} {work:16.2f}")
    from tests.test_planning_bounds import AGE_BY_INCOME, _connect
    for rows in (50_000, 1_000_000):
        cpu, work = _explain(_connect(rows), AGE_BY_INCOME)
        print(f"{f'people AIM/RAP, {rows} rows':28s} {cpu:7.2f} {work:16.2f}")
    print(f"\n{'site':52s} {'iterations':>10s} {'Gop per CPU s':>13s} {'CPU s':>7s}")
    for site, (n, ops, cpu) in sorted(_sites.items(), key=lambda kv: -kv[1][2]):
        print(f"{site:52s} {int(n):10d} {ops / max(cpu, 1e-9) / 1e9:13.2f} {cpu:7.2f}")
    print(f"(REFERENCE_RATE = {REFERENCE_RATE / 1e9:g} Gop per budget second)")


if __name__ == "__main__":
    main()
