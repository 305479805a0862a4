"""Machine speed calibrations kept across processes, so only a machine's first EXPLAIN measures them.

A calibration (`planner.timing.release_speeds`, `dpsql.backends.scan_speed`) times
dpsql's own code on synthetic inputs; its result depends on the machine, not on any
data. It is stored as JSON in `$DPSQL_CACHE_DIR`, by default the cache directory the shell
keeps its demo database in (`$XDG_CACHE_HOME/dpsql`, `~/.cache/dpsql` without it), keyed by
the calibration's name, the host, its CPU count and the Python version, and measured
again after `MAX_AGE` seconds. A cache that cannot be read or written is ignored.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from dataclasses import astuple
from pathlib import Path
from typing import Callable, TypeVar

MAX_AGE = 7 * 24 * 3600
_VERSION = 1  # bump when a calibration's meaning changes

T = TypeVar("T")


def _path() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dpsql"
    return Path(os.environ.get("DPSQL_CACHE_DIR") or default) / "speeds.json"


def _key(name: str) -> str:
    return f"{name}/v{_VERSION}/{platform.node()}/{os.cpu_count()}/py{sys.version_info[0]}.{sys.version_info[1]}"


def machine_cached(name: str, kind: Callable[..., T], measure: Callable[[], T]) -> T:
    """`kind(*stored values)` when this machine's calibration `name` is cached and fresh, else `measure()`, stored."""
    path, key = _path(), _key(name)
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        stored = {}
    entry = stored.get(key) if isinstance(stored, dict) else None
    if isinstance(entry, dict) and time.time() - float(entry.get("at", 0)) < MAX_AGE:
        try:
            return kind(*(float(v) for v in entry["values"]))
        except (KeyError, TypeError, ValueError):
            pass
    value = measure()
    stored = stored if isinstance(stored, dict) else {}
    stored[key] = {"at": time.time(), "values": list(astuple(value))}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(stored))
        temporary.replace(path)
    except OSError:
        pass
    return value


__all__ = ["MAX_AGE", "machine_cached"]
