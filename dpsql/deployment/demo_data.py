"""Deterministic census-like demo table ("people") generated inside DuckDB.

No download and no OS randomness: every random draw is a uniform derived from
DuckDB's 64-bit integer hash, ``hash(hash(i) XOR key(seed, k))`` for row index
``i`` and stream ``k`` (keys are SplitMix64-mixed in Python), mapped to the
open interval (0, 1).  The same ``seed`` therefore gives the same table regardless
of thread count.  Floats go through libm (``ln``/``exp``/``cos``), so
bit-identical results across machines rely on the platform's libm agreeing
(it does in practice; income is rounded to whole dollars, which absorbs ulp
differences).  The data also depends on DuckDB's ``hash`` function, so pin the
DuckDB version for cross-version reproducibility.

Columns, marginals and built-in correlations
--------------------------------------------

``person_id`` BIGINT
    ``i + 1``; unique.  Not declared in the catalog.
``age`` INTEGER
    Population pyramid: 22% children 0-17 (uniform), 60% adults 18-64
    (uniform), 18% seniors 65-99 with linearly declining density.  About
    0.01% of rows are deliberately out of the declared domain (ages 100-104).
``sex`` ENUM 'F'/'M'
    51.2% male below age 50; the male share falls by 0.35 points per year
    after 50 (about 34% male at 99).
``region`` ENUM
    Northeast 17%, Midwest 21%, South 38%, West 24%.
``race`` ENUM
    White / Black / Asian / Native / Other, about 62/13/6/2/17 overall; the
    mix depends on region (more Black in the South, more Asian, Native and
    Other in the West).
``education`` ENUM, 8 ordered levels
    Children follow school age (<6 None, 6-13 Primary, 14-17 Some HS).
    Adults draw from None 1%, Primary 3%, Some HS 7%, HS 28%, Some college
    27%, Bachelors 21%, Masters 10%, Doctorate 3%, capped by age (18-21 at
    most Some college, 22-23 Bachelors, 24-26 Masters), and older cohorts
    (55+) are shifted toward lower levels.
``marital`` ENUM
    Under 16 always 'Never married'.  P(never married) decays with age
    (about 0.77 at 20, 0.41 at 30, 0.14 at 50, 0.06 floor); P(divorced)
    rises to 13% by 43; P(widowed) grows quadratically after 45 and is
    more than twice as high for women; the rest are 'Married'.
``hours_per_week`` INTEGER 0..99, nullable
    Employment probability depends on age, sex and education (none under
    14, 25% for 14-17, 86%/74% for men/women 25-54, low after 65).
    Workers: 45% report exactly 40 hours (adults 25-64), otherwise normal
    around 42 (men) / 37 (women) hours, lower for the young and old,
    clamped to 1..99.  Non-workers have 0.  The value is NULL (non-response)
    for 8% of non-workers and 2.5% of workers: about 5% overall.
``income`` DOUBLE, whole dollars, 0..300000
    Annual personal income from all sources.  Workers: log-normal with
    median 26000 * exp(education effect + experience curve in age +
    0.7 * log(hours/40) - 0.15 for women), log-sd 0.55.  Non-working adults
    get transfer/pension income (seniors higher); 6% of them, and 10% of
    under-16s, have exactly 0.  Under-16s otherwise have small incomes
    (median 1500).  Roughly 1% exceed 200000 (the declared max, to exercise
    clamping); values above 250000 are compressed smoothly below 300000.
    Income uses the actual hours even when ``hours_per_week`` is NULL.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import duckdb

__all__ = ["create_people_table", "write_people_database", "PEOPLE_CATALOG_TOML"]

PEOPLE_CATALOG_TOML: str = """\
[tables.people]
[tables.people.columns]
age            = { type = "integer", min = 0, max = 99 }
sex            = { type = "categorical", values = ["F", "M"] }
race           = { type = "categorical", values = ["White", "Black", "Asian", "Native", "Other"] }
education      = { type = "categorical", values = ["None", "Primary", "Some HS", "HS", "Some college", "Bachelors", "Masters", "Doctorate"], ordered = true }
marital        = { type = "categorical", values = ["Never married", "Married", "Divorced", "Widowed"] }
region         = { type = "categorical", values = ["Northeast", "Midwest", "South", "West"] }
hours_per_week = { type = "integer", min = 0, max = 99, nullable = true }
income         = { type = "numeric", min = 0, max = 200000, bins = 40 }
"""

_EDUCATION = ["None", "Primary", "Some HS", "HS", "Some college",
              "Bachelors", "Masters", "Doctorate"]
# Cumulative adult shares of the education levels (last is 1).
_EDU_CUM = [0.01, 0.04, 0.11, 0.39, 0.66, 0.87, 0.97]
# Log-income effect of each education level.
_EDU_EFFECT = [-0.60, -0.45, -0.30, 0.0, 0.12, 0.45, 0.68, 0.88]


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sql_list(values, cast: str) -> str:
    if cast == "VARCHAR":
        items = ", ".join("'" + v.replace("'", "''") + "'" for v in values)
    else:
        items = ", ".join(repr(float(v)) for v in values)
    return f"([{items}]::{cast}[])"


_MASK64 = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    """SplitMix64 output function (a strong 64-bit mixer)."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def _stream_key(seed: int, k: int) -> int:
    """Per-(seed, stream) 64-bit key, computed in Python."""
    return _splitmix64(_splitmix64(seed & _MASK64) ^ k)


def _people_sql(rows: int, seed: int) -> str:
    """Build the SELECT that generates the table."""

    def u(k: int) -> str:
        # 53 high bits of hash(hash(i) XOR key_k) -> uniform in (0, 1).
        key = _stream_key(seed, k)
        return (f"(((hash(xor(h_i, {key}::UBIGINT)) >> 11)::DOUBLE + 0.5)"
                f" * {2.0 ** -53!r})")

    edu_level_adult = "CASE " + " ".join(
        f"WHEN ue_adj < {c!r} THEN {lvl}" for lvl, c in enumerate(_EDU_CUM)
    ) + f" ELSE {len(_EDU_CUM)} END"

    return f"""
WITH
draws AS (
    SELECT i,
        {u(1)} AS u_age1, {u(2)} AS u_age2, {u(3)} AS u_region,
        {u(4)} AS u_race, {u(5)} AS u_sex, {u(6)} AS u_edu,
        {u(7)} AS u_marital, {u(8)} AS u_work, {u(9)} AS u_null,
        {u(10)} AS u_heap, {u(11)} AS u_n1, {u(12)} AS u_n2,
        {u(13)} AS u_zero
    FROM (SELECT range AS i, hash(range) AS h_i FROM range({rows}))
),
s1 AS (
    SELECT *,
        CAST(CASE
            WHEN u_age1 < 0.0001 THEN 100 + floor(u_age2 * 5)
            WHEN u_age1 < 0.2201 THEN floor(u_age2 * 18)
            WHEN u_age1 < 0.8201 THEN 18 + floor(u_age2 * 47)
            ELSE 65 + floor(35 * (1 - sqrt(u_age2)))
        END AS INTEGER) AS age,
        CASE WHEN u_region < 0.17 THEN 'Northeast'
             WHEN u_region < 0.38 THEN 'Midwest'
             WHEN u_region < 0.76 THEN 'South'
             ELSE 'West' END AS region,
        -- Two independent standard normals (Box-Muller).
        sqrt(-2 * ln(u_n1)) * cos(2 * pi() * u_n2) AS z_hours,
        sqrt(-2 * ln(u_n1)) * sin(2 * pi() * u_n2) AS z_income
    FROM draws
),
s2 AS (
    SELECT *,
        CASE WHEN u_sex < 0.512 - 0.0035 * greatest(age - 50, 0)
             THEN 'M' ELSE 'F' END AS sex,
        CASE region
            WHEN 'Northeast' THEN [0.66, 0.78, 0.85, 0.86]
            WHEN 'Midwest'   THEN [0.76, 0.87, 0.91, 0.92]
            WHEN 'South'     THEN [0.58, 0.78, 0.82, 0.83]
            ELSE                  [0.52, 0.57, 0.69, 0.73]
        END::DOUBLE[] AS race_cum,
        u_edu * (1 - 0.004 * greatest(age - 55, 0)) AS ue_adj
    FROM s1
),
s3 AS (
    SELECT *,
        CASE WHEN u_race < race_cum[1] THEN 'White'
             WHEN u_race < race_cum[2] THEN 'Black'
             WHEN u_race < race_cum[3] THEN 'Asian'
             WHEN u_race < race_cum[4] THEN 'Native'
             ELSE 'Other' END AS race,
        CASE WHEN age < 6 THEN 0
             WHEN age < 14 THEN 1
             WHEN age < 18 THEN 2
             ELSE least({edu_level_adult},
                        CASE WHEN age < 22 THEN 4
                             WHEN age < 24 THEN 5
                             WHEN age < 27 THEN 6
                             ELSE 7 END)
        END AS edu_level
    FROM s2
),
s4 AS (
    SELECT *,
        -- Marital status probabilities.
        CASE WHEN age < 16 THEN 1.0
             ELSE 0.06 + 0.94 * exp(-(age - 16) / 14.0) END AS p_never,
        CASE WHEN age <= 45 THEN 0.0
             ELSE (CASE WHEN sex = 'F' THEN 0.55 ELSE 0.25 END)
                  * pow(least(age - 45, 55) / 55.0, 2) END AS p_widowed,
        0.13 * least(greatest(age - 18, 0) / 25.0, 1.0) AS p_divorced,
        -- Employment probability.
        least(greatest(
            CASE WHEN age < 14 THEN 0.0
                 WHEN age < 18 THEN 0.25
                 WHEN age < 25 THEN 0.60
                 WHEN age < 55 THEN CASE WHEN sex = 'M' THEN 0.86 ELSE 0.74 END
                 WHEN age < 65 THEN CASE WHEN sex = 'M' THEN 0.68 ELSE 0.58 END
                 ELSE 0.20 * exp(-(age - 65) / 10.0) END
            + CASE WHEN age >= 18 THEN 0.02 * (edu_level - 3) ELSE 0.0 END,
            0.0), 0.97) AS p_work
    FROM s3
),
s5 AS (
    SELECT *,
        CASE WHEN u_marital < p_never THEN 'Never married'
             WHEN u_marital < p_never + p_widowed THEN 'Widowed'
             WHEN u_marital < p_never + p_widowed + p_divorced THEN 'Divorced'
             ELSE 'Married' END AS marital,
        u_work < p_work AS works
    FROM s4
),
s6 AS (
    SELECT *,
        CAST(CASE
            WHEN NOT works THEN 0
            WHEN age < 18 THEN least(greatest(round(15 + 6 * z_hours), 1), 99)
            WHEN age >= 25 AND age < 65 AND u_heap < 0.45 THEN 40
            ELSE least(greatest(round(
                CASE WHEN age < 25 THEN 30
                     WHEN age >= 65 THEN 20
                     WHEN sex = 'M' THEN 42
                     ELSE 37 END
                + 10 * z_hours), 1), 99)
        END AS INTEGER) AS hours_actual
    FROM s5
),
s7 AS (
    SELECT *,
        {_sql_list(_EDU_EFFECT, "DOUBLE")}[edu_level + 1] AS edu_eff,
        least(age, 62) - 18 AS exper_years
    FROM s6
),
s8 AS (
    SELECT *,
        CASE
            WHEN age < 16 THEN
                CASE WHEN u_zero < 0.10 THEN 0.0
                     ELSE exp(ln(1500) + 1.0 * z_income) END
            WHEN works THEN exp(ln(26000) + edu_eff
                                + 0.045 * exper_years
                                - 0.0007 * exper_years * exper_years
                                + 0.7 * ln(least(hours_actual, 60) / 40.0)
                                + CASE WHEN sex = 'F' THEN -0.15 ELSE 0.0 END
                                + 0.55 * z_income)
            WHEN u_zero < 0.06 THEN 0.0
            WHEN age >= 65 THEN exp(ln(20000) + 0.5 * edu_eff + 0.5 * z_income)
            ELSE exp(ln(8000) + 0.5 * edu_eff + 0.9 * z_income)
        END AS income_raw
    FROM s7
)
SELECT
    CAST(i + 1 AS BIGINT) AS person_id,
    age,
    sex,
    race,
    {_sql_list(_EDUCATION, "VARCHAR")}[edu_level + 1] AS education,
    marital,
    region,
    CASE WHEN u_null < (CASE WHEN hours_actual > 0 THEN 0.025 ELSE 0.08 END)
         THEN NULL ELSE hours_actual END AS hours_per_week,
    CAST(round(CASE WHEN income_raw > 250000
                    THEN 250000 + 50000 * (1 - exp(-(income_raw - 250000) / 50000.0))
                    ELSE income_raw END) AS DOUBLE) AS income
FROM s8
ORDER BY i
"""


def create_people_table(con: duckdb.DuckDBPyConnection, rows: int = 1_000_000,
                        table: str = "people", seed: int = 2026, typed: bool = True) -> None:
    """Create (or replace) ``table`` with ``rows`` deterministic synthetic people.

    The same ``seed`` always yields the same table; see the module docstring
    for columns and their distributions. ``typed=False`` stores the same values
    as a CSV import would: categoricals as VARCHAR, every column nullable.
    """
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        raise ValueError(f"rows must be a non-negative int, got {rows!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an int, got {seed!r}")
    if not -(2 ** 63) <= seed < 2 ** 63:
        raise ValueError("seed must fit in a signed 64-bit integer")
    if not isinstance(table, str) or not table:
        raise ValueError("table must be a non-empty string")
    con.execute(f"CREATE OR REPLACE TABLE {_quote_ident(table)} ({_people_schema(typed)})")
    con.execute(f"INSERT INTO {_quote_ident(table)} " + _people_sql(rows, seed))


def _people_schema(typed: bool) -> str:
    """The table's columns as an owner would declare them: each categorical an ENUM of the catalog's
    values and NOT NULL where the catalog does not declare NULLs, so a scan needs no per-row checks
    of them (`dpsql.tables.columns.StoredType`); not `typed`: VARCHAR and nullable."""
    declared = tomllib.loads(PEOPLE_CATALOG_TOML)["tables"]["people"]["columns"]
    types = {"integer": "INTEGER", "numeric": "DOUBLE"}
    columns = ["person_id BIGINT" + (" NOT NULL" if typed else "")]
    for name, column in declared.items():
        kind = types.get(column["type"]) or ("ENUM(" + ", ".join(
            "'" + v.replace("'", "''") + "'" for v in column["values"]) + ")" if typed else "VARCHAR")
        columns.append(f"{name} {kind}" + ("" if column.get("nullable") or not typed else " NOT NULL"))
    return ", ".join(columns)


def write_people_database(path: str | os.PathLike, rows: int = 1_000_000) -> None:
    """Write the ``people`` table into the DuckDB file ``path`` (replacing it), all or nothing.

    The file is built under a temporary name beside ``path`` and renamed into
    place, so a half-written database is never found there.
    """
    path = Path(path)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        with duckdb.connect(str(partial)) as con:
            create_people_table(con, rows=rows)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
