"""SQL scalar expressions over one protected table, compiled to per-cell functions.

Comparisons, IN, IS, CASE and arithmetic by literals compile natively; any other deterministic
scalar expression of declared columns (functions, LIKE, column against column) is evaluated by
DuckDB on the declared domain (`dpsql.sql.evaluation`) and compiled from that public table.
Conditions compile to SQL's three-valued logic as a pair of `Predicate`s:
the indicator of cells where the condition is TRUE and where it is FALSE
(the rest, involving NULLs, is UNKNOWN). Value expressions inside aggregates
compile to a `Value`: the number a cell contributes and the indicator that
the expression is not NULL there. Everything is public arithmetic on the
declared domain; no data is read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

import numpy as np
from sqlglot import exp

from dpsql.tables.table import Table
from dpsql.tables.columns import BOOLEAN, KEY, NUMERIC
from dpsql.errors import CatalogError, NotSupportedError, ProgrammingError
from dpsql.sql.evaluation import Evaluated, Resolved, evaluate, to_predicate
from mechanisms.rap.multilinear import BooleanFunction
from mechanisms.workload import MAX_PREDICATE_TERMS, Predicate

ONE = Predicate.constant(1.0)
ZERO = Predicate.constant(0.0)

_COMPARISON = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
_FLIPPED = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_TEST = {
    "=": lambda a, b: a == b,
    "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}
# A threshold over more conditions than this is refused (its truth table has 2^k rows).
MAX_THRESHOLD_CONDITIONS = 10

# c + sum_j w_j [condition_j]: a sum of conditions cast to numbers (exact rationals).
IndicatorSum = tuple[Fraction, list[tuple[Fraction, "Condition"]]]


@dataclass(frozen=True)
class Condition:
    """Three-valued truth: `true` and `false` indicators (UNKNOWN is the rest)."""

    true: Predicate
    false: Predicate

    def negate(self) -> "Condition":
        return Condition(self.false, self.true)

    def and_(self, other: "Condition") -> "Condition":
        return Condition(self.true * other.true, self.false.or_(other.false))

    def or_(self, other: "Condition") -> "Condition":
        return Condition(self.true.or_(other.true), self.false * other.false)


ALWAYS = Condition(ONE, ZERO)


@dataclass(frozen=True)
class Value:
    """A numeric expression: `value` per cell (0 where NULL) and the not-NULL indicator.

    `value` is None for expressions with no numeric meaning (a categorical column).
    """

    value: Predicate | None
    present: Predicate


def literal_value(node: exp.Expression):
    """The Python value of a literal node (numbers, strings, negatives), else raise."""
    if isinstance(node, exp.Paren):
        return literal_value(node.this)
    if isinstance(node, exp.Neg):
        inner = literal_value(node.this)
        if isinstance(inner, (int, float)):
            return -inner
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        try:
            return int(text)
        except ValueError:
            return float(text)
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal):
        value = literal_value(node.this)
        if isinstance(value, str) and node.to.is_type(*exp.DataType.NUMERIC_TYPES):  # '25'::int, as clients write
            try:
                return int(value) if node.to.is_type(*exp.DataType.INTEGER_TYPES) else float(value)
            except ValueError:
                raise ProgrammingError(f"{node.sql()!r} is not a valid {node.to.sql()}") from None
        return value
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    raise ProgrammingError(f"expected a literal, got {node.sql()!r}")


def _is_literal(node: exp.Expression) -> bool:
    try:
        literal_value(node)
        return True
    except ProgrammingError:
        return False


class ExpressionCompiler:
    """Compiles conditions and value expressions against one table's declared domain.

    `lookups` are the public tables the query joins (`dpsql.sql.lookups.Lookup`): their
    columns resolve to attributes that are public functions of a declared column.
    """

    def __init__(self, table: Table, alias: str | None = None, lookups: Sequence = ()):
        self.table = table
        self.alias = alias
        self.lookups = list(lookups)
        self.notes: list[str] = []  # what the answer's reader should know (expressions evaluated on bins)

    # --- columns ------------------------------------------------------------
    def resolve(self, node: exp.Column):
        """The declared `Column`, or the looked-up attribute (`LookupColumn`), that `node` names."""
        qualifier = node.table.lower()
        if qualifier:
            if (declared := self.table.qualified(qualifier, node.name, self.alias)) is not None:
                return declared
            for lookup in self.lookups:
                if qualifier == lookup.alias.lower():
                    return lookup.attribute(node.name)
            raise ProgrammingError(f"unknown table qualifier {node.table!r} in {node.sql()!r}")
        name = node.name.lower()
        declared = self.table.has_column(name)
        found = [lk for lk in self.lookups if lk.has(name) and not (lk.using and lk.key.lower() == name)]
        if len(found) + declared > 1:
            raise ProgrammingError(f"column {node.name!r} is ambiguous: qualify it with its table's name or alias")
        return found[0].attribute(node.name) if found else self.table.column(node.name)

    def _column(self, node: exp.Expression):
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Cast) and isinstance(node.this, exp.Column):
            column = self.resolve(node.this)  # a numeric cast of a number is the number; other casts are evaluated
            return column if getattr(column, "numeric", False) and node.to.is_type(*exp.DataType.NUMERIC_TYPES) else None
        if isinstance(node, exp.Column):
            return self.resolve(node)
        return None

    # --- conditions -------------------------------------------------------------
    def condition(self, node: exp.Expression) -> Condition:
        if isinstance(node, exp.Paren):
            return self.condition(node.this)
        if isinstance(node, exp.And):
            return self.condition(node.this).and_(self.condition(node.expression))
        if isinstance(node, exp.Or):
            return self.condition(node.this).or_(self.condition(node.expression))
        if isinstance(node, exp.Not):
            return self.condition(node.this).negate()
        if isinstance(node, exp.Boolean):
            return ALWAYS if node.this else ALWAYS.negate()
        try:
            return self._native_condition(node)
        except _NotNative:
            return self._evaluated_condition(node)

    def _native_condition(self, node: exp.Expression) -> Condition:
        """The conditions compiled without evaluation; ProgrammingError for the others."""
        if type(node) in _COMPARISON:
            return self._comparison(_COMPARISON[type(node)], node.this, node.expression)
        if isinstance(node, exp.Between):
            low = self._comparison(">=", node.this, node.args["low"])
            forward = low.and_(self._comparison("<=", node.this, node.args["high"]))
            if not node.args.get("symmetric"):
                return forward
            # BETWEEN SYMMETRIC a AND b: either order of the bounds.
            backward = self._comparison(">=", node.this, node.args["high"])
            return forward.or_(backward.and_(self._comparison("<=", node.this, node.args["low"])))
        if isinstance(node, exp.In):
            return self._in(node)
        if isinstance(node, exp.Is):
            return self._is(node)
        column = self._column(node) if isinstance(node, exp.Column) else None
        if column is not None and column.kind == BOOLEAN:  # WHERE married
            return self._split(column, column.compare("=", True))
        raise _NotNative(f"unsupported condition {node.sql()!r}")

    # --- evaluation on the declared domain ---------------------------------------------
    def evaluated(self, node: exp.Expression) -> Evaluated:
        """`node` evaluated by DuckDB on the declared values of the columns it reads (`dpsql.sql.evaluation`)."""
        binned: list[str] = []

        def resolve(column: exp.Column) -> Resolved:
            found = self.resolve(column)
            if hasattr(found, "lookup"):  # a looked-up attribute: a value per bin of its join column
                return found.name, list(found.values)
            if found.is_open:
                raise CatalogError(found.not_released())
            if (found.binned or found.kind == KEY) and found.name not in binned:
                binned.append(found.name)
            return found.name, found.representatives()

        result = evaluate(node, resolve, self.table.domain)
        for name in binned:
            column = self.table.column(name)
            what = "midpoint" if column.kind == NUMERIC else "start"
            note = (f"{node.sql()} is evaluated on the released keys of {name}: on the keys not released it is NULL"
                    if column.kind == KEY else f"{node.sql()} is evaluated on the bins of {name} (each bin's {what}), "
                    f"not on its raw values: {column.describe()}")
            if note not in self.notes:
                self.notes.append(note)
        return result

    def _evaluated_condition(self, node: exp.Expression) -> Condition:
        result = self.evaluated(node)
        if not result.is_boolean:
            raise ProgrammingError(f"{node.sql()!r} is not a condition (its type is {result.sql_type}): compare it "
                                   "with a value")
        true = result.numbers
        return Condition(to_predicate(true, result.attributes),
                         to_predicate(result.present - true, result.attributes))

    def _evaluated_value(self, node: exp.Expression) -> Value:
        result = self.evaluated(node)
        present = to_predicate(result.present, result.attributes)
        if result.numbers is None:
            return Value(None, present)
        return Value(to_predicate(result.numbers, result.attributes), present)

    def _comparison(self, op: str, left: exp.Expression, right: exp.Expression) -> Condition:
        for side, other, o in ((left, right, op), (right, left, _FLIPPED[op])):
            terms = self._indicator_sum(side)
            if terms is not None and terms[1]:
                return self._threshold(terms, o, other)
        column, literal, written = self._column(left), right, op
        if column is None:
            column, literal, op = self._column(right), left, _FLIPPED[op]
        if column is None:
            raise _NotNative(f"unsupported comparison {left.sql()} {written} {right.sql()}")
        if not _is_literal(literal):
            raise _NotNative(f"{literal.sql()!r} is not a literal")
        value = literal_value(literal)
        if hasattr(column, "nearest_edge") and op not in ("=", "<>"):
            value, note = column.nearest_edge(value)
            if note and note not in self.notes:
                self.notes.append(note)
        true = column.compare(op, value)
        return self._split(column, true)

    # --- thresholds: (a = 1)::INT + (b = 2)::INT + (c > 5)::INT >= 2 -------------
    def _indicator_sum(self, node: exp.Expression) -> IndicatorSum | None:
        """c + sum_j w_j [cond_j] when `node` is literals and numeric casts of conditions, else None."""
        if isinstance(node, exp.Paren):
            return self._indicator_sum(node.this)
        if isinstance(node, exp.Cast) and _is_condition(_unparen(node.this)):
            if not node.to.is_type(*exp.DataType.NUMERIC_TYPES):
                return None
            return Fraction(0), [(Fraction(1), self.condition(node.this))]
        if _is_literal(node):
            value = literal_value(node)
            return None if isinstance(value, str) else (_exact(value, node), [])
        if isinstance(node, exp.Neg):
            inner = self._indicator_sum(node.this)
            return None if inner is None else _scaled(inner, Fraction(-1))
        if isinstance(node, (exp.Add, exp.Sub)):
            left, right = self._indicator_sum(node.this), self._indicator_sum(node.expression)
            if left is None or right is None:
                return None
            if isinstance(node, exp.Sub):
                right = _scaled(right, Fraction(-1))
            return left[0] + right[0], left[1] + right[1]
        if isinstance(node, exp.Mul):
            left, right = self._indicator_sum(node.this), self._indicator_sum(node.expression)
            if left is None or right is None or (left[1] and right[1]):
                return None
            return _scaled(right, left[0]) if not left[1] else _scaled(left, right[0])
        return None

    def _threshold(self, terms: IndicatorSum, op: str, other: exp.Expression) -> Condition:
        """[c + sum_j w_j cond_j <op> literal] as the exact indicator (inclusion-exclusion).

        SQL semantics: a cast of an UNKNOWN condition is NULL, so the comparison is
        UNKNOWN wherever some condition is: TRUE = known * f(conditions), FALSE = known - TRUE,
        known = prod_j (true_j + false_j). f is expanded as the multilinear polynomial of
        its truth table, in the conditions' TRUE indicators or (when shorter) their FALSE ones.
        """
        if not _is_literal(other) or isinstance(literal_value(other), str):
            raise _NotNative(f"a sum of conditions compared with {other.sql()!r}")
        bound = _exact(literal_value(other), other)
        constant, atoms = terms
        if len(atoms) > MAX_THRESHOLD_CONDITIONS:
            raise NotSupportedError(
                f"a threshold over {len(atoms)} conditions exceeds the limit of {MAX_THRESHOLD_CONDITIONS}; "
                "split it into smaller thresholds"
            )
        test = _TEST[op]
        weights = [w for w, _ in atoms]
        f = BooleanFunction.of(
            len(atoms),
            lambda mask: test(constant + sum(w for j, w in enumerate(weights) if mask >> j & 1), bound),
        )
        negated, coefficients = f.expansion()
        if len(coefficients) > MAX_PREDICATE_TERMS:
            raise NotSupportedError(
                f"the threshold expands to {len(coefficients)} product terms (limit {MAX_PREDICATE_TERMS}); "
                "use fewer conditions"
            )
        known = ONE
        for _, c in atoms:
            known = known * _collapse(c.true + c.false)
        basis = [c.false if negated else c.true for _, c in atoms]
        true = ZERO
        for mask, g in coefficients.items():
            product = known
            for j, b in enumerate(basis):
                if mask >> j & 1:
                    product = product * b
            true = true + product.scale(float(g))
        return Condition(true, known - true)

    def _split(self, column, true) -> Condition:
        false = column.not_null() - true
        return Condition(Predicate.on(column.name, true), Predicate.on(column.name, false))

    def _in(self, node: exp.In) -> Condition:
        if node.args.get("query") is not None or node.args.get("unnest") is not None:
            raise ProgrammingError("subqueries are not supported in IN: list the literal values")
        column = self._column(node.this)
        if column is None:
            raise _NotNative(f"IN of {node.this.sql()!r}")
        if not all(_is_literal(e) for e in node.expressions):
            raise _NotNative(f"IN of expressions {node.sql()!r}")
        values = [literal_value(e) for e in node.expressions]
        return self._split(column, column.one_of(values))

    def _is(self, node: exp.Is) -> Condition:
        column = self._column(node.this)
        if column is not None and isinstance(node.expression, exp.Boolean) and column.kind == BOOLEAN:
            true = column.compare("=", bool(node.expression.this))  # IS TRUE / IS FALSE: never UNKNOWN
            return Condition(Predicate.on(column.name, true), Predicate.on(column.name, 1.0 - true))
        if column is None or not isinstance(node.expression, exp.Null):
            raise _NotNative(f"unsupported IS test {node.sql()!r}")
        return Condition(
            Predicate.on(column.name, column.is_null()), Predicate.on(column.name, column.not_null())
        )

    # --- values -------------------------------------------------------------------
    def value(self, node: exp.Expression) -> Value:
        if isinstance(node, exp.Paren):
            return self.value(node.this)
        if isinstance(node, exp.Null):
            return Value(ZERO, ZERO)
        if isinstance(node, exp.Column):
            column = self.resolve(node)
            present = Predicate.on(column.name, column.not_null())
            if not column.numeric:
                return Value(None, present)
            return Value(Predicate.on(column.name, column.bin_values()), present)
        if _is_literal(node):
            v = literal_value(node)
            if isinstance(v, str):
                return Value(None, ONE)
            return Value(Predicate.constant(_finite(v, node)), ONE)
        if isinstance(node, exp.Cast):
            inner = _unparen(node.this)
            if _is_condition(inner):
                return self._indicator(self.condition(inner))
            if isinstance(inner, exp.Column) and self._column(node) is not None:  # a number cast to a number
                return self.value(inner)
            return self._evaluated_value(node)  # a cast that may round, parse or format
        if _is_condition(node):
            return self._indicator(self.condition(node))
        if isinstance(node, exp.Neg):
            inner = self.value(node.this)
            return Value(self._numeric(inner, node).scale(-1.0), inner.present)
        if isinstance(node, (exp.Add, exp.Sub)):
            left, right = self.value(node.this), self.value(node.expression)
            sign = 1.0 if isinstance(node, exp.Add) else -1.0
            present = left.present * right.present
            total = self._numeric(left, node) + self._numeric(right, node).scale(sign)
            return Value(total * present, present)
        if isinstance(node, (exp.Mul, exp.Div)):
            try:
                return self._scaled(node)
            except _NotNative:
                return self._evaluated_value(node)
        if isinstance(node, exp.Case):
            return self._case(node)
        if isinstance(node, exp.If):
            return self._branches([(node.this, node.args.get("true"))], node.args.get("false"))
        return self._evaluated_value(node)

    def _numeric(self, v: Value, node: exp.Expression) -> Predicate:
        if v.value is None:
            raise CatalogError(f"{node.sql()!r} has no numeric value (a categorical column or string)")
        return v.value

    def _indicator(self, c: Condition) -> Value:
        return Value(c.true, c.true + c.false)

    def _scaled(self, node: exp.Expression) -> Value:
        """A product or quotient: by a numeric literal, or (a product only) of two values. A product of values
        is a product of per-column functions, so it stays a linear query of the cells (SUM(x * x), SUM(x * y),
        k-star counts SUM(d * (d - 1) / 2)); its sensitivity comes from its largest value, as any sum's."""
        left, right = node.this, node.expression
        if isinstance(node, exp.Mul) and _is_literal(left) and not _is_literal(right):
            left, right = right, left
        if isinstance(node, exp.Mul) and not _is_literal(right):
            first, second = self.value(left), self.value(right)
            present = first.present * second.present
            try:
                return Value(self._numeric(first, node) * self._numeric(second, node) * present, present)
            except OverflowError as e:
                raise NotSupportedError(f"{node.sql()!r}: {e}") from None
        if not _is_literal(right) or isinstance(literal_value(right), str):
            raise _NotNative(f"{node.sql()!r}: a quotient by an expression")
        factor = _finite(literal_value(right), right)
        if isinstance(node, exp.Div):
            if factor == 0:
                raise ProgrammingError(f"{node.sql()!r}: division by zero")
            factor = 1.0 / factor
        inner = self.value(left)
        return Value(self._numeric(inner, node).scale(factor), inner.present)

    def _case(self, node: exp.Case) -> Value:
        subject = node.this
        branches = []
        for branch in node.args.get("ifs") or []:
            cond = branch.this
            if subject is not None:
                cond = exp.EQ(this=subject.copy(), expression=cond.copy())
            branches.append((cond, branch.args.get("true")))
        return self._branches(branches, node.args.get("default"))

    def _branches(self, branches, default) -> Value:
        """CASE semantics: the first branch whose condition is TRUE; ELSE (or NULL) otherwise."""
        remaining = ONE
        value, present, numeric = ZERO, ZERO, True
        for cond_node, result in branches:
            taken = self.condition(cond_node).true
            selector = remaining * taken
            out = self.value(result)
            if out.value is None:
                numeric = False
            else:
                value = value + selector * out.value
            present = present + selector * out.present
            remaining = remaining * taken.negate()
        out = self.value(default) if default is not None else Value(ZERO, ZERO)
        if out.value is None:
            numeric = False
        else:
            value = value + remaining * out.value
        present = present + remaining * out.present
        return Value(value if numeric else None, present)


# Conditions written as SQL (`condition_sql`) list the cells that meet them: at most this many.
_MAX_LISTED_CELLS = 100_000


def condition_sql(table: Table, where: Condition) -> str:
    """SQL over the table's columns that is true on the rows meeting `where`: the cells of the attributes
    it reads that meet it, listed (dpsql's own SQL, never the analyst's)."""
    clique = table.domain.canonical(where.true.attributes())
    if not clique:
        return "TRUE" if float(where.true.dense((), table.domain)) else "FALSE"
    indicator = where.true.dense(clique, table.domain).reshape(-1)
    if not np.all((indicator == 0) | (indicator == 1)):
        raise NotSupportedError("this WHERE must keep or drop whole rows (no weights)")
    meets = np.flatnonzero(indicator)
    cells = indicator.size
    listed, negate = (meets, "") if 2 * len(meets) <= cells else (np.setdiff1d(np.arange(cells), meets), "NOT ")
    if len(listed) > _MAX_LISTED_CELLS:
        raise NotSupportedError("the WHERE spans too many cells of its columns to list; simplify it")
    if not len(listed):
        return "TRUE" if negate else "FALSE"
    strides = np.cumprod([1] + [table.domain.size_of(a) for a in reversed(clique)])[:-1][::-1]
    cell = " + ".join(f"{table.columns[a].bin_sql()} * {int(s)}" for a, s in zip(clique, strides))
    return f"({cell}) {negate}IN ({', '.join(str(int(c)) for c in listed)})"


class _NotNative(ProgrammingError):
    """A construct the compiler has no rule for: it is evaluated on the declared domain instead."""


def _unparen(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _exact(v, node: exp.Expression) -> Fraction:
    """A numeric literal as the exact rational it prints as."""
    return Fraction(repr(_finite(v, node))) if isinstance(v, float) else Fraction(v)


def _collapse(p: Predicate) -> Predicate:
    """A sum of terms over one attribute as a single vector (e.g. TRUE + FALSE = NOT NULL)."""
    factors = p.factors()
    names = {a for _, fs in factors for a in fs}
    if len(names) != 1 or any(len(fs) != 1 for _, fs in factors):
        return p
    (name,) = names
    return Predicate.on(name, sum(c * fs[name] for c, fs in factors))


def _scaled(terms: IndicatorSum, factor: Fraction) -> IndicatorSum:
    return terms[0] * factor, [(w * factor, c) for w, c in terms[1]]


def _finite(v, node: exp.Expression) -> float:
    if not math.isfinite(float(v)):
        raise ProgrammingError(f"{node.sql()!r} is not a finite number")
    return float(v)


def _is_condition(node: exp.Expression) -> bool:
    return isinstance(node, (exp.And, exp.Or, exp.Not, exp.Between, exp.In, exp.Is, exp.Boolean)) or (
        type(node) in _COMPARISON
    )
