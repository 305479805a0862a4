"""The console's web application (WSGI, on Werkzeug, pages from Jinja2 templates with autoescaping).

Pages: `/login`, `/owner` (the data owner only), `/analyst` (an analyst only: GET shows their
budget, POST `/analyst` runs their SQL), `/logout`. Without a live session a page redirects to the
login and a POST is refused; every POST carries the session's CSRF token (the login form one of
its own, in a cookie), and one whose Origin is another site's is refused. Pages are not cached,
may not be framed, and load nothing but the console's stylesheet (Content-Security-Policy): there
is no script at all.
"""

from __future__ import annotations

import logging
import secrets
from importlib import resources

from jinja2 import Environment, PackageLoader, select_autoescape
from werkzeug.exceptions import HTTPException
from werkzeug.routing import Map, Rule
from werkzeug.utils import redirect
from werkzeug.wrappers import Request, Response

from dpsql import errors
from dpsql.interfaces.console import analyst_view
from dpsql.interfaces.console.logins import ANALYST, OWNER, Login, LoginRefused, Logins
from dpsql.interfaces.console.owner_view import owner_view

log = logging.getLogger("dpsql.interfaces.console")

SESSION_COOKIE = "dpsql_console"
LOGIN_COOKIE = "dpsql_login"  # the login form's CSRF token
MAX_REQUEST_BYTES = 1 << 20
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # (with no-referrer, browsers send the pages' own POSTs as Origin: null)
    "Cache-Control": "no-store",
}


class ConsoleRequest(Request):
    max_content_length = MAX_REQUEST_BYTES
    max_form_memory_size = MAX_REQUEST_BYTES


class ConsoleApp:
    """The WSGI application of one `dpsql serve` (its `Server`: profile, verifiers, throttles, TLS)."""

    def __init__(self, server):
        self.server = server
        self.logins = Logins(server)
        self.secure = server.tls is not None
        self.templates = Environment(loader=PackageLoader("dpsql.interfaces.console", "templates"),
                                     autoescape=select_autoescape(default=True))
        self.style = resources.files("dpsql.interfaces.console").joinpath("static", "console.css").read_bytes()
        self.urls = Map([
            Rule("/", endpoint="home", methods=["GET"]),
            Rule("/login", endpoint="login", methods=["GET", "POST"]),
            Rule("/logout", endpoint="logout", methods=["POST"]),
            Rule("/owner", endpoint="owner", methods=["GET"]),
            Rule("/analyst", endpoint="analyst", methods=["GET", "POST"]),
            Rule("/console.css", endpoint="style", methods=["GET"]),
        ])

    def __call__(self, environ, start_response):
        request = ConsoleRequest(environ)
        try:
            endpoint, _ = self.urls.bind_to_environ(environ).match()
            response = getattr(self, "_" + endpoint)(request)
        except HTTPException as e:  # no such page or method, a request too large, a malformed form
            response = e.get_response()
        except Exception:  # a page must never show a Python exception: the owner's log has it
            log.exception("console request %s %s failed", request.method, request.path)
            response = self._page("error.html", None, 500, message="internal error (logged for the data owner)")
        response.headers.update(HEADERS)
        return response(environ, start_response)

    def close(self) -> None:
        self.logins.close()

    # --- pages ----------------------------------------------------------------------------
    def _home(self, request: Request) -> Response:
        login = self._login_of(request)
        return redirect("/login" if login is None else "/owner" if login.role == OWNER else "/analyst", 303)

    def _login(self, request: Request) -> Response:
        if request.method == "GET":
            return self._login_form(None, 200)
        if not self._same_origin(request) or not _tokens_match(request.form.get("csrf"),
                                                                request.cookies.get(LOGIN_COOKIE)):
            return self._login_form("the login form expired: try again", 403)
        try:
            token, login = self.logins.log_in(request.form.get("name", ""), request.form.get("password", ""),
                                              request.remote_addr or "")
        except LoginRefused as e:
            return self._login_form(str(e), 401)
        response = redirect("/owner" if login.role == OWNER else "/analyst", 303)
        response.set_cookie(SESSION_COOKIE, token, httponly=True, samesite="Strict", secure=self.secure, path="/")
        response.delete_cookie(LOGIN_COOKIE, path="/login", httponly=True, samesite="Strict", secure=self.secure)
        return response

    def _logout(self, request: Request) -> Response:
        login = self._login_of(request)
        if login is None or not self._posted(request, login):
            return self._forbidden()
        self.logins.log_out(request.cookies[SESSION_COOKIE])
        response = redirect("/login", 303)
        response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="Strict", secure=self.secure)
        return response

    def _owner(self, request: Request) -> Response:
        login = self._login_of(request)
        if login is None:
            return redirect("/login", 303)
        if login.role != OWNER:
            return self._forbidden()
        try:
            view = owner_view(self.server.profile)
        except errors.Error as e:
            return self._page("error.html", login, 500, message=str(e))
        return self._page("owner.html", login, 200, view=view)

    def _analyst(self, request: Request) -> Response:
        login = self._login_of(request)
        if login is None:
            return redirect("/login", 303) if request.method == "GET" else self._forbidden()
        if login.role != ANALYST:
            return self._forbidden()
        answers, error, sql = [], None, ""
        if request.method == "POST":
            if not self._posted(request, login):
                return self._forbidden()
            sql = request.form.get("sql", "")
            if not login.running.acquire(blocking=False):
                error = "a statement of yours is running already: wait for its answer"
            else:
                try:
                    if login.connection is not None and sql.strip():
                        answers, error = analyst_view.run(login.connection, sql)
                finally:
                    login.running.release()
        with login.running:
            if login.connection is None:  # the session ended meanwhile (logged out elsewhere, expired)
                return redirect("/login", 303)
            budget = analyst_view.budget(login.connection, login.name)
        return self._page("analyst.html", login, 400 if error else 200, budget=budget, answers=answers, error=error,
                          sql=sql)

    def _style(self, request: Request) -> Response:
        return Response(self.style, mimetype="text/css")

    # --- helpers --------------------------------------------------------------------------
    def _login_of(self, request: Request) -> Login | None:
        return self.logins.find(request.cookies.get(SESSION_COOKIE))

    def _posted(self, request: Request, login: Login) -> bool:
        """A POST of this session's own page: same origin, its CSRF token."""
        return self._same_origin(request) and login.csrf_matches(request.form.get("csrf"))

    @staticmethod
    def _same_origin(request: Request) -> bool:
        """False when the browser says the request comes from another origin (Origin header, when sent)."""
        origin = request.headers.get("Origin")
        return origin is None or origin == request.host_url.rstrip("/")

    def _login_form(self, message: str | None, status: int) -> Response:
        token = secrets.token_urlsafe(32)
        response = self._page("login.html", None, status, message=message, csrf=token,
                              owner=self.logins.owner is not None)
        response.set_cookie(LOGIN_COOKIE, token, httponly=True, samesite="Strict", secure=self.secure, path="/login")
        return response

    def _forbidden(self) -> Response:
        return self._page("error.html", None, 403, message="forbidden: log in as who may see this page")

    def _page(self, template: str, login: Login | None, status: int, **values) -> Response:
        html = self.templates.get_template(template).render(login=login, **values)
        return Response(html, status=status, mimetype="text/html")


def _tokens_match(given: str | None, expected: str | None) -> bool:
    return bool(given) and bool(expected) and secrets.compare_digest(given.encode(), expected.encode())
