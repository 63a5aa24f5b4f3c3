"""Host-side data work at memory speed: `checksum`, `compare`, `fill` and `show` over pieces of at most PIECE bytes,
each vectorised, with no temporary the size of the buffer. The same code runs where the bytes are — in the
simulator's process, and in the GPU worker, whose host buffers live there — so neither ships a buffer down a pipe to
look at it. A side gives the pieces (`_host_window`, `_host_targets`) and says how long the work took
(`_host_work_timing`): the GPU side measures it, the simulator models it from its profile's host rates."""

from __future__ import annotations

import os
import time

import numpy as np

PIECE = 4 << 20  # bytes a piece: big enough that numpy's per-call cost vanishes, small enough to stay in cache
MOD = 251  # the checksum weighs byte i by (i mod 251) + 1: position-sensitive, and the same in `export c`'s C
WEIGHTS = np.arange(1, MOD + 1, dtype=np.uint64)
BLOCK = 257  # rows of bytes whose column sums fit uint16: 255 × 257 = 65535
RANDOM_RUN = 1 << 16  # random numbers made at once: 512 KiB of uint64 per temporary, in the CPU's cache
GOLDEN, MIX1, MIX2 = 0x9E3779B97F4A7C15, np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
STRIDES = np.arange(RANDOM_RUN, dtype=np.uint64) * np.uint64(GOLDEN)  # k·golden, wrapping: a run's counters less its base


def weighted_sum(pos: int, piece: np.ndarray) -> int:
    """Σ piece[k]·((pos + k) mod 251 + 1), exactly. The middle, whole rows of 251 bytes starting at a multiple of
    251, is summed per column (a sum over rows: numpy's fastest reduction) and the 251 column sums weighed once."""
    n = piece.size
    phase = pos % MOD
    head = min(n, (MOD - phase) % MOD)
    total = int(np.dot(piece[:head].astype(np.uint64), WEIGHTS[phase: phase + head])) if head else 0
    rows = (n - head) // MOD
    if rows:
        total += int(np.dot(column_sums(piece[head: head + rows * MOD].reshape(rows, MOD)), WEIGHTS))
    tail = piece[head + rows * MOD:]
    if tail.size:
        total += int(np.dot(tail.astype(np.uint64), WEIGHTS[:tail.size]))
    return total


def column_sums(table: np.ndarray) -> np.ndarray:
    """A uint8 table's column sums, as uint64. Blocks of BLOCK rows are summed in uint16 first — 255 × 257 fits, and
    numpy sums uint16 some 2.5 times faster than uint64 (2.0 against 0.8 GB/s here, np.sum 1.3 in the same run)."""
    blocks = table.shape[0] // BLOCK
    sums = table[:blocks * BLOCK].reshape(blocks, BLOCK, table.shape[1]).sum(axis=1, dtype=np.uint16) \
        .sum(axis=0, dtype=np.uint64)
    if table.shape[0] > blocks * BLOCK:
        sums += table[blocks * BLOCK:].sum(axis=0, dtype=np.uint64)
    return sums


def checksum(pieces) -> int:
    """Σ byte[i]·(i mod 251 + 1) mod 2^64 over (position, bytes) pieces; None bytes are zeros (they add nothing)."""
    return sum(weighted_sum(pos, piece) for pos, piece in pieces if piece is not None) % (1 << 64)


def _first_nonzero(x: np.ndarray) -> int | None:
    i = int(np.argmax(x != 0))
    return i if x[i] else None


def _equal(x: np.ndarray, y: np.ndarray) -> bool:
    """Equal bytes, looked at 8 at a time where the length allows (a third of the time of byte by byte)."""
    if x.size % 8 == 0:
        return bool(np.array_equal(x.view(np.uint64), y.view(np.uint64)))
    return bool(np.array_equal(x, y))


def first_difference(pairs) -> int | None:
    """The first position where two regions differ, from (position, a bytes, b bytes) pieces (None: zeros), or
    None."""
    for pos, x, y in pairs:
        if x is None and y is None:
            continue
        if x is None or y is None:
            at = _first_nonzero(y if x is None else x)
        elif _equal(x, y):
            continue
        else:
            at = int(np.argmax(x != y))
        if at is not None:
            return pos + at
    return None


def random_values(seed: int, start: int, count: int, dtype: np.dtype) -> np.ndarray:
    """What `fill … random seed SEED dtype T` writes from element `start`: `count` elements."""
    out = np.empty(count, dtype)
    fill_into(out, "random", start, seed)
    return out


def _splitmix_into(z: np.ndarray, seed: int, start: int, scratch: np.ndarray) -> None:
    """z (uint64, at most RANDOM_RUN) ← SplitMix64 of seed + (start + k + 1)·golden, in place: the counter-based
    generator the C of `export c` runs word by word, so a fill split into pieces draws the same numbers."""
    n = z.size
    t = scratch[:n]
    np.add(STRIDES[:n], np.uint64((seed + (start + 1) * GOLDEN) % (1 << 64)), out=z)
    for shift, mix in ((30, MIX1), (27, MIX2), (31, None)):
        np.right_shift(z, np.uint64(shift), out=t)
        np.bitwise_xor(z, t, out=z)
        if mix is not None:
            np.multiply(z, mix, out=z)


def _word_bytes(seed: int, j: int) -> np.ndarray:
    """Word j of the stream as its 8 little-endian bytes: for a word an integer fill's range cuts."""
    z, t = np.empty(1, np.uint64), np.empty(1, np.uint64)
    _splitmix_into(z, seed, j, t)
    return z.astype("<u8").view(np.uint8)


def fill_into(out: np.ndarray, value, start: int, seed: int) -> None:
    """out (elements start, start + 1, … of a buffer, as its dtype) ← a constant, `iota` (the index) or `random`:
    an integer dtype of size s takes bytes [i·s, i·s + s) of the little-endian SplitMix64 words z_0, z_1, … (one
    draw fills 8 bytes whatever the size, and uint8 and uint32 fills write the same bytes); a float is one draw an
    element, its 53 high bits in [0, 1)."""
    if value == "iota":
        with np.errstate(over="ignore"):  # a float16 past 65504 is inf, as the cast gives it
            np.copyto(out, np.arange(start, start + out.size), casting="unsafe")
    elif value != "random":
        np.copyto(out, value, casting="unsafe")
    else:
        floats = out.dtype.kind == "f"
        run = RANDOM_RUN if floats else RANDOM_RUN * 8 // out.itemsize  # elements one run of draws fills
        share = -(-out.size // (run * CORES)) * run  # whole runs a core

        def draw(k: int, n: int) -> None:
            if floats:
                _random_floats_into(out[k: k + n], start + k, seed)
            else:
                _random_bytes_into(out[k: k + n].view(np.uint8), (start + k) * out.itemsize, seed)

        if out.size <= share:
            draw(0, out.size)
        else:  # numpy lets the GIL go in its loops: the cores draw a share each
            list(_threads().map(lambda k: draw(k, share), range(0, out.size, share)))


def random_draws(nbytes: int, dtype: np.dtype) -> int:
    """The SplitMix64 words a `fill … random` of nbytes makes: one an element of a float, one each 8 bytes else."""
    return nbytes // dtype.itemsize if dtype.kind == "f" else -(-nbytes // 8)


def _random_bytes_into(out: np.ndarray, at: int, seed: int) -> None:
    """out (bytes) ← bytes at, at + 1, … of the stream. The whole words between are drawn in the cache and copied
    into out as little-endian uint64 (whatever its alignment; out itself is only written, never read: it may be
    write-combined memory); a word cut by either end is drawn alone and sliced."""
    head = min(-at % 8, out.size)
    if head:
        out[:head] = _word_bytes(seed, at // 8)[at % 8: at % 8 + head]
    whole = (out.size - head) // 8
    if whole:
        words = out[head: head + 8 * whole].view("<u8")
        z, t = np.empty(min(RANDOM_RUN, whole), np.uint64), np.empty(min(RANDOM_RUN, whole), np.uint64)
        for k in range(0, whole, RANDOM_RUN):
            n = min(RANDOM_RUN, whole - k)
            _splitmix_into(z[:n], seed, (at + head) // 8 + k, t)
            words[k: k + n] = z[:n]
    tail = out.size - head - 8 * whole
    if tail:
        out[out.size - tail:] = _word_bytes(seed, (at + out.size) // 8)[:tail]


def _random_floats_into(out: np.ndarray, start: int, seed: int) -> None:
    """out ← one draw an element: 53 random bits → [0, 1), exactly as (double)(z >> 11) * 2^-53."""
    z, t = np.empty(min(RANDOM_RUN, out.size), np.uint64), np.empty(min(RANDOM_RUN, out.size), np.uint64)
    real = np.empty(z.size, np.float64)
    for k in range(0, out.size, RANDOM_RUN):
        n = min(RANDOM_RUN, out.size - k)
        run = z[:n]
        _splitmix_into(run, seed, start + k, t)
        np.right_shift(run, np.uint64(11), out=run)
        np.multiply(run, 2.0 ** -53, out=real[:n])
        np.copyto(out[k: k + n], real[:n], casting="unsafe")


CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
_pool: list = []  # the threads `fill random` draws with, made at its first use


def _threads():
    if not _pool:
        from concurrent.futures import ThreadPoolExecutor

        _pool.append(ThreadPoolExecutor(CORES, thread_name_prefix="fill-random"))
    return _pool[0]


if hasattr(os, "register_at_fork"):  # a forked child (a graded section) has none of its parent's threads
    os.register_at_fork(after_in_child=_pool.clear)


def uniform_byte(value, dtype: np.dtype) -> int | None:
    """The byte every byte of the pattern is, when a constant's elements are one byte repeated (0, -1, 7 as uint8):
    such a fill is a memset — on the simulator, zeros keep no storage at all."""
    if isinstance(value, str):
        return None
    one = np.empty(1, dtype)
    np.copyto(one, value, casting="unsafe")
    raw = one.view(np.uint8)
    return int(raw[0]) if (raw == raw[0]).all() else None


class HostData:
    """The contract's host-data calls, for both sides (a mixin). A side gives `_host_begin` (its checks before the
    host touches a range), `_host_window` (a piece's bytes to read: a view where it can, None for zeros),
    `_host_targets` (pieces to write into), `_host_memset`, `_host_piece` (its piece size) and `_host_work_timing`
    (the Timing of the work, from the seconds measured here and what was read and written)."""

    _host_piece = PIECE

    def _pieces(self, buf, offset: int, nbytes: int):
        for pos, n in piece_spans(offset, nbytes, self._host_piece):
            yield pos, self._host_window(buf, pos, n)

    def host_checksum(self, buf):
        self._host_begin(buf, 0, buf.size)
        t0 = time.perf_counter()
        value = checksum(self._pieces(buf, 0, buf.size))
        return value, self._host_work_timing(time.perf_counter() - t0, "checksum", [(buf, buf.size)])

    def host_compare(self, a, a_offset: int, b, b_offset: int, nbytes: int):
        self._host_begin(a, a_offset, nbytes)
        self._host_begin(b, b_offset, nbytes)
        t0 = time.perf_counter()
        pairs = ((pos - a_offset, self._host_window(a, pos, n), self._host_window(b, pos - a_offset + b_offset, n))
                 for pos, n in piece_spans(a_offset, nbytes, self._host_piece))
        at = first_difference(pairs)
        return at, self._host_work_timing(time.perf_counter() - t0, "compare", [(a, nbytes), (b, nbytes)])

    def host_fill(self, buf, value, dtype: str, seed: int):
        kind = np.dtype(dtype)
        nbytes = buf.size // kind.itemsize * kind.itemsize
        byte = uniform_byte(value, kind)
        self._host_begin(buf, 0, nbytes, write="zeros" if byte == 0 else True)
        t0 = time.perf_counter()
        if byte is not None:
            self._host_memset(buf, byte, nbytes)
        else:
            for offset, target in self._host_targets(buf, nbytes):
                fill_into(target.view(kind), value, offset // kind.itemsize, seed)
        op = "fill random" if value == "random" else "fill"
        return self._host_work_timing(time.perf_counter() - t0, op, [(buf, nbytes)], random_draws(nbytes, kind))

    def host_read(self, buf, offset: int, nbytes: int):
        self._host_begin(buf, offset, nbytes)
        t0 = time.perf_counter()
        out = np.zeros(nbytes, np.uint8)
        for pos, piece in self._pieces(buf, offset, nbytes):
            if piece is not None:
                out[pos - offset: pos - offset + piece.size] = piece
        return out, self._host_work_timing(time.perf_counter() - t0, "read", [(buf, nbytes)])


def piece_spans(offset: int, nbytes: int, piece: int = PIECE):
    """(position, length) pieces of a range, each ending on a multiple of `piece` (the simulator's chunks line up)."""
    pos, end = offset, offset + nbytes
    while pos < end:
        n = min(piece - pos % piece, end - pos)
        yield pos, n
        pos += n
