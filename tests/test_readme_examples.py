"""The README's examples run as written, as a newcomer would run them.

The fenced blocks of the sections in `RUN` run in README order in one fresh
directory: `sh` blocks with bash (standard input empty, so `dpsql shell` runs
non-interactively), `python` blocks in this interpreter (one namespace per section,
the reader's Python session: its connections close at the section's end), `sql`
blocks through that session's cursor `cur`, the `toml` catalog is compared with the
one `dpsql demo --write` wrote, and the `text` transcript is replayed through the
shell, its output compared with the README's once numbers are masked (they vary
with the noise).

`NOT_RUN` names the sections whose examples are not run, and why; an example in any
other section fails the test until it is run or listed there.
"""

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import dpsql
from dpsql.interfaces.shell import demo_paths

README = Path(__file__).resolve().parents[1] / "README.md"
RUN = ("## A 5-minute tour", "## The SQL it accepts", "## Interactive shell", "## Deploying to analysts",
       "## DuckDB extension")
NOT_RUN = {
    "## Set-up: two commands": "`make demo` and `make test`: this suite is what they run",
    "## How it works": "`dpsql synth` on a generated 1M-row table takes minutes; the second line is a template",
    "## Privacy semantics": "the privacy-unit catalog illustrates other tables",
    "## Scaling out": "it needs a Spark cluster",
    "## Serving PostgreSQL clients": "it starts a server on a fixed port: tests/test_serve.py runs these clients "
                                     "against a real server",
}
PROMPT, CONTINUATION = "dpsql> ", "  ...> "


def sections() -> dict[str, list[tuple[str, str]]]:
    """Title of each `## ` section that has fenced blocks -> (language, code) of each, in order."""
    found = {}
    for part in re.split(r"^(?=## )", README.read_text(), flags=re.M):
        blocks = re.findall(r"^```(\w+)\n(.*?)^```", part, re.S | re.M)
        if blocks:
            found[part.splitlines()[0]] = blocks
    return found


def skeleton(line: str) -> str:
    """A line with numbers masked, table rules shortened and spacing collapsed."""
    line = re.sub(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?", "9", line)
    line = re.sub(r"[-+]{3,}", "---", line)
    return " ".join(line.split())


def replay(transcript: str, env: dict, cwd: Path) -> None:
    typed, expected = [], []
    for line in transcript.splitlines():
        if line.startswith((PROMPT, CONTINUATION)):
            typed.append(line[len(PROMPT):])
        else:
            expected.append(line)
    done = subprocess.run(["dpsql", "shell", "census.duckdb", "--catalog", "catalog.toml"],
                          input="\n".join(typed) + "\n", stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, cwd=cwd, env=env, timeout=120)
    assert [skeleton(x) for x in done.stdout.splitlines()] == [skeleton(x) for x in expected]


def run_sql(cursor: dpsql.Cursor, script: str) -> None:
    """A SQL block, as the README says to run it: the whole script through the cursor."""
    cursor.execute(script)
    results = 1
    while cursor.nextset():
        results += 1
    assert results == script.upper().count("SELECT ")


def test_every_example_is_run_or_listed():
    assert set(sections()) == set(RUN) | set(NOT_RUN)


def _seed_demo_cache(written: Path, env: dict) -> None:
    """Put the table `dpsql demo --write` just wrote where `dpsql shell` (no database) looks for the demo
    database: the same generated million rows, not generated twice (tests/test_shell.py tests the generation)."""
    database = Path(env["XDG_CACHE_HOME"]) / "dpsql" / demo_paths()[0].name
    database.parent.mkdir(parents=True)
    shutil.copyfile(written, database)


def test_readme_examples_run(tmp_path, monkeypatch, capsys):
    found = sections()
    bin_dir = str(Path(sys.executable).parent)
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""),
               XDG_CACHE_HOME=str(tmp_path / "cache"), XDG_STATE_HOME=str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    for title in RUN:
        session = {"__name__": "readme"}
        for lang, code in found[title]:
            if lang == "sh":
                done = subprocess.run(["bash", "-e", "-c", code], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                                      capture_output=True, text=True, timeout=300)
                assert done.returncode == 0, f"sh block failed:\n{code}\n{done.stdout}\n{done.stderr}"
                assert "Traceback" not in done.stderr
                if code.startswith("dpsql demo --write census.duckdb"):
                    _seed_demo_cache(tmp_path / "census.duckdb", env)
            elif lang == "python":
                exec(compile(code, f"{README} ({title})", "exec"), session)
            elif lang == "sql":
                run_sql(session["cur"], code)
            elif lang == "toml":
                assert tomllib.loads(code) == tomllib.loads((tmp_path / "catalog.toml").read_text())
            elif lang == "text":
                replay(code, env, tmp_path)
            else:
                raise AssertionError(f"{title}: no way to run a {lang} block")
        for value in session.values():  # the reader's Python session ends
            if isinstance(value, dpsql.Connection):
                value.close()
    assert "n_stderr" in capsys.readouterr().out
    assert (tmp_path / "regions.csv").read_text().splitlines()[0] == "region,n,n_stderr"
