"""`dpsql serve`: a PostgreSQL-wire endpoint where analysts get DP answers with their own budgets.

The data owner's profile (`dpsql.deployment.profile`) names the database, catalog and ledger, where the
server listens ([server]) and who may connect: each analyst with a password verifier and a
budget of their own. Analysts connect with any PostgreSQL client (psql, psycopg, SQLAlchemy,
pandas, DBeaver, jupysql) and never see a file; every charge is in the one ledger, in their name.

Modules: `wire` (the protocol's messages), `auth` (SCRAM-SHA-256 verifiers, throttling),
`pgcompat` (what clients expect beyond SQL: settings, transactions, catalog functions, types),
`client` (one connection's protocol state machine on a dpsql session), `server` (the listener).
"""

from __future__ import annotations

import argparse
import getpass
import sys


def add_parsers(sub) -> None:
    """The `serve` and `passwd` subcommands of the `dpsql` command line."""
    serve = sub.add_parser("serve", help="serve the profile's analysts over the PostgreSQL protocol",
                           description="Listen for PostgreSQL clients (psql, psycopg, SQLAlchemy, ...) and answer "
                                       "their SQL with DP, each analyst within their own budget.")
    serve.add_argument("profile", help="the data owner's deployment profile (TOML), with a [server] section and "
                                       "a password verifier for each analyst who may connect")
    serve.set_defaults(run=_serve)
    passwd = sub.add_parser("passwd", help="print the profile line with an analyst's password verifier "
                                           "(SCRAM-SHA-256; the password is read from the terminal or stdin)")
    passwd.add_argument("analyst", help="the analyst's name (their PostgreSQL user name)")
    passwd.set_defaults(run=_passwd)


def _serve(args: argparse.Namespace) -> int:
    from dpsql.interfaces.server.server import serve

    serve(args.profile)
    return 0


def _passwd(args: argparse.Namespace) -> int:
    from dpsql.interfaces.server.auth import scram_verifier

    if sys.stdin.isatty():
        password = getpass.getpass(f"password for {args.analyst}: ")
        if getpass.getpass("again: ") != password:
            print("error: the passwords differ", file=sys.stderr)
            return 1
    else:
        password = sys.stdin.readline().rstrip("\n")
    if not password:
        print("error: empty password", file=sys.stderr)
        return 1
    print(f"password = \"{scram_verifier(password)}\"  # [analysts.{args.analyst}]")
    return 0
