"""Who is logged in to the console: password checks against the profile's SCRAM verifiers, and sessions.

A login names the owner (`[owner]`) or an analyst and gives their password, which is checked here,
on the server, against the verifier the profile stores (`Verifier.accepts`), never stored. Failed
logins count against the same throttles as the PostgreSQL endpoint's (per client address and name,
and per address: `dpsql.interfaces.server.auth.Throttle`), so the two surfaces together allow no more guesses;
an unknown name is checked against a verifier nobody knows the password of, as there.

A session is a random token (256 bits) in a cookie, mapped here to who logged in and a CSRF token
of its own; it ends at logout, after `IDLE_SECONDS` unused or `LONGEST_SECONDS` in all. An analyst's
session holds their dpsql connection from the profile, the one the PostgreSQL endpoint opens at a
login (`dpsql.interfaces.dbapi._connect_profile`), and runs one statement at a time.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import threading
import time
from dataclasses import dataclass, field

from dpsql import errors
from dpsql.interfaces.dbapi import Connection, _connect_profile
from dpsql.interfaces.server.auth import Verifier

log = logging.getLogger("dpsql.interfaces.console")

IDLE_SECONDS = 30 * 60
LONGEST_SECONDS = 12 * 3600
MOST_SESSIONS = 256  # beyond this, a login ends the least recently used session
OWNER, ANALYST = "owner", "analyst"


class LoginRefused(Exception):
    """A login refused: the message says why (the same for a wrong name and a wrong password)."""


@dataclass
class Login:
    """One logged-in browser: who, their CSRF token and (an analyst's) dpsql connection."""

    role: str
    name: str
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    started: float = field(default_factory=time.monotonic)
    seen: float = field(default_factory=time.monotonic)
    connection: Connection | None = None
    running: threading.Lock = field(default_factory=threading.Lock)  # held while a statement runs

    def csrf_matches(self, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(token.encode(), self.csrf.encode())

    def expired(self, now: float) -> bool:
        return now - self.seen > IDLE_SECONDS or now - self.started > LONGEST_SECONDS

    def close(self) -> None:
        """Close the analyst's connection, once their running statement (if any) has finished."""
        with self.running:
            connection, self.connection = self.connection, None
            if connection is not None:
                try:
                    connection.close()
                except Exception:  # closing must not fail the request that ends the session
                    log.exception("closing the console session of %s", self.name)


class Logins:
    """The console's sessions, for the listening `dpsql.interfaces.server.server.Server` (its profile, verifiers and
    throttles)."""

    def __init__(self, server):
        self.server = server
        owner = server.profile.owner
        self.owner = None if owner is None else (owner.name, Verifier.parse(owner.password, owner.name))
        self._sessions: dict[str, Login] = {}
        self._lock = threading.Lock()

    def log_in(self, name: str, password: str, address: str) -> tuple[str, Login]:
        """Check the password and open a session: (its token, the login); LoginRefused if not."""
        server = self.server
        key = f"{address}\0{name}"  # as the PostgreSQL endpoint's: never the name alone
        wait = max(server.by_login.wait(key), server.by_address.wait(address))
        if wait > 0:
            raise LoginRefused(f"too many failed logins: try again in {wait:.0f} s")
        is_owner = self.owner is not None and name == self.owner[0]
        verifier = self.owner[1] if is_owner else server.verifier(name)
        if not name or not verifier.accepts(password):
            server.by_login.failed(key)
            server.by_address.failed(address)
            log.warning("failed console login for %r from %s", name, address)
            raise LoginRefused("wrong name or password")
        server.by_login.succeeded(key)
        login = Login(OWNER if is_owner else ANALYST, name)
        if not is_owner:
            try:
                login.connection = _connect_profile(server.profile, name, None, None, "duckdb")
            except errors.Error as e:
                raise LoginRefused(str(e)) from None
        token = secrets.token_urlsafe(32)
        with self._lock:
            ended = self._sweep() + self._evict()
            self._sessions[token] = login
        for old in ended:
            old.close()
        log.info("%s %s logged in to the console from %s", login.role, name, address)
        return token, login

    def find(self, token: str | None) -> Login | None:
        """The live session of a cookie's token (and it is used now), or None."""
        if not token:
            return None
        now = time.monotonic()
        with self._lock:
            login = self._sessions.get(token)
            if login is None:
                return None
            if login.expired(now):
                del self._sessions[token]
            else:
                login.seen = now
                return login
        login.close()
        return None

    def log_out(self, token: str) -> None:
        with self._lock:
            login = self._sessions.pop(token, None)
        if login is not None:
            login.close()

    def close(self) -> None:
        with self._lock:
            logins, self._sessions = list(self._sessions.values()), {}
        for login in logins:
            login.close()

    def _sweep(self) -> list[Login]:
        """Forget the expired sessions (under the lock); returns them, to be closed outside it."""
        now = time.monotonic()
        ended = [t for t, login in self._sessions.items() if login.expired(now)]
        return [self._sessions.pop(t) for t in ended]

    def _evict(self) -> list[Login]:
        """Room for one more session (under the lock): the least recently used ones go."""
        ended = []
        while len(self._sessions) >= MOST_SESSIONS:
            token = min(self._sessions, key=lambda t: self._sessions[t].seen)
            ended.append(self._sessions.pop(token))
        return ended
