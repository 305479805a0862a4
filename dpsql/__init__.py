"""dpsql: differentially private SQL that plans a workload's measurements.

`dpsql.connect(...)` returns a PEP 249 connection; see `dpsql.interfaces.dbapi` (the type objects
and constructors PEP 249 names are here too). `dpsql.releases.synth.synthesize(conn, table, ...)`
releases a synthetic copy of a protected table; see `dpsql.releases.synth`.
"""

import os

# The planner's optimizers do many small matrix products, which multi-threaded BLAS
# slows down badly on busy machines (20x measured on 2 loaded cores). Unless the user
# chose otherwise, BLAS runs single-threaded; this only works if NumPy is not yet loaded.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from dpsql.releases import synth
from dpsql.tables.catalog import Catalog
from dpsql.tables.column_declarations import categorical, integer, numeric
from dpsql.interfaces.dbapi import Connection, Cursor, connect
from dpsql.interfaces.dbapi_types import (
    BINARY,
    DATETIME,
    NUMBER,
    ROWID,
    STRING,
    Binary,
    Date,
    DateFromTicks,
    Time,
    TimeFromTicks,
    Timestamp,
    TimestampFromTicks,
)
from dpsql.errors import (
    BudgetExceededError,
    CatalogError,
    DatabaseError,
    DataError,
    Error,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ProfileError,
    ProgrammingError,
    Warning,
)
from dpsql.interfaces.extension import register
from dpsql.answers.result import Result

apilevel = "2.0"
threadsafety = 1  # threads may share the module, not connections
paramstyle = "qmark"

__version__ = "0.1.0"

__all__ = [
    "connect", "Connection", "Cursor", "Result", "Catalog", "integer", "numeric", "categorical",
    "Warning", "Error", "InterfaceError", "DatabaseError", "DataError", "OperationalError",
    "IntegrityError", "InternalError", "ProgrammingError", "NotSupportedError",
    "CatalogError", "ProfileError", "BudgetExceededError", "apilevel", "threadsafety", "paramstyle", "register",
    "STRING", "BINARY", "NUMBER", "DATETIME", "ROWID", "Date", "Time", "Timestamp", "DateFromTicks", "TimeFromTicks",
    "TimestampFromTicks", "Binary", "synth",
]
