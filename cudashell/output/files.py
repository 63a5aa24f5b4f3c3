"""Files the shell writes: whole or not at all, and state that several shells share.

`replace_file` writes a temporary file beside the target (a name no other writer uses), flushes and fsyncs it,
renames it over the target (`os.replace`) and fsyncs the folder: a full disk, a crash or Ctrl-C half-way leaves the
old file as it was — never a truncated new one — and the temporary file is removed. `locked` holds a lock file
beside a state file (lesson progress, the prompt's history) while it is read again, merged and replaced, so two
shells sharing a state folder take turns instead of undoing each other's changes."""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
import time
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

from ..errors import ShellError

FULL = frozenset({errno.ENOSPC, errno.EDQUOT})  # no room left on the disk, or in the user's quota
LOCK_WAIT = 10.0  # seconds to wait for another shell's lock: held for milliseconds, unless that shell is stopped


def write_error(path, e: OSError, col: int | None = None) -> ShellError:
    """One line for a write that failed, naming the file: DISK_FULL when there was no room, else IO_ERROR."""
    if e.errno in FULL:
        return ShellError("DISK_FULL", f"cannot write {path}: {e.strerror}; the file is as it was before",
                          "free some space, or write to another disk", col)
    return ShellError("IO_ERROR", f"cannot write {path}: {e.strerror or e}", None, col)


def replace_file(path, content: str | bytes | Callable[[BinaryIO], None], col: int | None = None) -> None:
    """Write `content` (text as UTF-8, bytes, or a function that writes into a binary file) to `path`, replacing
    what was there only once all of it is on the disk. A failure is a ShellError (`write_error`) and leaves `path`
    untouched. A link is followed (its target is replaced, as writing through it would). Written as it is, in
    place: something that is not a regular file (/dev/null, a pipe), having nothing to replace, and a file you may
    write in a folder where you may not make one beside it."""
    path = Path(path)
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        there = target.exists()
        mode = stat.S_IMODE(os.stat(target).st_mode) if there else None
        if there and not target.is_file():
            return _in_place(target, content)
        try:
            fd, temp = _temporary(target)
        except PermissionError:
            if not there or not os.access(target, os.W_OK):
                raise
            return _in_place(target, content)
    except OSError as e:
        raise write_error(path, e, col) from None
    try:
        with os.fdopen(fd, "wb") as f:
            _fill(f, content)
            f.flush()
            if mode is not None:
                os.fchmod(f.fileno(), mode)  # an executable script stays executable
            os.fsync(f.fileno())
        os.replace(temp, target)
    except BaseException as e:
        try:
            os.unlink(temp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise write_error(path, e, col) from None
        raise
    _sync_folder(target.parent)


def _in_place(target: Path, content) -> None:
    with open(target, "wb") as f:
        _fill(f, content)


def _fill(f: BinaryIO, content: str | bytes | Callable[[BinaryIO], None]) -> None:
    if callable(content):
        content(f)
    else:
        f.write(content.encode("utf-8") if isinstance(content, str) else content)


def _temporary(target: Path) -> tuple[int, Path]:
    """A new file beside `target`, hidden, with a name of its own (O_EXCL): two writers never share one. Made
    with the mode a new file gets (0666 less the umask)."""
    while True:
        temp = target.parent / f".{target.name[:100]}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), temp
        except FileExistsError:
            continue


def _sync_folder(folder: Path) -> None:
    """The rename on the disk too. The new file is in place already: a folder that cannot be synced (some file
    systems refuse) is not a failed write."""
    try:
        fd = os.open(folder if str(folder) else ".", os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def locked(path, wait: float = LOCK_WAIT) -> Iterator[None]:
    """Hold `path`.lock (an exclusive flock) for the block: a state file is read again, merged and replaced inside
    it. The lock goes with the process, so a shell that died holds nothing; one held past `wait` seconds (a shell
    stopped with Ctrl-Z in the middle of a write) is an IO_ERROR rather than a hang. Where no lock file can be made
    (a read-only folder) the block runs unlocked."""
    lock_path = f"{path}.lock"
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as e:
        if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        yield  # a folder where no lock can be made: the write decides for itself, as it did before locks
        return
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ShellError("IO_ERROR", f"cannot write {path}: another cudashell has held {lock_path} for "
                                     f"{wait:g} s") from None
                time.sleep(0.005)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def move_aside(path) -> Path:
    """A damaged state file renamed out of the way, kept for a look (`NAME.bad-YYYYmmdd-HHMMSS`); the caller
    starts afresh."""
    path = Path(path)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside, n = path.with_name(f"{path.name}.bad-{stamp}"), 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.bad-{stamp}-{n}")
    os.replace(path, aside)
    return aside
