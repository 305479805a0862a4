"""Machine speed calibrations are measured once per machine and survive a new process."""

import json
from dataclasses import dataclass

import pytest

from planner import speed_cache


@dataclass(frozen=True)
class Speeds:
    a: float
    b: float


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DPSQL_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_measured_once_then_read_back(cache_dir):
    calls = []

    def measure():
        calls.append(1)
        return Speeds(1.5, 2.5)

    assert speed_cache.machine_cached("x", Speeds, measure) == Speeds(1.5, 2.5)
    assert speed_cache.machine_cached("x", Speeds, measure) == Speeds(1.5, 2.5)
    assert len(calls) == 1
    assert speed_cache.machine_cached("y", Speeds, measure) == Speeds(1.5, 2.5) and len(calls) == 2


def test_stale_or_corrupt_entries_are_measured_again(cache_dir, monkeypatch):
    speed_cache.machine_cached("x", Speeds, lambda: Speeds(1.0, 1.0))
    path = cache_dir / "speeds.json"
    stored = json.loads(path.read_text())
    (entry,) = stored.values()
    entry["at"] -= speed_cache.MAX_AGE + 1
    path.write_text(json.dumps(stored))
    assert speed_cache.machine_cached("x", Speeds, lambda: Speeds(2.0, 2.0)) == Speeds(2.0, 2.0)
    path.write_text("not json")
    assert speed_cache.machine_cached("x", Speeds, lambda: Speeds(3.0, 3.0)) == Speeds(3.0, 3.0)


def test_an_unwritable_cache_is_ignored(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("DPSQL_CACHE_DIR", str(blocker / "below-a-file"))
    assert speed_cache.machine_cached("x", Speeds, lambda: Speeds(4.0, 4.0)) == Speeds(4.0, 4.0)
