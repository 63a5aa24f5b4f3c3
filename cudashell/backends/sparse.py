"""Lazy byte storage for the simulator: fixed-size chunks made on first write, so a 64 GiB buffer
that nobody touched costs no RAM, and a shared budget stops the simulator from exhausting the host."""

from __future__ import annotations

import numpy as np

from ..errors import ShellError

CHUNK = 1 << 20


class Budget:
    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0

    def check(self, nbytes: int) -> None:
        if self.used + nbytes > self.limit:
            raise ShellError("SIM_BUDGET",  # the simulator's own limit, not the driver's: named apart
                             f"the simulator's storage budget of {self.limit >> 20} MiB of this machine's RAM is spent "
                             "(a real GPU would have the memory)",
                             "write less data, free buffers, or raise storage_budget in a --sim-profile")

    def take(self, nbytes: int) -> None:
        self.check(nbytes)
        self.used += nbytes


class SparseBytes:
    def __init__(self, size: int, budget: Budget):
        self.size = size
        self.budget = budget
        self.chunks: dict[int, np.ndarray] = {}

    def _spans(self, offset: int, nbytes: int):
        """(chunk index, start in chunk, stop in chunk, start in the flat range) for a byte range."""
        pos, end = offset, offset + nbytes
        while pos < end:
            idx, start = divmod(pos, CHUNK)
            stop = min(CHUNK, start + end - pos)
            yield idx, start, stop, pos - offset
            pos += stop - start

    def read(self, offset: int, nbytes: int) -> np.ndarray:
        out = np.zeros(nbytes, np.uint8)
        for idx, start, stop, at in self._spans(offset, nbytes):
            chunk = self.chunks.get(idx)
            if chunk is not None:
                out[at : at + stop - start] = chunk[start:stop]
        return out

    def missing_bytes(self, offset: int, nbytes: int) -> int:
        """Real RAM a write over this range would add."""
        return CHUNK * sum(1 for idx, *_ in self._spans(offset, nbytes) if idx not in self.chunks)

    def reserve(self, offset: int, nbytes: int) -> None:
        """Refuse up front a write that the budget cannot hold, so a failed command changes nothing."""
        self.budget.check(self.missing_bytes(offset, nbytes))

    def _chunks_for(self, offset: int, nbytes: int):
        spans = list(self._spans(offset, nbytes))
        missing = [idx for idx, *_ in spans if idx not in self.chunks]
        self.budget.take(len(missing) * CHUNK)  # all or nothing: a refused write changes nothing
        for idx in missing:
            self.chunks[idx] = np.zeros(min(CHUNK, self.size - idx * CHUNK), np.uint8)
        return spans

    def write(self, offset: int, data: np.ndarray) -> None:
        data = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        for idx, start, stop, at in self._chunks_for(offset, data.size):
            self.chunks[idx][start:stop] = data[at : at + stop - start]

    def fill(self, offset: int, value: int, nbytes: int) -> None:
        if value == 0:  # zero pages need no storage: drop or clear what exists
            for idx, start, stop, _ in self._spans(offset, nbytes):
                chunk = self.chunks.get(idx)
                if chunk is None:
                    continue
                if start == 0 and stop == chunk.size:
                    del self.chunks[idx]
                    self.budget.used -= CHUNK
                else:
                    chunk[start:stop] = 0
            return
        for idx, start, stop, _ in self._chunks_for(offset, nbytes):
            self.chunks[idx][start:stop] = value

    def copy_from(self, src: "SparseBytes", src_off: int, dst_off: int, nbytes: int) -> None:
        """Chunk by chunk, so a large copy never holds the whole range at once."""
        if src.touched(src_off, nbytes):
            self.reserve(dst_off, nbytes)
        step = CHUNK
        for pos in range(0, nbytes, step):
            n = min(step, nbytes - pos)
            piece = src.read(src_off + pos, n)
            if piece.any() or self.touched(dst_off + pos, n):
                self.write(dst_off + pos, piece)

    def touched(self, offset: int, nbytes: int) -> bool:
        return any(idx in self.chunks for idx, *_ in self._spans(offset, nbytes))

    def release(self) -> None:
        self.budget.used -= len(self.chunks) * CHUNK
        self.chunks.clear()
