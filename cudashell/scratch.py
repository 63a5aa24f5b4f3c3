"""Buffers a measurement makes for itself, straight through the backend (not the session's), always freed —
for `calibrate` and the benches."""

from __future__ import annotations

import numpy as np

from .session import Buffer


class Scratch:
    """Buffers made straight through the backend (not the session) and always freed."""

    def __init__(self, backend):
        self.backend, self.bufs = backend, []

    def alloc(self, kind: str, size: int, flags=frozenset()) -> tuple[Buffer, float]:
        a, t = self.backend.alloc(kind, size, frozenset(flags))
        buf = Buffer(f"calibrate{len(self.bufs)}", kind, size, frozenset(flags), a.host_ptr, a.device_ptr, a.handle)
        self.bufs.append(buf)
        return buf, t.seconds

    def free_all(self) -> None:
        for buf in self.bufs:
            self.backend.free(buf)
        self.bufs.clear()


def ones(n: int):
    return np.ones(n, np.uint8)
