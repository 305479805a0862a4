"""The planner: a workload of linear queries → the measurements with the lowest expected error.

It never imports `dpsql` and never reads data: it sees a `Workload`, a `Domain`, a budget
and options, and returns a `Plan` (`plan`): measurements with their budget shares, every
block's expected RMSE, the alternatives considered and why this one won.

- `planner`: `plan_workload` (per group of connected blocks, the cheapest family, then
  families that share measurements across groups, then the whole workload in one family;
  the adaptive procedures compete when the table's size is known) and
  `budget_for_accuracy` (the least budget meeting an RMSE target);
- `families/`: the strategy families and their exact costs (how to add one: its docstring);
- `adaptive/`: AIM and RAP, costed by simulation on public stand-in data;
- `planning_limit`: the planning budget (counted in work, so plans do not depend on the machine)
  and cancellation;
- `pareto`: privacy–utility fronts (EXPLAIN PARETO): (ε, expected RMSE) of the planner and each
  family, exact for linear plans, and of AIM/RAP by Bayesian optimization over their settings on
  stand-in data; `budget_for_rmse`;
- `timing` (predicted execution time), `chart` (error vs budget, fronts), `components`.
"""

from planner.planning_limit import PlanningLimit
from planner.plan import MAX_ERROR, TOTAL_SQUARED, Plan
from planner.planner import budget_for_accuracy, plan_workload

__all__ = ["MAX_ERROR", "TOTAL_SQUARED", "PlanningLimit", "Plan", "budget_for_accuracy", "plan_workload"]
