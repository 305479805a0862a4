"""The Spark session every Tumult side runs in: local mode on 2 cores, no UI, few shuffle partitions (small
tables: 200 partitions only add tasks, not noise), a throwaway warehouse. Imported by the side scripts, which
run by path in Tumult's environment (their folder is on sys.path)."""

import os
import sys
import tempfile

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession  # noqa: E402


def local_spark() -> SparkSession:
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", tempfile.mkdtemp(prefix="tumult-warehouse-"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
