"""A real `dpsql serve` on a local port, for the tests of PostgreSQL clients (tests/test_serve.py,
tests/test_clients_*.py): the census database, its catalog and a profile with analysts."""

from __future__ import annotations

import re
import shutil
import signal
import ssl
import subprocess
import sys
from pathlib import Path

import duckdb

from dpsql.budget.ledger import Ledger
from dpsql.interfaces.server.auth import scram_verifier

CATALOG = """
[tables.people]
[tables.people.columns]
age = { type = "integer", min = 0, max = 99 }
sex = { type = "categorical", values = ["F", "M"] }
"""

# A large result every client suite fetches (public SQL: no budget spent), checked complete and in order
LARGE_ROWS = 20_000
LARGE = f"SELECT i::INTEGER AS i, 'row ' || i AS label FROM generate_series(1, {LARGE_ROWS}) AS t(i) ORDER BY i"
# A cancelled statement: long enough that only a cancel stops it
SLOW = "SELECT COUNT(*) FROM range(1000000000000) a"


class Served:
    """A running `dpsql serve` and what it serves."""

    def __init__(self, root: Path, profile: Path | None = None):
        self.root = root
        self.profile = profile or root / "profile.toml"
        self.process: subprocess.Popen | None = None
        self.port = 0
        self.tls = False  # TLS required (`require_tls`): clients connect with sslmode=require

    def require_tls(self) -> bool:
        """Serve with a fresh self-signed certificate (TLS then required); False where openssl is missing."""
        if shutil.which("openssl") is None:
            return False
        cert, key = self.root / "server.crt", self.root / "server.key"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                        "/CN=localhost", "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
        self.profile.write_text(self.profile.read_text().replace(
            'listen = "127.0.0.1:0"', f'listen = "127.0.0.1:0"\ntls_cert = "{cert}"\ntls_key = "{key}"'))
        self.tls = True
        return True

    def ssl_context(self) -> ssl.SSLContext | None:
        """A client context for the test certificate (encrypted, not verified: it is self-signed)."""
        if not self.tls:
            return None
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        return context

    def start(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "dpsql.interfaces.cli", "serve", str(self.profile)],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        match = re.search(r"listening on [\d.]+:(\d+)", line)
        assert match, line + self.process.stderr.read()
        self.port = int(match.group(1))

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=20)
        self.process = None

    def dsn(self, user: str = "alice", password: str = "alice-pw") -> str:
        tls = " sslmode=require" if self.tls else ""
        return f"host=127.0.0.1 port={self.port} user={user} password={password} dbname=census{tls}"

    def url(self, user: str = "alice", password: str = "alice-pw", driver: str = "psycopg") -> str:
        tls = ("?ssl=require" if driver == "asyncpg" else "?sslmode=require") if self.tls else ""
        return f"postgresql+{driver}://{user}:{password}@127.0.0.1:{self.port}/census{tls}"

    def ledger(self) -> Ledger:
        return Ledger.existing(str(self.root / "census.duckdb.dpsql-state"))


def census(root: Path) -> Served:
    """The census deployment in `root` (a protected `people`, a public `regions`), not yet started:
    alice (ε = 2), bob (ε = 0.25) and carol (ε = 1), each with a SCRAM-SHA-256 verifier."""
    con = duckdb.connect(str(root / "census.duckdb"))
    con.execute("CREATE TABLE people AS SELECT (i * 7919 % 100)::INTEGER AS age, "
                "CASE WHEN i % 3 = 0 THEN 'M' ELSE 'F' END AS sex, 'ssn-' || i AS ssn FROM range(20000) t(i)")
    con.execute("CREATE TABLE regions AS SELECT * FROM (VALUES (1, 'north'), (2, 'south')) t(id, name)")
    con.close()
    (root / "catalog.toml").write_text(CATALOG)
    (root / "profile.toml").write_text(f"""
[data]
database = "census.duckdb"
catalog = "catalog.toml"
[budget]
epsilon = 10
delta = 1e-9
[server]
listen = "127.0.0.1:0"
[analysts.alice]
epsilon = 2
password = "{scram_verifier('alice-pw')}"
[analysts.bob]
epsilon = 0.25
password = "{scram_verifier('bob-pw')}"
[analysts.carol]
epsilon = 1
password = "{scram_verifier('carol-pw')}"
""")
    return Served(root)
