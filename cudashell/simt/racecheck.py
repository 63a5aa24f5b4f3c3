"""Races, as compute-sanitizer's racecheck finds them: two threads of a block touching one shared-memory
location between barriers with at least one writing, and two threads of a launch writing one global location
(atomics excepted). Reported as warnings after the launch; the kernel still runs as the GPU would."""

from __future__ import annotations

import numpy as np

from .memory import SHARED_BASE

NONE = -1
MANY = -2


def _at(loc) -> str:
    return f"{loc[0]}:{loc[1]}:{loc[2]}" if loc else "?"


class Watch:
    def __init__(self, mem, report, describe):
        self.mem, self.report, self.describe = mem, report, describe
        shape = mem.shared.shape
        self.writer = np.full(shape, NONE, np.int32)  # the thread (in its block) that last wrote each byte
        self.reader = np.full(shape, NONE, np.int32)  # the thread that read it, or MANY
        self.wloc = np.zeros(shape, np.int32)
        self.rloc = np.zeros(shape, np.int32)
        self.locs: list = [None]
        self.global_writers: dict = {}  # region → (granularity, first writer per unit: thread id + 1)
        self.dirty = False

    def _loc_id(self, loc) -> int:
        try:
            return self.locs.index(loc)
        except ValueError:
            self.locs.append(loc)
            return len(self.locs) - 1

    def barrier(self) -> None:
        if self.dirty:
            self.writer.fill(NONE)
            self.reader.fill(NONE)
            self.dirty = False

    def _hazard(self, kind, block, off, t_then, loc_then, t_now, loc_now, lane_now):
        tpb = self.mem.tpb
        blk_lane = int(block) * tpb
        first = self.describe(blk_lane + int(t_then), None, 0, "", None, "")
        # describe gives "… by thread (x,y,z) in block (…)": keep the thread and block words
        then_thread = first.split(" by ", 1)[1]
        now_thread = self.describe(int(lane_now), None, 0, "", None, "").split(" by ", 1)[1]
        self.report.warn(f"racecheck: shared-memory {kind} hazard at byte {int(off)} of the block's shared memory: "
                         f"{then_thread} at {_at(self.locs[int(loc_then)])}, then {now_thread} at {_at(loc_now)}, "
                         "with no __syncthreads() between")

    def shared(self, block, off, lanes, size, loc, write) -> None:
        self.dirty = True
        t = (lanes % self.mem.tpb).astype(np.int32)
        lid = self._loc_id(loc)
        if write:
            prior_w = self.writer[block, off]
            prior_r = self.reader[block, off]
            waw = (prior_w >= 0) & (prior_w != t)
            war = ((prior_r >= 0) & (prior_r != t)) | (prior_r == MANY)
            # two lanes of this very store on one location
            key = block.astype(np.int64) * (1 << 32) + off
            order = np.argsort(key, kind="stable")
            same = np.zeros(len(key), bool)
            if len(key) > 1:
                same[order[1:]] = key[order[1:]] == key[order[:-1]]
            if waw.any():
                i = int(np.flatnonzero(waw)[0])
                self._hazard("write-after-write", block[i], off[i], prior_w[i], self.wloc[block[i], off[i]], t[i],
                             loc, lanes[i])
            elif war.any():
                i = int(np.flatnonzero(war)[0])
                then = prior_r[i] if prior_r[i] >= 0 else (t[i] + 1) % self.mem.tpb
                self._hazard("write-after-read", block[i], off[i], then, self.rloc[block[i], off[i]], t[i], loc,
                             lanes[i])
            elif same.any():
                i = int(np.flatnonzero(same)[0])
                j = order[np.searchsorted(key[order], key[i])]
                self._hazard("write-after-write", block[i], off[i], t[j], lid, t[i], loc, lanes[i])
            self.writer[block, off] = t
            self.wloc[block, off] = lid
            self.reader[block, off] = NONE
        else:
            prior_w = self.writer[block, off]
            raw = (prior_w >= 0) & (prior_w != t)
            if raw.any():
                i = int(np.flatnonzero(raw)[0])
                self._hazard("read-after-write", block[i], off[i], prior_w[i], self.wloc[block[i], off[i]], t[i],
                             loc, lanes[i])
            prior_r = self.reader[block, off]
            self.reader[block, off] = np.where(prior_r == NONE, t, np.where(prior_r == t, t, MANY))
            self.rloc[block, off] = lid

    def global_write(self, region, addr, lanes, size, loc) -> None:
        gran, table = self.global_writers.get(region, (None, None))
        if table is None:  # one uint32 per element written: as many bytes as the buffer, for 4-byte elements
            gran = size
            table = np.zeros(-(-region.size // gran), np.uint32)
            self.global_writers[region] = (gran, table)
        unit = (addr - region.start) // gran
        gid = (self.gid(lanes) + 1).astype(np.uint32)
        prior = table[unit]
        clash = (prior != 0) & (prior != gid)
        dup = np.zeros(len(unit), bool)
        if len(unit) > 1 and not (unit[1:] > unit[:-1]).all():  # not one lane an element: look for two on one
            order = np.argsort(unit, kind="stable")
            dup[order[1:]] = (unit[order[1:]] == unit[order[:-1]]) & (gid[order[1:]] != gid[order[:-1]])
        if clash.any() or dup.any():
            i = int(np.flatnonzero(clash | dup)[0])
            now = self.describe(int(lanes[i]), None, 0, "", None, "").split(" by ", 1)[1]
            self.report.warn(f"racecheck: two threads wrote 0x{int(addr[i]):x} in {region.name} without an atomic "
                             f"(the last at {_at(loc)}, {now}): which value stays is up to the GPU")
        table[unit] = gid

    def gid(self, lanes):
        """A thread's number in the whole launch (its chunk's first block is folded in by the caller)."""
        return self.base + lanes

    base = 0
