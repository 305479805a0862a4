"""The README's shell and extension examples run as written.

The fenced blocks of the "Interactive shell" and "DuckDB extension" sections
run in order in one directory: `python` blocks in this interpreter, `sh`
blocks with bash (standard input empty, so `dpsql shell` runs non-interactively),
and the `text` transcript is replayed through the shell, its output compared
with the README's once numbers are masked (they vary with the noise).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
SECTIONS = ("## Interactive shell", "## DuckDB extension")
PROMPT, CONTINUATION = "dpsql> ", "  ...> "


def blocks() -> list[tuple[str, str]]:
    """(language, code) of each fenced block in the sections, in order."""
    text = README.read_text()
    start = text.index(SECTIONS[0])
    end = text.index("\n## ", text.index(SECTIONS[1]) + 1)
    return re.findall(r"^```(\w+)\n(.*?)^```", text[start:end], re.S | re.M)


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


def test_readme_sections_run(tmp_path, monkeypatch, capsys):
    found = blocks()
    assert {lang for lang, _ in found} == {"python", "sh", "text"}
    bin_dir = str(Path(sys.executable).parent)
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""),
               XDG_CACHE_HOME=str(tmp_path / "cache"), XDG_STATE_HOME=str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    for lang, code in found:
        if lang == "python":
            exec(compile(code, str(README), "exec"), {"__name__": "readme"})
        elif lang == "text":
            replay(code, env, tmp_path)
        else:
            done = subprocess.run(["bash", "-e", "-c", code], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, f"sh block failed:\n{code}\n{done.stdout}\n{done.stderr}"
            assert "Traceback" not in done.stderr
    assert "n_stderr" in capsys.readouterr().out
    assert (tmp_path / "regions.csv").read_text().splitlines()[0] == "region,n,n_stderr"
