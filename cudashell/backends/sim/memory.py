"""Memory: allocations from the driver-like address spaces, registration, what the driver says of a pointer,
reads and writes of the lazily stored bytes, managed prefetch and advice."""

from __future__ import annotations

from dataclasses import replace

from ...errors import ShellError
from ...model import syncrules as R
from ...sizes import format_size
from ..addresses import SMALL, AddressSpaceFull, granule
from ..base import HOST_DEVICEMAP, HOST_PORTABLE, HOST_WRITECOMBINED, Allocation
from ..refusals import refuse_register
from ..sparse import SparseBytes
from .common import INVALID, MIB, STALE_LIMIT, SimAlloc, ns, secs
from .vmm import SimReservation
from .pools import GROWTH

MALLOC = 1e-6  # malloc or free of pages never touched: about a microsecond


def pool_map_seconds(profile, nbytes: int, first: bool) -> float:
    """The host time of an allocation whose pool maps `nbytes` (its first mapping, or a later one): the profile's
    pool figures (measured on the H100; `calibrate` measures them)."""
    fixed = profile.pool_first_map if first else profile.pool_map_again
    return profile.pool_reuse + fixed + profile.pool_map_per_mib * nbytes / MIB


def _rounded(region: str, size: int) -> int:
    """The bytes of addresses an allocation of `size` takes."""
    step = granule(region, size)
    return -(-size // step) * step


def _out_of_memory(kind: str) -> tuple[str, str]:
    """The code of an allocation that finds no room, and the call to name in its message: pageable memory is
    malloc's, the host's failure; every other kind the driver's."""
    return ("HOST_OUT_OF_MEMORY", "malloc: ") if kind == "pageable" else ("CUDA_ERROR_OUT_OF_MEMORY", "")


class Memory:
    """The simulator's memory (a mixin: its state is made in SimBackend._fresh)."""

    def alloc(self, kind, size, flags, ctx=None):
        self._alive()
        p = self.profile
        if size <= 0:
            raise ShellError(INVALID, "a size of 0 bytes cannot be allocated", "give a size above 0")
        device = self._context(ctx).device
        self._room_for(kind, size, device)
        if kind == "managed" and not p.managed_memory:
            raise ShellError("CUDA_ERROR_NOT_SUPPORTED", "this device has no managed memory")
        region = "alias" if kind == "device" and not p.unified_addressing else kind
        a = SimAlloc(kind, size, SparseBytes(size, self.budget), region=region, device=device, ctx=ctx)
        a.addr = self._addresses(region, size, kind)
        host_ptr = device_ptr = None
        cost = MALLOC
        if kind == "pageable":
            host_ptr = a.addr
        elif kind == "pinned":
            host_ptr = a.addr
            try:
                device_ptr = self._map(host_ptr, size, "mapped" in flags)
            except ShellError:
                self.addresses.give(region, a.addr, size)  # a refused allocation leaves nothing behind
                raise
            a.dptr = device_ptr
            a.host_bits = (HOST_WRITECOMBINED if "writecombined" in flags else 0) | \
                (HOST_DEVICEMAP if device_ptr is not None else 0) | self._portable_bit(a, "portable" in flags)
            cost = p.pinned_alloc_per_mib * size / MIB + 5e-6
        elif kind == "device":
            device_ptr = a.addr
            cost = p.device_alloc
            if size < SMALL:
                self.pooled += 1
                self._inherit(a)
        else:
            host_ptr = device_ptr = a.addr
            cost = p.device_alloc
        self.live.add(a)
        self._count(a, +1)
        return Allocation(a, host_ptr, device_ptr), self._host_call(cost)

    def _room_for(self, kind: str, size: int, device: int) -> None:
        """Raise the out-of-memory error an allocation of `size` bytes of `kind` on GPU `device` meets."""
        p = self.profile
        on_device = kind in ("device", "managed")
        used, limit = (self.device_used, p.device_memory) if on_device else (self.host_used, p.host_memory)
        if device and on_device:  # another GPU's own memory
            used = sum(x.size for x in self.live if x.device == device and x.kind == "device"
                       and not isinstance(x, SimReservation))  # a reservation is addresses; its handles are memory
            used += sum(h.size for h in self.vmm_handles.values() if h.device == device)
        if on_device:  # memory the stream-ordered pools hold idle is taken too
            used += sum(p.idle for p in self.mem_pools.values() if p.device == device)
        if used + size > limit:
            code, call = _out_of_memory(kind)
            raise ShellError(code, f"{call}{size} bytes do not fit: {used} of {limit} bytes of "
                             f"{'device' if on_device else 'host'} memory in use", "free something, or ask for less")

    def alloc_async(self, size, stream, pool=None):
        """The address is known at once (the driver returns it); the stream reaches the allocation in its order,
        which takes no engine time. Memory comes, as from the driver's pool (pools.py), first from a block freed
        earlier that the stream may take (freed on it — stream order makes it safe before the stream reaches the
        free —, after an event, or done), then from the pool's idle memory; only the rest is mapped, and only that
        needs room and host time; with no room left, a block still being freed on another stream, the allocating
        stream made to wait for that free."""
        self._alive()
        if size <= 0:
            raise ShellError(INVALID, "a size of 0 bytes cannot be allocated", "give a size above 0")
        q = self._queue_of(stream)
        mem_pool = self._pool_of_stream(pool, stream)
        device = mem_pool.device
        region = "device" if self.profile.unified_addressing else "alias"
        a = SimAlloc("device", size, SparseBytes(size, self.budget), region=region, device=device,
                     ctx=self._ctx_of(stream), mem_pool=mem_pool)

        def fits(b: SimAlloc) -> bool:  # in the same small or large space, its addresses holding `size` bytes
            held = b.span or b.size
            return (held < SMALL) == (size < SMALL) and _rounded(region, size) <= _rounded(region, held)

        before = self.now
        block, _ = self._reusable(q, mem_pool, fits)
        mapped = 0
        if block is None and mem_pool.idle < size:
            mapped = -(-(size - mem_pool.idle) // GROWTH) * GROWTH
            try:
                self._room_for("device", mapped, device)
            except ShellError:
                block = self._pending_block(q, mem_pool, fits)
                if block is None:
                    raise
                q.tail = max(q.tail, block.free_end)  # the driver's own dependency on that free
                mapped = 0
        if block is not None:
            self._take_block(block, a)
            cost = self.profile.pool_reuse
        else:
            a.addr = self._addresses(region, size, "device")
            mem_pool.grow(mapped)
            cost = (self.profile.pool_warm if not mapped
                    else pool_map_seconds(self.profile, size - (mem_pool.idle - mapped), not mem_pool.mapped_before))
            mem_pool.mapped_before = mem_pool.mapped_before or bool(mapped)
        mem_pool.use(size)
        # `cost` is the whole call's host time, as the GPU measures it; _submit adds the async call it includes
        self._advance(self.now + max(0, ns(cost) - self.call_ns))
        self.live.add(a)
        self._count(a, +1)
        t = self._submit(stream, 0.0, None, R.QUEUED)
        return Allocation(a, None, a.addr), replace(t, host_seconds=secs(self.now - before))  # queued as the call ends

    def _take_block(self, block: SimAlloc, a: SimAlloc) -> None:
        """A freed block taken whole by a new allocation (the driver would split it; the bytes it holds beyond the
        new size become the pool's idle memory): its addresses, and its place in the pool's used memory."""
        self.freed_on[block.freed_by].remove(block)
        a.addr, a.span = block.addr, max(block.span, block.size)
        block.mem_pool.used -= block.size
        block.data.release()
        block.freed = True
        self.live.discard(block)
        self._count(block, -1)

    def free_async(self, buf, stream):
        """The memory goes back to its pool in stream order; the host does not wait. Until a synchronize sees the
        free done it is the pool's used memory, which only an allocation ordered after the free may take
        (`Pools._reusable`)."""
        self._alive()
        a: SimAlloc = buf.handle
        if a.kind != "device":
            raise ShellError(INVALID, f"{buf.name} is {a.kind} memory: cudaFreeAsync frees device memory",
                             "free it without `async`")
        if a.mem_pool is None:  # cudaMalloc's memory: the driver frees it when the stream reaches the free
            return self._submit(stream, 0.0, None, R.QUEUED,
                                lambda snapshot: lambda: None if a.freed else self._release(a))
        key = self._queue_of(stream)
        self.freed_on.setdefault(key, []).append(a)
        a.freed_by = key

        def reached():
            a.reached = True
        t = self._submit(stream, 0.0, None, R.QUEUED, lambda snapshot: reached)
        a.free_seq, a.free_end = self.seq, key.tail
        return t

    def _queue_of(self, stream):
        """The stream a handle names (None: the current context's default stream), to key what was freed on it."""
        return stream if stream is not None else self._context(self.cur).default

    def _portable_bit(self, a: SimAlloc, asked: bool) -> int:
        """Small pinned allocations share a pool (one per write-combining), and cuMemHostGetFlags reports
        the pool's PORTABLE bit: that of the allocation which made it (H100, CUDA 13)."""
        if a.size >= SMALL:
            return HOST_PORTABLE if asked else 0
        a.pool = bool(a.host_bits & HOST_WRITECOMBINED)
        bit, live = self.host_pools.get(a.pool, (HOST_PORTABLE if asked else 0, 0))
        self.host_pools[a.pool] = (bit, live + 1)
        return bit

    def _inherit(self, a: SimAlloc) -> None:
        """cudaMalloc does not clear memory: a small block handed back holds what its last owner left."""
        for addr, old in list(self.stale.items()):
            lo, hi = max(addr, a.addr), min(addr + old.size, a.addr + a.size)
            if lo < hi:
                a.data.write(lo - a.addr, old.data.read(lo - addr, hi - lo))
                old.data.release()
                del self.stale[addr]

    def _addresses(self, region: str, size: int, kind: str = "") -> int:
        """Where an allocation goes; a 32-bit address space that has no room left is out of memory."""
        try:
            return self.addresses.take(region, size)
        except AddressSpaceFull as e:
            where = "device" if region == "alias" else region
            code, call = _out_of_memory(kind)
            raise ShellError(code, f"{call}{format_size(size)} does not fit in the {where} addresses left in this "
                             f"{self.profile.address_bits}-bit address space (they end at 0x{e.args[0]:08x})",
                             "free something, or ask for less") from None

    def _map(self, host_ptr: int, size: int, mapped: bool) -> int | None:
        """The device pointer of pinned memory: the host pointer itself under UVA; without UVA a
        separate alias, and only when it was mapped."""
        if self.profile.unified_addressing:
            return host_ptr
        return self._addresses("alias", size) if mapped else None

    def _unmap(self, a: SimAlloc) -> None:
        """A mapped alias's addresses go back with it (without UVA)."""
        if a.dptr is not None and a.dptr != a.addr and a.kind in ("pinned", "pageable"):
            self.addresses.give("alias", a.dptr, a.size)

    def free(self, buf):
        a: SimAlloc = buf.handle
        if a.kind != "pageable":  # cudaFree / cudaFreeHost wait for the device first
            self._refuse_held("cudaFree, which waits for the device,")
            self._wait_device("cudaFree, which waits for the device")
            self._alive()
        self._release(a)
        p = self.profile
        self._elapse(MALLOC if a.kind == "pageable" else p.pinned_free_per_mib * a.size / MIB
                     if a.kind == "pinned" else p.device_free)

    def _release(self, a: SimAlloc) -> None:
        """An allocation's addresses and bytes go back (memory of the stream-ordered pool, to its pool)."""
        self.addresses.give(a.region, a.addr, a.span or a.size)
        self._unmap(a)
        if a.pool is not None:
            bit, live = self.host_pools.pop(a.pool)
            if live > 1:
                self.host_pools[a.pool] = (bit, live - 1)
        if a.mem_pool is not None:
            a.mem_pool.used -= a.size
            self._forget_if_destroyed(a.mem_pool)
        pooled = a.kind == "device" and a.size < SMALL and a.mem_pool is None
        if pooled and self.pooled > 1:  # the pool lives on, and the block keeps its bytes for the next owner
            self.stale[a.addr] = a
            while len(self.stale) > STALE_LIMIT:
                self.stale.popitem(last=False)[1].data.release()
        else:
            a.data.release()
        if pooled:
            self.pooled -= 1
            if not self.pooled:  # the driver releases an empty pool: what comes back next is cleared
                for old in self.stale.values():
                    old.data.release()
                self.stale.clear()
        a.freed = True
        self.live.discard(a)
        self._count(a, -1)

    def _count(self, a: SimAlloc, sign: int) -> None:
        """Memory in use: the session GPU's (device and managed) and the host's; another GPU's is counted from
        `live` when asked."""
        if a.kind == "device" and a.device:
            return
        if a.kind in ("device", "managed"):
            self.device_used += sign * a.size
        else:
            self.host_used += sign * a.size

    def register(self, buf, flags):
        self._alive()
        a: SimAlloc = buf.handle
        refuse_register(buf.name, a.kind, a.registered)
        device_ptr = self._map(buf.host_ptr, a.size, "mapped" in flags)
        a.dptr = device_ptr
        a.registered, a.ctx = True, self.cur
        a.readonly = "readonly" in flags
        a.host_bits = (HOST_PORTABLE if "portable" in flags else 0) | (HOST_DEVICEMAP if device_ptr is not None else 0)
        self._elapse(self.profile.register_per_mib * a.size / MIB)
        return device_ptr

    def unregister(self, buf):
        self._alive()
        a: SimAlloc = buf.handle
        if a.kind != "pageable":
            raise ShellError(INVALID, f"{buf.name} is {a.kind} memory, which cudaHostRegister did not pin",
                             "only ranges pinned by `register` can be unregistered")
        if not a.registered:
            raise ShellError("CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
                             f"{buf.name} was not registered with cudaHostRegister",
                             "only ranges pinned by `register` can be unregistered")
        self._refuse_held("cudaHostUnregister, which waits for the device,")
        self._wait_device("cudaHostUnregister, which waits for the device")
        self._alive()
        self._unmap(a)
        a.registered, a.readonly, a.host_bits, a.dptr = False, False, 0, None
        self._elapse(self.profile.unregister_per_mib * a.size / MIB)

    def pointer_info(self, buf):
        a: SimAlloc = buf.handle
        pinned = a.kind == "pinned" or a.registered
        info = {"device": a.device}
        if a.kind == "pageable" and not a.registered:
            info.update(memory_type=INVALID, is_managed=INVALID)
        else:
            info["memory_type"] = "host" if pinned else "device"
            info["is_managed"] = a.kind == "managed"
        info["host_flags"] = a.host_bits if pinned else HOST_DEVICEMAP if a.kind == "managed" else INVALID
        if pinned:
            info["host_device_ptr"] = buf.device_ptr if buf.device_ptr is not None else INVALID
        else:
            info["host_device_ptr"] = INVALID
        self._advance(self.now)
        if self.dead and self.dead != "GPU_ABANDONED":  # the host-memory queries answer the sticky error
            info["host_flags"] = info["host_device_ptr"] = self.dead
        if a.kind == "managed":
            info.update({"read_mostly": False, "preferred_location": "none", "last_prefetch_location": "none",
                         **a.managed})
        return info

    def pin_limit(self):
        return self.profile.host_memory // 2, "half of the profile's host memory"

    def prefetch(self, buf, where, stream):
        """The pages move on the copy engine; the first move to the device of pages the host wrote holds the host
        until it is done, as on the H100 (syncrules.prefetch_rule)."""
        self._alive()
        a: SimAlloc = buf.handle
        populates = where == "device" and not a.been_to_host and a.data.touched(0, a.size)
        a.been_to_host = a.been_to_host or where == "host"
        a.managed["last_prefetch_location"] = "device 0" if where == "device" else "host"
        path = "pinned h2d" if where == "device" else "pinned d2h"
        return self._submit(stream, self.profile.copy_seconds(path, a.size),
                            self.engine("h2d" if where == "device" else "d2h"), R.prefetch_rule(where, populates))

    def advise(self, buf, advice, where):
        self._alive()
        a: SimAlloc = buf.handle
        if advice == "readmostly":
            a.managed["read_mostly"] = True
        elif advice == "preferred":
            a.managed["preferred_location"] = "device 0" if where == "device" else "host"

    def read(self, buf, offset, nbytes):
        if buf.kind == "device":
            self._alive()
            self._refuse_held("reading device memory (a synchronous copy)")
            self.vmm_check(buf, offset, nbytes, "cuMemcpyDtoH")
        else:
            self._advance(self.now)
        return buf.handle.data.read(offset, nbytes)

    def write(self, buf, offset, data):
        self.version += 1
        self._advance(self.now)
        buf.handle.data.write(offset, data)

    def room(self, nbytes):
        self.budget.check(nbytes)
