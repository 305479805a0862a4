"""The web console (`dpsql.interfaces.console`): the same privacy rules as the PostgreSQL endpoint, over HTTP.

Most tests drive the console's WSGI application in this process (Werkzeug's test client) on a
`Server` of a real profile, so each request goes through the same login checks, sessions and
analyst sessions as in `dpsql serve`; the last ones start a real `dpsql serve` with a console.
"""

from __future__ import annotations

import re
import shutil
import socket
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from console_deployment import OWNER, OWNER_PASSWORD, ServedConsole, with_console

pytest.importorskip("werkzeug")
pytest.importorskip("jinja2")

from werkzeug.test import Client  # noqa: E402

from dpsql.interfaces.console import Console  # noqa: E402
from dpsql.interfaces.console.app import LOGIN_COOKIE, SESSION_COOKIE, ConsoleApp  # noqa: E402
from dpsql.errors import ProfileError  # noqa: E402
from dpsql.budget.ledger import Ledger  # noqa: E402
from dpsql.deployment.profile import Profile  # noqa: E402
from dpsql.interfaces.server.auth import scram_verifier  # noqa: E402
from dpsql.interfaces.server.server import Server  # noqa: E402

COUNT_BY_SEX = "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY sex"


@pytest.fixture()
def console(tmp_path):
    app = ConsoleApp(Server(Profile.load(with_console(tmp_path))))
    app.root = tmp_path
    yield app
    app.close()


def charges(root: Path) -> list:
    path = root / "census.duckdb.dpsql-state"
    return Ledger.existing(str(path)).charges() if path.exists() else []


def csrf_of(page: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', page).group(1)


def log_in(app, name: str, password: str) -> tuple[Client, object]:
    client = Client(app)
    form = client.get("/login")
    response = client.post("/login", data={"name": name, "password": password, "csrf": csrf_of(form.text)})
    return client, response


def run_sql(client: Client, sql: str):
    page = client.get("/analyst")
    return client.post("/analyst", data={"sql": sql, "csrf": csrf_of(page.text)})


def test_unauthenticated_requests_get_nothing(console):
    client = Client(console)
    for path in ("/", "/owner", "/analyst"):
        response = client.get(path)
        assert response.status_code == 303 and response.headers["Location"] == "/login"
        assert "people" not in response.text and "ε" not in response.text
    response = client.post("/analyst", data={"sql": COUNT_BY_SEX, "csrf": "x"})
    assert response.status_code == 403 and "people" not in response.text
    assert client.post("/logout").status_code == 403
    forged = Client(console)
    forged.set_cookie(SESSION_COOKIE, "made-up-token")
    assert forged.get("/owner").status_code == 303
    assert charges(console.root) == []  # nothing ran, nothing was charged


def test_passwords_are_checked_against_the_verifiers_and_failures_are_throttled(console):
    for name, password in [("alice", "wrong"), ("nobody", "alice-pw"), ("olga", "alice-pw"), ("", "")]:
        client, response = log_in(console, name, password)
        assert response.status_code == 401 and "wrong name or password" in response.text
        assert SESSION_COOKIE + "=" not in response.headers.get("Set-Cookie", "")
    # the fourth failure for one (address, name) waits, as the PostgreSQL endpoint's logins do (shared counts)
    for _ in range(3):
        log_in(console, "bob", "wrong")
    _, response = log_in(console, "bob", "bob-pw")
    assert response.status_code == 401 and "too many failed logins" in response.text
    # the login form's CSRF token must come back with the cookie that carried it
    client = Client(console)
    client.get("/login")
    response = client.post("/login", data={"name": "alice", "password": "alice-pw", "csrf": "guessed"})
    assert response.status_code == 403 and SESSION_COOKIE not in response.headers.get("Set-Cookie", "")


def test_session_cookie_is_random_httponly_and_strict_and_ends_at_logout(console):
    client, response = log_in(console, "alice", "alice-pw")
    assert response.status_code == 303 and response.headers["Location"] == "/analyst"
    cookie = next(c for c in response.headers.getlist("Set-Cookie") if c.startswith(SESSION_COOKIE + "="))
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert len(cookie.split(";")[0].split("=", 1)[1]) >= 40  # 256 random bits
    _, again = log_in(console, "alice", "alice-pw")
    assert again.headers["Set-Cookie"] != response.headers["Set-Cookie"]  # a new token per login
    page = client.get("/analyst")
    assert page.status_code == 200 and "no-store" in page.headers["Cache-Control"]
    assert "script-src" not in page.headers["Content-Security-Policy"]  # default-src 'none': no script runs
    assert client.post("/logout", data={"csrf": csrf_of(page.text)}).status_code == 303
    assert client.get("/analyst").status_code == 303  # the token is no longer a session
    assert LOGIN_COOKIE != SESSION_COOKIE


def test_an_analyst_sees_their_answers_charged_first_and_only_their_own_charges(console):
    bob, _ = log_in(console, "bob", "bob-pw")
    response = run_sql(bob, "SELECT COUNT(*) AS bobs_secret_question FROM people WHERE age < 30")
    assert response.status_code == 200 and "charged ε=0.1" in response.text
    alice, _ = log_in(console, "alice", "alice-pw")
    response = run_sql(alice, COUNT_BY_SEX)
    assert response.status_code == 200
    assert [(c.who, c.statement) for c in charges(console.root)] == [
        ("bob", "SELECT COUNT(*) AS bobs_secret_question FROM people WHERE age < 30"), ("alice", COUNT_BY_SEX)]
    page = response.text
    assert "charged ε=0.1" in page and "±" in page
    assert page.count('class="bar"') == 2 and page.count('class="interval"') == 2  # F and M with their intervals
    assert "bobs_secret_question" not in page and "bob" not in page.replace("bobs", "")
    owner_page = alice.get("/owner")
    assert owner_page.status_code == 403 and "bobs_secret_question" not in owner_page.text


def test_with_stderr_columns_the_bars_are_labelled_by_the_groups_only(console):
    alice, _ = log_in(console, "alice", "alice-pw")
    page = run_sql(alice, "SET dpsql.stderr = on; " + COUNT_BY_SEX).text
    assert "<th>n_stderr</th>" in page and page.count('class="bar"') == 2
    labels = re.findall(r'<rect class="bar"[^>]*><title>([^<]*)</title>', page)
    assert [label.split(":")[0] for label in labels] == ["F", "M"]


def test_refused_statements_spend_nothing(console):
    bob, _ = log_in(console, "bob", "bob-pw")
    refused = [
        "SET dpsql.query_epsilon = 3; SELECT COUNT(*) FROM people",  # over bob's own ε = 0.25 in either noise
        "SELECT COUNT(*) FROM people WHERE sex = 'X'",  # not a declared value
        "SELECT ssn FROM people",  # rows of a protected table
        f"ATTACH '{console.root / 'census.duckdb.dpsql-state'}' AS ledger",  # the owner's files
        "SELECT * FROM read_csv('/etc/passwd')",
    ]
    for sql in refused:
        response = run_sql(bob, sql)
        assert response.status_code == 400 and 'id="error"' in response.text, sql
        assert "ssn-" not in response.text and "root:" not in response.text
    assert charges(console.root) == []
    page = run_sql(bob, "SET dpsql.query_epsilon = 0.1").text
    assert '<td id="spent">ε=0</td>' in page  # spent: nothing


def test_posts_need_the_sessions_csrf_token_and_its_origin(console):
    alice, _ = log_in(console, "alice", "alice-pw")
    token = csrf_of(alice.get("/analyst").text)
    assert alice.post("/analyst", data={"sql": COUNT_BY_SEX}).status_code == 403
    assert alice.post("/analyst", data={"sql": COUNT_BY_SEX, "csrf": token + "x"}).status_code == 403
    assert alice.post("/analyst", data={"sql": COUNT_BY_SEX, "csrf": token},
                      headers={"Origin": "https://evil.example"}).status_code == 403
    assert alice.post("/analyst", data={"sql": COUNT_BY_SEX, "csrf": token},
                      headers={"Origin": "null"}).status_code == 403  # an opaque origin is another's
    bob, _ = log_in(console, "bob", "bob-pw")
    assert bob.post("/analyst", data={"sql": COUNT_BY_SEX, "csrf": token}).status_code == 403  # alice's token
    assert charges(console.root) == []
    assert alice.post("/analyst", data={"sql": COUNT_BY_SEX, "csrf": token},
                      headers={"Origin": "http://localhost"}).status_code == 200


def test_explain_and_pareto_are_charts_and_spend_nothing(console):
    alice, _ = log_in(console, "alice", "alice-pw")
    page = run_sql(alice, "EXPLAIN SELECT age, COUNT(*) FROM people GROUP BY age").text
    assert "Total cost" in page and "expected error against the budget" in page and 'class="series"' in page
    page = run_sql(alice, "EXPLAIN PARETO SELECT age, COUNT(*) FROM people GROUP BY age").text
    assert "ε–error front of people" in page and 'class="series"' in page
    assert charges(console.root) == []


def test_the_owner_page_shows_budgets_charges_and_the_chain(console):
    alice, _ = log_in(console, "alice", "alice-pw")
    run_sql(alice, COUNT_BY_SEX)
    owner, response = log_in(console, OWNER, OWNER_PASSWORD)
    assert response.headers["Location"] == "/owner"
    page = owner.get("/owner").text
    assert "intact: hash chain and budget verified (1 charge" in page
    assert Ledger.existing(str(console.root / "census.duckdb.dpsql-state")).head() in page
    assert COUNT_BY_SEX in page and "ε spent over time" in page and "ε remaining over time" in page
    remaining = re.search(r'<div class="chart" id="remaining">.*?</svg>', page, re.S).group(0)
    assert re.findall(r'class="series"[^>]*><title>([^<]*)</title>', remaining) == ["all analysts", "alice", "bob",
                                                                                   "carol"]
    for name, allowance in (("alice", "ε=2,"), ("bob", "ε=0.25,"), ("carol", "ε=1,")):
        assert re.search(rf"<td>{name}</td><td>{re.escape(allowance)}", page)
    token = csrf_of(page)  # the owner's own session token: still, the owner runs no SQL here
    assert owner.post("/analyst", data={"sql": COUNT_BY_SEX, "csrf": token}).status_code == 403
    assert owner.get("/analyst").status_code == 403 and len(charges(console.root)) == 1
    # an altered ledger: said so, and its charges are not listed
    import duckdb

    con = duckdb.connect(str(console.root / "census.duckdb.dpsql-state"))
    con.execute("UPDATE dpsql_ledger SET statement = 'SELECT 1'")
    con.close()
    page = owner.get("/owner").text
    assert "TAMPERED" in page and COUNT_BY_SEX not in page and "charge 1 or its measurements were altered" in page


def test_the_profile_guards_the_console(tmp_path):
    profile = with_console(tmp_path)
    text = profile.read_text()
    profile.write_text(text.replace('console = "127.0.0.1:0"', 'console = "0.0.0.0:8080"'))
    with pytest.raises(ProfileError, match="not a loopback address"):
        Profile.load(profile)
    profile.write_text(text.replace('name = "olga"', 'name = "alice"'))
    with pytest.raises(ProfileError, match="an analyst's too"):
        Profile.load(profile)
    profile.write_text(re.sub(r'(\[owner\]\nname = "olga"\n)password = "[^"]+"', r'\1password = "md5abc"', text))
    with pytest.raises(ProfileError, match=r"\[owner\] password is an md5 verifier"):
        Profile.load(profile)
    profile.write_text(text.replace('console = "127.0.0.1:0"\n', ""))
    assert Profile.load(profile).server.console is None and Profile.load(profile).owner.name == "olga"


@pytest.mark.parametrize("workers", [1, 2])
def test_dpsql_serve_serves_the_console_beside_postgresql(tmp_path, workers):
    with ServedConsole(with_console(tmp_path, f"\nworkers = {workers}")) as served:
        with urllib.request.urlopen(served.url + "login", timeout=10) as response:
            assert response.status == 200 and "Log in" in response.read().decode()
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(served.url + "analyst", data=b"sql=SELECT+1"), timeout=10)
        assert refused.value.code == 403


def test_with_a_certificate_the_console_is_https_and_its_cookies_secure(tmp_path):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "server.crt", tmp_path / "server.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    profile = with_console(tmp_path, f'\ntls_cert = "{cert}"\ntls_key = "{key}"')
    profile.write_text(profile.read_text().replace('console = "127.0.0.1:0"', 'console = "0.0.0.0:0"'))
    console = Console(Server(Profile.load(profile)))  # anywhere, now that passwords travel encrypted
    console.start()
    try:
        assert console.url.startswith("https://")
        port = console.url.rsplit(":", 1)[1].rstrip("/")
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/login", context=context, timeout=10) as response:
            assert response.status == 200 and "Secure" in response.headers["Set-Cookie"]
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/login", timeout=10)  # no plain HTTP beside it
        silent = socket.create_connection(("127.0.0.1", int(port)))  # connects, never starts its handshake
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/login", context=context, timeout=10) as response:
            assert response.status == 200  # neither the failed handshake nor the silent client hold it up
        silent.close()
    finally:
        console.stop()


KEYS_AND_STREAM = """
[tables.visits]
privacy_unit = "user_id"
max_rows_per_unit = 2
[tables.visits.columns]
url = { type = "key" }

[tables.signups]
privacy_unit = "user_id"
max_rows_per_unit = 3
time = "signup_time"
append_only = true
[tables.signups.columns]
region = { type = "categorical", values = ["N", "S"] }
"""


def test_the_owner_page_lists_key_releases_and_continual_queries(tmp_path):
    import duckdb

    import dpsql

    con = duckdb.connect(str(tmp_path / "web.duckdb"))
    con.execute("CREATE TABLE visits AS SELECT i AS user_id, ['/home', '/cart', '/help'][i % 3 + 1] AS url "
                "FROM range(6000) t(i)")
    con.execute("CREATE TABLE signups AS SELECT i AS user_id, TIMESTAMP '2025-01-06' + (i % 60) * INTERVAL 1 DAY "
                "AS signup_time, CASE WHEN i % 3 = 0 THEN 'S' ELSE 'N' END AS region FROM range(3000) t(i)")
    con.close()
    (tmp_path / "catalog.toml").write_text(KEYS_AND_STREAM)
    profile = tmp_path / "profile.toml"
    profile.write_text(f"""
[data]
database = "web.duckdb"
catalog = "catalog.toml"
[budget]
epsilon = 10
delta = 1e-6
[server]
listen = "127.0.0.1:0"
console = "127.0.0.1:0"
[analysts.alice]
epsilon = 5
password = "{scram_verifier('alice-pw')}"
[owner]
name = "{OWNER}"
password = "{scram_verifier(OWNER_PASSWORD)}"
""")
    with dpsql.connect(profile=str(profile), analyst="alice") as conn:
        cur = conn.cursor()
        cur.execute("SELECT url, COUNT(*) AS n FROM visits GROUP BY url")  # releases the keys (a δ of its own)
        cur.execute("CREATE CONTINUAL QUERY weekly AS SELECT region, COUNT(*) AS n FROM signups GROUP BY region "
                    "EMIT EVERY INTERVAL '7 days' ON signup_time FROM '2025-01-06' FOR 20 RELEASES "
                    "WITH (epsilon = 1)")
        cur.execute("EMIT weekly")
        mine = conn.session.budget().spent
    app = ConsoleApp(Server(Profile.load(profile)))
    try:
        owner, _ = log_in(app, OWNER, OWNER_PASSWORD)
        page = owner.get("/owner").text
    finally:
        app.close()
    keys = re.search(r'<table class="rows" id="keys">.*?</table>', page, re.S).group(0)
    cells = re.findall(r"<td>([^<]*)</td>", keys)
    assert cells[2:6] == ["alice", "visits", "url", "3"] and set(cells[6].split(", ")) == {"/home", "/cart", "/help"}
    assert float(cells[7]) > 0  # the δ the release spent
    continual = re.search(r'<table class="rows" id="continual">.*?</table>', page, re.S).group(0)
    cells = re.findall(r"<td>([^<]*)</td>", continual)
    assert cells[:3] == ["weekly", "signups", "alice"] and cells[4:7] == ["7 days", "1", "20"]
    assert "δ spent by key releases" in page
    # alice's spent counts the capacity her key release took, as her own budget does (ε at the δ left)
    assert re.search(rf"<td>alice</td><td>ε=5[.\d]*, [^<]*</td><td>{re.escape(str(mine))}</td>", page)


def test_idle_sessions_end_and_large_posts_are_refused(console, monkeypatch):
    alice, _ = log_in(console, "alice", "alice-pw")
    token = csrf_of(alice.get("/analyst").text)
    response = alice.post("/analyst", data={"sql": "SELECT 1 -- " + "x" * (2 << 20), "csrf": token})
    assert response.status_code == 413 and charges(console.root) == []
    monkeypatch.setattr("dpsql.interfaces.console.logins.IDLE_SECONDS", 0.0)
    assert alice.get("/analyst").status_code == 303  # unused for longer than the idle limit: logged out
