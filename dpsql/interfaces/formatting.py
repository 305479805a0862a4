"""Rendering results as text: aligned tables, Markdown, CSV and JSON.

In the human modes (``table``, ``markdown``) each DP aggregate is shown as
``value ± half-width`` of its 95% confidence interval, rounded to the
precision the interval supports. The machine modes (``csv``, ``json``) keep
full precision and add a ``<column>_stderr`` column after each DP column.
"""

from __future__ import annotations

import csv
import io
import json
import math
from decimal import Decimal
from typing import Any

from prompt_toolkit.utils import get_cwidth

from dpsql.answers.result import Result
from mechanisms.reconstruction.answering import LEAST_SQUARES

MODES = ("table", "csv", "json", "markdown")
LEVEL = 0.95
STDERR_SUFFIX = "_stderr"
_MAX_DECIMALS = 6


def dp_columns(result: Result) -> list[bool]:
    """Per column: does it hold DP aggregates (with a standard error, or one no model can state)?"""
    if result.dp:
        return list(result.dp)
    flags = [False] * len(result.columns)
    for errs in result.stderr:
        for j, e in enumerate(errs):
            flags[j] = flags[j] or e is not None
    return flags


def stderr_name(column: str) -> str:
    """The name of the standard-error column that follows a DP column in machine output."""
    return column + STDERR_SUFFIX


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, Decimal)) and not isinstance(v, bool)


def _decimals_for(half: float) -> int:
    """Decimals that show a half-width to two significant digits."""
    if not half > 0 or math.isinf(half):
        return 0
    return min(max(0, 1 - math.floor(math.log10(half))), _MAX_DECIMALS)


def format_value(v: Any, approximate: bool = False) -> str:
    """One value as text; `approximate` rounds floats to 6 significant digits (noisy values)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "NULL"
    if isinstance(v, float) and approximate and math.isfinite(v):
        if v == 0 or 1e-4 <= abs(v) < 1e15:
            digits = 0 if v == 0 else math.floor(math.log10(abs(v))) + 1
            return f"{v:.{min(max(0, 6 - digits), _MAX_DECIMALS)}f}"
        return f"{v:.6g}"
    return str(v)


def _estimate_cells(values: list[Any], halves: list[float | None]) -> list[str]:
    """`value ± half` cells of one DP column, with shared decimals and aligned ± signs."""
    positive = [h for h in halves if h is not None and h > 0]
    decimals = _decimals_for(min(positive)) if positive else 0
    shown = []
    for v, h in zip(values, halves):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            shown.append(None)
        elif h is None:  # a value no model can state an error for: shown without ±
            shown.append((format_value(v, approximate=True), ""))
        else:
            shown.append((f"{v:.{decimals}f}", f"{h:.{decimals}f}"))
    vw = max((len(s[0]) for s in shown if s), default=0)
    hw = max((len(s[1]) for s in shown if s), default=0)
    return ["NULL" if s is None else f"{s[0]:>{vw}} ± {s[1]:>{hw}}" if s[1] else f"{s[0]:>{vw}}" + " " * (hw + 3)
            for s in shown]


def cell_texts(result: Result, rows: list[tuple]) -> tuple[list[list[str]], list[bool]]:
    """Text of every cell (by column) and whether each column is right-aligned."""
    flags = dp_columns(result)
    intervals = result.ci(LEVEL)[: len(rows)]
    noisy = result.kind == "dp"
    columns, right = [], []
    for j in range(len(result.columns)):
        values = [r[j] for r in rows]
        if flags[j]:
            halves = [None if iv[j] is None else (iv[j][1] - iv[j][0]) / 2 for iv in intervals]
            columns.append(_estimate_cells(values, halves))
            right.append(True)
        else:
            columns.append([format_value(v, approximate=noisy) for v in values])
            right.append(any(_is_number(v) for v in values))
    return columns, right


def _pad(text: str, width: int, right: bool) -> str:
    fill = " " * max(0, width - get_cwidth(text))
    return fill + text if right else text + fill


def _table(result: Result, rows: list[tuple]) -> str:
    columns, right = cell_texts(result, rows)
    widths = [max([get_cwidth(name)] + [get_cwidth(c) for c in col]) for name, col in zip(result.columns, columns)]
    lines = [" " + " | ".join(_pad(n, w, False) for n, w in zip(result.columns, widths)).rstrip()]
    lines.append("-" + "-+-".join("-" * w for w in widths) + "-")
    for i in range(len(rows)):
        cells = [_pad(col[i], w, r) for col, w, r in zip(columns, widths, right)]
        lines.append((" " + " | ".join(cells)).rstrip())
    return "\n".join(lines)


def _markdown(result: Result, rows: list[tuple]) -> str:
    columns, right = cell_texts(result, rows)

    def escape(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| " + " | ".join(escape(c) for c in result.columns) + " |"]
    lines.append("|" + "|".join("---:" if r else "---" for r in right) + "|")
    for i in range(len(rows)):
        lines.append("| " + " | ".join(escape(col[i]) for col in columns) + " |")
    return "\n".join(lines)


def machine_records(result: Result) -> tuple[list[str], list[list[Any]]]:
    """Header and rows with a standard-error column after each DP column."""
    flags = dp_columns(result)
    header: list[str] = []
    for name, dp in zip(result.columns, flags):
        header.extend([name, stderr_name(name)] if dp else [name])
    stderr = result.stderr or [(None,) * len(result.columns)] * len(result.rows)
    records = []
    for row, errs in zip(result.rows, stderr):
        record: list[Any] = []
        for v, e, dp in zip(row, errs, flags):
            record.extend([v, e] if dp else [v])
        records.append(record)
    return header, records


def _csv(result: Result) -> str:
    header, records = machine_records(result)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for record in records:
        writer.writerow(["" if v is None else repr(v) if isinstance(v, float) else v for v in record])
    return buf.getvalue().rstrip("\n")


def _json_value(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, Decimal):
        return float(v)
    return str(v)


def _json(result: Result) -> str:
    header, records = machine_records(result)
    objects = [json.dumps(dict(zip(header, map(_json_value, r))), ensure_ascii=False) for r in records]
    return "[" + ",\n ".join(objects) + "]"


def render(result: Result, mode: str = "table", max_rows: int = 0) -> str:
    """The result's rows as text in `mode`; `max_rows` > 0 truncates the human modes."""
    if mode not in MODES:
        raise ValueError(f"unknown output mode {mode!r}; use one of {', '.join(MODES)}")
    if result.kind == "explain" and mode in ("table", "markdown"):
        return result.plan or ""
    if result.kind == "status" and len(result.columns) == 2 and mode in ("table", "markdown"):
        return "\n".join(f"{name} = {format_value(value)}" for name, value in result.rows)
    if mode == "csv":
        return _csv(result)
    if mode == "json":
        return _json(result)
    if not result.columns:
        return "OK" if result.rowcount < 0 else f"OK ({result.rowcount} row{'' if result.rowcount == 1 else 's'} changed)"
    rows = result.rows if max_rows <= 0 else result.rows[:max_rows]
    text = _table(result, rows) if mode == "table" else _markdown(result, rows)
    hidden = len(result.rows) - len(rows)
    return text + (f"\n... {hidden} more rows (.maxrows to show more)" if hidden else "")


def footer(result: Result, with_charge: bool = True) -> str:
    """Row count, what ± means, and (`with_charge`) the statement's charge with the remaining budget."""
    charge = [result.charge_text] if with_charge and result.charge_text else []
    if result.kind in ("explain", "status") or not result.columns:
        return "\n".join(charge)
    n = len(result.rows)
    note = f", value ± {LEVEL:.0%} confidence half-width" if any(dp_columns(result)) else ""
    models = [m for m in result.answered_by if m != LEAST_SQUARES]
    if models:
        note += (f"; answered by the {' and the '.join(models)}: no ± where it answers (its error on what was "
                 "never measured is not bounded)")
    return "\n".join([f"({n} row{'' if n == 1 else 's'}{note})", *result.notes] + charge)
