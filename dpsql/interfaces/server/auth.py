"""Who an analyst is: password verifiers in the profile, the SCRAM-SHA-256 exchange, and throttling.

The owner's profile stores a verifier per analyst, never a password: PostgreSQL's SCRAM format,
``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`` (made by ``dpsql passwd``), following
RFC 5802/7677 as PostgreSQL does. MD5 verifiers are refused (at profile load): an md5 verifier is
itself enough to log in (the challenge needs only md5(password + name)), so whoever reads one is
that analyst. Failed logins are throttled per (client address, name) after 3 failures and per
client address after 10 (so one address cannot try many names; `Throttle`): each further attempt
must wait, doubling up to 5 minutes, and an attempt during the wait is refused without a password
check. Neither key is the name alone, so a stranger's failures never lock a named analyst out of
their own address.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import sqlite3
import threading
import time
import unicodedata
from dataclasses import dataclass

from dpsql.errors import ProfileError

SCRAM = "SCRAM-SHA-256"


def _hmac(key: bytes, text: bytes) -> bytes:
    return hmac.new(key, text, hashlib.sha256).digest()


def scram_verifier(password: str, iterations: int = 4096) -> str:
    """PostgreSQL's SCRAM-SHA-256 verifier of a password (what a profile stores; RFC 5802/7677)."""
    salt = secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", unicodedata.normalize("NFKC", password).encode(), salt, iterations)
    stored = hashlib.sha256(_hmac(salted, b"Client Key")).digest()
    server = _hmac(salted, b"Server Key")
    b64 = lambda raw: base64.b64encode(raw).decode()  # noqa: E731
    return f"{SCRAM}${iterations}:{b64(salt)}${b64(stored)}:{b64(server)}"


@dataclass(frozen=True)
class Verifier:
    """A parsed SCRAM-SHA-256 verifier: salt, keys and iterations."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def parse(cls, text: str, analyst: str) -> "Verifier":
        if text.startswith(SCRAM + "$"):
            try:
                head, keys = text[len(SCRAM) + 1:].split("$")
                count, salt = head.split(":")
                stored, server = keys.split(":")
                parsed = cls(base64.b64decode(salt, validate=True), base64.b64decode(stored, validate=True),
                             base64.b64decode(server, validate=True), int(count))
            except ValueError:
                raise ProfileError(f"[analysts.{analyst}] password is not a valid SCRAM-SHA-256 verifier: make one "
                                   f"with `dpsql passwd {analyst}`") from None
            if parsed.iterations < 1 or not parsed.salt or len(parsed.stored_key) != 32 or len(parsed.server_key) != 32:
                raise ProfileError(f"[analysts.{analyst}] password is not a valid SCRAM-SHA-256 verifier: make one "
                                   f"with `dpsql passwd {analyst}`")
            return parsed
        if text.startswith("md5"):
            raise ProfileError(f"[analysts.{analyst}] password is an md5 verifier, which dpsql refuses (an md5 "
                               f"verifier alone logs in as its analyst): make a SCRAM-SHA-256 one with "
                               f"`dpsql passwd {analyst}` and put it in its place")
        raise ProfileError(f"[analysts.{analyst}] password must be a verifier, not a password: make one with "
                           f"`dpsql passwd {analyst}` (SCRAM-SHA-256)")

    def accepts(self, password: str) -> bool:
        """Whether `password` is this verifier's (checked on the server, as a SCRAM proof is: its salted
        password's client key must hash to StoredKey). For the web console's login form."""
        salted = hashlib.pbkdf2_hmac("sha256", unicodedata.normalize("NFKC", password).encode(), self.salt,
                                     self.iterations)
        stored = hashlib.sha256(_hmac(salted, b"Client Key")).digest()
        return hmac.compare_digest(stored, self.stored_key)


class ScramExchange:
    """The server side of one SCRAM-SHA-256 login (RFC 5802; no channel binding is offered).

    PostgreSQL clients send an empty user name in the SCRAM messages (the user is the start-up
    message's), so the exchange is against the verifier chosen for that user."""

    def __init__(self, verifier: Verifier):
        self.verifier = verifier
        self._gs2 = self._client_bare = self._server_first = self._nonce = ""

    def first(self, client_first: str) -> str:
        """The server-first message for the client-first one (ValueError if malformed)."""
        gs2_flag, _, rest = client_first.partition(",")
        authzid, _, bare = rest.partition(",")
        if gs2_flag not in ("n", "y") or authzid or not bare.startswith("n="):
            raise ValueError("unsupported GS2 header (channel binding is not offered)")
        fields = dict(part.split("=", 1) for part in bare.split(",") if "=" in part)
        if not fields.get("r"):
            raise ValueError("the client nonce is missing")
        self._gs2 = f"{gs2_flag},,"
        self._client_bare = bare
        self._nonce = fields["r"] + base64.b64encode(secrets.token_bytes(18)).decode()
        salt = base64.b64encode(self.verifier.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={self.verifier.iterations}"
        return self._server_first

    def final(self, client_final: str) -> str | None:
        """The server-final message, or None if the proof is wrong (ValueError if malformed)."""
        without_proof, _, proof = client_final.rpartition(",p=")
        fields = dict(part.split("=", 1) for part in without_proof.split(",") if "=" in part)
        if fields.get("r") != self._nonce or not proof:
            raise ValueError("the nonce does not match")
        if base64.b64decode(fields.get("c", "")) != self._gs2.encode():
            raise ValueError("the channel binding does not match")
        auth = f"{self._client_bare},{self._server_first},{without_proof}".encode()
        try:
            client_proof = base64.b64decode(proof, validate=True)
        except binascii.Error:
            raise ValueError("the proof is not base64") from None
        signature = _hmac(self.verifier.stored_key, auth)
        if len(client_proof) != len(signature):
            return None
        client_key = bytes(a ^ b for a, b in zip(client_proof, signature))
        if not hmac.compare_digest(hashlib.sha256(client_key).digest(), self.verifier.stored_key):
            return None
        return "v=" + base64.b64encode(_hmac(self.verifier.server_key, auth)).decode()


class Throttle:
    """Failed logins per key (a client address and a name, or an address): from the `free`-th failure on,
    each next attempt must wait, twice as long after each further failure.

    The counts live in a SQLite database (`path`; default: in memory), so that the worker processes
    of one server share them: more workers must not mean more guesses."""

    def __init__(self, free: int = 3, first_wait: float = 1.0, longest_wait: float = 300.0, path: str = ":memory:"):
        self.free, self.first_wait, self.longest_wait = free, first_wait, longest_wait
        self.path = path
        self._lock = threading.Lock()
        self._db = self._connect()
        self._db.execute("CREATE TABLE IF NOT EXISTS failures (key TEXT PRIMARY KEY, count INTEGER, not_before REAL)")
        self._db.commit()

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30, check_same_thread=False, isolation_level="IMMEDIATE")

    def reopen(self) -> None:
        """A fresh connection to the shared counts (in a process forked after this one was made)."""
        if self.path != ":memory:":
            self._db = self._connect()

    def wait(self, key: str) -> float:
        """Seconds before another attempt for `key` is allowed (0: now)."""
        with self._lock:
            row = self._db.execute("SELECT not_before FROM failures WHERE key = ?", (key,)).fetchone()
        return 0.0 if row is None else max(0.0, row[0] - time.time())

    def failed(self, key: str) -> None:
        with self._lock, self._db:
            row = self._db.execute("SELECT count FROM failures WHERE key = ?", (key,)).fetchone()
            count = 1 if row is None else row[0] + 1
            delay = 0.0 if count < self.free else min(self.first_wait * 2 ** (count - self.free), self.longest_wait)
            self._db.execute("INSERT OR REPLACE INTO failures VALUES (?, ?, ?)", (key, count, time.time() + delay))

    def succeeded(self, key: str) -> None:
        with self._lock, self._db:
            self._db.execute("DELETE FROM failures WHERE key = ?", (key,))
