"""Lazy byte storage for the simulator: fixed-size chunks made on first write, so a 64 GiB buffer
that nobody touched costs no RAM, and a shared budget stops the simulator from exhausting the host. A copy of
whole chunks shares them (copy on write): a bench's gigabyte copies cost the host no time and no RAM."""

from __future__ import annotations

import numpy as np

from ..errors import ShellError

CHUNK = 1 << 20


class Budget:
    """The RAM the simulator's bytes may hold: each chunk counted once, however many stores share it."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self.holders: dict[int, int] = {}  # id of a chunk two or more stores hold → how many hold it

    def check(self, nbytes: int) -> None:
        if self.used + nbytes > self.limit:
            raise ShellError("SIM_BUDGET",  # the simulator's own limit, not the driver's: named apart
                             f"the simulator's storage budget of {self.limit >> 20} MiB of this machine's RAM is spent "
                             "(a real GPU would have the memory)",
                             "write less data, free buffers, or raise storage_budget in a --sim-profile")

    def take(self, nbytes: int) -> None:
        self.check(nbytes)
        self.used += nbytes

    def shared(self, chunk: np.ndarray) -> bool:
        return id(chunk) in self.holders

    def share(self, chunk: np.ndarray) -> None:
        self.holders[id(chunk)] = self.holders.get(id(chunk), 1) + 1

    def drop(self, chunk: np.ndarray) -> None:
        """A store lets go of a chunk: its RAM comes back once no store holds it."""
        n = self.holders.pop(id(chunk), 1)
        if n > 2:
            self.holders[id(chunk)] = n - 1
        elif n == 1:
            self.used -= CHUNK

    def clear(self) -> None:
        self.used = 0
        self.holders.clear()


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

    def _length(self, idx: int) -> int:
        return min(CHUNK, self.size - idx * CHUNK)

    def read(self, offset: int, nbytes: int) -> np.ndarray:
        out = np.zeros(nbytes, np.uint8)
        for idx, start, stop, at in self._spans(offset, nbytes):
            chunk = self.chunks.get(idx)
            if chunk is not None:
                out[at : at + stop - start] = chunk[start:stop]
        return out

    def window(self, offset: int, nbytes: int) -> np.ndarray | None:
        """A range's bytes to read and let go: a view of its chunk where it lies in one (no copy), None where nothing
        was ever written (zeros), else a copy."""
        idx, start = divmod(offset, CHUNK)
        if start + nbytes <= CHUNK:
            chunk = self.chunks.get(idx)
            return None if chunk is None else chunk[start: start + nbytes]
        return self.read(offset, nbytes) if self.touched(offset, nbytes) else None

    def _unowned(self, idx: int) -> bool:
        """Whether writing into chunk idx needs RAM: it does not exist, or other stores share it."""
        chunk = self.chunks.get(idx)
        return chunk is None or self.budget.shared(chunk)

    def missing_bytes(self, offset: int, nbytes: int) -> int:
        """Real RAM a write over this range would add."""
        return CHUNK * sum(1 for idx, *_ in self._spans(offset, nbytes) if self._unowned(idx))

    def reserve(self, offset: int, nbytes: int) -> None:
        """Refuse up front a write that the budget cannot hold, so a failed command changes nothing."""
        self.budget.check(self.missing_bytes(offset, nbytes))

    def _own(self, idxs) -> None:
        """Chunks this store may write into: made where missing, copied where shared — the RAM for all of them
        taken first, or none (a refused write changes nothing)."""
        needed = [idx for idx in idxs if self._unowned(idx)]
        self.budget.take(len(needed) * CHUNK)
        for idx in needed:
            chunk = self.chunks.get(idx)
            if chunk is None:
                self.chunks[idx] = np.zeros(self._length(idx), np.uint8)
            else:
                self.chunks[idx] = chunk.copy()
                self.budget.drop(chunk)  # still held by another store: no RAM back

    def _chunks_for(self, offset: int, nbytes: int):
        spans = list(self._spans(offset, nbytes))
        self._own([idx for idx, *_ in spans])
        return spans

    def write(self, offset: int, data: np.ndarray) -> None:
        data = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        for idx, start, stop, at in self._chunks_for(offset, data.size):
            self.chunks[idx][start:stop] = data[at : at + stop - start]

    def _zero(self, spans) -> None:
        """Zeros over these spans: whole chunks dropped (zero pages need no storage), parts cleared."""
        spans = list(spans)
        self._own([idx for idx, start, stop, *_ in spans if idx in self.chunks
                   and not (start == 0 and stop == self._length(idx))])
        for idx, start, stop, *_ in spans:
            chunk = self.chunks.get(idx)
            if chunk is None:
                continue
            if start == 0 and stop == chunk.size:
                del self.chunks[idx]
                self.budget.drop(chunk)
            else:
                chunk[start:stop] = 0

    def fill(self, offset: int, value: int, nbytes: int) -> None:
        if value == 0:
            self._zero(self._spans(offset, nbytes))
            return
        for idx, start, stop, _ in self._chunks_for(offset, nbytes):
            self.chunks[idx][start:stop] = value

    def reserve_copy(self, src: "SparseBytes", src_off: int, dst_off: int, nbytes: int) -> None:
        """Refuse up front a copy whose new chunks the budget cannot hold: only those it makes — a part of a chunk
        that gets bytes from the source, or a shared chunk written into; a whole chunk lined up with the source's
        is shared (or dropped, where the source has none) and needs no RAM."""
        aligned = (src_off - dst_off) % CHUNK == 0
        shift = (src_off - dst_off) // CHUNK
        made = 0
        for idx, start, stop, at in self._spans(dst_off, nbytes):
            if not self._unowned(idx):
                continue
            if aligned and start == 0 and stop == self._length(idx):
                have = src.chunks.get(idx + shift)
                if have is None or have.size == stop:
                    continue
            if idx in self.chunks or src.touched(src_off + at, stop - start):
                made += CHUNK
        self.budget.check(made)

    def copy_from(self, src: "SparseBytes", src_off: int, dst_off: int, nbytes: int) -> None:
        """Chunk by chunk of this store, so a large copy never holds the whole range at once; a piece of zeros
        makes no chunk."""
        self.reserve_copy(src, src_off, dst_off, nbytes)
        if (src_off - dst_off) % CHUNK == 0:
            self._copy_aligned(src, src_off, dst_off, nbytes)
            return
        for idx, start, stop, at in self._spans(dst_off, nbytes):
            piece = src.read(src_off + at, stop - start)
            if piece.any() or idx in self.chunks:
                self.write(dst_off + at, piece)

    def _copy_aligned(self, src: "SparseBytes", src_off: int, dst_off: int, nbytes: int) -> None:
        """Each piece lies in one chunk on both sides: a whole chunk is shared, a part copied into this store's own
        chunk; a chunk never written gives zeros. No array between (through read and write a bench's 1 GiB copy
        took 0.7 s)."""
        shift = (src_off - dst_off) // CHUNK
        for idx, start, stop, _ in self._spans(dst_off, nbytes):
            have = src.chunks.get(idx + shift)
            if have is None:
                self._zero([(idx, start, stop)])
            elif start == 0 and stop == self._length(idx) == have.size:
                mine = self.chunks.get(idx)
                if mine is not have:
                    self.budget.share(have)
                    self.chunks[idx] = have
                    if mine is not None:
                        self.budget.drop(mine)
            else:
                self._own([idx])
                self.chunks[idx][start:stop] = have[start:stop]

    def snapshot(self, offset: int, nbytes: int) -> "SparseBytes":
        """A range's bytes as they are now, kept apart until they land (a staged copy's): whole chunks shared, copy on
        write, so a staged 1 GiB copy holds no 1 GiB array beside it."""
        snap = SparseBytes(nbytes, self.budget)
        snap.copy_from(self, offset, 0, nbytes)
        return snap

    def land(self, snap: "SparseBytes", offset: int) -> None:
        """A snapshot's bytes written here at `offset`, and the snapshot let go."""
        self.copy_from(snap, 0, offset, snap.size)
        snap.release()

    def touched(self, offset: int, nbytes: int) -> bool:
        return any(idx in self.chunks for idx, *_ in self._spans(offset, nbytes))

    def release(self) -> None:
        for chunk in self.chunks.values():
            self.budget.drop(chunk)
        self.chunks.clear()
