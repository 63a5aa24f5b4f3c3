"""What the shell reads whole before using any of it — a script, a checks file, a lesson, a CUDA source and the files
it includes — capped in size and refused unless it is a regular file: `run /dev/zero` or `kernel load` of a FIFO
would otherwise read without end (or wait for a writer forever), and a 10 GiB file would spend the host's memory.
One line says which (INPUT_TOO_LARGE, NOT_A_FILE); a folder is left to the caller's own "cannot read" error."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ..errors import ShellError
from ..sizes import format_size

SCRIPT_LIMIT = 1 << 20  # 1 MiB: some 25,000 lines of commands (the largest shipped demo is 9 KiB)
SOURCE_LIMIT = 4 << 20  # 4 MiB of CUDA C, a source and its #includes together (nvcc's largest samples are ~100 KiB)
LIMITS = {"script": SCRIPT_LIMIT, "lesson": SCRIPT_LIMIT, "source": SOURCE_LIMIT}
HINTS = {"script": "a script is a text file of commands up to 1 MiB: split a longer one and `run` its parts",
         "lesson": "a lesson is a TOML text file up to 1 MiB (docs/lessons.md)",
         "source": "a CUDA source, with the files it includes, may be up to 4 MiB"}


def _check(st: os.stat_result, path: Path, what: str) -> int:
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if not stat.S_ISREG(st.st_mode):
        raise ShellError("NOT_A_FILE", f"{path} is not a regular file (a device, a FIFO or a socket): a {what} is "
                         "read whole, and this one might never end", f"name a {what} saved as a file")
    if st.st_size > LIMITS[what]:
        raise too_large(path, what, st.st_size)
    return st.st_size


def regular_size(path: Path, what: str) -> int:
    """The size of the regular file at `path` (symbolic links followed), checked as read_capped checks it; a folder
    or a missing file raises OSError as opening it would."""
    return _check(os.stat(path), path, what)


def too_large(path: Path, what: str, size: int | None = None) -> ShellError:
    shown = f" ({format_size(size)})" if size is not None else ""
    return ShellError("INPUT_TOO_LARGE", f"{path}{shown} is larger than a {what} may be: "
                      f"{format_size(LIMITS[what])}", HINTS[what])


def read_capped(path: Path, what: str) -> bytes:
    """The bytes of the file at `path`, a `what` ("script" or "source"): refused as NOT_A_FILE or INPUT_TOO_LARGE
    before they are read (a file that grows while it is read is stopped at the cap)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO's plain open would wait for a writer
    with os.fdopen(fd, "rb") as f:
        _check(os.fstat(fd), path, what)
        raw = f.read(LIMITS[what] + 1)
    if len(raw) > LIMITS[what]:
        raise too_large(path, what)
    return raw
