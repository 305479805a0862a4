"""The census deployment (tests/served.py) with the web console: its profile, and a real `dpsql serve` of it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from served import census

from dpsql.interfaces.server.auth import scram_verifier

OWNER, OWNER_PASSWORD = "olga", "owner-pw"


def with_console(root: Path, extra: str = "") -> Path:
    """The census deployment's profile with a console on any free port (`extra`: more [server] keys) and an
    owner login."""
    census(root)
    profile = root / "profile.toml"
    profile.write_text(profile.read_text().replace('listen = "127.0.0.1:0"', f'listen = "127.0.0.1:0"\n'
                                                   f'console = "127.0.0.1:0"{extra}')
                       + f'\n[owner]\nname = "{OWNER}"\npassword = "{scram_verifier(OWNER_PASSWORD)}"\n')
    return profile


class ServedConsole:
    """`dpsql serve PROFILE` in a subprocess, from its start until the end of the `with` block; `url`: the console's."""

    def __init__(self, profile: Path):
        self.profile = profile
        self.url = ""

    def __enter__(self) -> "ServedConsole":
        self.process = subprocess.Popen([sys.executable, "-m", "dpsql.interfaces.cli", "serve", str(self.profile)],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first, second = self.process.stdout.readline(), self.process.stdout.readline()
        match = re.search(r"console on (https?://\S+/)", second)
        assert "listening on" in first and match, first + second + self.process.stderr.read()
        self.url = match.group(1)
        return self

    def __exit__(self, *_) -> None:
        self.process.terminate()
        self.process.wait(timeout=20)
