"""The listener of `dpsql serve`: accepts clients, one thread each, and routes cancel requests."""

from __future__ import annotations

import itertools
import logging
import signal
import socket
import ssl
import sys
import threading
import time
from pathlib import Path

from dpsql.errors import ProfileError
from dpsql.profile import Profile
from dpsql.server import wire
from dpsql.server.auth import Throttle, Verifier, scram_verifier
from dpsql.server.client import ClientConnection

log = logging.getLogger("dpsql.server")


class Server:
    """A PostgreSQL-wire endpoint for the analysts of one deployment profile."""

    def __init__(self, profile: Profile):
        self.profile = profile
        self.verifiers = {name: Verifier.parse(a.password, name) for name, a in profile.analysts.items()
                          if a.password is not None}
        if not self.verifiers:
            raise ProfileError("no analyst of the profile has a password: add password = \"...\" (a verifier made "
                               "by `dpsql passwd NAME`) to the [analysts.NAME] who may connect")
        # Unknown names go through the same exchange against a verifier nobody knows the password of.
        self._nobody = Verifier.parse(scram_verifier(ssl.RAND_bytes(16).hex()), "nobody")
        self.by_analyst, self.by_address = Throttle(free=3), Throttle(free=10)  # failed logins
        settings = profile.server
        self.tls = None
        self.tls_required = settings.tls_cert is not None
        if settings.tls_cert is not None:
            self.tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            try:
                self.tls.load_cert_chain(settings.tls_cert, settings.tls_key)
            except (OSError, ssl.SSLError) as e:
                raise ProfileError(f"cannot load the TLS certificate and key: {e}") from None
        self._pids = itertools.count(1000)
        self._clients: dict[int, ClientConnection] = {}
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()

    # --- clients ------------------------------------------------------------------------------
    def verifier(self, name: str) -> Verifier:
        return self.verifiers.get(name, self._nobody)

    def next_pid(self) -> int:
        return next(self._pids)

    def register(self, client: ClientConnection) -> None:
        with self._lock:
            self._clients[client.pid] = client

    def unregister(self, client: ClientConnection) -> None:
        with self._lock:
            self._clients.pop(client.pid, None)

    def cancel(self, pid: int, secret: int) -> None:
        with self._lock:
            client = self._clients.get(pid)
        if client is not None and client.secret == secret:
            client.cancel()

    # --- listening ----------------------------------------------------------------------------
    def bind(self) -> tuple[str, int]:
        """Open the listening socket; returns the address it listens on."""
        settings = self.profile.server
        family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((settings.host, settings.port))
        except OSError as e:
            listener.close()
            raise ProfileError(f"cannot listen on {settings.host}:{settings.port}: {e.strerror}") from None
        listener.listen(128)
        self._listener = listener
        return listener.getsockname()[:2]

    def serve_forever(self) -> None:
        """Accept clients until `stop` (each in a thread of its own)."""
        assert self._listener is not None, "bind() first"
        while not self._stopping.is_set():
            try:
                sock, address = self._listener.accept()
            except OSError:
                break
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                full = len(self._clients) >= self.profile.server.max_connections
            if full:
                _refuse(sock, "53300", "sorry, too many clients already")
                continue
            client = ClientConnection(self, sock, address[0])
            thread = threading.Thread(target=client.run, name=f"dpsql-client-{client.pid}", daemon=True)
            with self._lock:
                self._threads = [t for t in self._threads if t.is_alive()] + [thread]
            thread.start()

    def stop(self) -> None:
        """Stop accepting clients (safe from a signal handler); `close` then ends the sessions."""
        self._stopping.set()
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()

    def close(self, timeout: float = 30.0) -> None:
        """End every client's connection and wait for its session to close (running statements stop
        before their charge: the client is gone)."""
        with self._lock:
            clients, threads = list(self._clients.values()), list(self._threads)
        for client in clients:
            client.cancel()
            try:
                client.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))


def _refuse(sock: socket.socket, sqlstate: str, text: str) -> None:
    try:
        sock.sendall(wire.error_response(sqlstate, text, "FATAL"))
    except OSError:
        pass
    sock.close()


def serve(profile_path: str | Path) -> None:
    """`dpsql serve PROFILE`: listen until SIGTERM or Ctrl-C, printing the address once listening."""
    profile = Profile.load(profile_path)
    server = Server(profile)
    host, port = server.bind()
    print(f"dpsql: listening on {host}:{port} (PostgreSQL protocol 3.0"
          f"{', TLS required' if server.tls_required else ''})", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: server.stop())
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        server.stop()
    server.close()
    print("dpsql: stopped", file=sys.stderr, flush=True)
