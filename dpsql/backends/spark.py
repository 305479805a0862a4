"""Marginals computed by Spark SQL: DuckDB's marginal SQL, transpiled by sqlglot.

The row filter of the protected table, the binning and the GROUPING SETS
aggregation all run inside Spark, on whatever cluster the session points at;
only (bin indices, count) rows reach the driver. The catalog's table name is
resolved in the session's current catalog and database: a metastore table, or
a temporary view the data owner registered. Needs `pip install 'dpsql[spark]'`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from dpsql.backends.base import SQLBackend
from dpsql.errors import OperationalError

SPARK_ERRORS = (PySparkException, Py4JError)


def spark_session(spark: Any = None) -> Any:
    """The session to measure with: `spark` itself when it is a session object, else one
    for the master URL `spark` ("local[4]", "spark://host:7077", "yarn", ...), else the
    configured default (spark-submit, spark-defaults.conf)."""
    if spark is not None and not isinstance(spark, str):
        return spark
    builder = SparkSession.builder.appName("dpsql")
    if spark is not None:
        builder = builder.master(spark)
    try:
        return builder.getOrCreate()
    except SPARK_ERRORS as e:
        raise OperationalError(f"cannot start Spark ({spark or 'default master'}): {e}") from None


def profile_session(master: str | None, tables: dict[str, str]) -> Any:
    """The session a deployment profile names (`[data] engine = "spark"`): on `master` (None: the configured
    default), with each of `tables` (name -> Parquet location: a path or a URL Spark reads) registered as a
    temporary view; tables not listed are resolved in the session's catalog (a metastore's)."""
    session = spark_session(master)
    for name, location in tables.items():
        try:
            session.read.parquet(location).createOrReplaceTempView(name)
        except SPARK_ERRORS as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise OperationalError(f"Spark cannot read table {name!r} at {location!r}: {first}") from None
    return session


class SparkBackend(SQLBackend):
    """Marginals computed by Spark SQL (local mode or any cluster)."""

    engine = "Spark"
    dialect = "spark"
    errors = SPARK_ERRORS

    def __init__(self, spark: Any = None):
        super().__init__()
        self.spark = spark_session(spark)
        self._jobs = f"dpsql-{id(self)}"  # this connection's jobs, so that stopping them stops no one else's

    def interrupt(self) -> None:
        self.spark.sparkContext.cancelJobGroup(self._jobs)

    def fetch(self, sql: str, columns: list[str]) -> dict[str, np.ndarray]:
        self.spark.sparkContext.setJobGroup(self._jobs, "dpsql marginals", interruptOnCancel=True)
        rows = self.spark.sql(sql).collect()
        out = {}
        for c in columns:
            values = [r[c] for r in rows]
            text = any(isinstance(v, str) for v in values)
            out[c] = np.asarray(values, dtype=object) if text else np.asarray([v or 0 for v in values], dtype=np.int64)
        return out
