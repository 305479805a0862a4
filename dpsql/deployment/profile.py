"""A deployment profile: the data owner's TOML that says where everything is and who may spend what.

An analyst's surface (the shell, a server, `dpsql.connect(profile=..., analyst=...)`)
takes a profile and an analyst's name and nothing else the owner decides: the
database, the catalog, the ledger, the total budget, the engine's settings and each
analyst's own budget all come from here. Relative paths are relative to the profile.

```toml
[data]
database = "census.duckdb"         # public tables (and, with the default engine, the protected ones)
catalog = "catalog.toml"
ledger = "census.dpsql-state"      # default: <database>.dpsql-state
read_only = true                   # default: the data is opened read-only
log = "dpsql.log"                  # optional: the owner's log (failed scans, with their cause)
output_dir = "exports"             # optional: the only directory shells may read and write files in (none: no files)
engine = "spark"                   # optional: where the protected tables are measured: "duckdb" (default) or "spark"
spark_master = "local[4]"          # with engine = "spark": the master URL (default: spark-defaults, spark-submit)

[data.tables]                      # with engine = "spark": protected tables' Parquet locations (paths or URLs);
people = "warehouse/people"        # tables not listed are the Spark session's own (a metastore's)

[budget]                           # the ledger's total, fixed when the ledger is created
epsilon = 10                       # or rho = ...
delta = 1e-9                       # 0: pure ε-DP
query_epsilon = 0.1                # default share of each new query
key_release_delta = 5e-10          # the part of δ set apart for key releases when the ledger is created
                                   # (default: δ / 2 with a key column in the catalog, else 0)
key_delta = 1e-10                  # the δ one release of keys spends (default: δ / 10)
accounting = "exact"               # how charges compose: "exact" (default) or "zcdp" (dpsql.budget.ledger_accounting)

[engine]                           # DuckDB settings of the database the scans run in
threads = 4

[workspace]                        # DuckDB settings of each analyst's workspace
memory_limit = "1GB"
statement_timeout = 30             # seconds a public statement may run (default 30; 0: no limit)

[analysts.alice]                   # who may connect, and what each may spend in all
epsilon = 2                        # or rho = ...; no amount: up to the total
password = "SCRAM-SHA-256$4096:..." # a SCRAM-SHA-256 verifier made by `dpsql passwd alice` (required with [server])

[server]                           # `dpsql serve`: the PostgreSQL-wire endpoint
listen = "127.0.0.1:5433"          # host:port (port 0: any free port, printed at start)
tls_cert = "server.crt"            # optional: TLS with this certificate and key; then TLS is required
tls_key = "server.key"
max_connections = 64               # per worker
workers = 4                        # processes serving clients (default 1); use about one per core
authentication_timeout = 60        # seconds a client has to log in (default 60, as PostgreSQL's)
max_unauthenticated = 16           # per worker: clients not yet logged in (default 16), at most 4 per address
console = "127.0.0.1:8080"         # optional: the web console (`dpsql.interfaces.console`), served by the same process;
                                   # without TLS (tls_cert) only on a loopback address: its login form sends passwords

[owner]                            # the data owner's login to the console (their page: budgets, charges, the chain)
name = "owner"                     # default "owner"; not an analyst's name
password = "SCRAM-SHA-256$4096:..." # a verifier made by `dpsql passwd owner`
```
"""

from __future__ import annotations

import ipaddress
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpsql.budget.units import checked
from dpsql.errors import ProfileError, ProgrammingError
from dpsql.budget.ledger_accounting import ACCOUNTING_MODES
from dpsql.deployment.output_files import OutputFiles
from dpsql.interfaces.server.auth import Verifier

_SECTIONS = {"data", "budget", "engine", "workspace", "analysts", "server", "owner"}
_DATA_KEYS = {"database", "catalog", "ledger", "read_only", "log", "output_dir", "engine", "spark_master", "tables"}
_DATA_ENGINES = ("duckdb", "spark")
_BUDGET_KEYS = {"epsilon", "delta", "rho", "query_epsilon", "query_rho", "key_delta", "key_release_delta",
                "accounting"}
_ANALYST_KEYS = {"epsilon", "rho", "password"}
_SERVER_KEYS = {"listen", "tls_cert", "tls_key", "max_connections", "workers", "authentication_timeout",
                "max_unauthenticated", "console"}
_OWNER_KEYS = {"name", "password"}


@dataclass(frozen=True)
class Analyst:
    """One analyst of a profile: a name and an optional own budget (ε or ρ).

    Who connects as which analyst is established by the surface that starts the session
    (e.g. an SSH forced command fixing `--analyst`), not by the profile.
    """

    name: str
    epsilon: float | None = None
    rho: float | None = None
    password: str | None = None  # a verifier (`dpsql.interfaces.server.auth`), for `dpsql serve`


@dataclass(frozen=True)
class ServerSettings:
    """The profile's [server] section: where `dpsql serve` listens, and its TLS certificate."""

    host: str = "127.0.0.1"
    port: int = 5433
    tls_cert: Path | None = None
    tls_key: Path | None = None
    max_connections: int = 64  # per worker process
    workers: int = 1  # processes serving clients (a statement's planning holds one process's interpreter)
    authentication_timeout: float = 60.0  # seconds from connecting to logged in (PostgreSQL's default)
    max_unauthenticated: int = 16  # per worker: clients connected but not (yet) logged in
    console: tuple[str, int] | None = None  # (host, port) of the web console (`dpsql.interfaces.console`); None: not served


@dataclass(frozen=True)
class Profile:
    """A parsed deployment profile (see the module docstring)."""

    path: Path
    database: str
    catalog: Path
    ledger: str | None = None
    read_only: bool = True
    log: Path | None = None
    output_dir: Path | None = None
    data_engine: str = "duckdb"  # where the protected tables are measured ([data] engine)
    spark_master: str | None = None
    spark_tables: dict[str, str] = field(default_factory=dict)  # name -> Parquet location ([data.tables])
    budget: dict[str, float] = field(default_factory=dict)
    engine: dict[str, Any] = field(default_factory=dict)
    workspace: dict[str, Any] = field(default_factory=dict)
    analysts: dict[str, Analyst] = field(default_factory=dict)
    server: ServerSettings = field(default_factory=ServerSettings)
    owner: Analyst | None = None  # the data owner's console login ([owner]: a name and a password verifier)

    @classmethod
    def load(cls, path: str | Path) -> "Profile":
        path = Path(path)
        try:
            text = path.read_bytes().decode("utf-8")
        except FileNotFoundError:
            raise ProfileError(f"profile {str(path)!r} does not exist") from None
        except OSError as e:
            raise ProfileError(f"cannot read profile {str(path)!r}: {e.strerror}") from None
        except UnicodeDecodeError:
            raise ProfileError(f"profile {str(path)!r} is not UTF-8 text") from None
        try:
            spec = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ProfileError(f"profile {str(path)!r} is not valid TOML: {e}") from None
        return cls.from_dict(spec, path)

    @classmethod
    def from_dict(cls, spec: dict, path: Path) -> "Profile":
        _known(spec, _SECTIONS, "the profile")
        data = _section(spec, "data")
        _known(data, _DATA_KEYS, "[data]")
        base = path.parent

        def local(key: str, required: bool = False) -> Path | None:
            value = data.get(key)
            if value is None:
                if required:
                    raise ProfileError(f"the profile's [data] needs {key} = \"...\"")
                return None
            if not isinstance(value, str) or not value:
                raise ProfileError(f"[data] {key} must be a path")
            return (base / value).resolve()

        budget = _section(spec, "budget")
        _known(budget, _BUDGET_KEYS, "[budget]")
        checked_budget = {k: _amount(k.removeprefix("query_").removeprefix("key_").removeprefix("release_"), v,
                                     f"[budget] {k}")
                          for k, v in budget.items() if k != "accounting"}
        if "accounting" in budget:
            if budget["accounting"] not in ACCOUNTING_MODES:
                raise ProfileError(f"[budget] accounting must be one of {', '.join(map(repr, ACCOUNTING_MODES))}")
            checked_budget["accounting"] = budget["accounting"]
        analysts = {}
        for name, entry in _section(spec, "analysts").items():
            if not isinstance(entry, dict):
                raise ProfileError(f"[analysts.{name}] must be a table")
            _known(entry, _ANALYST_KEYS, f"[analysts.{name}]")
            if "epsilon" in entry and "rho" in entry:
                raise ProfileError(f"[analysts.{name}]: give epsilon or rho, not both")
            amounts = {k: _amount(k, entry[k], f"[analysts.{name}] {k}") for k in ("epsilon", "rho") if k in entry}
            password = entry.get("password")
            if password is not None and (not isinstance(password, str) or not password):
                raise ProfileError(f"[analysts.{name}] password must be a verifier string")
            if password is not None:
                Verifier.parse(password, name)  # SCRAM-SHA-256 only: refused here, at load, otherwise
            analysts[name] = Analyst(name, amounts.get("epsilon"), amounts.get("rho"), password)
        if not analysts:
            raise ProfileError("the profile declares no analysts: add [analysts.<name>] for each one")
        if "server" in spec:  # served: an analyst without a verifier could never log in, so say so now
            unable = sorted(name for name, a in analysts.items() if a.password is None)
            if unable:
                raise ProfileError(f"[analysts.{unable[0]}] has no password, and the profile serves PostgreSQL "
                                   f"clients ([server]): add password = \"...\" (a verifier made by "
                                   f"`dpsql passwd {unable[0]}`) to each analyst ({', '.join(unable)})")
        read_only = data.get("read_only", True)
        if not isinstance(read_only, bool):
            raise ProfileError("[data] read_only must be true or false")
        ledger = local("ledger")
        data_engine, spark_master, spark_tables = _data_engine(data, base)
        return cls(
            path=path.resolve(), database=str(local("database", True)), catalog=local("catalog", True),
            ledger=None if ledger is None else str(ledger), read_only=read_only, log=local("log"),
            output_dir=local("output_dir"), data_engine=data_engine, spark_master=spark_master,
            spark_tables=spark_tables, budget=checked_budget, engine=_section(spec, "engine"),
            workspace=_workspace(_section(spec, "workspace")), analysts=analysts,
            server=_server(_section(spec, "server"), base), owner=_owner(_section(spec, "owner"), analysts),
        )

    def owner_files(self) -> list[Path]:
        """The owner's files: database, ledger, catalog, the profile itself, log, TLS certificate and key."""
        ledger = self.ledger or self.database + ".dpsql-state"  # the default ledger, beside the database
        optional = (self.log, self.server.tls_cert, self.server.tls_key)
        return [Path(self.database), Path(ledger), self.catalog, self.path, *(f for f in optional if f is not None)]

    def analyst_files(self) -> OutputFiles:
        """What the analysts' surfaces may read and write: files under `output_dir` only, none of the owner's."""
        return OutputFiles(self.owner_files(), self.output_dir, confined=True)

    def analyst(self, name: str | None) -> Analyst:
        """The analyst `name`, who must be declared."""
        if not name:
            raise ProfileError(f"name the analyst: one of {', '.join(sorted(self.analysts))}")
        if name not in self.analysts:
            raise ProfileError(f"{name!r} is not an analyst of this profile")
        return self.analysts[name]


def _data_engine(data: dict, base: Path) -> tuple[str, str | None, dict[str, str]]:
    """[data] engine, spark_master and [data.tables] (locations relative to the profile unless URLs)."""
    engine = data.get("engine", "duckdb")
    if engine not in _DATA_ENGINES:
        raise ProfileError(f"[data] engine must be one of {', '.join(repr(e) for e in _DATA_ENGINES)}, got {engine!r}")
    master, tables = data.get("spark_master"), data.get("tables", {})
    if engine != "spark" and (master is not None or tables):
        raise ProfileError("[data] spark_master and [data.tables] are for engine = \"spark\"")
    if master is not None and (not isinstance(master, str) or not master):
        raise ProfileError("[data] spark_master must be a Spark master URL, e.g. \"local[4]\" or \"spark://host:7077\"")
    if not isinstance(tables, dict) or not all(isinstance(v, str) and v for v in tables.values()):
        raise ProfileError("[data.tables] maps each table name to its Parquet location (a path or a URL)")
    located = {name: where if "://" in where else str((base / where).resolve()) for name, where in tables.items()}
    return engine, master, located


def _server(spec: dict, base: Path) -> ServerSettings:
    _known(spec, _SERVER_KEYS, "[server]")
    host, port = _address(spec.get("listen", "127.0.0.1:5433"), "listen")
    paths = {}
    for key in ("tls_cert", "tls_key"):
        if key in spec:
            if not isinstance(spec[key], str) or not spec[key]:
                raise ProfileError(f"[server] {key} must be a path")
            paths[key] = (base / spec[key]).resolve()
    if len(paths) == 1:
        raise ProfileError("[server] TLS needs both tls_cert and tls_key")
    most = spec.get("max_connections", 64)
    if isinstance(most, bool) or not isinstance(most, int) or not 1 <= most <= 10_000:
        raise ProfileError("[server] max_connections must be a whole number from 1 to 10000")
    workers = spec.get("workers", 1)
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 64:
        raise ProfileError("[server] workers must be a whole number from 1 to 64")
    deadline = spec.get("authentication_timeout", 60)
    if isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or not 1 <= deadline <= 600:
        raise ProfileError("[server] authentication_timeout must be a number of seconds from 1 to 600")
    pending = spec.get("max_unauthenticated", min(16, most))
    if isinstance(pending, bool) or not isinstance(pending, int) or not 1 <= pending <= most:
        raise ProfileError("[server] max_unauthenticated must be a whole number from 1 to max_connections")
    console = None if "console" not in spec else _address(spec["console"], "console")
    if console is not None and "tls_cert" not in paths and not _loopback(console[0]):
        raise ProfileError(f"[server] console = \"{spec['console']}\" is not a loopback address and the profile has no "
                           "TLS certificate: the console's login form sends passwords, so serve it on 127.0.0.1 (reach "
                           "it through an SSH tunnel) or give [server] tls_cert and tls_key")
    return ServerSettings(host, port, paths.get("tls_cert"), paths.get("tls_key"), most, workers,
                          float(deadline), pending, console)


def _address(listen: Any, key: str) -> tuple[str, int]:
    """A "host:port" value of [server]."""
    host, _, port = listen.rpartition(":") if isinstance(listen, str) else ("", "", "")
    if not host or not port.isdigit() or int(port) > 65535:
        raise ProfileError(f"[server] {key} must be \"host:port\", got {listen!r}")
    return host.strip("[]"), int(port)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _owner(spec: dict, analysts: dict[str, Analyst]) -> Analyst | None:
    """The [owner] section: the data owner's console login (no budget: the owner spends nothing)."""
    if not spec:
        return None
    _known(spec, _OWNER_KEYS, "[owner]")
    name, password = spec.get("name", "owner"), spec.get("password")
    if not isinstance(name, str) or not name:
        raise ProfileError("[owner] name must be a non-empty string")
    if name in analysts:
        raise ProfileError(f"[owner] name {name!r} is an analyst's too: give the owner a name of their own")
    if not isinstance(password, str) or not password:
        raise ProfileError(f"[owner] needs password = \"...\": a verifier made by `dpsql passwd {name}`")
    try:
        Verifier.parse(password, name)
    except ProfileError as e:
        raise ProfileError(str(e).replace(f"[analysts.{name}]", "[owner]")) from None
    return Analyst(name, password=password)


def _workspace(spec: dict) -> dict:
    """The [workspace] section: DuckDB settings, and `statement_timeout` (seconds, 0: none), checked here."""
    timeout = spec.get("statement_timeout", 0)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 <= timeout <= 86_400:
        raise ProfileError("[workspace] statement_timeout must be a number of seconds from 0 (no limit) to 86400")
    return spec


def _amount(name: str, value: Any, where: str) -> float:
    try:
        return checked(name, value, where)
    except ProgrammingError as e:
        raise ProfileError(str(e)) from None


def _section(spec: dict, name: str) -> dict:
    value = spec.get(name, {})
    if not isinstance(value, dict):
        raise ProfileError(f"[{name}] must be a table")
    return value


def _known(spec: dict, allowed: set[str], where: str) -> None:
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise ProfileError(f"{where} has unknown keys {unknown}; allowed: {sorted(allowed)}")


__all__ = ["Analyst", "Profile", "ServerSettings"]
