"""The stream-ordered allocator's pools on the simulator: each GPU's default pool and those `pool create` makes,
with the driver's attributes (release threshold, reserved and used bytes and their high-water marks, the three reuse
policies), which memory an allocation may reuse, and what a synchronize gives back.

Modeled after the H100 (CUDA 13: ../shared/design/memory-model-facts.md, "Stream-ordered allocator"): threshold 0 by
default; a block freed on a stream comes back to the next allocation on that stream at once (the same address); a
block freed on another stream after an event dependency, or once that stream has reached the free (opportunistic);
failing all, the allocator makes the allocating stream wait for a pending free (internal dependencies). A freed block
stays the pool's *used* memory until a stream, event or device synchronize — or a trim — finds its free done (its
stream has reached it): then it is the pool's idle memory. A synchronize gives idle memory back down to the release
threshold, a trim down to what it keeps — so `cudaMemPoolTrimTo` right after a free still queued behind work keeps
the memory reserved (a C probe on the H100), and right after a free on an idle stream gives it back (the
simulator's stream reaches the free at once; on a GPU the trim races with the driver reaching it). Reserved memory grows in 2 MiB steps (the pool's mapping
granularity on the H100)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import ShellError
from .common import INVALID, MIB, SimAlloc

GROWTH = 2 * MIB
REUSE = ("follow-events", "opportunistic", "internal")  # the driver's three reuse policies, all on by default


@dataclass(eq=False)
class SimPool:
    device: int
    default: bool
    threshold: int = 0
    reuse: dict = field(default_factory=lambda: dict.fromkeys(REUSE, True))
    reserved: int = 0
    used: int = 0  # live allocations and freed blocks no synchronize has seen done
    reserved_high: int = 0
    used_high: int = 0
    mapped_before: bool = False  # its first mapping costs far more than later ones (sim/memory.py)
    destroyed: bool = False  # cuMemPoolDestroy with allocations still out: it goes when the last one does

    def use(self, nbytes: int) -> None:
        self.used += nbytes
        self.used_high = max(self.used_high, self.used)

    def grow(self, nbytes: int) -> None:
        self.reserved += nbytes
        self.reserved_high = max(self.reserved_high, self.reserved)

    @property
    def idle(self) -> int:
        return self.reserved - self.used

    def keep_at_most(self, nbytes: int) -> None:
        """Give idle memory back until at most `nbytes` stay reserved (used memory cannot go)."""
        self.reserved = max(self.used, min(self.reserved, nbytes))


class Pools:
    """The simulator's pools (a mixin: its state is made in SimBackend._fresh; handles are ints, as on the GPU side,
    so they cross the worker's pipe)."""

    def pool_default(self, device):
        self._alive()
        if device not in self.default_pools:
            self.default_pools[device] = self._new_pool(SimPool(device, True))
        return self.default_pools[device]

    def pool_create(self, device):
        self._alive()
        return self._new_pool(SimPool(device, False))

    def _new_pool(self, pool: SimPool) -> int:
        self.next_pool += 1
        self.mem_pools[self.next_pool] = pool
        return self.next_pool

    def _pool(self, handle) -> SimPool:
        pool = self.mem_pools.get(handle)
        if pool is None or pool.destroyed:
            raise ShellError(INVALID, "no such memory pool (it was destroyed)", "`pool` lists the pools")
        return pool

    def pool_destroy(self, pool):
        self._alive()
        pool = self._pool(pool)
        if pool.default:
            raise ShellError(INVALID, "a GPU's default pool cannot be destroyed", "destroy a pool `pool create` made")
        pool.destroyed = True
        self._forget_if_destroyed(pool)

    def _forget_if_destroyed(self, pool: SimPool) -> None:
        """A destroyed pool goes when its last allocation does (its memory with it)."""
        if pool.destroyed and not pool.used:
            self.mem_pools = {h: p for h, p in self.mem_pools.items() if p is not pool}

    def pool_set(self, pool, attribute, value):
        self._alive()
        pool = self._pool(pool)
        if attribute == "threshold":
            pool.threshold = value
        elif attribute in REUSE:
            pool.reuse[attribute] = bool(value)
        else:
            raise ShellError(INVALID, f"no pool attribute {attribute}", f"threshold, {', '.join(REUSE)}")

    def pool_attributes(self, pool):
        self._alive()
        p = self._pool(pool)
        return {"threshold": p.threshold, "reserved": p.reserved, "reserved_high": p.reserved_high,
                "used": p.used, "used_high": p.used_high, **{k.replace("-", "_"): p.reuse[k] for k in REUSE}}

    def pool_trim(self, pool, keep):
        """cuMemPoolTrimTo: only idle memory goes — a freed block whose stream has not reached the free is still
        used."""
        self._alive()
        self._elapse(self.profile.async_call)  # what the streams reach during the call counts
        self._frees_done()
        self._pool(pool).keep_at_most(keep)

    def _pool_of_stream(self, handle, stream) -> SimPool:
        """The pool an allocation on `stream` comes from: the one named, or its GPU's default pool."""
        device = self._context(self._ctx_of(stream)).device
        pool = self._pool(handle if handle is not None else self.pool_default(device))
        if pool.device != device:
            raise ShellError(INVALID, f"the pool is GPU {pool.device}'s, the stream GPU {device}'s",
                             "allocate from a pool of the stream's GPU")
        return pool

    def _reusable(self, q, pool: SimPool, fits) -> tuple[SimAlloc | None, bool]:
        """A block of `pool` freed in stream order that an allocation on stream q may take, by the driver's rules in
        its order: freed on q itself; ordered before q by an event (follow-events); freed on a stream that has
        reached the free (opportunistic). Second: whether taking it needs q to wait for the free (internal
        dependencies) — only asked for when nothing else serves the allocation (`internal=True`)."""
        mine = [b for b in self.freed_on.get(q, ()) if b.mem_pool is pool and fits(b)]
        if mine:
            return min(mine, key=_held), False
        others = [b for s, blocks in self.freed_on.items() if s is not q for b in blocks if b.mem_pool is pool and fits(b)]
        ordered = [b for b in others if (pool.reuse["follow-events"] and self._ordered_after_free(q, b))
                   or (pool.reuse["opportunistic"] and b.reached)]
        if ordered:
            return min(ordered, key=_held), False
        return None, False

    def _ordered_after_free(self, q, b: SimAlloc) -> bool:
        """Whether stream q is ordered after b's free: by an event it waited for, or by the legacy default stream's
        implicit synchronisation with the blocking streams of its context (the driver follows both)."""
        if q.seen.get(b.freed_by, 0) >= b.free_seq:
            return True
        default = self.ctxs[q.ctx].default
        return b.freed_by.ctx == q.ctx and (b.freed_by is default and not q.nonblocking
                                           or q is default and not b.freed_by.nonblocking)

    def _pending_block(self, q, pool: SimPool, fits) -> SimAlloc | None:
        """Internal dependencies: a block freed on another stream, not yet reached, that q may take by waiting."""
        if not pool.reuse["internal"]:
            return None
        others = [b for s, blocks in self.freed_on.items() if s is not q for b in blocks if b.mem_pool is pool and fits(b)]
        return min(others, key=_held) if others else None

    def _frees_done(self) -> None:
        """Blocks whose free their stream has reached become their pools' idle memory, for any stream."""
        for blocks in self.freed_on.values():
            for b in [b for b in blocks if b.reached]:
                blocks.remove(b)
                self._release(b)

    def _pools_synchronized(self) -> None:
        """A stream, event or device synchronize: the frees done by now are seen (their blocks become idle memory,
        for any stream), and each pool gives idle memory back down to its release threshold."""
        self._frees_done()
        for pool in self.mem_pools.values():
            if pool.reserved > pool.threshold:
                pool.keep_at_most(pool.threshold)


def _held(b: SimAlloc) -> int:
    return b.span or b.size
