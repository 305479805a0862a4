"""The listener of `dpsql serve`: accepts clients, one thread each, and routes cancel requests.

With `[server] workers = N > 1`, N processes forked after the socket is bound accept from it
(the kernel spreads the clients), so N statements plan at once. They share what must be shared:
the ledger (its own file lock), the failed-login counts (`Throttle` on a SQLite file), and cancel
requests, which reach any worker and are passed to the one serving that client (its index is
in the client's backend key). Workers die with the parent, even when it is killed.

Strangers: a client has `[server] authentication_timeout` seconds (60, as PostgreSQL) from its
connection to its login, then it is disconnected; at most `max_unauthenticated` clients of a worker
may be connected without having logged in, at most `PENDING_PER_ADDRESS` of them from one address.
When that many wait, a newcomer takes the place of the longest-waiting client of the address with
the most, so sockets that never send a byte cannot lock the analysts out.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import itertools
import logging
import os
import shutil
import signal
import socket
import ssl
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

from dpsql.errors import ProfileError
from dpsql.deployment.profile import Profile
from dpsql.interfaces.server import wire
from dpsql.interfaces.server.auth import Throttle, Verifier, scram_verifier
from dpsql.interfaces.server.client import ClientConnection

log = logging.getLogger("dpsql.server")


class Server:
    """A PostgreSQL-wire endpoint for the analysts of one deployment profile."""

    def __init__(self, profile: Profile, shared: Path | None = None):
        self.profile = profile
        profile.analyst_files().check_directory()  # refuse to start with owner or deployment files in reach
        self.verifiers = {name: Verifier.parse(a.password, name) for name, a in profile.analysts.items()
                          if a.password is not None}
        if not self.verifiers:
            raise ProfileError("no analyst of the profile has a password: add password = \"...\" (a verifier made "
                               "by `dpsql passwd NAME`) to the [analysts.NAME] who may connect")
        # Unknown names go through the same exchange against a verifier nobody knows the password of.
        self._nobody = Verifier.parse(scram_verifier(ssl.RAND_bytes(16).hex()), "nobody")
        place = (lambda name: str(shared / name)) if shared is not None else (lambda name: ":memory:")
        self.by_login = Throttle(free=3, path=place("logins.sqlite"))  # failed logins, per (address, name)
        self.by_address = Throttle(free=10, path=place("addresses.sqlite"))  # ... and per client address
        settings = profile.server
        self.tls = None
        self.tls_required = settings.tls_cert is not None
        if settings.tls_cert is not None:
            self.tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            try:
                self.tls.load_cert_chain(settings.tls_cert, settings.tls_key)
            except (OSError, ssl.SSLError) as e:
                raise ProfileError(f"cannot load the TLS certificate and key: {e}") from None
        self.index = 0  # this worker's index (its clients' backend keys start with it)
        self._cancel_pipes: list[int] = []  # per worker, where its cancel requests are written
        self._pids = itertools.count(1000)
        self._clients: dict[int, ClientConnection] = {}
        self._arrived: dict[int, float] = {}  # pid -> when the client connected (monotonic), until unregistered
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
            self._arrived[client.pid] = time.monotonic()

    def unregister(self, client: ClientConnection) -> None:
        with self._lock:
            self._forget(client)

    def cancel(self, pid: int, secret: int) -> None:
        """A cancel request: for a client of this worker, or passed on to the worker serving it."""
        owner = pid >> _WORKER_SHIFT
        if owner != self.index and 0 <= owner < len(self._cancel_pipes):
            os.write(self._cancel_pipes[owner], struct.pack("!ii", pid, secret))
            return
        with self._lock:
            client = self._clients.get(pid)
        if client is not None and client.secret == secret:
            client.cancel()

    def become_worker(self, index: int, pipes: list[tuple[int, int]]) -> None:
        """In a forked worker: take `index`, reopen what must not be shared across a fork, and listen
        for cancel requests passed on by the other workers."""
        self.index = index
        self._pids = itertools.count((index << _WORKER_SHIFT) + 1000)
        self._cancel_pipes = [write for _, write in pipes]
        self.by_login.reopen()
        self.by_address.reopen()
        readable = pipes[index][0]

        def passed_on() -> None:
            while True:
                data = os.read(readable, 8)
                if len(data) < 8:
                    return
                self.cancel(*struct.unpack("!ii", data))

        threading.Thread(target=passed_on, name="dpsql-cancels", daemon=True).start()

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
        # Accept polls: a signal the kernel delivers to another thread (DuckDB's, say) does not interrupt
        # this thread's accept(), and Python runs the handler (`stop`) only when this thread runs again.
        self._listener.settimeout(_ACCEPT_POLL_SECONDS)
        while not self._stopping.is_set():
            self._disconnect_late()
            try:
                sock, address = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            refusal = self._admit(address[0])
            if refusal is not None:
                _refuse(sock, "53300", refusal)
                continue
            client = ClientConnection(self, sock, address[0])
            thread = threading.Thread(target=client.run, name=f"dpsql-client-{client.pid}", daemon=True)
            with self._lock:
                self._threads = [t for t in self._threads if t.is_alive()] + [thread]
            self.register(client)  # from its first byte: counted against max_connections, closed by `close`
            thread.start()

    def _pending(self) -> list[ClientConnection]:
        """The clients not logged in (yet), longest-waiting first (under the lock)."""
        return sorted((c for c in self._clients.values() if not c.analyst), key=lambda c: self._arrived[c.pid])

    def _admit(self, address: str) -> str | None:
        """Make room for a new client from `address` (see the module docstring), or say why it is refused."""
        settings = self.profile.server
        with self._lock:
            pending = self._pending()
            if sum(c.address == address for c in pending) >= PENDING_PER_ADDRESS:
                return "sorry, too many clients from your address are not logged in yet"
            if len(pending) < settings.max_unauthenticated and len(self._clients) < settings.max_connections:
                return None
            if not pending:
                return "sorry, too many clients already"
            waiting: dict[str, int] = {}
            for c in pending:
                waiting[c.address] = waiting.get(c.address, 0) + 1
            busiest = max(waiting, key=waiting.get)  # the first address with the most (dicts keep order)
            evicted = next(c for c in pending if c.address == busiest)
            self._forget(evicted)
        _shut(evicted)
        return None

    def _disconnect_late(self) -> None:
        """Disconnect the clients that have not logged in within `authentication_timeout`."""
        cutoff = time.monotonic() - self.profile.server.authentication_timeout
        with self._lock:
            late = [c for c in self._pending() if self._arrived[c.pid] <= cutoff]
            for client in late:
                self._forget(client)
        for client in late:
            log.warning("a client from %s did not log in within the authentication timeout", client.address)
            _shut(client)

    def _forget(self, client: ClientConnection) -> None:
        """No longer count `client` (under the lock): it is being disconnected, and its thread ends."""
        self._clients.pop(client.pid, None)
        self._arrived.pop(client.pid, None)

    def stop(self) -> None:
        """Stop accepting clients (safe from a signal handler); `close` then ends the sessions."""
        self._stopping.set()
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()

    def close(self, timeout: float = 10.0) -> None:
        """End every client's connection, logged in or not, and wait for its session to close (running
        statements stop before their charge: the client is gone)."""
        with self._lock:
            clients, threads = list(self._clients.values()), list(self._threads)
        for client in clients:
            _shut(client)
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))


_ACCEPT_POLL_SECONDS = 0.5
PENDING_PER_ADDRESS = 4  # clients of one address that may be connected without having logged in


def _shut(client: ClientConnection) -> None:
    """End a client's connection: its thread's next read fails and it closes its session."""
    try:
        client.sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _refuse(sock: socket.socket, sqlstate: str, text: str) -> None:
    try:
        sock.sendall(wire.error_response(sqlstate, text, "FATAL"))
    except OSError:
        pass
    sock.close()


def serve(profile_path: str | Path) -> None:
    """`dpsql serve PROFILE`: listen until SIGTERM or Ctrl-C, printing the address once listening."""
    profile = Profile.load(profile_path)
    workers = profile.server.workers
    shared = Path(tempfile.mkdtemp(prefix="dpsql-serve-")) if workers > 1 else None
    try:
        server = Server(profile, shared)
        host, port = server.bind()
        console = _console(server)
        print(f"dpsql: listening on {host}:{port} (PostgreSQL protocol 3.0"
              f"{', TLS required' if server.tls_required else ''}"
              f"{f', {workers} worker processes' if workers > 1 else ''})", flush=True)
        if console is not None:
            print(f"dpsql: console on {console.url}", flush=True)
        if workers == 1:
            _run(server, console)
        else:
            _run_workers(server, workers, console)
    finally:
        if shared is not None:
            shutil.rmtree(shared, ignore_errors=True)
    print("dpsql: stopped", file=sys.stderr, flush=True)
    # Every charge is already committed (the ledger writes each in one transaction); a session still
    # inside DuckDB past `close`'s wait must not hold up (or crash) the interpreter's teardown.
    os._exit(0)


def _console(server: Server):
    """The web console (`dpsql.interfaces.console`), bound, where the profile asks for one ([server] console)."""
    if server.profile.server.console is None:
        return None
    try:
        from dpsql.interfaces.console import Console
    except ImportError as e:
        raise ProfileError(f"[server] console needs the console's libraries ({e.name} is missing): "
                           "pip install 'dpsql[console]'") from None
    return Console(server)


def _run(server: Server, console=None) -> None:
    signal.signal(signal.SIGTERM, lambda *_: server.stop())
    if console is not None:
        console.start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        server.stop()
    server.close()
    if console is not None:
        console.stop()


def _run_workers(server: Server, workers: int, console=None) -> None:
    """Fork the workers (before any session, thread or database exists here) and wait for them; the console,
    if any, is served by this process once they run."""
    pipes = [os.pipe() for _ in range(workers)]
    children = []
    for index in range(workers):
        child = os.fork()
        if child == 0:
            code = 0
            try:
                _die_with_parent()
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the workers
                if console is not None:
                    console.close_listener()
                server.become_worker(index, pipes)
                _run(server)
            except BaseException:  # a worker never returns into the parent's code
                log.exception("worker %d failed", index)
                code = 1
            finally:
                os._exit(code)
        children.append(child)
    server._listener.close()

    def stop(*_) -> None:
        for child in children:
            try:
                os.kill(child, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if console is not None:
        console.start()
    for child in children:
        while True:
            try:
                os.waitpid(child, 0)
                break
            except ChildProcessError:
                break
            except InterruptedError:
                continue
    if console is not None:
        console.stop()


def _die_with_parent() -> None:
    """Linux: this process gets SIGKILL when its parent dies (even by SIGKILL); elsewhere nothing."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


_WORKER_SHIFT = 24  # a client's backend key (its "pid") is worker index << 24 | a counter
