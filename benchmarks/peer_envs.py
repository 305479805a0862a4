"""Peer systems (OpenDP, Tumult Analytics, SmartNoise SQL) in environments of their own.

A peer's packages pin versions dpsql does not use, so each peer lives in its own
virtual environment under `.bench-envs/NAME` (ignored by git), created on request
from the registry with the pins of pyproject's `peer-NAME` extra. A benchmark runs
the peer's side as a subprocess of that environment's Python, speaking JSON on
stdin/stdout, and skips the peer cleanly when the environment is absent.

    python -m benchmarks.peer_envs install opendp tumult smartnoise
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENVS = ROOT / ".bench-envs"
PEERS = ("opendp", "tumult", "smartnoise")
MODES = {"smartnoise": ("pure",)}  # a peer's privacy modes where not both "pure" and "zcdp" (SmartNoise: Laplace, ε/k, δ/k)


def python(peer: str) -> Path | None:
    """The peer environment's interpreter, or None when it was not installed."""
    exe = ENVS / peer / "bin" / "python"
    return exe if exe.exists() and (ENVS / peer / ".installed").exists() else None


def requirements(peer: str) -> list[str]:
    """The pins of pyproject's `peer-<peer>` extra."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["optional-dependencies"][f"peer-{peer}"]


def install(peer: str) -> Path:
    """Create `.bench-envs/<peer>` and install the peer's pins into it."""
    target = ENVS / peer
    venv.create(target, with_pip=True, clear=True)
    exe = target / "bin" / "python"
    subprocess.run([exe, "-m", "pip", "install", "--quiet", *requirements(peer)], check=True)
    (target / ".installed").touch()
    return exe


def run(peer: str, script: Path, request: dict, timeout: float = 3600) -> dict | None:
    """Run `script` in the peer's environment with `request` as JSON on stdin; its JSON reply, or None if absent."""
    exe = python(peer)
    if exe is None:
        return None
    done = subprocess.run(
        [exe, str(script)], input=json.dumps(request), capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise RuntimeError(f"{peer} side failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # the reply is the last line


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "install" or not set(sys.argv[2:]) <= set(PEERS):
        sys.exit(f"usage: python -m benchmarks.peer_envs install {' '.join(PEERS)}")
    for name in sys.argv[2:]:
        print(name, "->", install(name))
