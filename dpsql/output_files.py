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
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO, Iterable, TextIO

from dpsql.errors import ProgrammingError


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
                                   "catalog, profile or log)")
        if self.directory is not None and self.directory not in (real, *real.parents):
            raise ProgrammingError(f"files may only be {done} under {str(self.directory)!r}")
        return real

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
