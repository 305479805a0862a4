"""Aggregates of a DP query: each compiles to blocks of linear queries over the table's domain.

COUNT and SUM are one block each; AVG a centred SUM block and a COUNT block; a quantile
(MEDIAN, QUANTILE, PERCENTILE_CONT/DISC WITHIN GROUP, MIN/MAX as extreme quantiles) the block
of its column's prefix counts. `compile_aggregate` compiles one aggregate node of the SELECT;
`REFUSED_AGGREGATES` and `ANONYMOUS_AGGREGATES` name those refused, with why.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from dpsql.tables.table import Table
from dpsql.tables.columns import INTEGER, KEY, NUMERIC, PRESENCE, Column
from dpsql.errors import CatalogError, NotSupportedError, ProgrammingError
from dpsql.sql.expressions import Condition, ExpressionCompiler, Value, literal_value
from dpsql.sql.lookups import SlicedMap
from dpsql.sql.size_bound import refuse_oversized
from mechanisms.matrices import Dense, Diagonal
from mechanisms.workload import Block, Predicate, Term

REFUSED_AGGREGATES = {
    "ApproxQuantile": "percentiles are not supported yet; use a GROUP BY histogram of the column",
    "ArrayAgg": "collecting raw values would release them; use COUNT/SUM/AVG",
    "GroupConcat": "collecting raw values would release them; use COUNT/SUM/AVG",
    "AnyValue": "ANY_VALUE releases a raw value; use COUNT/SUM/AVG",
    "First": "FIRST releases a raw value; use COUNT/SUM/AVG",
    "Last": "LAST releases a raw value; use COUNT/SUM/AVG",
}


# DuckDB aggregates that sqlglot parses as anonymous functions (not AggFunc): without this
# list they slipped through and ran over the noisy result relation, or failed only after
# the budget was charged. MEAN is DuckDB's AVG, FSUM/SUMKAHAN its SUM, COUNT_STAR its COUNT(*).
ANONYMOUS_AGGREGATES = frozenset({
    "arbitrary", "arg_max_null", "arg_max_nulls_last", "arg_min_null", "arg_min_nulls_last",
    "bitstring_agg", "combine_aggr", "count_star", "decimal_average", "entropy", "favg", "fsum",
    "histogram", "histogram_exact", "kahan_sum", "kurtosis_pop", "lttb", "mad", "mean", "product",
    "reservoir_quantile", "sem", "sum_no_overflow", "sumkahan", "variant_group_object",
})


# Variance and standard deviation under each name: (sample, root). sqlglot parses most as their own nodes
# (VAR_SAMP as Variance, MySQL's STD and VARIANCE as StddevPop and VariancePop); VAR, VARP and STDEVP
# (T-SQL) and STD (MySQL's population standard deviation) as anonymous functions in other dialects.
MOMENT_NODES = {exp.Variance: (True, False), exp.VariancePop: (False, False), exp.Stddev: (True, True),
                exp.StddevSamp: (True, True), exp.StddevPop: (False, True)}
ANONYMOUS_MOMENTS = {"var": (True, False), "varp": (False, False), "std": (False, True), "stdevp": (False, True)}


def moment(node: exp.Expression) -> tuple[bool, bool] | None:
    """(sample, root) when `node` is a variance or standard deviation, else None."""
    if isinstance(node, exp.Anonymous):
        return ANONYMOUS_MOMENTS.get(node.name.lower())
    return MOMENT_NODES.get(type(node))


@dataclass
class Aggregate:
    """One aggregate of the query: COUNT or SUM (one block), AVG (SUM and COUNT blocks), a
    quantile (one block: the prefix counts of its column, per group), or a variance or standard
    deviation (blocks of the sum of squares, the sum and the count: `dpsql.answers.moments`).

    An AVG's sum block measures SUM(x - center), `center` the middle of x's declared
    range: half the sensitivity of SUM(x) when the range is [0, U], and its noise is
    not multiplied by the mean when divided by the count (`average`). A quantile is read
    off the noisy CDF of `column` (`mechanisms.quantiles`); MIN and MAX are answered as
    the `MIN_MAX_QUANTILE` and 1 − `MIN_MAX_QUANTILE` quantiles (`approximation` says so).
    A variance's sums are centred likewise: SUM((x - center)²), SUM(x - center), COUNT(x).
    """

    kind: str  # "count", "sum", "avg", "quantile", "variance" or "stddev"
    sql: str
    blocks: list[Block]
    center: float = 0.0
    quantile: float = 0.5
    column: Column | None = None  # a quantile's column
    discrete: bool = False  # PERCENTILE_DISC: a bin's value, not interpolated within the bin
    approximation: str = ""
    sample: bool = False  # a variance or standard deviation: of the sample (n - 1), else of the population

    def average(self, centered_sum: np.ndarray, count: np.ndarray, least: float) -> np.ndarray:
        """AVG from its two blocks' answers: center + sum / count where count >= `least`, else NaN."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(count >= least, self.center + centered_sum / count, np.nan)



def is_aggregate_node(node: exp.Expression) -> bool:
    if isinstance(node, exp.Filter):
        return isinstance(node.this, (exp.AggFunc, exp.WithinGroup)) or moment(node.this) is not None
    if isinstance(node, exp.WithinGroup):
        return isinstance(node.this, (exp.PercentileCont, exp.PercentileDisc)) and not isinstance(node.parent, exp.Filter)
    return ((isinstance(node, exp.AggFunc) and not isinstance(node, (exp.Grouping, exp.GroupingId)) or moment(node) is not None)
            and not isinstance(node.parent, (exp.Filter, exp.WithinGroup)))


def compile_aggregate(
    node: exp.Expression,
    compiler: ExpressionCompiler,
    where: Condition,
    layout: tuple[tuple[str, ...], dict[str, np.ndarray]],
    table: Table,
    prefix: str,
) -> Aggregate:
    condition = where
    agg = node
    if isinstance(node, exp.Filter):
        agg = node.this
        condition = condition.and_(compiler.condition(node.expression.this))
    if isinstance(agg, exp.WithinGroup) or isinstance(agg, QUANTILE_NODES):
        return _compile_quantile(agg, node, compiler, condition, layout, table, prefix)
    if moment(agg) is not None:
        return _compile_moment(agg, node, compiler, condition, layout, table, prefix)
    if agg.find(exp.AggFunc) is not agg or any(isinstance(n, exp.AggFunc) for n in agg.walk() if n is not agg):
        raise NotSupportedError(f"nested aggregates are not supported: {node.sql()!r}")
    arg = agg.this
    if isinstance(arg, exp.Distinct) and isinstance(agg, exp.Count) and table.counts_distinct_units:
        arg = None  # COUNT(DISTINCT unit) over the table of (unit, group) pairs: COUNT(*)
    elif isinstance(arg, exp.Distinct):
        raise NotSupportedError(
            f"{agg.key.upper()}(DISTINCT ...) is not supported: distinct values have unbounded sensitivity; "
            "use GROUP BY on a declared column"
        )
    label = f"{prefix}{node.sql()}"
    if isinstance(agg, exp.Count):
        present = _counted(arg, compiler, table)
        return Aggregate("count", label, [_block(label, condition.true * present, layout, table.domain)])
    value = compiler.value(arg)
    if value.value is None:
        raise CatalogError(_not_numeric(arg, compiler, f"{agg.key.upper()}({arg.sql()})"))
    if isinstance(agg, exp.Sum):
        return Aggregate("sum", label, [_block(label, condition.true * value.value, layout, table.domain)])
    center = _middle_of_range(value, table.domain)
    centered = value.value - value.present.scale(center) if center else value.value
    total = _block(f"{label} [sum]", condition.true * centered, layout, table.domain)
    count = _block(f"{label} [count]", condition.true * value.present, layout, table.domain)
    return Aggregate("avg", label, [total, count], center)


def _counted(arg: exp.Expression | None, compiler: ExpressionCompiler, table: Table) -> Predicate:
    """What COUNT(arg) adds per cell: 1 where `arg` is not NULL.

    COUNT(*) and COUNT of the privacy-unit column (or of the foreign key that reaches the unit) count
    rows: rows without a unit are outside the protected table. A declared column's NULL-ness is its NULL
    bin (a `presence` column declares nothing else); a key column's is not declared (NULL shares the bin
    of the keys not released), so COUNT of it is refused."""
    if arg is None or isinstance(arg, exp.Star):
        return Predicate.constant(1.0)
    if isinstance(arg, exp.Column) and _names_unit(arg, compiler, table):
        return Predicate.constant(1.0)
    column = compiler.resolve(arg) if isinstance(arg, exp.Column) else None
    if not isinstance(column, Column):
        return compiler.value(arg).present
    if column.kind == KEY:
        raise NotSupportedError(
            f"COUNT({arg.sql()}): key column {column.name!r} does not declare which rows hold NULL (they are counted "
            "with the keys not released); use COUNT(*), or declare a presence column for it")
    return Predicate.on(column.name, column.not_null())


def _names_unit(arg: exp.Column, compiler: ExpressionCompiler, table: Table) -> bool:
    """Whether `arg` names the table's privacy-unit column (or its foreign key to the unit), not declared."""
    units = {c.lower() for c in table.unit_columns()}
    qualifiers = {"", table.name.lower(), (compiler.alias or "").lower()}
    return (arg.name.lower() in units and arg.table.lower() in qualifiers
            and not any(c.lower() == arg.name.lower() for c in table.columns))


QUANTILE_NODES = (exp.Median, exp.Quantile, exp.PercentileCont, exp.PercentileDisc, exp.Min, exp.Max)
MIN_MAX_QUANTILE = 0.01  # MIN(x) is answered as this quantile of x, MAX(x) as 1 minus it


def _compile_quantile(agg: exp.Expression, node: exp.Expression, compiler: ExpressionCompiler, condition: Condition,
                      layout, table: Table, prefix: str) -> Aggregate:
    """MEDIAN(x), QUANTILE(x, q), QUANTILE_CONT/DISC(x, q), PERCENTILE_CONT/DISC(q) WITHIN GROUP
    (ORDER BY x [DESC]), MIN(x), MAX(x): one block of x's prefix counts per group."""
    discrete = isinstance(agg.this if isinstance(agg, exp.WithinGroup) else agg, exp.PercentileDisc)
    approximation = ""
    if isinstance(agg, exp.WithinGroup):
        order = agg.expression.expressions if isinstance(agg.expression, exp.Order) else []
        if len(order) != 1:
            raise ProgrammingError(f"{node.sql()!r}: WITHIN GROUP needs one ORDER BY column")
        arg, q = order[0].this, _fraction(agg.this.this, node)
        q = 1.0 - q if order[0].args.get("desc") else q
    elif isinstance(agg, (exp.Min, exp.Max)):
        arg = agg.this
        q = MIN_MAX_QUANTILE if isinstance(agg, exp.Min) else 1.0 - MIN_MAX_QUANTILE
        approximation = (f"{agg.key.upper()} is a DP approximation: the {q:g} quantile (an extreme value depends "
                         "on one individual)")
    elif isinstance(agg, exp.Median):
        arg, q = agg.this, 0.5
    else:
        arg = agg.this
        q = _fraction(agg.args.get("quantile") or agg.args.get("expression"), node)
    if not isinstance(arg, exp.Column) or isinstance(arg.this, exp.Star):
        raise NotSupportedError(f"{node.sql()!r}: a quantile is taken of one declared column, not an expression")
    column = compiler.resolve(arg)
    if not isinstance(column, Column) or column.kind not in (INTEGER, NUMERIC):
        raise CatalogError(f"{node.sql()!r}: a quantile needs an integer or numeric column of the catalog")
    group_by, mapped = layout
    if column.name in group_by or column.name in mapped:
        raise ProgrammingError(f"{node.sql()!r}: the quantile's column is also grouped by")
    values, size = column.value_bins, table.domain.size_of(column.name)
    cdf = np.zeros((values, size))
    cdf[:, :values] = np.tril(np.ones((values, values)))
    label = f"{prefix}{node.sql()}"
    block = _block(f"{label} [prefix counts]", condition.true, (group_by, {**mapped, column.name: cdf}), table.domain)
    return Aggregate("quantile", label, [block], quantile=q, column=column, discrete=discrete,
                     approximation=approximation)


def _fraction(node: exp.Expression | None, whole: exp.Expression) -> float:
    """A quantile's fraction: a literal number in [0, 1]."""
    try:
        value = literal_value(node) if node is not None else None
    except Exception:
        value = None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ProgrammingError(f"{whole.sql()!r}: the quantile must be a number from 0 to 1")
    return float(value)


# Ranges of value expressions over more cells than this are not evaluated (AVG is then not centred).
_RANGE_CELLS = 1 << 20


def _compile_moment(agg: exp.Expression, node: exp.Expression, compiler: ExpressionCompiler, condition: Condition,
                    layout, table: Table, prefix: str) -> Aggregate:
    """VAR_POP/VAR_SAMP/STDDEV_POP/STDDEV_SAMP(x) (every name of them): blocks of SUM((x - c)²), SUM(x - c) and
    COUNT(x) per group, c the middle of x's declared range (the square's sensitivity is (range / 2)²)."""
    sample, root = moment(agg)
    args = agg.expressions if isinstance(agg, exp.Anonymous) else [agg.this]
    if len(args) != 1 or args[0] is None:
        raise ProgrammingError(f"{node.sql()!r}: a variance or standard deviation takes one argument")
    arg = args[0]
    if isinstance(arg, exp.Distinct):
        raise NotSupportedError(f"{node.sql()!r}: DISTINCT values have unbounded sensitivity; drop DISTINCT")
    if any(isinstance(n, exp.AggFunc) or moment(n) is not None for n in arg.walk()):
        raise NotSupportedError(f"nested aggregates are not supported: {node.sql()!r}")
    value = compiler.value(arg)
    if value.value is None:
        raise CatalogError(_not_numeric(arg, compiler, repr(node.sql())))
    center = _middle_of_range(value, table.domain)
    centered = _collapsed(value.value - value.present.scale(center) if center else value.value, table.domain)
    label = f"{prefix}{node.sql()}"
    blocks = [_block(f"{label} [{what}]", condition.true * p, layout, table.domain) for what, p in (
        ("sum of squares", _collapsed(centered * centered, table.domain)), ("sum", centered),
        ("count", value.present))]
    return Aggregate("stddev" if root else "variance", label, blocks, center, sample=sample)


def _collapsed(predicate: Predicate, domain) -> Predicate:
    """A predicate of one attribute as one term (its products expand into many)."""
    attributes = predicate.attributes()
    if len(attributes) != 1:
        return predicate
    (attribute,) = attributes
    return Predicate.on(attribute, predicate.dense((attribute,), domain))


def _middle_of_range(value: Value, domain) -> float:
    """The middle of the value's declared range over cells where it is not NULL (0 when unknown).

    Evaluated exactly on the declared domain of the attributes the expression reads
    (public); an expression over more than `_RANGE_CELLS` cells is not centred.
    """
    attributes = domain.canonical(value.value.attributes() | value.present.attributes())
    if not attributes or math.prod(domain.size_of(a) for a in attributes) > _RANGE_CELLS:
        return 0.0
    values = value.value.dense(attributes, domain)[value.present.dense(attributes, domain) != 0]
    if not values.size:
        return 0.0
    middle = (float(values.min()) + float(values.max())) / 2
    return middle if abs(middle) >= SMALLEST_VALUE else 0.0


# Every value a query multiplies counts by is 0 or within these magnitudes: beyond them exact
# answers grow without bound, and the planner's floating-point error formulas lose their meaning.
SMALLEST_VALUE, LARGEST_VALUE = 1e-9, 1e15


def _check_magnitudes(name: str, coef: float, vectors) -> None:
    """Refuse a term whose values are not finite, or whose nonzero products leave the allowed range."""
    if not np.isfinite(coef):
        raise ProgrammingError(f"{name}: the expression produces values that are not finite numbers")
    largest, smallest = abs(coef), abs(coef)
    for v in vectors:
        v = np.abs(np.asarray(v, dtype=float))
        if not np.all(np.isfinite(v)):
            raise ProgrammingError(f"{name}: the expression produces values that are not finite numbers")
        nonzero = v[v > 0]
        if nonzero.size == 0:
            return  # the term is zero
        largest *= float(nonzero.max())
        smallest *= float(nonzero.min())
    if coef != 0 and not (SMALLEST_VALUE <= smallest and largest <= LARGEST_VALUE):
        raise ProgrammingError(
            f"{name}: its values reach magnitudes from {smallest:.3g} to {largest:.3g}; they must be 0 or between "
            f"{SMALLEST_VALUE:g} and {LARGEST_VALUE:g}: rescale the expression"
        )


def _block(name: str, predicate: Predicate, layout: tuple[tuple[str, ...], dict[str, np.ndarray]], domain) -> Block:
    """Turn a sum of per-attribute products into Kronecker terms with square group factors.

    `layout` is `group_layout`'s: attributes grouped as themselves get square factors,
    attributes grouped through lookups their mapping times the term's vector.
    The block's weight in the planner's objective is 1/Δ², Δ its L2 sensitivity
    (the most one row can change one of its rows), so errors of counts
    and of sums in other units are compared on one scale.
    """
    group_by, mapped = layout
    choices = [m.terms if isinstance(m, SlicedMap) else [(m, {})] for m in mapped.values()]  # a key's slices
    terms = []
    for (coef, factors), chosen in itertools.product(predicate.factors(), itertools.product(*choices)):
        for vectors in (v for _, v in chosen):
            factors = {**factors, **{a: factors[a] * x if a in factors else x for a, x in vectors.items()}}
        _check_magnitudes(name, coef, factors.values())
        mats = {}
        for attr, vector in factors.items():
            if attr in mapped:
                continue
            if attr in group_by:
                if not np.all(vector == 1.0):
                    mats[attr] = Diagonal(vector)
            elif not np.all(vector == 1.0):
                mats[attr] = Dense(vector[None, :])
        for attr, (mapping, _) in zip(mapped, chosen):
            mats[attr] = Dense(mapping * factors[attr][None, :] if attr in factors else mapping)
        terms.append(Term(coef, mats))
    block = Block(name, group_by, terms, mapped_rows={a: m.shape[0] for a, m in mapped.items()})
    refuse_oversized(block, domain)  # before its sensitivity (or anything its size) is computed
    scale = block.sensitivity(domain, 2)
    block.weight = 1.0 / scale**2 if scale > 0 else 1.0
    return block


def _not_numeric(arg: exp.Expression, compiler: ExpressionCompiler, what: str) -> str:
    """Why an aggregate of `arg` has no numbers to add: a presence column says so, anything else is not numeric."""
    column = compiler.resolve(arg) if isinstance(arg, exp.Column) else None
    if isinstance(column, Column) and column.kind == PRESENCE:
        return column.presence_only("summed")
    return f"{what} needs a numeric column or expression"
