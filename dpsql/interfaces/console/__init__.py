"""The web console of `dpsql serve`: the budget, the charges and the answers, to look at in a browser.

With `[server] console = "host:port"` in the profile, the process that serves PostgreSQL clients
also serves these pages, behind the same credentials: an analyst logs in with the name and
password of their PostgreSQL login, the data owner with `[owner]`'s (each checked on the server
against the profile's SCRAM verifier). The owner's page shows the ledger: the total and each
analyst's allowance, spent and remaining, spending over time, every charge with its statement,
the hash chain's verification, key releases and continual queries; it changes nothing. An
analyst's page shows their own budget and charges and runs their SQL on their dpsql session, as
the PostgreSQL endpoint does, answers drawn with their 95% intervals, EXPLAIN and EXPLAIN PARETO as
charts. Charts are SVG drawn on the server; the pages run no script and load nothing from elsewhere.

Modules: `logins` (passwords, sessions), `app` (the WSGI application and its pages),
`owner_view` and `analyst_view` (what the pages show), `charts` (SVG). Served by Werkzeug's
threaded WSGI server on a socket bound here (TLS with the profile's certificate, when it has one).
"""

from __future__ import annotations

import logging
import socket
import threading

from werkzeug.serving import WSGIRequestHandler, make_server

from dpsql.errors import ProfileError

log = logging.getLogger("dpsql.interfaces.console")

REQUEST_TIMEOUT_SECONDS = 60  # a connection that sends nothing for this long is closed


class _Handler(WSGIRequestHandler):
    """Werkzeug's handler, logging requests at DEBUG on `dpsql.interfaces.console` (not to the terminal), and with a
    certificate, making each connection's TLS handshake in its own thread (under the timeout): a client
    that connects and says nothing must not hold up the others' connections, as a handshake on the
    listening socket would."""

    timeout = REQUEST_TIMEOUT_SECONDS
    _refused = False

    def setup(self) -> None:
        tls = self.server.ssl_context
        if tls is not None:
            self.request.settimeout(self.timeout)
            try:
                self.request = tls.wrap_socket(self.request, server_side=True)
            except OSError:  # not TLS, or too slow: nothing to answer
                self._refused = True
        super().setup()

    def handle(self) -> None:
        if not self._refused:
            super().handle()

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.connection.close()  # (the server closes the socket it accepted, which the TLS one replaced)

    def log_request(self, code="-", size="-") -> None:
        log.debug("%s %s %s", self.address_string(), self.requestline, code)

    def log(self, type: str, message: str, *args) -> None:
        log.debug("%s " + message, self.address_string(), *args)


class Console:
    """The console of one listening `dpsql.interfaces.server.server.Server`: bound at construction, served by `start`."""

    def __init__(self, server):
        from dpsql.interfaces.console.app import ConsoleApp

        host, port = server.profile.server.console
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((host, port))
        except OSError as e:
            listener.close()
            raise ProfileError(f"cannot listen on {host}:{port} for the console: {e.strerror}") from None
        listener.listen(64)
        self.app = ConsoleApp(server)
        self._listener = listener
        self.httpd = make_server(host, port, self.app, threaded=True, request_handler=_Handler, fd=listener.fileno())
        self.httpd.ssl_context = server.tls  # each connection is wrapped by its handler (`_Handler.setup`)
        self.httpd.daemon_threads = True
        self.url = f"{'https' if server.tls is not None else 'http'}://{_url_host(host)}:{listener.getsockname()[1]}/"
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="dpsql-console", daemon=True)
        self._thread.start()

    def close_listener(self) -> None:
        """In a forked worker: drop the inherited socket (the parent serves the console)."""
        self.httpd.socket.close()
        self._listener.close()

    def stop(self) -> None:
        if self._thread is not None:
            self.httpd.shutdown()
        self.httpd.server_close()
        self._listener.close()
        self.app.close()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


__all__ = ["Console"]
