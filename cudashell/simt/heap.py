"""The C heap under a launch's lanes. A chunk's values are NumPy arrays of megabytes (8 bytes a lane, 2^17 lanes),
made and dropped by every statement; glibc's malloc gives the freed top of its heap back to the OS each time it
passes a trim threshold and the next statement page-faults it in again — 40–50% of a reduction's or a vector add's
CPU time at 2^24 threads (measured). During a launch the heap keeps what it freed (up to KEEP bytes), arrays up to
the largest size mmap allows stay on it, and after a large launch what is free goes back to the OS at once (a trim
of a fragmented heap takes milliseconds: not after a small one). Where the C library is not glibc, nothing
changes."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from contextlib import contextmanager

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters (glibc's malloc.h)
KEEP = 64 << 20  # free bytes the heap's top may hold before it is given back
MMAP_FROM = 32 << 20  # the largest mmap threshold glibc takes on 64-bit: smaller arrays come from the heap


def _glibc():
    try:
        libc = ctypes.CDLL(None)
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except (OSError, TypeError):  # pragma: no cover - no C library to open by name None (Windows)
        return None


_LIBC = _glibc()
_tuned = False


@contextmanager
def kept(trim: bool) -> Iterator[None]:
    """The heap keeps what the launch frees while it runs; with `trim`, what is free is given back when it ends."""
    global _tuned
    if _LIBC is not None and not _tuned:  # once a process: mallopt's settings stay
        _LIBC.mallopt(M_MMAP_THRESHOLD, MMAP_FROM)
        _LIBC.mallopt(M_TRIM_THRESHOLD, KEEP)
        _tuned = True
    try:
        yield
    finally:
        if _LIBC is not None and trim:
            _LIBC.malloc_trim(0)
