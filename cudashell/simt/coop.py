"""Cooperative groups at run time: the built-ins coopfront.py calls (`cg::NAME`, the group handle first).

A group handle is one 64-bit register value: its kind in bits 32-35 (a block, a tile, the coalesced lanes of a
warp, the grid), a tile's size in bits 40-47 and its parent tile's in bits 48-55 (0: the block), and a coalesced
group's member lanes in the low 32 bits. Tiles are aligned within warps, so a lane's tile and its rank in it
follow from the lane; a coalesced group's ranks count its member lanes from the lowest. Collectives are computed
in the order cooperative_groups' own code combines values (a tile: a butterfly of shfl_xor; a coalesced group:
a shfl_down tree when its size is a power of two, else a Hillis–Steele scan; scans: Hillis–Steele), so float
sums give the GPU's bits."""

from __future__ import annotations

import numpy as np

from .builtins import WARP, _activemask, barrier, shuffle
from .memory import Fault
from .values import dtype_of

BLOCK, TILE, COALESCED, GRID = 1, 2, 3, 4
LOW32 = np.uint64(0xFFFFFFFF)


def _handle(kind: int, size: int = 0, parent: int = 0, mask=0):
    head = np.uint64(kind << 32 | size << 40 | parent << 48)
    return head | np.asarray(mask).astype(np.uint64) if np.ndim(mask) else head


def _where(e) -> str:
    return f"{e.loc[0]}:{e.loc[1]}:{e.loc[2]}"


class Group:
    """A handle read for the lanes calling: what group each lane is in, its rank there, and tables of values in
    rank order, one row a group (`table`), to combine them as the group's own code would."""

    def __init__(self, mach, value, m, e):
        self.mach, self.m = mach, m
        v = np.broadcast_to(np.asarray(value).astype(np.uint64), (mach.n,))
        if np.ndim(value) == 0:  # one handle for every lane (a tile's, a block's): nothing to compare
            head = int(value) >> 32
        else:
            heads = v[m] >> np.uint64(32)
            if len(heads) == 0 or (heads != heads[0]).any():
                raise Fault("NOT_SUPPORTED_ON_SIM", f"{_where(e)}: a group handle that differs between the threads "
                            "calling it is not in the simulator's subset")
            head = int(heads[0])
        self.kind, self.size, self.parent = head & 0xF, (head >> 8) & 0xFF, (head >> 16) & 0xFF
        lane = mach.lane
        if self.kind == TILE:
            self.width = self.size
            self.rank = lane & (self.size - 1)
            self.count = np.int64(self.size)
            self.valid = np.ones((1, self.size), bool)
        elif self.kind == COALESCED:
            self.width = WARP
            warp_masks = np.bitwise_or.reduce(np.where(m, v & LOW32, np.uint64(0)).reshape(-1, WARP), axis=1)
            bits = ((warp_masks[:, None] >> np.arange(WARP, dtype=np.uint64)) & np.uint64(1)).astype(bool)
            self.lane_of = np.argsort(~bits, axis=1, kind="stable")  # member lanes first, lowest first
            counts = bits.sum(1)
            self.rank = (np.cumsum(bits, 1) - bits).reshape(-1)
            self.count = np.repeat(counts, WARP)
            self.valid = np.arange(WARP)[None, :] < counts[:, None]
            self.rows_count = counts

    # ------------------------------------------------------------------ values in rank order
    def table(self, x):
        """(groups, width): each group's values by rank."""
        x = np.broadcast_to(np.asarray(x), (self.mach.n,)).reshape(-1, self.width)
        if self.kind == COALESCED:
            return np.take_along_axis(x, self.lane_of, axis=1)
        return x

    def own(self, t):
        """Each lane's own rank's entry of a (groups, width) table."""
        if self.kind == COALESCED:
            rows = self.mach.lane // WARP
            return t[rows, np.minimum(self.rank, WARP - 1)]
        return t.reshape(-1)

    def each(self, per_group):
        """A value per group, given to each of its lanes."""
        return np.repeat(per_group, self.width)

    def from_rank(self, x, src):
        """Each lane's read of `x` from the member of rank `src` (its own value where there is none)."""
        x = np.broadcast_to(np.asarray(x), (self.mach.n,))
        src = np.asarray(src).astype(np.int64)
        ok = (src >= 0) & (src < self.count)
        s = np.clip(src, 0, WARP - 1)
        lanes = self.mach.lane - self.mach.lane % WARP + self.lane_of[self.mach.lane // WARP, s]
        return np.where(ok, x[lanes], x)


def _group(mach, e, m) -> Group:
    return Group(mach, mach.ev(e.args[0], m), m, e)


def _threads(mach) -> int:
    s = mach.special
    return int(s["blockDim.x"]) * int(s["blockDim.y"]) * int(s["blockDim.z"])


def _block_rank(mach):
    s = mach.special
    gx, gy = int(s["gridDim.x"]), int(s["gridDim.y"])
    return (np.asarray(s["blockIdx.x"]).astype(np.int64) + np.asarray(s["blockIdx.y"]).astype(np.int64) * gx
            + np.asarray(s["blockIdx.z"]).astype(np.int64) * gx * gy)


def _typed(e, value):
    return np.asarray(value).astype(dtype_of(e.type))


# ------------------------------------------------------------------ making groups
def _this_thread_block(mach, e, m):
    return _handle(BLOCK)


def _this_grid(mach, e, m):
    return _handle(GRID)


def _coalesced_threads(mach, e, m):
    return _handle(COALESCED, mask=_activemask(mach, e, m))


def _tiled_partition(mach, e, m):
    g = _group(mach, e, m)
    sizes = np.unique(np.broadcast_to(np.asarray(mach.ev(e.args[1], m)), (mach.n,))[m])
    size = int(sizes[0])
    if len(sizes) != 1 or size < 1 or size > WARP or size & (size - 1):
        raise Fault("NOT_SUPPORTED_ON_SIM", f"{_where(e)}: tiled_partition into tiles of {size} threads: a power of "
                    "two up to 32, the same in every thread, is what the simulator runs")
    if g.kind == BLOCK:
        return _handle(TILE, size, 0)
    if g.kind == TILE and size <= g.size:
        return _handle(TILE, size, g.size)
    raise Fault("NOT_SUPPORTED_ON_SIM", f"{_where(e)}: tiled_partition of this group (a tile of {g.size} threads "
                f"into {size}, or a coalesced group) is not in the simulator's subset")


# ------------------------------------------------------------------ what a group is
def _sync(mach, e, m):
    g = _group(mach, e, m)
    group = "thread_block" if g.kind == BLOCK else "thread_block_tile"
    called = f"cg::sync({group})" if e.name == "cg::sync" else f"{group}::sync()"
    if g.kind == BLOCK:
        barrier(mach, m, e.loc, called, mach.tpb)
    elif g.kind == TILE:
        barrier(mach, m, e.loc, called, g.size)
    elif mach.mem.watch is not None:  # a coalesced group: its members are the lanes that came
        mach.mem.watch.tile_barrier(m, WARP)
    return None


def _thread_rank(mach, e, m):
    g = _group(mach, e, m)
    within_block = mach.lane % mach.tpb
    if g.kind == BLOCK:
        return _typed(e, within_block)
    if g.kind == GRID:
        return _typed(e, _block_rank(mach) * _threads(mach) + within_block)
    return _typed(e, g.rank)


def _size(mach, e, m):
    g = _group(mach, e, m)
    if g.kind == BLOCK:
        return _typed(e, _threads(mach))
    if g.kind == GRID:
        s = mach.special
        return _typed(e, _threads(mach) * int(s["gridDim.x"]) * int(s["gridDim.y"]) * int(s["gridDim.z"]))
    return _typed(e, g.count)


def _meta_group_rank(mach, e, m):
    g = _group(mach, e, m)
    if g.kind == COALESCED:
        return _typed(e, 0)
    parent = g.parent or mach.tpb
    return _typed(e, (mach.lane % parent) // g.size)


def _meta_group_size(mach, e, m):
    g = _group(mach, e, m)
    if g.kind == COALESCED:
        return _typed(e, 1)
    return _typed(e, g.parent // g.size if g.parent else -(-_threads(mach) // g.size))


def _block_rank_of_grid(mach, e, m):
    return _typed(e, _block_rank(mach))


def _num_blocks(mach, e, m):
    s = mach.special
    return _typed(e, int(s["gridDim.x"]) * int(s["gridDim.y"]) * int(s["gridDim.z"]))


def _dim3(special: str):
    """thread_block's group_index() and friends: a dim3 in a slot of the calling frame, as a struct result is."""
    def run(mach, e, m):
        key = ("ret", id(e))
        frame = mach.frame
        if key not in frame.addr:
            frame.addr[key] = mach.mem.push(12)
        addr = frame.addr[key]
        for k, axis in enumerate("xyz"):
            mach.store(addr + 4 * k, e.type.fields[k][1], mach.special[f"{special}.{axis}"], m)
        return np.int64(addr)
    return run


# ------------------------------------------------------------------ exchanging values
def _shfl(kind: str):
    def run(mach, e, m):
        g = _group(mach, e, m)
        v, which = mach.ev(e.args[1], m), mach.ev(e.args[2], m)
        if g.kind == TILE:
            return shuffle(mach, v, which, g.size, kind)
        which = np.asarray(which).astype(np.int64)
        if kind == "idx":
            src = np.where(g.count == WARP, which & (WARP - 1), which)
        else:
            src = g.rank - which if kind == "up" else g.rank + which
        return g.from_rank(v, src)
    return run


def _bits(g, flags):
    """Per group, a 32-bit word with bit r set where the member of rank r has the flag."""
    t = g.table(flags) & g.valid
    return (t.astype(np.uint64) << np.arange(t.shape[1], dtype=np.uint64)).sum(1, dtype=np.uint64).astype(np.uint32)


def _vote(kind: str):
    def run(mach, e, m):
        g = _group(mach, e, m)
        pred = (np.broadcast_to(np.asarray(mach.ev(e.args[1], m)), (mach.n,)) != 0) & m
        said = _bits(g, pred)
        if kind == "ballot":
            return g.each(said)
        if kind == "any":
            return g.each(said != 0).astype(np.int32)
        return g.each(said == _bits(g, m)).astype(np.int32)
    return run


def _match_any(mach, e, m):
    g = _group(mach, e, m)
    v = np.broadcast_to(np.asarray(mach.ev(e.args[1], m)), (mach.n,))
    t = g.table(v)
    rows = mach.lane // g.width
    same = (t[rows] == v[:, None]) & g.valid[rows % len(g.valid)] & g.table(m)[rows]
    return (same.astype(np.uint64) << np.arange(g.width, dtype=np.uint64)).sum(1, dtype=np.uint64).astype(np.uint32)


# ------------------------------------------------------------------ reduce and scans
OPS = {
    "plus": lambda a, b: a + b,
    "less": lambda a, b: np.where(b < a, b, a),  # cg::less: (b < a) ? b : a
    "greater": lambda a, b: np.where(a < b, b, a),  # cg::greater: (a < b) ? b : a
    "bit_and": np.bitwise_and, "bit_or": np.bitwise_or, "bit_xor": np.bitwise_xor,
}


def _collective_args(mach, e, m):
    g = _group(mach, e, m)
    dt = dtype_of(e.type)
    op = OPS[e.args[2].value]
    return g, g.table(np.asarray(mach.ev(e.args[1], m)).astype(dt)).astype(dt), dt, lambda a, b: op(a, b).astype(dt)


def _scan_table(t, counts, op):
    """Hillis–Steele over ranks: at step i, rank r ≥ i combines its value with rank r − i's (`op(own, earlier)`)."""
    ranks = np.arange(t.shape[1])[None, :]
    i = 1
    while i < t.shape[1]:
        earlier = np.concatenate([t[:, :i], t[:, :-i]], axis=1)
        t = np.where((ranks >= i) & (i < counts[:, None]), op(t, earlier), t)
        i <<= 1
    return t


def _reduce(mach, e, m):
    g, t, dt, op = _collective_args(mach, e, m)
    if g.kind == TILE:
        ranks = np.arange(g.size)
        mask = g.size >> 1
        while mask:
            t = op(t, t[:, ranks ^ mask])
            mask >>= 1
        return g.own(t)
    counts = g.rows_count
    rows = np.arange(len(t))
    tree = t  # a power of two: shfl_down, offsets from half the size down, the result from rank 0
    ranks = np.arange(WARP)[None, :]
    for off in (16, 8, 4, 2, 1):
        down = np.where(ranks + off < counts[:, None], np.roll(tree, -off, axis=1), tree)
        tree = np.where((off < counts)[:, None], op(tree, down), tree)
    scanned = _scan_table(t, counts, op)  # any other size: scanned, the result from the last rank
    last = scanned[rows, np.maximum(counts - 1, 0)]
    pow2 = (counts & (counts - 1)) == 0
    return g.each(np.where(pow2, tree[:, 0], last)).astype(dt)


def _scan(exclusive: bool):
    def run(mach, e, m):
        g, t, dt, op = _collective_args(mach, e, m)
        counts = np.full(len(t), g.size) if g.kind == TILE else g.rows_count
        t = _scan_table(t, counts, op)
        if exclusive:  # the inclusive result one rank up; rank 0 gets T{}
            t = np.concatenate([np.zeros((len(t), 1), dt), t[:, :-1]], axis=1)
        return g.own(t)
    return run


COOP = {
    "cg::this_thread_block": _this_thread_block, "cg::this_grid": _this_grid,
    "cg::coalesced_threads": _coalesced_threads, "cg::tiled_partition": _tiled_partition,
    "cg::sync": _sync, "cg::group.sync": _sync, "cg::thread_rank": _thread_rank, "cg::size": _size, "cg::num_threads": _size,
    "cg::meta_group_rank": _meta_group_rank, "cg::meta_group_size": _meta_group_size,
    "cg::block_rank": _block_rank_of_grid, "cg::num_blocks": _num_blocks,
    "cg::group_index": _dim3("blockIdx"), "cg::thread_index": _dim3("threadIdx"),
    "cg::dim_threads": _dim3("blockDim"), "cg::group_dim": _dim3("blockDim"),
    "cg::shfl": _shfl("idx"), "cg::shfl_up": _shfl("up"), "cg::shfl_down": _shfl("down"),
    "cg::shfl_xor": _shfl("xor"),
    "cg::any": _vote("any"), "cg::all": _vote("all"), "cg::ballot": _vote("ballot"), "cg::match_any": _match_any,
    "cg::reduce": _reduce, "cg::inclusive_scan": _scan(False), "cg::exclusive_scan": _scan(True),
}
