"""The PEP 249 exception hierarchy, plus dpsql's own refinements.

Every error a user can cause is one of these, raised before the budget ledger
is charged, with a message that says what was wrong and what to do instead.
"""


class Warning(Exception):  # noqa: A001 - the name is fixed by PEP 249
    """Important warnings (PEP 249)."""


class Error(Exception):
    """Base class of every dpsql error (PEP 249)."""


class InterfaceError(Error):
    """Misuse of the DB-API interface itself (e.g. a closed cursor)."""


class DatabaseError(Error):
    """Errors related to the database."""


class DataError(DatabaseError):
    """Problems with the processed data."""


class OperationalError(DatabaseError):
    """Errors in the database's operation, not necessarily under the caller's control."""


class IntegrityError(DatabaseError):
    """Relational integrity violated."""


class InternalError(DatabaseError):
    """The engine reached an inconsistent state: a bug, please report it."""


class ProgrammingError(DatabaseError):
    """Bad SQL, unknown tables or columns, unsupported constructs."""


class NotSupportedError(DatabaseError):
    """A method or construct the engine does not support."""


class CatalogError(ProgrammingError):
    """A catalog declaration is invalid, or a query conflicts with it."""


class ProfileError(ProgrammingError):
    """A deployment profile is missing, unreadable or invalid, or names no such analyst."""


class BudgetExceededError(OperationalError):
    """The charge a statement needs exceeds the remaining privacy budget."""


class OuterExpressionError(ProgrammingError):
    """A DP query's outer expressions (HAVING, ORDER BY, LIMIT, arithmetic over aggregates) failed; `kind` is
    DuckDB's error class. Its message quotes DuckDB's: shown only when they fail on zeros, before any charge."""

    def __init__(self, message: str, kind: str = ""):
        super().__init__(message)
        self.kind = kind
