"""Races, as compute-sanitizer's racecheck finds them: two threads of a block touching one shared-memory
location between barriers with at least one writing, and two threads of a launch writing one global location
(atomics excepted). Reported as warnings after the launch; the kernel still runs as the GPU would."""

from __future__ import annotations

import numpy as np

NONE = -1
MANY = -2
TILED = -3  # at and below: an access ordered by a warp-level barrier for the threads of one tile (see tile_barrier)
SNAPSHOT_BYTES = 4 << 20  # the most the remembered states of a launch's tables take
WARP_READERS = -7000  # down to -7031: read by several threads, all of warp WARP_READERS - value (below the tags)


_TAGS = [np.zeros(0, np.uint16)]


def _tags(n: int) -> np.ndarray:
    """The writers' tags of threads 0 … n - 1 (thread % 65535 + 1), made once and sliced."""
    if len(_TAGS[0]) < n:
        _TAGS[0] = (np.arange(max(n, 2 * len(_TAGS[0]), 1 << 17)) % 65535 + 1).astype(np.uint16)
    return _TAGS[0]


def _at(loc) -> str:
    return f"{loc[0]}:{loc[1]}:{loc[2]}" if loc else "?"


class Watch:
    """One launch's race detector. Shared memory is watched per 4-byte word (per byte for narrower accesses), in
    int16 tables made at the first shared access and cleared at each chunk and barrier; global writes per
    element, in a 16-bit tag of the writer per element of a buffer written (compute-sanitizer checks shared memory
    only; this check of global writes is the simulator's extra)."""

    def __init__(self, report, tpb: int, blocks: int, shared_bytes: int):
        self.report, self.tpb = report, tpb
        self.shape = {4: (blocks, max(1, -(-shared_bytes // 4))), 1: (blocks, max(1, shared_bytes))}
        self.tables: dict = {}  # granularity → (writer, reader, writer's line, reader's line)
        self.locs: list = [None]
        self.global_writers: dict = {}  # region → (granularity, the writer of each element: thread id + 1)
        self.describe = None
        self.base = 0
        self.dirty = False
        self.uniform = True  # every block's rows of the tables are row 0's: since the last barrier each access was
        # the same (lanes and offsets) in every block of the chunk, so one block's bookkeeping stands for all
        # While uniform, the tables' row 0 is a state reached from the empty one (a barrier's) by a sequence of
        # accesses: a tile loop repeats the same few, so each state's row 0 is kept once (`snapshots`) and what an
        # access does to a state without a hazard is remembered (`memo`): then it costs a dictionary look-up.
        self.state: int | None = 0  # the current state's number (None: not remembered, until the next barrier)
        self.stale = False  # row 0 is not yet the state's: it is in snapshots[state]
        self.snapshots: list = [{}]  # state → {granularity: row 0 of each table}; state 0: all empty
        self.memo: dict | None = {}  # (state, access) → the state after it
        self.hazarded = False

    def chunk(self, describe, base: int) -> None:
        """A new chunk of blocks: its own shared memory, its own thread numbers from `base` on."""
        self.describe, self.base = describe, base
        self.dirty = True
        self.barrier()

    def _tables(self, gran: int):
        t = self.tables.get(gran)
        if t is None:
            shape = self.shape[gran]
            t = self.tables[gran] = (np.full(shape, NONE, np.int16), np.full(shape, NONE, np.int16),
                                     np.zeros(shape, np.int16), np.zeros(shape, np.int16))
        return t

    def _loc_id(self, loc) -> int:
        try:
            return self.locs.index(loc)
        except ValueError:
            self.locs.append(loc)
            return len(self.locs) - 1

    def barrier(self) -> None:
        if self.dirty:
            for writer, reader, _, _ in self.tables.values():
                writer.fill(NONE)
                reader.fill(NONE)
            self.dirty = False
        self.uniform = True
        self.state, self.stale = 0, False

    def _materialise(self) -> None:
        """Row 0 of the tables made the current state's, where the memo skipped the updates."""
        if self.stale:
            rows = self.snapshots[self.state]
            for gran, tables in self.tables.items():
                saved = rows.get(gran)
                for k, t in enumerate(tables):
                    t[0] = saved[k] if saved is not None else (NONE if k < 2 else 0)
            self.stale = False

    def _spread(self) -> None:
        """Row 0 of every table copied to every block's row: the blocks' accesses are about to differ."""
        if self.uniform:
            self._materialise()
            for table in self.tables.values():
                for t in table:
                    t[1:] = t[0]
            self.uniform = False

    def tile_barrier(self, lanes, width: int) -> None:
        """A barrier of the threads of `width`-thread tiles of a warp (a tile's sync, __syncwarp): each access
        recorded for a thread of `lanes` (the lanes that reached it) becomes its tile's, ordered before the later
        accesses of that tile's threads and not of any other thread. It is written as TILED - (first thread of the
        tile · 6 + log2 width), which an int16 holds for the 1024 threads of a block."""
        if not self.tables:
            return
        self._spread()
        reached = np.asarray(lanes).reshape(-1)
        came = np.zeros(self.shape[4][0] * self.tpb, bool)  # the last chunk may hold fewer blocks than the tables
        came[:len(reached)] = reached
        warp_came = came.reshape(-1, 32).any(1)
        for writer, reader, _, _ in self.tables.values():
            cols = writer.shape[1]
            for table in (writer.reshape(-1), reader.reshape(-1)):
                cells = np.flatnonzero(table >= 0)  # the few cells a thread touched since the last barrier
                who = table[cells]
                synced = came[cells // cols * self.tpb + who]
                table[cells[synced]] = TILED - ((who[synced] & ~(width - 1)) * 6 + width.bit_length() - 1)
            flat = reader.reshape(-1)
            cells = np.flatnonzero(flat <= WARP_READERS)  # several readers of one warp: ordered for its threads
            warp = WARP_READERS - flat[cells]
            synced = warp_came[cells // cols * (self.tpb // 32) + warp]
            flat[cells[synced]] = TILED - (warp[synced] * 32 * 6 + 5)

    def _unordered(self, prior, t):
        """Whether the recorded access `prior` (a thread, or a tile's tag) is unordered with thread `t`'s now."""
        mine = (prior >= 0) & (prior != t)
        tagged = (prior <= TILED) & (prior > WARP_READERS)
        if not tagged.any():
            return mine
        v = TILED - prior
        base, width = v // 6, 1 << (v % 6)
        return mine | (tagged & ((t < base) | (t >= base + width)))

    def _thread(self, prior, now) -> int:
        """The thread a message names for a recorded access: its own, the first of the tile that synced, or
        (several readers) another than `now` (of its warp where they were all of one)."""
        if prior >= 0:
            return int(prior)
        if prior == MANY:
            return (int(now) + 1) % self.tpb
        if prior <= WARP_READERS:
            return (WARP_READERS - int(prior)) * 32 + (int(now) + 1) % 32
        return int((TILED - prior) // 6)

    def _hazard(self, kind, block, off, t_then, loc_then, t_now, loc_now, lane_now):
        self.hazarded = True
        blk_lane = int(block) * self.tpb
        first = self.describe(blk_lane + self._thread(t_then, t_now), None, 0, "", None, "")
        # describe gives "… by thread (x,y,z) in block (…)": keep the thread and block words
        then_thread = first.split(" by ", 1)[1]
        now_thread = self.describe(int(lane_now), None, 0, "", None, "").split(" by ", 1)[1]
        self.report.warn(f"racecheck: shared-memory {kind} hazard at byte {int(off)} of the block's shared memory: "
                         f"{then_thread} at {_at(self.locs[int(loc_then)])}, then {now_thread} at {_at(loc_now)}, "
                         "with no __syncthreads() between")

    def shared(self, block, off, lanes, size, loc, write, every_block: int = 0) -> None:
        """One access of shared memory by `lanes`; `every_block` (the chunk's blocks): these are block 0's, and
        every block of the chunk made the same access (the tables' rows stay alike while each access is such)."""
        self.dirty = True
        if every_block and not self.uniform:  # the rows differ already: every block's lanes, one by one
            ids = np.arange(every_block, dtype=np.int64)
            block = np.repeat(ids, len(lanes))
            lanes = (lanes[None, :] + (ids * self.tpb)[:, None]).reshape(-1)
            off = np.tile(off, every_block)
            every_block = 0
        if not every_block:
            self._spread()
        if size > 4:  # a vector's access: each of its words is a location of its own
            for k in range(0, size, 4):
                self.shared(block, off + k, lanes, 4, loc, write, every_block)
            return
        key = None
        if every_block and self.memo is not None and self.state is not None:
            key = (self.state, off.tobytes(), lanes.tobytes(), size, write, loc)
            after = self.memo.get(key)
            if after is not None:
                self.state, self.stale = after, True
                return
            self._materialise()
            self.hazarded = False
        self._update(block, off, lanes, size, loc, write)
        if key is not None:
            row_bytes = sum(t[0].nbytes for tables in self.tables.values() for t in tables)
            if self.hazarded or (len(self.snapshots) + 1) * row_bytes > SNAPSHOT_BYTES:  # a hazard's message
                self.state = None  # names this chunk's threads: not remembered
                return
            self.snapshots.append({g: tuple(t[0].copy() for t in tables) for g, tables in self.tables.items()})
            self.state = self.memo[key] = len(self.snapshots) - 1

    def _update(self, block, off, lanes, size, loc, write) -> None:
        gran = 4 if size >= 4 else 1
        writer, reader, wloc, rloc = (t.reshape(-1) for t in self._tables(gran))
        cell = block * self.shape[gran][1] + (off >> 2 if gran == 4 else off)  # each lane's location, flat
        t = (lanes - block * self.tpb).astype(np.int16)
        lid = self._loc_id(loc)
        prior_w = writer[cell]
        if write:
            prior_r = reader[cell]
            waw = self._unordered(prior_w, t)
            war = self._unordered(prior_r, t) | (prior_r == MANY) | (prior_r <= WARP_READERS)
            writer[cell] = t
            same = writer[cell] != t  # two lanes of this very store on one location: one of them lost
            if waw.any():
                i = int(np.flatnonzero(waw)[0])
                self._hazard("write-after-write", block[i], off[i], prior_w[i], wloc[cell[i]], t[i], loc, lanes[i])
            elif war.any():
                i = int(np.flatnonzero(war)[0])
                self._hazard("write-after-read", block[i], off[i], prior_r[i], rloc[cell[i]], t[i], loc, lanes[i])
            elif same.any():
                i = int(np.flatnonzero(same)[0])
                self._hazard("write-after-write", block[i], off[i], writer[cell[i]], lid, t[i], loc, lanes[i])
            wloc[cell] = lid
            reader[cell] = NONE
        else:
            raw = self._unordered(prior_w, t)
            if raw.any():
                i = int(np.flatnonzero(raw)[0])
                self._hazard("read-after-write", block[i], off[i], prior_w[i], wloc[cell[i]], t[i], loc, lanes[i])
            prior_r = reader[cell]
            ordered = (prior_r == NONE) | (prior_r == t) | ((prior_r <= TILED) & ~self._unordered(prior_r, t))
            warp = (t // 32).astype(np.int16)
            one_warp = ((prior_r >= 0) & (prior_r // 32 == warp)) | (prior_r == WARP_READERS - warp)
            reader[cell] = np.where(ordered, t, np.where(one_warp, WARP_READERS - warp, MANY))
            rloc[cell] = lid

    def global_write(self, region, addr, lanes, size, loc, distinct: bool = False, run: bool = False) -> None:
        """`distinct`: the lanes' elements are known to differ (no two lanes of this store on one); `run`: they
        are consecutive elements written by consecutive lanes (slices of the tables, no index arrays)."""
        gran, table = self.global_writers.get(region, (None, None))
        if table is None:  # a 16-bit tag of the writer per element: half the bytes of a buffer of 4-byte elements
            gran = min(size, 8)
            table = np.zeros(-(-region.size // gran), np.uint16)
            self.global_writers[region] = (gran, table)
        if size > gran:  # a vector's store: each of its elements on its own
            for k in range(0, size, gran):
                self.global_write(region, addr + k, lanes, gran, loc, distinct)
            return
        if run and size == gran:
            first = (int(addr[0]) - region.start) // gran
            unit = slice(first, first + len(addr))
            start = (self.base + int(lanes[0])) % 65535
            gid = _tags(start + len(addr))[start:start + len(addr)]
        else:
            unit = (addr - region.start) // gran
            gid = (self.gid(lanes) % 65535 + 1).astype(np.uint16)  # two writers 65535 threads apart look alike
        prior = table[unit]
        clash = (prior != 0) & (prior != gid) if prior.any() else False
        table[unit] = gid
        dup = False if distinct else table[unit] != gid  # two lanes of this store on one element: all but one lost
        if np.any(clash) or np.any(dup):
            i = int(np.flatnonzero(clash | dup)[0])
            now = self.describe(int(lanes[i]), None, 0, "", None, "").split(" by ", 1)[1]
            self.report.warn(f"racecheck: two threads wrote 0x{int(addr[i]):x} in {region.name} without an atomic "
                             f"(the last at {_at(loc)}, {now}): which value stays is up to the GPU")

    def gid(self, lanes):
        """A thread's number in the whole launch: the chunk's first lane's, `base`, plus the lane's."""
        return self.base + lanes
