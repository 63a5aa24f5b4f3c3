"""What a measurement (`calibrate`, the benches) makes for itself: buffers straight through the backend (not the
session's), always freed; and its progress line, a step per point measured."""

from __future__ import annotations

from .session import Buffer

PIECE = 64 << 20


class Scratch:
    """Buffers made straight through the backend (not the session) and always freed — in the context the
    measurement runs in (the session's current one: its copies and launches on the default stream run there, and
    buffers of another GPU would make every copy a peer copy)."""

    def __init__(self, backend, ctx):
        self.backend, self.ctx, self.bufs = backend, ctx, []

    def alloc(self, kind: str, size: int, flags=frozenset()) -> tuple[Buffer, float]:
        a, t = self.backend.alloc(kind, size, frozenset(flags), self.ctx)
        buf = Buffer(f"calibrate{len(self.bufs)}", kind, size, frozenset(flags), a.host_ptr, a.device_ptr, a.handle)
        self.bufs.append(buf)
        return buf, t.seconds

    def fill_ones(self, buf: Buffer) -> None:
        """Bytes of 1 through the whole buffer, a piece at a time from one array: a 1 GiB buffer needs no 1 GiB array
        beside it."""
        piece = ones(min(PIECE, buf.size))
        for pos in range(0, buf.size, PIECE):
            self.backend.write(buf, pos, piece[:buf.size - pos])

    def free(self, buf: Buffer) -> None:
        self.backend.free(buf)
        self.bufs.remove(buf)

    def free_all(self) -> None:
        for buf in self.bufs:
            self.backend.free(buf)
        self.bufs.clear()


class Progress:
    """Counts the points of a measurement for the shell's progress line (`session.progress`: drawn only on a
    terminal; nothing in scripts or pipes)."""

    def __init__(self, session, total: int, label: str):
        self.session, self.total, self.done, self.label = session, total, 0, label

    def step(self) -> None:
        self.done += 1
        if self.session.progress:
            self.session.progress(self.label, self.done, self.total)

    def close(self) -> None:
        if self.session.progress:
            self.session.progress(self.label, None, self.total)


def ones(n: int):
    import numpy as np

    return np.ones(n, np.uint8)
