"""Local-report tables: one report per user, randomized on the user's device (local DP).

``model = "local"``, ``protocol = "oue"``, ``epsilon = 1``: each row is a report about the user's cell
of the declared columns (flat index in declaration order, last column fastest). No central budget is
spent on it: its answers come from the protocol's unbiased estimator (`mechanisms.ldp.answering`),
with the exact variance of every answer, from the reports tallied in SQL (`tally_sql`). The payload
columns are named as the client's payload keys (see the catalog's docstring).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dpsql.errors import CatalogError
from dpsql.tables.columns import KEY, quote_identifier
from dpsql.tables.table import Relation, Table
from mechanisms.domain import Domain
from mechanisms.ldp.answering import LOCAL_PROTOCOLS as ANSWERABLE, client_protocol, payload_of
from mechanisms.ldp.client import HASH_PRIME, Protocol
from mechanisms.ldp.tally import Payload

LOCAL_PROTOCOLS = tuple(ANSWERABLE)  # the protocols a local table's reports may use (`mechanisms.ldp.answering`)
OPTIONS = ("branching", "oracle", "order", "query_share")  # a protocol's other parameters, keys of the table


@dataclass
class LocalReportTable(Table):
    """Reports made with `protocol` at `local_epsilon` (and its `protocol_options`), one per user."""

    kind = "local reports"
    scanned_by_rows = False
    holds_reports = True
    answered_by_reports = True

    protocol: str | None = None
    local_epsilon: float | None = None
    protocol_options: dict = field(default_factory=dict)
    _client: Protocol | None = field(init=False, default=None, repr=False)

    @classmethod
    def declares(cls, settings: dict) -> bool:
        return settings.get("model") == "local"

    @classmethod
    def declared(cls, name: str, columns: dict, settings: dict) -> "LocalReportTable":
        if any(settings.get(k) is not None for k in ("privacy_unit", "max_rows_per_unit")) or settings.get("append_only"):
            raise CatalogError(f"table {name!r}: a local table has one report per user: no privacy unit, time "
                               "or key columns")
        return cls(name, columns, settings.get("rows"), settings.get("time"), settings.get("protocol"),
                   settings.get("epsilon"), {k: settings[k] for k in OPTIONS if k in settings}, **cls.more(settings))

    @classmethod
    def more(cls, settings: dict) -> dict:
        """A subclass's further fields from the declaration."""
        return {}

    def check_declaration(self) -> None:
        if self.protocol not in LOCAL_PROTOCOLS:
            raise CatalogError(f"table {self.name!r}: a local table needs protocol, one of {', '.join(LOCAL_PROTOCOLS)}")
        epsilon = self.local_epsilon
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not 0 < epsilon < 100:
            raise CatalogError(f"table {self.name!r}: a local table needs epsilon, the ε of its reports (0 to 100)")
        if self.time_column or (any(c.kind == KEY for c in self.columns.values()) and not self.head_list()):
            raise CatalogError(f"table {self.name!r}: a local table has one report per user: no privacy unit, time "
                               "or key columns")
        try:
            self._client = client_protocol(self.protocol, float(epsilon), Domain(
                tuple(self.columns), tuple(c.size for c in self.columns.values())), self.protocol_options)
        except (ValueError, TypeError) as e:
            raise CatalogError(f"table {self.name!r}: {e}") from None

    def head_list(self) -> bool:
        """Whether its key columns are a head list its opt-in group discovers (a hybrid table's, `hybrid`)."""
        return False

    @property
    def client(self) -> Protocol:
        """The client protocol (the randomizer its reports were made with)."""
        return self._client

    def signature_note(self) -> str:
        options = "".join(f" {k}={v}" for k, v in sorted(self.protocol_options.items()))
        return f"; local reports, {self.protocol}{options} at ε={self.local_epsilon:g}"

    def count_marginals(self, backend, cliques, key, within) -> dict:
        raise CatalogError(f"table {self.name!r} holds local-DP reports: it is answered by its protocol's estimate, "
                           "never measured centrally")

    def explain_text(self, reports: int | None = None) -> str:
        """What EXPLAIN says of a query over the reports."""
        how_many = "" if reports is None else f"{reports:,} "
        return (f"[{self.name}] local DP: the table holds {how_many}reports randomized on the users' devices with "
                f"{self.protocol} at ε = {self.local_epsilon:g}; no central budget is charged. Answered by the "
                "protocol's unbiased estimate (one estimate answers every query, consistently), with the exact "
                "variance of each answer, covariances between cells included (evaluated at the estimate)")

    def _items_sql(self, payload: Payload) -> str:
        """The SQL of the cells (or indices) each report supports, one row each (UNNEST for a list)."""
        if payload.hashed:  # local hashing: the cells j with ((a·j + b) mod P) mod g = y
            g, cells = self.client.range, self.domain.size()
            return (f"UNNEST(list_filter(range({cells}), lambda x: ((CAST(\"a\" AS BIGINT) * x + \"b\") % {HASH_PRIME}) "
                    f"% {g} = \"y\"))")
        return f"UNNEST({quote_identifier(payload.items)})" if payload.items else quote_identifier(payload.item)

    def tally_sql(self, relation: Relation = quote_identifier) -> str:
        """Per (stratum `s`, item `j`): how many reports support the item (`n`) and the sum of their signs
        (`t`); rows with j = −1 count each stratum's reports (`mechanisms.ldp.tally`)."""
        payload = payload_of(self.client)
        source = relation(self.name)
        stratum = f"COALESCE(CAST({quote_identifier(payload.stratum)} AS BIGINT), -2)" if payload.stratum else "0"
        sign = f"COALESCE(CAST({quote_identifier(payload.sign)} AS DOUBLE), 0)" if payload.sign else "0.0"
        return (f"SELECT s, CAST(j AS BIGINT) AS j, COUNT(*) AS n, SUM(t) AS t FROM (SELECT {stratum} AS s, "
                f"{self._items_sql(payload)} AS j, {sign} AS t FROM {source}) AS r WHERE j IS NOT NULL GROUP BY s, j "
                f"UNION ALL SELECT {stratum} AS s, -1 AS j, COUNT(*) AS n, 0.0 AS t FROM {source} GROUP BY 1")

    def pairs_sql(self, relation: Relation = quote_identifier) -> str | None:
        """Per pair of cells (`j`, `k`): how many reports support both (local hashing's co-support, `n`);
        None for a protocol whose estimate does not need them."""
        payload = payload_of(self.client)
        if not payload.hashed:
            return None
        items = self._items_sql(payload)[len("UNNEST("):-1]
        return (f"SELECT CAST(j AS BIGINT) AS j, CAST(k AS BIGINT) AS k, COUNT(*) AS n FROM (SELECT j, UNNEST(l) AS k "
                f"FROM (SELECT UNNEST(l) AS j, l FROM (SELECT {items} AS l FROM {relation(self.name)}) AS r) AS p) AS q "
                "GROUP BY j, k")
