"""Which files an analyst's surface may write or read: never the data, the ledger or the catalog.

The shell's `.output`/`.once` and `dpsql synth --out` write files the analyst names;
the shell's `.read` and `.import` read them. `OutputFiles` refuses a path that is, or
links to, one of the owner's files (the database, the ledger state, the catalog, the
profile, the log) or a companion of one (a name that extends it: `.wal`, `.lock`,
`.wal.checkpoint`, ...), compared by resolved real path and by inode, so neither `..`,
a symbolic link, `/proc/self/fd` nor a hard link gets through. It refuses to replace an
existing file unless asked to, and reads regular files only. A connection made from a
profile writes and reads only under the profile's `output_dir`, and nowhere when it
names none: anywhere else the service's account can reach (its own code, its keys) is
not the analyst's.

Nor are any deployment's files, this one's or another's (`is_deployment_file`): a profile or
catalog (`*.toml`), a database or ledger (a DuckDB file, whatever its name, and the names
`*.duckdb`, `*.db`, `*.dpsql-state` with their companions), a log, a TLS key or certificate;
they are never read or written. A profile connection (the shell's, the server's) refuses
to start when its `output_dir` holds, at any depth, one of the owner's files or any
deployment's file (`check_directory`): the directory is the analysts' alone.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO, Iterable, TextIO

from dpsql.errors import ProfileError, ProgrammingError

# Names of a deployment's files (any deployment's): profiles and catalogs, databases, ledgers and their
# companions (`.wal`, `.lock`), logs, TLS keys and certificates. A DuckDB file is one by its content too.
_DEPLOYMENT_NAME_PARTS = (".duckdb", ".dpsql-state")
_DEPLOYMENT_SUFFIXES = (".toml", ".db", ".wal", ".lock", ".log", ".key", ".pem", ".crt")


def is_deployment_file(path: Path) -> bool:
    """Whether `path` names a deployment's file (see the module docstring), or is a DuckDB database."""
    name = path.name.lower()
    if name.endswith(_DEPLOYMENT_SUFFIXES) or any(part in name for part in _DEPLOYMENT_NAME_PARTS):
        return True
    try:  # O_NONBLOCK: a FIFO does not wait for a writer; only a regular file's content is read
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        head = os.read(fd, 20) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        return False
    finally:
        os.close(fd)
    # DuckDB's header: an 8-byte checksum, the magic "DUCK", a little-endian 8-byte storage version
    return len(head) == 20 and head[8:12] == b"DUCK" and head[14:20] == bytes(6)


class OutputFiles:
    """The rule for files an analyst's surface writes or reads (see the module docstring).

    `directory`: the only directory files may be written or read under; with `confined`,
    no directory means no file may be written or read at all.
    """

    def __init__(self, owner_files: Iterable[str | Path] = (), directory: str | Path | None = None,
                 confined: bool = False):
        self.owner_files = {Path(os.path.realpath(str(f))) for f in owner_files if str(f) != ":memory:"}
        self.directory = Path(os.path.realpath(directory)) if directory is not None else None
        self.confined = confined

    def check(self, path: str | Path, overwrite: bool = False) -> Path:
        """The path to write, or ProgrammingError saying why it may not be written."""
        real = self._allowed(path, "write")
        text = str(path)
        if real.exists() and not overwrite:
            raise ProgrammingError(f"{text!r} exists; add --overwrite to replace it")
        if real.is_dir():
            raise ProgrammingError(f"{text!r} is a directory")
        if not real.parent.is_dir():
            raise ProgrammingError(f"cannot write to {text!r}: directory {str(real.parent)!r} does not exist")
        return real

    def open(self, path: str | Path, overwrite: bool = False) -> TextIO:
        """`path` opened for writing text, if `check` allows it."""
        real = self.check(path, overwrite)
        try:
            return open(real, "w" if overwrite else "x", encoding="utf-8")
        except OSError as e:
            raise ProgrammingError(f"cannot write to {str(path)!r}: {e.strerror}") from None

    def open_read(self, path: str | Path) -> BinaryIO:
        """`path`, a regular file, opened for reading (binary), if the rule allows reading it."""
        real = self._allowed(path, "read")
        try:  # O_NONBLOCK: opening a FIFO does not wait for a writer (it is then refused)
            fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as e:
            raise ProgrammingError(f"cannot read {str(path)!r}: {e.strerror}") from None
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode) or self._same_file(found):
            os.close(fd)
            raise ProgrammingError(f"cannot read {str(path)!r}: not a regular file, or one of the owner's")
        return os.fdopen(fd, "rb")

    def _allowed(self, path: str | Path, verb: str) -> Path:
        """The real path of `path` (to "write" or "read") if it is a file name, not the owner's, and
        inside the directory; else ProgrammingError saying why."""
        text = str(path)
        action, done = ("write to", "written") if verb == "write" else ("read", "read")
        if not text or "\x00" in text:
            raise ProgrammingError(f"cannot {action} {text!r}: not a file name")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ProgrammingError(f"cannot {action} {text!r}: the name is not valid Unicode") from None
        if self.confined and self.directory is None:
            raise ProgrammingError(f"this deployment lets analysts {verb} no files (its profile names no output_dir)")
        real = Path(os.path.realpath(text))
        if self._owned(real) or (real.exists() and self._same_file(real.stat())):
            raise ProgrammingError(f"cannot {action} {text!r}: it is one of the data owner's files (data, ledger, "
                                   "catalog, profile, log, TLS key or certificate)")
        if self.directory is not None and self.directory not in (real, *real.parents):
            raise ProgrammingError(f"files may only be {done} under {str(self.directory)!r}")
        if self.confined and not real.is_dir() and is_deployment_file(real):
            raise ProgrammingError(f"cannot {action} {text!r}: it is named or made like a deployment's file (a "
                                   "profile or catalog, a database, a ledger, a log, a TLS key or certificate)")
        return real

    def check_directory(self) -> None:
        """ProfileError unless the directory holds, at any depth, none of the owner's files (existing or
        not) and no deployment's file (see the module docstring); nothing to check without a directory."""
        if self.directory is None:
            return
        found = [f for f in self.owner_files if self.directory in f.parents]
        for folder, _, names in [] if found else os.walk(self.directory):  # links are not followed
            for name in names:
                path = Path(folder, name)
                try:
                    if not path.is_symlink() and (self._owned(path) or self._same_file(path.stat())
                                                  or is_deployment_file(path)):
                        found.append(path)
                except OSError:  # gone meanwhile
                    continue
        if found:
            shown = ", ".join(repr(str(p)) for p in sorted(set(found))[:5]) + (" ..." if len(set(found)) > 5 else "")
            raise ProfileError(f"the profile's output_dir {str(self.directory)!r} holds the data owner's or a "
                               f"deployment's files ({shown}), which analysts' shells could read or replace: give "
                               "analysts a folder of their own that holds none (e.g. output_dir = \"exports\" beside "
                               "the data)")

    def _owned(self, real: Path) -> bool:
        """`real` is an owner's file or a companion of one (its name extends the owner's file's name)."""
        return any(real == f or (real.parent == f.parent and real.name.startswith(f.name + "."))
                   for f in self.owner_files)

    def _same_file(self, target: os.stat_result) -> bool:
        """Whether the file `target` describes is one of the owner's files (a hard link to one, say)."""
        for owned in self.owner_files:
            try:
                found = owned.stat()
            except OSError:
                continue
            if (found.st_dev, found.st_ino) == (target.st_dev, target.st_ino):
                return True
        return False


__all__ = ["OutputFiles"]
