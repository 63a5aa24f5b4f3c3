"""What a kernel's loads and stores reach, as a GPU's generic addresses: global memory (the allocations its
context can reach, each copied in on first touch and written back when the launch ends), shared memory (a
window whose bytes are the lane's block's) and local memory (a window whose bytes are the lane's own). Every
access is checked as compute-sanitizer's memcheck does and counted as the memory system sees it: 32-byte
sectors per warp request for global memory, bank wavefronts for shared memory."""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

import numpy as np

SHARED_BASE = 1 << 56
LOCAL_BASE = 2 << 56
WINDOW = 1 << 32
WARP = 32


@dataclass(eq=False)
class Region:
    """One allocation a kernel may touch: its address, size, kind for the traffic model, and its bytes."""
    name: str
    start: int
    size: int
    kind: str  # device, zero-copy, managed, peer
    reachable: bool = True  # False: pageable, or not mapped in the kernel's context (an access faults)
    readonly: bool = False
    read: object = None  # () -> np.ndarray of its bytes (a copy)
    owner: object = None  # the backend's allocation, where the written bytes go back
    data: np.ndarray | None = None
    dirty: bool = False
    views: dict = field(default_factory=dict)

    @property
    def end(self) -> int:
        return self.start + self.size

    def bytes(self) -> np.ndarray:
        if self.data is None:
            raw = self.read()
            pad = (-len(raw)) % 16  # typed views (up to a float4's 16 bytes) need whole elements; the pad is
            # never written back
            if pad:
                raw = np.resize(raw, len(raw) + pad)
                raw[-pad:] = 0
            self.data = raw
        return self.data

    def view(self, dtype) -> np.ndarray:
        v = self.views.get(dtype)
        if v is None:
            v = self.views[dtype] = self.bytes().view(dtype)
        return v


class Fault(Exception):
    """A kernel's access that the GPU would fault on, with what compute-sanitizer would say of it."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message


@dataclass
class Traffic:
    """Counts of one launch, by memory kind: what the modeled time comes from."""
    requests: dict = field(default_factory=dict)  # kind → warp requests (loads and stores)
    sectors: dict = field(default_factory=dict)  # kind → 32-byte sectors moved
    shared_requests: int = 0
    shared_wavefronts: int = 0  # one per request when conflict-free; n for an n-way bank conflict
    atomics: int = 0
    instructions: int = 0  # warp instructions executed (statements and expressions, per active warp)
    loads: int = 0
    stores: int = 0
    useful: dict = field(default_factory=dict)  # kind → bytes the threads asked for (sectors × 32 is what moved)
    constant_requests: int = 0  # warp loads of __constant__ memory …
    constant_addresses: int = 0  # … and the distinct addresses each touched (the constant cache serves one a pass)
    readonly_loads: int = 0  # warp loads by the read-only data path (__ldg, const __restrict__ parameters)

    def add(self, kind: str, requests: int, sectors: int, useful: int) -> None:
        self.requests[kind] = self.requests.get(kind, 0) + requests
        self.sectors[kind] = self.sectors.get(kind, 0) + sectors
        self.useful[kind] = self.useful.get(kind, 0) + useful


def _sectors(addr: np.ndarray, lanes: np.ndarray, size: int) -> tuple[int, int, int]:
    """Warp requests, distinct 32-byte sectors and the bytes the lanes asked for, for the active lanes' addresses
    of one instruction (within one allocation). Asked-for bytes count each address of a warp once: 32 lanes
    reading one element ask for its bytes, not 32 times them, so the share of moved bytes used is at most 100%
    (aligned accesses of one size are the same or disjoint)."""
    warp = lanes >> 5
    shift = size.bit_length() - 1
    rel = addr - (int(addr.min()) & ~31)  # from a sector boundary: offsets within one allocation, below 2^40
    keys = (warp << 40) | (rel >> shift)  # (warp, element): sorted, its sectors are sorted too
    step = keys[1:] - keys[:-1]
    if (step < 0).any():
        keys = np.sort(keys)
        step = keys[1:] - keys[:-1]
    useful = (1 + int(np.count_nonzero(step))) * size if len(keys) else 0
    sector_keys = keys >> (5 - shift)  # an aligned access (16 bytes at most) lies in one sector
    sectors = 1 + int(np.count_nonzero(sector_keys[1:] != sector_keys[:-1])) if len(keys) else 0
    if len(lanes) and lanes[-1] - lanes[0] + 1 == len(lanes):  # contiguous lanes: every warp between is there
        return int(warp[-1] - warp[0] + 1), sectors, useful
    requests = 1 + int(np.count_nonzero(warp[1:] != warp[:-1])) if len(warp) else 0
    return requests, sectors, useful


def _constant(offsets: np.ndarray, lanes: np.ndarray, stride: int | None) -> tuple[int, int]:
    """Warp requests to constant memory and the distinct addresses of each (one: a broadcast), for the active
    lanes' offsets into one variable."""
    if stride is not None:  # whole warps, one progression: one address a warp, or one a lane
        warps = len(offsets) // WARP
        return warps, warps if stride == 0 else len(offsets)
    warp = lanes >> 5
    keys = (warp << 32) | offsets
    step = keys[1:] - keys[:-1]
    if (step < 0).any():  # sorted only when the lanes' addresses go back somewhere (a warp's own order)
        keys = np.sort(keys)
        step = keys[1:] - keys[:-1]
    distinct = 1 + int(np.count_nonzero(step)) if len(keys) else 0
    return 1 + int(np.count_nonzero(warp[1:] != warp[:-1])) if len(warp) else 0, distinct


def _stride(addr: np.ndarray, lanes: np.ndarray) -> tuple[int | None, bool]:
    """The step between neighbouring lanes' addresses when every lane of whole warps is here and each warp's
    addresses are an arithmetic progression of that one step (`a[i]` with i a thread's number: the usual case),
    else None; and whether all the lanes' addresses are one progression (not only each warp's)."""
    n = len(addr)
    if n < 2 or n % WARP or lanes[0] % WARP or lanes[-1] - lanes[0] + 1 != n:
        return None, False
    step = int(addr[1]) - int(addr[0])
    if int(addr[-1]) - int(addr[0]) == step * (n - 1):
        d = addr[1:] - addr[:-1]
        if (d == step).all():
            return step, True
    head = addr[:WARP]
    if not ((head[1:] - head[:-1]) == step).all():  # the first warp is no progression: no need to look further
        return None, False
    rows = addr.reshape(-1, WARP)
    if ((rows[:, 1:] - rows[:, :-1]) == step).all():  # a progression a warp, the warps apart (a block's rows)
        return step, False
    return None, False


def _rows(addr: np.ndarray, lanes: np.ndarray, size: int):
    """Whole warps whose lanes go in runs of 2 to 16 (a divisor of 32), each run a progression of one step (a
    multiple of the size, aligned), a warp's runs in rising sectors none of them shares (a 2-D block's rows of a
    tile, `a[row * n + tx]` with blockDim.x under 32): (lo, hi, (requests, sectors, asked-for bytes)) from the runs'
    ends, without sorting the lanes; None otherwise (the general path counts it, and names what faults)."""
    n = len(addr)
    if n < WARP or n % WARP or lanes[0] % WARP or lanes[-1] - lanes[0] + 1 != n:
        return None
    head = addr[:WARP]
    step = int(head[1]) - int(head[0])
    if step == 0 or step % size or int(head[0]) % size:
        return None
    breaks = np.flatnonzero((head[1:] - head[:-1]) != step)
    run = int(breaks[0]) + 1 if len(breaks) else WARP
    if run == WARP or WARP % run:
        return None
    runs = addr.reshape(-1, run)
    if not ((runs[:, 1:] - runs[:, :-1]) == step).all() or (runs[:, 0] & (size - 1)).any():
        return None
    low, high = (runs[:, 0], runs[:, -1]) if step > 0 else (runs[:, -1], runs[:, 0])
    first, last = (low >> 5).reshape(-1, WARP // run), (high >> 5).reshape(-1, WARP // run)
    if not (first[:, 1:] > last[:, :-1]).all():
        return None
    # a step of a sector or less touches every sector between a run's ends; a longer one a sector a lane
    sectors = int((last - first).sum()) + len(low) if abs(step) <= 32 else n
    return int(low.min()), int(high.max()), (n // WARP, sectors, n * size)


def _strided_sectors(addr: np.ndarray, stride: int, size: int) -> tuple[int, int, int]:
    """Requests, sectors and asked-for bytes of whole warps reading an arithmetic progression whose stride is a
    multiple of the size: per warp, the sectors from its first lane's to its last lane's when lanes are less than
    a sector apart, else one a lane; a stride of 0 is a broadcast of one element a warp."""
    warps = len(addr) // WARP
    if stride == 0:
        return warps, warps, warps * size
    if abs(stride) >= 32:
        return warps, warps * WARP, len(addr) * size
    first, last = addr[::WARP] >> 5, addr[WARP - 1::WARP] >> 5
    return warps, int(np.abs(last - first).sum()) + warps, len(addr) * size


def _wavefronts(offsets: np.ndarray, lanes: np.ndarray) -> tuple[int, int]:
    """Shared-memory requests and wavefronts: a warp's accesses to distinct 4-byte words of one bank (of 32)
    are served one after another; the same word is broadcast."""
    warp = lanes // WARP
    word = offsets >> 2
    starts = np.r_[0, np.flatnonzero(warp[1:] != warp[:-1]) + 1]
    requests = len(starts)
    span = np.maximum.reduceat(word, starts) - np.minimum.reduceat(word, starts)
    if (span < 32).all():  # distinct words within 32 consecutive words sit in distinct banks
        return requests, requests
    if len(word) == 32 * requests and len(lanes) and lanes[-1] - lanes[0] + 1 == len(lanes) and lanes[0] % 32 == 0:
        rows = word.reshape(-1, 32)
        step = rows[:, 1:] - rows[:, :-1]
        s = int(step[0, 0])
        if (step == s).all():  # every warp a stride s apart (a column of a tile): gcd(s, 32) words share a bank
            ways = 1 if s == 0 else 32 if s % 32 == 0 else math.gcd(s % 32, 32)
            return requests, requests * ways
        rows = np.sort(rows, axis=1)  # whole warps: per row, its distinct words and their banks
        first = np.ones(rows.shape, bool)
        first[:, 1:] = rows[:, 1:] != rows[:, :-1]
        r, c = np.nonzero(first)
        per_bank = np.bincount(r * 32 + rows[r, c] % 32, minlength=rows.shape[0] * 32).reshape(-1, 32)
        return requests, int(per_bank.max(1).sum())
    keys = np.sort(warp * (1 << 40) + word)
    keys = keys[np.r_[True, keys[1:] != keys[:-1]]]  # distinct words per warp
    banks = np.sort((keys >> 40) * 64 + (keys & ((1 << 40) - 1)) % 32)
    edges = np.r_[0, np.flatnonzero(banks[1:] != banks[:-1]) + 1]
    runs = np.diff(np.r_[edges, len(banks)])  # words per (warp, bank)
    warps_of = banks[edges] >> 6
    wstarts = np.r_[0, np.flatnonzero(warps_of[1:] != warps_of[:-1]) + 1]
    return requests, int(np.maximum.reduceat(runs, wstarts).sum())


class Memory:
    def __init__(self, regions: list[Region], shared_bytes: int, blocks: int, lanes: int, tpb: int,
                 traffic: Traffic, describe):
        self.regions = sorted(regions, key=lambda r: r.start)
        self.starts = [r.start for r in self.regions]
        self.traffic = traffic
        self.describe = describe  # (lane, addr, size, what) -> text naming the thread and the nearest buffer
        self.shared = np.zeros((blocks, max(16, -(-shared_bytes // 16) * 16)), np.uint8)
        self.shared_bytes = shared_bytes
        self.tpb = tpb  # lanes per block (padded to whole warps)
        self.local = np.zeros((lanes, 0), np.uint8)
        self.sp = 0  # local memory in use, per lane (a stack: frames in call order)
        self.watch = None  # racecheck, when on
        self.trace: list | None = None  # show-access: (buffer, element, size, lane, write) per access
        self.path = ""  # the load under way goes by the read-only data path or the constant cache (Index.path)
        self.row_starts: dict = {}  # cells a block → each block's first cell (_row_starts)
        self.patterns: dict = {}  # every-block shared accesses checked so far → their (requests, wavefronts);
        # the launch gives every chunk's Memory the same dict, so a tile loop's accesses are checked once a launch

    # -------------------------------------------------------------- local frames
    def push(self, nbytes: int) -> int:
        addr = self.sp
        self.sp += -(-nbytes // 16) * 16
        if self.sp > self.local.shape[1]:
            grown = np.zeros((self.local.shape[0], max(self.sp, 2 * self.local.shape[1])), np.uint8)
            grown[:, :self.local.shape[1]] = self.local
            self.local = grown
        return LOCAL_BASE + addr

    # -------------------------------------------------------------- access
    def access(self, addr, lanes: np.ndarray, dtype: np.dtype, loc, write: bool, values=None, count=True):
        """Load (values None) or store `values` at each active lane's address; returns the loaded values."""
        size = dtype.itemsize
        if np.ndim(addr) == 0:
            addr = np.full(len(lanes), addr, np.int64)
        if len(addr) == 0:
            return np.zeros(0, dtype)
        every = self._every_block(addr, lanes) if count and self.trace is None else 0
        span = addr[:every] if every else addr  # every block's addresses alike: one block's bound them all
        lo, hi = int(span.min()), int(span.max())
        for base, space in ((SHARED_BASE, "shared"), (LOCAL_BASE, "local")):  # below a window: an array's -1
            if base - WINDOW <= lo < base:
                i = int(np.argmin(span))
                self._fail("CUDA_ERROR_ILLEGAL_ADDRESS", int(lanes[i]), lo, dtype.itemsize, loc, write, space,
                           f"{base - lo} bytes before the start of the {space} memory")
        if lo >= SHARED_BASE and hi < SHARED_BASE + WINDOW:
            return self._shared(span - SHARED_BASE, lanes[:every] if every else lanes, dtype, loc, write, values,
                                count, every)
        if lo >= LOCAL_BASE and hi < LOCAL_BASE + WINDOW:
            return self._local(addr - LOCAL_BASE, lanes, dtype, loc, write, values)
        if hi < SHARED_BASE:
            return self._global(addr, lanes, dtype, loc, write, values, count)
        out = np.zeros(len(addr), dtype)  # a mix of windows: each part on its own
        for lo_, hi_, fn in ((0, SHARED_BASE, "g"), (SHARED_BASE, SHARED_BASE + WINDOW, "s"),
                             (LOCAL_BASE, LOCAL_BASE + WINDOW, "l")):
            sel = (addr >= lo_) & (addr < hi_)
            if not sel.any():
                continue
            vals = None if values is None else (values[sel] if np.ndim(values) else values)
            r = self.access(addr[sel], lanes[sel], dtype, loc, write, vals, count)
            if not write:
                out[sel] = r
        bad = ~((addr < SHARED_BASE) | ((addr >= SHARED_BASE) & (addr < SHARED_BASE + WINDOW))
                | ((addr >= LOCAL_BASE) & (addr < LOCAL_BASE + WINDOW)))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            self._fail("CUDA_ERROR_ILLEGAL_ADDRESS", int(lanes[i]), int(addr[i]), size, loc, write, "global")
        return out

    def _fail(self, code, lane, addr, size, loc, write, space, why=""):
        what = "write" if write else "read"
        raise Fault(code, self.describe(lane, addr, size, f"Invalid __{space}__ {what} of size {size}", loc, why))

    def _global(self, addr, lanes, dtype, loc, write, values, count):
        size = dtype.itemsize
        shift = size.bit_length() - 1
        stride, whole = _stride(addr, lanes)
        rows = None  # a warp's rows of a tile: their bounds and counts
        if stride is not None and whole and not (int(addr[0]) | stride) & (size - 1):
            lo, hi = sorted((int(addr[0]), int(addr[-1])))  # an arithmetic progression: its ends bound it
        elif stride is not None and not stride & (size - 1) and not (addr[::WARP] & (size - 1)).any():
            ends = np.concatenate((addr[::WARP], addr[WARP - 1::WARP]))  # a progression a warp: its ends bound it
            lo, hi = int(ends.min()), int(ends.max())
        elif stride is None and (rows := _rows(addr, lanes, size)) is not None:
            lo, hi = rows[0], rows[1]
        else:
            if size > 1:
                mis = addr & (size - 1)
                if mis.any():
                    i = int(np.flatnonzero(mis)[0])
                    self._fail("CUDA_ERROR_MISALIGNED_ADDRESS", int(lanes[i]), int(addr[i]), size, loc, write,
                               "global", "misaligned")
            lo, hi = int(addr.min()), int(addr.max())
            stride, whole = None, False
        k = bisect.bisect_right(self.starts, lo) - 1
        if k >= 0 and hi + size <= self.regions[k].end:
            groups = [(self.regions[k], None)]
        else:
            idx = np.searchsorted(np.array(self.starts, np.int64), addr, "right") - 1
            ends = np.array([r.end for r in self.regions] + [0], np.int64)
            inside = (idx >= 0) & (addr + size <= ends[idx])
            if not inside.all():
                if self.trace is not None and count:  # show-access of a kernel that faults: its lanes in bounds
                    for j in np.unique(idx[inside]):
                        sel, r = inside & (idx == j), self.regions[j]
                        self.trace.extend((r.name, int(e), size, int(n), write)
                                          for e, n in zip((addr[sel] - r.start) >> shift, lanes[sel]))
                i = int(np.flatnonzero(~inside)[0])
                self._fail("CUDA_ERROR_ILLEGAL_ADDRESS", int(lanes[i]), int(addr[i]), size, loc, write, "global",
                           "out of bounds")
            groups = [(self.regions[j], idx == j) for j in np.unique(idx)]
        out = None if write else np.zeros(len(addr), dtype)
        for region, sel in groups:
            a = addr if sel is None else addr[sel]
            ln = lanes if sel is None else lanes[sel]
            if not region.reachable or (write and region.readonly):
                why = "read-only memory" if region.reachable else "memory this context cannot reach"
                self._fail("CUDA_ERROR_ILLEGAL_ADDRESS", int(ln[0]), int(a[0]), size, loc, write, "global", why)
            if count and self.path == "constant" and region.kind == "constant":  # the constant cache's passes
                req, distinct = _constant(a - region.start, ln, stride if sel is None else None)
                self.traffic.constant_requests += req
                self.traffic.constant_addresses += distinct
                self.traffic.loads += req
            elif count:  # in 32-byte sectors (a __constant__ variable read through a pointer too, as on the GPU)
                req, sec, useful = rows[2] if rows is not None and sel is None else \
                    _sectors(a, ln, size) if stride is None or sel is not None else _strided_sectors(a, stride, size)
                self.traffic.add("device" if region.kind == "constant" else region.kind, req, sec, useful)
                if write:
                    self.traffic.stores += req
                else:
                    self.traffic.loads += req
                    if self.path == "readonly":
                        self.traffic.readonly_loads += req
            view = region.view(dtype)
            if whole and stride == size and sel is None:  # consecutive elements: a slice, no index array
                first = (int(a[0]) - region.start) >> shift
                ix = slice(first, first + len(a))
            else:
                ix = (a - region.start) >> shift
            if self.trace is not None and count:
                self.trace.extend((region.name, int(i), size, int(l), write)
                                  for i, l in zip(range(ix.start, ix.stop) if isinstance(ix, slice) else ix, ln))
            if write:
                v = values if sel is None or np.ndim(values) == 0 else values[sel]
                view[ix] = v
                region.dirty = True
                if self.watch is not None and count:  # atomics (count=False) do not race
                    self.watch.global_write(region, a, ln, size, loc, distinct=whole and abs(stride) >= size and
                                            sel is None, run=whole and stride == size and sel is None)
            else:
                got = view[ix]
                if isinstance(ix, slice):  # a slice is a view of the buffer: the lanes' values are a copy, which a
                    got = got.copy()  # later store to these elements leaves as it was loaded
                if sel is None:
                    out = got
                else:
                    out[sel] = got
        return out

    def _shared(self, off, lanes, dtype, loc, write, values, count, every=0):
        """`every`: these are block 0's lanes and offsets, and every block of the chunk makes the same access:
        one block's are checked and counted, every block's bytes move."""
        size = dtype.itemsize
        shift = size.bit_length() - 1
        known = None
        if every:
            key = (off.tobytes(), lanes.tobytes(), size)
            known = self.patterns.get(key)  # a pattern checked and counted before in this launch: its counts
        if known is None:
            self._check_shared(off, lanes, size, loc, write)
        blocks = self.shared.shape[0] if every else 1
        if count:
            if known is None:
                req, wav = _wavefronts(off, lanes)
                if every:
                    self.patterns[key] = (req, wav)
            else:
                req, wav = known
            self.traffic.shared_requests += req * blocks
            self.traffic.shared_wavefronts += wav * blocks
        block = lanes // self.tpb
        cell = off >> shift
        view = self.shared.view(dtype)
        if self.trace is not None and count:
            self.trace.extend(("__shared__", int(o) // size, size, int(l), write) for o, l in zip(off, lanes))
        if self.watch is not None and count:
            self.watch.shared(block, off, lanes, size, loc, write, every_block=blocks if every else 0)
        # flat indices into the contiguous shared bytes: NumPy gathers and scatters them several times faster
        # than by a (block, cell) pair of index arrays
        flat = view.reshape(-1)
        if every:
            if not write:
                return np.take(view, cell, axis=1).reshape(-1)
            ix = (self._row_starts(view.shape[1]) + cell).reshape(-1)
            flat[ix] = values
            return None
        ix = block * view.shape[1] + cell
        if write:
            flat[ix] = values
            return None
        return flat.take(ix)

    def _row_starts(self, cells: int) -> np.ndarray:
        """Where each block's shared memory starts, in cells of `cells` a block: a column, made once a chunk."""
        starts = self.row_starts.get(cells)
        if starts is None:
            starts = self.row_starts[cells] = np.arange(self.shared.shape[0], dtype=np.int64)[:, None] * cells
        return starts

    def _check_shared(self, off, lanes, size, loc, write) -> None:
        if size > 1 and (off & (size - 1)).any():
            i = int(np.flatnonzero(off & (size - 1))[0])
            self._fail("CUDA_ERROR_MISALIGNED_ADDRESS", int(lanes[i]), int(off[i]) + SHARED_BASE, size, loc, write,
                       "shared", "misaligned")
        if int(off.max()) + size > self.shared_bytes:
            i = int(np.flatnonzero(off + size > self.shared_bytes)[0])
            self._fail("CUDA_ERROR_ILLEGAL_ADDRESS", int(lanes[i]), int(off[i]) + SHARED_BASE, size, loc, write,
                       "shared", f"out of bounds of the block's {self.shared_bytes} bytes of shared memory")

    def _every_block(self, addr, lanes) -> int:
        """The lanes a block has in this access when every block of the chunk has the same lanes at the same
        addresses (a tile's `s[threadIdx.y][k]`), else 0."""
        blocks = self.shared.shape[0]
        n = len(lanes)
        if blocks < 2 or n % blocks or addr[n // blocks] != addr[0]:
            return 0
        k = n // blocks
        rows = addr.reshape(blocks, k)
        if not (rows == rows[0]).all():
            return 0
        if n != blocks * self.tpb or int(lanes[-1]) != n - 1:  # not every lane: the same ones in each block?
            by_block = lanes.reshape(blocks, k) - (np.arange(blocks, dtype=np.int64) * self.tpb)[:, None]
            if not (by_block == by_block[0]).all():
                return 0
        return k

    def _local(self, off, lanes, dtype, loc, write, values):
        size = dtype.itemsize
        if (off % size != 0).any() or (off + size > self.sp).any():
            bad = (off % size != 0) | (off + size > self.sp)
            i = int(np.flatnonzero(bad)[0])
            self._fail("CUDA_ERROR_ILLEGAL_ADDRESS", int(lanes[i]), int(off[i]) + LOCAL_BASE, size, loc, write,
                       "local", "out of the thread's stack")
        view = self.local.view(dtype)
        if write:
            view[lanes, off // size] = values
            return None
        return view[lanes, off // size]

    # -------------------------------------------------------------- atomics
    def _cas_one(self, addr, lanes, dtype, loc, new, compare):
        """atomicCAS of every lane on one global address (a contended CAS loop's round): one read and one write of
        it (checked as the first lane's), the swaps found in as many passes as there are."""
        old = self.access(addr, lanes[:1], dtype, loc, False, count=False)
        olds, value = _cas_one_rounds(old[0], compare, new)
        self.access(addr, lanes[:1], dtype, loc, True, np.asarray([value], dtype), count=False)
        return olds

    def atomic(self, op: str, addr, lanes, dtype, loc, operands, want_old: bool, compare=None):
        """Apply one atomic per active lane, serialised per address in lane order; return the old values."""
        self.traffic.atomics += len(lanes) and 1 + int(np.count_nonzero(np.diff(lanes // WARP)))
        if np.ndim(addr) == 0:
            addr = np.full(len(lanes), addr, np.int64)
        if op == "cas" and len(addr) and addr[0] < SHARED_BASE and (addr == addr[0]).all():
            return self._cas_one(addr[:1], lanes, dtype, loc, np.asarray(operands, dtype), np.asarray(compare, dtype))
        operands = np.broadcast_to(np.asarray(operands, dtype), addr.shape).copy()
        old = self.access(addr, lanes, dtype, loc, False, count=False)  # checks bounds; the first value seen
        # one location is one address in global memory, but an address and a block in shared memory (each block
        # its own), an address and a thread in local memory
        where = np.where(addr >= LOCAL_BASE, addr + lanes * WINDOW,
                         np.where(addr >= SHARED_BASE, addr + (lanes // self.tpb) * WINDOW, addr))
        if (where == where[0]).all():  # one location (a contended counter): no sorting
            uniq, inv = where[:1], np.zeros(len(where), np.int64)
        else:
            uniq, inv = np.unique(where, return_inverse=True)
        if len(uniq) == len(addr) and op != "cas":
            new = _combine(op, old, operands, dtype)
            self.access(addr, lanes, dtype, loc, True, new, count=False)
            return old
        if op in ("add", "sub") and dtype.kind in "iu":
            signed = operands if op == "add" else (np.zeros_like(operands) - operands)
            order = np.argsort(inv, kind="stable")
            s = signed[order]
            csum = np.cumsum(s, dtype=dtype)
            g = inv[order]
            starts = np.r_[0, np.flatnonzero(g[1:] != g[:-1]) + 1]
            base = np.repeat(csum[starts] - s[starts], np.diff(np.r_[starts, len(s)]))
            excl = csum - s - base  # the sum of earlier lanes of the same address
            olds = np.empty_like(old)
            olds[order] = (old[order] + excl).astype(dtype)
            totals = csum[np.r_[starts[1:] - 1, len(s) - 1]] - base[starts]
            first = order[starts]
            self.access(addr[first], lanes[first], dtype, loc, True, (old[first] + totals).astype(dtype), count=False)
            return olds
        if not want_old and op in ("add", "min", "max", "and", "or", "xor"):
            first = np.unique(inv, return_index=True)[1]  # one accumulator a location, applied in lane order
            acc = old[first].copy()
            ufunc = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
                     "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
            ufunc.at(acc, inv, operands)
            self.access(addr[first], lanes[first], dtype, loc, True, acc.astype(dtype), count=False)
            return old
        # the general case: lanes grouped by location in lane order (sorted once), then rounds over the groups
        order = np.argsort(inv, kind="stable") if len(uniq) > 1 else np.arange(len(inv))
        g = inv[order]  # each sorted lane's location (its group), 0 … len(uniq) - 1
        starts = _starts(g)
        counts = np.diff(np.append(starts, len(g)))
        value = old[order[starts]].copy()  # each location's value as the rounds go
        if op == "cas":
            olds_sorted = _cas_rounds(g, starts, counts, value, np.asarray(compare, dtype)[order] if
                                      np.ndim(compare) else np.full(len(g), compare, dtype), operands[order])
        else:  # round r applies each location's r-th lane: as many rounds as the most lanes on one location
            rank = np.arange(len(g)) - np.repeat(starts, counts)
            olds_sorted = np.empty(len(g), dtype)
            by_rank = np.argsort(rank, kind="stable")
            edges = np.r_[0, np.cumsum(np.bincount(rank))]
            ops = operands[order]
            for r in range(len(edges) - 1):
                k = by_rank[edges[r]:edges[r + 1]]
                olds_sorted[k] = value[g[k]]
                value[g[k]] = _combine(op, value[g[k]], ops[k], dtype)
        olds = np.empty_like(old)
        olds[order] = olds_sorted
        first_idx = order[starts]
        self.access(addr[first_idx], lanes[first_idx], dtype, loc, True, value, count=False)
        return olds


def _cas_one_rounds(value, compare, new):
    """atomicCAS of lanes on one location, in lane order: each round finds the next lane whose compare matches
    the value; the lanes after it see its new value (until the next swap). Returns (old values, last value)."""
    n = len(compare)
    compare, new = np.broadcast_to(compare, (n,)), np.broadcast_to(new, (n,))
    olds = np.full(n, value, compare.dtype)
    pos = 0
    while pos < n:
        hits = np.flatnonzero(compare[pos:] == value)
        if len(hits) == 0:
            break
        pos += int(hits[0])
        value = new[pos]
        pos += 1
        olds[pos:] = value
    return olds, value


def _cas_rounds(g, starts, counts, value, compare, new):
    """atomicCAS of lanes sorted by location (`g`, groups from `starts`), serialised in lane order: a lane
    swaps when its compare equals the location's value at its turn. Each round finds, for every location at
    once, the next lane that swaps — the lanes before it fail, seeing the value as it was — so a call takes
    as many rounds as the most swaps on one location (one, in a CAS loop whose lanes all read the same value),
    not one a lane. `value` ends as each location's last value; returns each sorted lane's old value."""
    n = len(g)
    k = np.arange(n)
    group_start = np.repeat(starts, counts)
    initial = value.copy()
    pending_from = starts.copy()  # each location's first lane not yet decided
    swapped = np.zeros(n, bool)
    while True:
        hit = np.flatnonzero((k >= pending_from[g]) & (compare == value[g]))
        if len(hit) == 0:
            break
        first = hit[_starts(g[hit])]  # each location's next swap
        swapped[first] = True
        value[g[first]] = new[first]
        pending_from[g[first]] = first + 1
    last = np.maximum.accumulate(np.where(swapped, k, -1))  # the latest swap at or before each lane …
    before = np.empty_like(last)  # … strictly before it
    before[0], before[1:] = -1, last[:-1]
    return np.where(before >= group_start, new[before], initial[g])


def _starts(sorted_keys: np.ndarray) -> np.ndarray:
    """Where each run of equal keys begins (the keys sorted, at least one)."""
    change = np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1
    out = np.empty(len(change) + 1, np.int64)
    out[0], out[1:] = 0, change
    return out


def _combine(op, old, x, dtype):
    with np.errstate(over="ignore", invalid="ignore"):
        if op == "add":
            return (old + x).astype(dtype)
        if op == "sub":
            return (old - x).astype(dtype)
        if op == "exch":
            return x.astype(dtype)
        if op == "min":
            return np.minimum(old, x)
        if op == "max":
            return np.maximum(old, x)
        if op == "and":
            return old & x
        if op == "or":
            return old | x
        if op == "xor":
            return old ^ x
        if op == "inc":  # ((old >= x) ? 0 : (old + 1))
            return np.where(old >= x, 0, old + 1).astype(dtype)
        if op == "dec":  # (((old == 0) || (old > x)) ? x : (old - 1))
            return np.where((old == 0) | (old > x), x, old - 1).astype(dtype)
    raise ValueError(op)
