"""The simulated device: a discrete-event model on one virtual clock. Real bytes (lazily stored) change
when an operation *completes* in virtual time; the host's clock moves by each call's modeled cost and by
every wait; engines and streams follow the driver's ordering rules (copy engines in issue order, kernels of
different streams concurrently, the legacy default stream's implicit synchronisation); which calls hold
the host comes from the one table in `syncrules`. Deterministic: the same script gives the same figures."""

from __future__ import annotations

import bisect
import heapq
import math
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from .. import syncrules as R
from ..errors import RESET_HINT, ShellError, held_error
from ..launchdims import check_launch, computed
from .addresses import SMALL, AddressSpaces
from .base import (HOST_DEVICEMAP, HOST_PORTABLE, HOST_WRITECOMBINED, WORK_CALLS, Allocation, Backend, DeviceInfo,
                   Timing, round_stats)
from .profile import Profile
from .sparse import Budget, SparseBytes

MIB = 1 << 20
STEP = 64 * MIB
INVALID = "CUDA_ERROR_INVALID_VALUE"
INVALID_DEVICE = "CUDA_ERROR_INVALID_DEVICE"
ILLEGAL = "CUDA_ERROR_ILLEGAL_ADDRESS"
CALLBACK_COST = 5e-6  # a host function holds its stream this long
REFUSED_AT_LAUNCH = {  # what the interpreter finds that is no GPU fault: refused before the launch is queued
    "DIVERGENT_BARRIER": "every thread of a block must reach each __syncthreads(); move it out of the branch",
    "RUNAWAY_KERNEL": "a GPU would run it until `gpu-timeout` or Ctrl-C; look at the loop's condition",
    "NOT_SUPPORTED_ON_SIM": "the simulator runs the CUDA C subset in the guide's chapter \"Your own kernels\"",
}
MAX_THREADS = 1 << 28  # the simulator's own limit on one launch (a GPU takes far more: it would run for hours here)
CONTEXT_CREATE = 0.11  # cuCtxCreate took 109 ms on the H100 (CUDA 13)
STALE_LIMIT = 64  # freed small device blocks whose bytes the next owner inherits (while their pool lives)


@dataclass(eq=False)
class SimAlloc:
    kind: str
    size: int
    data: SparseBytes
    addr: int = 0
    region: str = ""
    host_bits: int = 0  # cuMemHostGetFlags, while pinned or registered
    readonly: bool = False
    registered: bool = False
    freed: bool = False
    managed: dict = field(default_factory=dict)  # range attributes of managed memory
    pool: bool | None = None  # the small pinned pool it came from (write-combined or not)
    device: int = 0  # the GPU of the context it was made in
    ctx: object = None  # that context's handle (None: the session GPU's primary)
    dptr: int | None = None  # the address a kernel uses for it (None: a kernel cannot reach it)

    @property
    def cls(self) -> str:
        return R.memory_class(self.kind, self.registered)


@dataclass(eq=False)  # streams are told apart by identity, never by value
class SimStream:
    tail: float = 0.0  # when the last work queued on it ends
    nonblocking: bool = False
    priority: int = 0
    engine: str | None = None  # where its last operation ran
    ctx: object = None  # the context it belongs to


@dataclass(eq=False)
class SimCtx:
    """A modeled context: its GPU, whether it is that GPU's primary, and its own legacy default stream."""

    device: int
    primary: bool
    default: SimStream


@dataclass(eq=False)
class SimEvent:
    time: float | None = None  # when the GPU reaches it; None until recorded
    record: list | None = None  # its latest record while held: [when the GPU reaches it], filled in at release
    ctx: object = None  # the context it was made in: it can be recorded only on that context's streams


@dataclass(eq=False)
class Op:
    seq: int
    start: float
    end: float
    effect: Callable | None = None  # the data change, applied when the op completes
    fault: str | None = None
    callback: dict | None = None

    def __lt__(self, other: "Op") -> bool:
        return (self.end, self.seq) < (other.end, other.seq)


class SimBackend(Backend):
    name = "sim"
    timing_label = "modeled"
    tracing = "modeled"
    drops_all_on_close = True  # the simulated device goes whole: its queued work need not finish first

    def __init__(self, profile: Profile | None = None):
        self.profile = p = profile or Profile.load(None)
        self.info = DeviceInfo(p.name, 0, p.device_memory, p.compute_capability, p.pci_bus_id,
                               p.unified_addressing, p.can_map_host_memory, p.pageable_memory_access,
                               p.managed_memory, p.concurrent_managed_access, p.async_engine_count,
                               p.concurrent_kernels)
        self.budget = Budget(p.storage_budget)
        self.now = 0.0  # the host's virtual clock, seconds
        self.gpu_timeout: float | None = None
        self.fired: list[dict] = []
        self._fresh()

    def _fresh(self) -> None:
        """The device side, new: what a new context starts with (the host's clock runs on)."""
        self.addresses = AddressSpaces()
        self.live: set[SimAlloc] = set()
        self.stale: OrderedDict[int, SimAlloc] = OrderedDict()  # freed small device blocks, by address
        self.pooled = 0  # live device allocations carved from the small pool
        self.host_pools: dict[bool, tuple[int, int]] = {}  # write-combined? → (PORTABLE bit, live allocations)
        self.device_used = self.host_used = 0
        self.peers: set[tuple[int, int]] = set()  # (a, b): GPU a may reach GPU b's memory
        self.ctxs: dict = {None: SimCtx(0, True, SimStream())}  # handle → context; None: GPU 0's primary
        self.cur = None  # the current context's handle
        self.next_ctx = 0
        self.streams: list[SimStream] = []
        self.retired = 0.0  # the tail of destroyed blocking streams: the default stream still waits for it
        self.engines: dict[str, tuple[list, list]] = {}  # engine → (starts, ends) of its busy spans, in time order
        self.ops: list[Op] = []  # queued work, by completion time
        self.spans: OrderedDict[int, tuple[float, float]] = OrderedDict()  # work reported as still running
        self.seq = 0
        self.dead: str | None = None  # the sticky error after a kernel fault, as the driver has it; or GPU_ABANDONED
        self.fault_detail: str | None = None  # what the simulator saw of the kernel fault that made `dead`
        self.unkept: ShellError | None = None  # the storage budget refused finished work its bytes: said once
        self.version = 0  # counts changes to memory: a user kernel launched earlier runs again if it moved
        self.salvaged: set[SimAlloc] = set()
        self.held: list[Callable] | None = None  # while `hold`: what was queued, scheduled in order at release

    @property
    def default(self) -> SimStream:
        """The current context's legacy default stream: what a stream handle of None means."""
        return self.ctxs[self.cur].default

    def _ctx_of(self, stream) -> object:
        """The context work on `stream` runs in (the default stream's: the current one)."""
        return stream.ctx if stream is not None else self.cur

    def _refuse_held(self, what: str) -> None:
        if self.held is not None:
            raise held_error(what)

    def salvage(self, buf):
        """Host memory outlives its context: the bytes themselves go over to the new allocation."""
        if buf.kind == "device":
            raise ShellError("NOT_HOST_ACCESSIBLE", f"{buf.name} is device memory")
        self._advance(self.now)
        self.salvaged.add(buf.handle)
        return buf.handle.data

    def restore(self, buf, saved):
        buf.handle.data.release()
        buf.handle.data = saved

    def reset(self):
        for a in list(self.live) + list(self.stale.values()):
            if a not in self.salvaged:
                a.data.release()
        self._fresh()

    # ------------------------------------------------------------------ the clock
    def _advance(self, t: float) -> None:
        """Move the host's clock to t, completing (in completion order) everything that ends by then."""
        self.now = max(self.now, t)
        while self.ops and self.ops[0].end <= self.now:
            op = heapq.heappop(self.ops)
            if self.dead:
                continue  # after a fault nothing more runs
            if op.fault:
                self.dead = op.fault
            elif op.effect:
                self.version += 1
                try:
                    fault = op.effect()
                except ShellError as e:  # the simulator's own storage ran out as the work ended: said once, not sticky
                    self.unkept = e
                    continue
                if fault:
                    self.dead, self.fault_detail = fault
            if op.callback is not None:
                self.fired.append({**op.callback, "at": op.end})

    def _alive(self) -> None:
        """Every GPU call: time passes first, so a fault that has happened by now surfaces here."""
        self._advance(self.now)
        if self.unkept is not None:
            e, self.unkept = self.unkept, None
            raise ShellError(e.code, f"{e.message}: work that finished meanwhile could not keep its bytes", e.hint)
        if self.dead == "GPU_ABANDONED":
            raise ShellError(self.dead, "the GPU side was given up; nothing more can run on it", RESET_HINT)
        if self.dead:
            seen = f" ({self.fault_detail})" if self.fault_detail else ""
            raise ShellError(self.dead, f"the context is unusable after an earlier kernel fault{seen}", RESET_HINT)

    def _wait(self, t: float, what: str) -> None:
        """The host waits for the GPU until t — or, past `gpu_timeout`, gives it up as a person would."""
        if self.gpu_timeout and t - self.now > self.gpu_timeout:
            self._advance(self.now + self.gpu_timeout)
            if not self.dead:
                self.dead = "GPU_ABANDONED"
                raise ShellError(self.dead, f"gave the GPU up after {self.gpu_timeout:g} s waiting in {what} "
                                 f"(gpu-timeout {self.gpu_timeout:g} s); work still queued there will never finish",
                                 RESET_HINT)
        self._advance(t)

    def _blocking_tails(self, ctx=None) -> float:
        return max([self.retired] + [s.tail for s in self.streams if not s.nonblocking and s.ctx == ctx])

    def _ready(self, q: SimStream) -> float:
        """When work queued now on q may start: after q's earlier work and the host's call, and by the legacy
        default stream's rule after its context's default stream (blocking streams) or every blocking stream of
        its context (default)."""
        ready = max(self.now + self.profile.async_call, q.tail)
        default = self.ctxs[q.ctx].default
        if q is default:
            return max(ready, self._blocking_tails(q.ctx))
        return ready if q.nonblocking else max(ready, default.tail)

    def engine(self, kind: str | None) -> str | None:
        """The hardware an operation runs on: with asyncEngineCount ≥ 2, H2D and D2H copies have an engine
        each; with 1 they share one; with 0 copies wait for compute. Kernels, memsets and device-to-device
        copies run on the SMs, concurrently across streams when the device has concurrentKernels."""
        if kind in ("h2d", "d2h"):
            n = self.profile.async_engine_count
            return kind if n >= 2 else "copy" if n == 1 else "compute"
        return kind

    def _schedule(self, handle, duration: float, engine: str | None) -> tuple[float, float]:
        q = handle or self.default
        start = self._ready(q)
        if engine and q.engine and engine != q.engine and start == q.tail:  # handed over to another engine
            start += self.profile.engine_switch
        if engine:
            q.engine = engine
        serial = engine and (engine != "compute" or not self.profile.concurrent_kernels)
        if serial:
            start = self._engine_slot(engine, start, duration)
        end = start + duration
        q.tail = end
        return start, end

    def _engine_slot(self, engine: str, ready: float, duration: float) -> float:
        """When an operation ready at `ready` runs on `engine`, which it then holds. With Hyper-Q, in the first idle
        gap long enough (work queued earlier but waiting for its stream leaves the engine to others: on the H100 a
        copy on a non-blocking stream ran while a blocking stream's copy waited for a kernel); without, after
        everything issued before it."""
        starts, ends = self.engines.setdefault(engine, ([], []))
        gone = bisect.bisect_right(ends, self.now)  # spans over before now can hold nothing up
        if gone > 64:
            del starts[:gone], ends[:gone]
        if not self.profile.hyper_q:
            at = max(ready, ends[-1]) if ends else ready
            i = len(starts)
        else:
            at, i = ready, bisect.bisect_right(ends, ready)
            while i < len(starts) and starts[i] < at + duration:
                at = max(at, ends[i])
                i += 1
        starts.insert(i, at)
        ends.insert(i, at + duration)
        return at

    def _submit(self, handle, duration: float, engine: str | None, rule: R.Rule, effect=None, *,
                stage: float = 0.0, fault: str | None = None, callback: dict | None = None) -> Timing:
        """Queue one operation under its synchronisation rule and return what the host saw. While held, the
        operation is scheduled at release (its bytes, if staged, are read now)."""
        if self.held is not None and rule.blocks:
            raise held_error("this call", rule.why)
        before = self.now
        if rule.stages:  # a sync copy first waits for its stream; then the host stages the bytes
            if rule.wait == "queue":
                self._wait(self._ready(handle or self.default) - self.profile.async_call, "a synchronous copy")
            self.now += stage
            effect = effect(snapshot=True) if effect else None
        elif effect:
            effect = effect(snapshot=False)
        self.seq += 1
        token = self.seq
        if self.held is not None:
            self.held.append(lambda: self._enqueue(token, handle, duration, engine, effect, fault, callback))
            self.now = max(self.now, before + self.profile.async_call)
            self._advance(self.now)
            self._keep_span(token, None)
            return Timing(None, self.now - before, False, self.timing_label, token, rule=rule.why, basis="modeled",
                          issued=before)
        start, end = self._enqueue(token, handle, duration, engine, effect, fault, callback)
        if rule.wait == "complete":
            self._wait(end + self.profile.sync_latency, "a synchronous call")
        else:
            self.now = max(self.now, before + self.profile.async_call)
            self._advance(self.now)
        if end > self.now:
            self._keep_span(token, (start, end))
        else:
            token = None
        return Timing(duration, self.now - before, rule.blocks, self.timing_label, token, start, end,
                      rule=rule.why, basis="modeled", issued=before)

    def _enqueue(self, token: int, handle, duration, engine, effect, fault, callback) -> tuple[float, float]:
        start, end = self._schedule(handle, duration, engine)
        heapq.heappush(self.ops, Op(token, start, end, effect, fault, callback))
        if token in self.spans:
            self.spans[token] = (start, end)
        return start, end

    def _keep_span(self, token: int, span) -> None:
        self.spans[token] = span
        if len(self.spans) > 1 << 16:
            self.spans.popitem(last=False)

    def _host_call(self, cost: float, rule: R.Rule = R.HOST_ONLY) -> Timing:
        before = self.now
        self._advance(self.now + cost)
        return Timing(cost, self.now - before, rule.blocks, self.timing_label, rule=rule.why, basis="modeled")

    def _wait_device(self, what: str = "cuCtxSynchronize") -> None:
        """Until every queued operation has ended — on destroyed streams too."""
        self._wait(max([self.now] + [op.end for op in self.ops]), what)

    # ------------------------------------------------------------------ memory
    def alloc(self, kind, size, flags, ctx=None):
        self._alive()
        p = self.profile
        if size <= 0:
            raise ShellError(INVALID, "a size of 0 bytes cannot be allocated", "give a size above 0")
        device = self._context(ctx).device
        on_device = kind in ("device", "managed")
        used, limit = (self.device_used, p.device_memory) if on_device else (self.host_used, p.host_memory)
        if device and on_device:  # another GPU's own memory
            used = sum(x.size for x in self.live if x.device == device and x.kind == "device")
        if used + size > limit:
            raise ShellError("CUDA_ERROR_OUT_OF_MEMORY",
                             f"{size} bytes do not fit: {used} of {limit} bytes of "
                             f"{'device' if on_device else 'host'} memory in use",
                             "free something, or ask for less")
        if kind == "managed" and not p.managed_memory:
            raise ShellError("CUDA_ERROR_NOT_SUPPORTED", "this device has no managed memory")
        region = "alias" if kind == "device" and not p.unified_addressing else kind
        a = SimAlloc(kind, size, SparseBytes(size, self.budget), region=region, device=device, ctx=ctx)
        a.addr = self.addresses.take(region, size)
        host_ptr = device_ptr = None
        cost = 1e-6
        if kind == "pageable":
            host_ptr = a.addr
        elif kind == "pinned":
            host_ptr = a.addr
            device_ptr = self._map(host_ptr, size, "mapped" in flags)
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

    def _map(self, host_ptr: int, size: int, mapped: bool) -> int | None:
        """The device pointer of pinned memory: the host pointer itself under UVA; without UVA a
        separate alias, and only when it was mapped."""
        if self.profile.unified_addressing:
            return host_ptr
        return self.addresses.take("alias", size) if mapped else None

    def free(self, buf):
        a: SimAlloc = buf.handle
        if a.kind != "pageable":  # cudaFree / cudaFreeHost wait for the device first
            self._refuse_held("cudaFree, which waits for the device,")
            self._wait_device("cudaFree, which waits for the device")
            self._alive()
        self.addresses.give(a.region, a.addr, a.size)
        if a.pool is not None:
            bit, live = self.host_pools.pop(a.pool)
            if live > 1:
                self.host_pools[a.pool] = (bit, live - 1)
        pooled = a.kind == "device" and a.size < SMALL
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
        if a.kind == "pinned" or a.registered:
            raise ShellError("CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
                             f"{buf.name} is already page-locked",
                             "a range can be registered once; `unregister` it first")
        if a.kind != "pageable":
            raise ShellError(INVALID, f"{buf.name} is not host memory", "register pageable host buffers")
        device_ptr = self._map(buf.host_ptr, a.size, "mapped" in flags)
        a.dptr = device_ptr
        a.registered, a.ctx = True, self.cur
        a.readonly = "readonly" in flags
        a.host_bits = (HOST_PORTABLE if "portable" in flags else 0) | (HOST_DEVICEMAP if device_ptr is not None else 0)
        self._advance(self.now + self.profile.register_per_mib * a.size / MIB)
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
        a.registered, a.readonly, a.host_bits, a.dptr = False, False, 0, None

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

    def versions(self):
        return {"driver": "simulated", "profile": self.profile.name}

    def clock(self):
        return self.now

    def command_started(self):
        self._advance(self.now + self.profile.shell_overhead)

    def host_sleep(self, seconds):
        self._advance(self.now + seconds)

    def memory_paths(self):
        return self.profile.memory_paths()

    def devices(self):
        p = self.profile
        bus = p.pci_bus_id.rsplit(":", 2)
        devices = [{"ordinal": i, "name": p.name, "pci_bus_id": f"{bus[0]}:{int(bus[1], 16) + i:02x}:{bus[2]}",
                    "numa_node": 0, "total_mem": p.device_memory, "compute_capability": p.compute_capability}
                   for i in range(p.gpus)]
        peers = [{"src": a, "dst": b, "access": p.peer_access, "link": p.peer_link, "atomics": p.peer_access}
                 for a in range(p.gpus) for b in range(p.gpus) if a != b]
        return {"devices": devices, "peers": peers, "link_source": "the simulator's profile", "memory_nodes": [0]}

    def peer_access(self, src, dst, enable):
        self._alive()
        p = self.profile
        if not (0 <= src < p.gpus and 0 <= dst < p.gpus) or src == dst:
            raise ShellError(INVALID_DEVICE, f"no pair of GPUs {src} → {dst} in a profile of {p.gpus}")
        if not p.peer_access:
            raise ShellError("CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", f"GPU {src} cannot reach GPU {dst} directly")
        if enable and (src, dst) in self.peers:
            raise ShellError("CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", f"GPU {src} can already reach GPU {dst}")
        if not enable and (src, dst) not in self.peers:
            raise ShellError("CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", f"GPU {src} was not given access to GPU {dst}")
        (self.peers.add if enable else self.peers.discard)((src, dst))
        return self._host_call(20e-6)

    def peer_copy(self, src, dst, nbytes, reps, peer):
        self._alive()
        self._refuse_held("a copy between GPUs (timed to its end)")
        p = self.profile
        if not (0 <= src < p.gpus and 0 <= dst < p.gpus) or src == dst:
            raise ShellError(INVALID_DEVICE, f"no pair of GPUs {src} → {dst} in a profile of {p.gpus}")
        if peer and not p.peer_access:
            raise ShellError("CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", f"GPU {src} cannot reach GPU {dst} directly")
        per = p.peer_latency + nbytes / (p.peer_rate if peer else p.peer_staged_rate)
        self._advance(self.now + per * reps)
        return per

    # ------------------------------------------------------------------ contexts
    def _context(self, handle) -> SimCtx:
        try:
            return self.ctxs[handle]
        except KeyError:
            raise ShellError("CUDA_ERROR_INVALID_CONTEXT", "that context was destroyed") from None

    def context_create(self, device):
        self._alive()
        if not 0 <= device < self.profile.gpus:
            raise ShellError(INVALID_DEVICE, f"there is no GPU {device}: the profile has {self.profile.gpus}",
                             "`devices` lists them; `--sim-profile two-h200` has two")
        self.next_ctx += 1
        self.ctxs[self.next_ctx] = SimCtx(device, False, SimStream(ctx=self.next_ctx))
        return self.next_ctx, self._host_call(CONTEXT_CREATE)

    def context_primary(self, device):
        if device == 0:
            return None
        for h, c in self.ctxs.items():
            if c.primary and c.device == device:
                return h
        handle, _ = self.context_create(device)
        self.ctxs[handle].primary = True
        return handle

    def context_use(self, handle):
        self._context(handle)
        self.cur = handle
        return self._host_call(self.profile.async_call)

    def context_destroy(self, handle):
        if self._context(handle).primary:
            raise ShellError("CUDA_ERROR_INVALID_CONTEXT", "a primary context is released when the session closes")
        self._refuse_held("cuCtxDestroy, which waits for the context's work,")
        self._wait_device("cuCtxDestroy")
        del self.ctxs[handle]
        if self.cur == handle:
            self.cur = None

    def reach(self, buf, ctx):
        """Which address a kernel in context `ctx` uses for `buf`, or the error: under UVA every context reaches
        pinned memory and its GPU's memory; without UVA, pinned memory made without `portable` is mapped only in
        the context that made it, and device memory belongs to its context alone. Another GPU's memory needs peer
        access (given to primary contexts by `peer enable`)."""
        a, c = buf.handle, self._context(ctx)
        uva = self.profile.unified_addressing
        if a.kind == "device":
            if a.device != c.device:
                return buf.device_ptr if c.primary and (c.device, a.device) in self.peers else "NO_PEER_ACCESS"
            return buf.device_ptr if uva or a.ctx == ctx else "OTHER_CONTEXT"
        if a.kind == "managed":
            return buf.device_ptr
        if buf.device_ptr is None:
            return INVALID
        return buf.device_ptr if uva or a.host_bits & HOST_PORTABLE or a.ctx == ctx else INVALID

    def host_copy(self, device, node, nbytes, reps, to_device):
        self._alive()
        self._refuse_held("a timed copy (it waits for its end)")
        if not 0 <= device < self.profile.gpus:
            raise ShellError(INVALID_DEVICE, f"there is no GPU {device}: the profile has {self.profile.gpus}")
        per = self.profile.copy_seconds("pinned h2d" if to_device else "pinned d2h", nbytes)
        self._advance(self.now + per * (reps + 1))
        return per

    def pin_limit(self):
        return self.profile.host_memory // 2, "half of the profile's host memory"

    def prefetch(self, buf, where, stream):
        self._alive()
        a: SimAlloc = buf.handle
        a.managed["last_prefetch_location"] = "device 0" if where == "device" else "host"
        path = "pinned h2d" if where == "device" else "pinned d2h"
        return self._submit(stream, self.profile.copy_seconds(path, a.size),
                            self.engine("h2d" if where == "device" else "d2h"), R.QUEUED)

    def advise(self, buf, advice, where):
        self._alive()
        a: SimAlloc = buf.handle
        if advice == "readmostly":
            a.managed["read_mostly"] = True
        elif advice == "preferred":
            a.managed["preferred_location"] = "device 0" if where == "device" else "host"

    # host access: at the host's current virtual time, as the GPU has left memory by then
    def read(self, buf, offset, nbytes):
        if buf.kind == "device":
            self._alive()
            self._refuse_held("reading device memory (a synchronous copy)")
        else:
            self._advance(self.now)
        return buf.handle.data.read(offset, nbytes)

    def write(self, buf, offset, data):
        self.version += 1
        self._advance(self.now)
        buf.handle.data.write(offset, data)

    def known_zero(self, buf, offset, nbytes):
        if buf.kind == "device":  # a read the GPU side would have to make: as `read` does
            self._refuse_held("reading device memory (a synchronous copy)")
        self._advance(self.now)
        return not buf.handle.data.touched(offset, nbytes)

    def reserve(self, buf, offset, nbytes):
        buf.handle.data.reserve(offset, nbytes)

    def room(self, nbytes):
        self.budget.check(nbytes)

    # ------------------------------------------------------------------ work
    def _refuse_readonly(self, buf, what: str) -> None:
        if buf.handle.readonly:
            raise ShellError(INVALID, f"{what} into {buf.name}, which is registered read-only",
                             "the GPU may only read a `readonly` registration")

    def _seen(self, host: SimAlloc, other: SimAlloc, ctx) -> str:
        """How a copy sees host memory: without UVA, pinned memory made without `portable` is pinned only for the
        context that made it — another (the one owning the device memory on the other side, or the copy's own)
        copies it as pageable (staged). Under UVA every pinned allocation is portable."""
        viewer = other.ctx if other.kind == "device" else ctx
        if (host.cls == "pinned" and viewer != host.ctx and not self.profile.unified_addressing
                and not host.host_bits & HOST_PORTABLE):
            return "pageable"
        return host.cls

    def _path(self, src: SimAlloc, dst: SimAlloc, ctx) -> tuple[str, str | None]:
        """The calibrated path a copy takes and the engine kind it uses."""
        s_dev, d_dev = src.kind in ("device", "managed"), dst.kind in ("device", "managed")
        if s_dev and d_dev:
            return "d2d", "compute"
        if not s_dev and not d_dev:
            return "h2h", None
        host = dst if s_dev else src
        cls = "pageable" if self._seen(host, src if s_dev else dst, ctx) == "pageable" else \
            "writecombined" if host.host_bits & HOST_WRITECOMBINED else "pinned"
        return f"{cls} {'d2h' if s_dev else 'h2d'}", "d2h" if s_dev else "h2d"

    def memcpy(self, src, src_off, dst, dst_off, nbytes, stream, async_):
        self._alive()
        self._refuse_readonly(dst, "a copy")
        s, d = src.handle, dst.handle
        ctx = self._ctx_of(stream)
        rule = R.memcpy_rule(self._seen(s, d, ctx), self._seen(d, s, ctx), async_, nbytes)
        if nbytes == 0:
            return self._host_call(self.profile.async_call, rule)
        path, kind = self._path(s, d, ctx)
        stage = 0.0
        here = self._context(ctx).device
        if any(x.kind == "device" and x.device != here for x in (s, d)):
            # another GPU's memory: timed whole, the host waiting for both GPUs (as on a GPU)
            self._refuse_held("a copy to or from another GPU (timed to its end)")
            rule = R.BETWEEN_GPUS
        if path == "d2d" and s.device != d.device and "managed" not in (s.kind, d.kind):  # between GPUs: over the link, or staged through the host
            direct = (s.device, d.device) in self.peers or (d.device, s.device) in self.peers
            duration = self.profile.peer_latency + nbytes / (self.profile.peer_rate if direct
                                                             else self.profile.peer_staged_rate)
            kind = "d2h"
        elif rule.stages:  # the host copies into staging memory, then the DMA runs at the pinned rate
            duration = self.profile.copy_seconds("pinned h2d", nbytes)
            stage = max(self.profile.copy_seconds(path, nbytes) - duration,
                        self.profile.staging_latency + nbytes / self.profile.staging_rate)
        else:
            duration = self.profile.copy_seconds(path, nbytes)

        def effect(snapshot: bool):
            if snapshot:  # the bytes as they are now, at issue
                data = s.data.read(src_off, nbytes) if s.data.touched(src_off, nbytes) else None
                return lambda: d.data.write(dst_off, data) if data is not None else d.data.fill(dst_off, 0, nbytes)
            return lambda: d.data.copy_from(s.data, src_off, dst_off, nbytes)

        if s.data.touched(src_off, nbytes):
            d.data.reserve(dst_off, nbytes)
        return self._submit(stream, duration, self.engine(kind), rule, effect, stage=stage)

    def memset(self, buf, offset, value, nbytes, stream, async_):
        self._alive()
        self._refuse_readonly(buf, "a memset")
        a = buf.handle
        if buf.device_ptr is None:  # `unchecked`: the driver does not know the pointer
            raise ShellError(INVALID, f"{buf.name} is not memory the GPU can reach",
                             "memset needs device, managed or pinned memory")
        rule = R.memset_rule(a.cls, async_, nbytes)
        if nbytes == 0:
            return self._host_call(self.profile.async_call, rule)
        if value:
            a.data.reserve(offset, nbytes)
        return self._submit(stream, self.profile.copy_latency + nbytes / self.profile.memset, "compute", rule,
                            lambda snapshot: lambda: a.data.fill(offset, value, nbytes))

    def launch(self, kernel, args, count, grid, block, shared, stream, trace=False):
        """`trace` (the simulator's alone): record which thread touched which element, for `show-access`."""
        self._alive()
        if not kernel.builtin:
            return self._launch_user(kernel, args, grid, block, shared, stream, trace)
        p = self.profile
        check_launch(grid, block, shared)  # what cuLaunchKernel refuses on the H100, before anything changes
        named = dict(zip((q.name for q in kernel.params), args))
        ctx = self._ctx_of(stream)
        here = self._context(ctx).device
        faulty = [named[q.name].name for q in kernel.params if q.is_buffer and (
            (q.writes and named[q.name].buf.handle.readonly)
            or (named[q.name].buf.device_ptr is None and not p.pageable_memory_access)
            or (named[q.name].buf.device_ptr is not None and isinstance(self.reach(named[q.name].buf, ctx), str)))]
        if kernel.name == "spin":
            return self._submit(stream, int(named["us"]) * 1e-6, "compute", R.QUEUED)
        n = computed(count, grid, block)  # one element a thread of the whole grid
        nbytes = n * 4
        bufs = {q.name: named[q.name] for q in kernel.params if q.is_buffer}
        scalars = {q.name: named[q.name] for q in kernel.params if not q.is_buffer}
        outputs = [q.name for q in kernel.params if q.writes]
        for name in outputs:  # the bytes the kernel will write must fit before anything changes
            bufs[name].buf.handle.data.reserve(bufs[name].offset, nbytes)

        def effect(snapshot):
            def run():
                for pos in range(0, nbytes, STEP):  # in pieces: a 16 GiB launch must not need 48 GiB of RAM
                    size = min(STEP, nbytes - pos)
                    arrays = {k: r.buf.handle.data.read(r.offset + pos, size).view(np.float32)
                              for k, r in bufs.items()}
                    with np.errstate(over="ignore", invalid="ignore"):  # the GPU gives inf/nan silently too
                        for name, values in kernel.sim(arrays, scalars).items():
                            r = bufs[name]
                            r.buf.handle.data.write(r.offset + pos, values.astype(np.float32))
            return run

        moved = sum(nbytes * (2 if q.kind == "inout" else 1) /
                    (p.peer_rate if bufs[q.name].buf.kind == "device" and bufs[q.name].buf.handle.device != here
                     # another GPU's memory, over the link
                     else p.kernel_device_read if bufs[q.name].buf.kind in ("device", "managed")
                     else p.kernel_zero_copy_read)
                    for q in kernel.params if q.is_buffer)
        return self._submit(stream, p.launch_latency + moved, "compute", R.QUEUED, None if faulty else effect,
                            fault=ILLEGAL if faulty else None)

    def load_kernels(self, source, path=None):
        self._refuse_held("loading a module, which may wait for the device,")
        from ..simt import compile_source  # the front end loads clang: only when a kernel is defined

        return compile_source(source, path)

    def _regions(self, ctx, named: dict) -> list:
        """Every live allocation as a kernel in context `ctx` sees it: the address it uses, whether it may touch
        it, and what its traffic costs (device memory, the bus for mapped host memory, the link for a peer's)."""
        from ..simt.memory import Region

        c = self._context(ctx)
        uva = self.profile.unified_addressing
        regions = []
        for a in self.live:
            if a.kind == "device":
                kind = "device" if a.device == c.device else "peer"
                ok = (uva or a.ctx == ctx) if kind == "device" else (c.primary and (c.device, a.device) in self.peers)
                addr = a.addr
            elif a.kind == "managed":
                kind, ok, addr = "managed", True, a.addr
            else:
                addr = a.dptr if a.dptr is not None else a.addr
                kind = "zero-copy"
                ok = a.dptr is not None and (uva or a.host_bits & HOST_PORTABLE or a.ctx == ctx) \
                    or (a.kind == "pageable" and not a.registered and self.profile.pageable_memory_access)
            regions.append(Region(named.get(id(a), f"a {a.kind} allocation"), addr, a.size, kind, ok, a.readonly,
                                  read=lambda a=a: a.data.read(0, a.size), owner=a))
        return regions

    def _run_user(self, kernel, values, grid, block, shared, ctx, named, trace=False):
        """Run a user kernel over the memory as it is now: (report, written regions) or the fault."""
        from ..simt.launch import run
        from ..simt.memory import Fault

        program, fn = kernel.handle
        regions = self._regions(ctx, named)
        try:
            report = run(program, fn, values, grid, block, shared, regions, trace=trace)
        except Fault as f:
            return f, []
        return report, [r for r in regions if r.dirty]

    def _launch_user(self, kernel, args, grid, block, shared, stream, trace=False):
        """A user's CUDA C kernel: run now on the memory as the host sees it, to count its traffic and model
        its time; at its modeled end its writes land — or, if anything changed memory meanwhile, it runs again
        on what is there then (so the bytes are always what the stream order gives)."""
        from ..simt.launch import shared_layout

        p = self.profile
        program, fn = kernel.handle
        _layout, static, _total = shared_layout(program, fn, shared)
        check_launch(grid, block, shared, static_shared=static)
        threads = grid[0] * grid[1] * grid[2] * block[0] * block[1] * block[2]
        if threads > MAX_THREADS:
            raise ShellError("NOT_SUPPORTED_ON_SIM", f"{threads} threads in one launch: the simulator runs up to 2^28",
                             "launch fewer blocks (a grid-stride loop covers the same elements)")
        ctx = self._ctx_of(stream)
        values, named = [], {}
        for q, v in zip(kernel.params, args):
            if q.is_buffer:
                buf = v.buf
                base = buf.device_ptr if buf.device_ptr is not None else buf.host_ptr  # `unchecked`: as C passes it
                values.append(base + v.offset)
                named[id(buf.handle)] = buf.name
            else:
                values.append(v)
        version = self.version
        first, written = self._run_user(kernel, values, grid, block, shared, ctx, named, trace)
        if isinstance(first, Exception) and first.code in REFUSED_AT_LAUNCH:  # nothing is queued: the context lives
            raise ShellError(first.code, first.message, REFUSED_AT_LAUNCH[first.code])
        for r in written:
            r.owner.data.reserve(0, r.size)

        def effect(snapshot):
            def land():
                if self.version == version + 1:  # nothing but this kernel's own completion since its launch
                    report, regions = first, written
                else:
                    report, regions = self._run_user(kernel, values, grid, block, shared, ctx, named)
                if isinstance(report, Exception):
                    return report.code, report.message
                for r in regions:
                    r.owner.data.write(0, r.data[:r.size])
                if report.lines or report.warnings or report.dropped:
                    self.fired.append({"result": "kernel_output", "kernel": kernel.name, "lines": report.lines,
                                       "warnings": report.warnings, "dropped": report.dropped})
                return None
            return land

        if isinstance(first, Exception):
            report, duration = None, p.launch_latency
        else:
            report, duration = first, self.kernel_seconds(first.traffic)
        return replace(self._submit(stream, duration, "compute", R.QUEUED, effect), report=report)

    def kernel_seconds(self, traffic) -> float:
        """A user kernel's modeled time from its counts: the memory it moved at each kind's rate, or the warp
        instructions it issued, whichever takes longer, after the launch latency and the calibrated floor."""
        p = self.profile
        rate = {"device": p.kernel_device_read, "managed": p.kernel_device_read, "zero-copy": p.kernel_zero_copy_read,
                "peer": p.peer_rate}
        memory = sum(n * 32 / rate[k] for k, n in traffic.sectors.items()) + traffic.atomics * 32 / p.kernel_device_read
        issue = traffic.instructions / p.kernel_warp_instructions + traffic.shared_wavefronts / p.kernel_shared_wavefronts
        return p.launch_latency + p.kernel_floor + max(memory, issue)

    # ------------------------------------------------------------------ events and callbacks
    def event_create(self):
        self._alive()
        return SimEvent(ctx=self.cur)

    def _same_context(self, event, ctx) -> None:
        if event.ctx != ctx:
            raise ShellError("CUDA_ERROR_INVALID_HANDLE", "an event belongs to the context it was made in",
                             "record it on a stream of that context (`contexts` says which)")

    def event_record(self, event, stream):
        self._alive()
        self._same_context(event, self._ctx_of(stream))
        if self.held is not None:  # the GPU reaches it after the release
            record = event.record = [math.inf]
            event.time = math.inf

            def reached():
                record[0] = self._schedule(stream, 0.0, None)[1]
                if event.record is record:  # not recorded again since
                    event.time, event.record = record[0], None
            self.held.append(reached)
        else:
            _, event.time = self._schedule(stream, 0.0, None)
        return self._host_call(self.profile.async_call, R.QUEUED)

    def event_query(self, event):
        self._alive()
        return event.time is None or event.time <= self.now

    def event_sync(self, event):
        self._alive()
        if event.time is not None and event.time > self.now:
            self._refuse_held("cuEventSynchronize")
        before = self.now
        self._wait(event.time or 0.0, "cuEventSynchronize")
        self._alive()
        return Timing(self.now - before, self.now - before, True, self.timing_label, basis="modeled")

    def event_elapsed(self, start, end):
        self._alive()
        self._same_context(end, start.ctx)
        if start.time is None or end.time is None:
            raise ShellError("CUDA_ERROR_INVALID_HANDLE", "an event that was never recorded has no time",
                             "`event record` both events first")
        if max(start.time, end.time) > self.now:
            raise ShellError("CUDA_ERROR_NOT_READY", "the GPU has not reached both events yet",
                             "`event sync` the later one first")
        return end.time - start.time

    def event_destroy(self, event):
        pass

    def stream_wait(self, stream, event):
        self._alive()
        if self.held is not None:  # it waits for the record made before this call, as cuStreamWaitEvent does —
            # a record made later in the hold must not move it
            record = event.record or [event.time]
            self.held.append(lambda: self._wait_for(stream, record[0]))
            return
        self._wait_for(stream, event.time)

    def _wait_for(self, stream, time: float | None) -> None:
        if time is not None:
            q = stream or self.default
            q.tail = max(q.tail, time)

    def host_callback(self, stream, text, label):
        self._alive()
        return self._submit(stream, CALLBACK_COST, None, R.QUEUED, callback={"text": text, "stream": label})

    def host_noop(self, stream):
        self._alive()
        return self._submit(stream, CALLBACK_COST, None, R.QUEUED)

    def fired_callbacks(self):
        fired, self.fired = self.fired, []
        return fired

    def resolve(self, token):
        span = self.spans.get(token)
        if span is None or span[1] > self.now or self.dead:  # after a fault no event completes: work stays pending
            return None
        del self.spans[token]
        return span[1] - span[0], span[0], span[1]

    # ------------------------------------------------------------------ streams
    def stream_create(self, nonblocking, priority):
        self._alive()
        p = self.profile
        actual = min(max(priority, p.priority_greatest), p.priority_least)  # the driver clamps
        s = SimStream(0.0, nonblocking, actual, ctx=self.cur)
        self.streams.append(s)
        return s, actual

    def stream_destroy(self, handle):
        """Returns at once; work still queued on the stream runs to the end (callbacks fire, events complete)."""
        self._alive()  # after a fault the driver answers its sticky error (the H100 did)
        self.streams = [s for s in self.streams if s is not handle]
        if not handle.nonblocking:
            self.retired = max(self.retired, handle.tail)

    def _stream_tail(self, handle) -> float:
        q = handle or self.default
        return max(q.tail, self._blocking_tails()) if q is self.default else q.tail

    def stream_sync(self, handle):
        self._alive()
        self._refuse_held("cuStreamSynchronize")
        before = self.now
        self._wait(self._stream_tail(handle), "cuStreamSynchronize")
        self._alive()
        return Timing(self.now - before, self.now - before, True, self.timing_label, basis="modeled")

    def stream_idle(self, handle):
        self._alive()
        if self.held:  # work waits for the release
            return False
        return self._stream_tail(handle) <= self.now

    def device_sync(self):
        self._alive()
        self._refuse_held("cuCtxSynchronize")
        before = self.now
        self._wait_device()
        self._alive()
        return Timing(self.now - before, self.now - before, True, self.timing_label, basis="modeled")

    def priority_range(self):
        return self.profile.priority_least, self.profile.priority_greatest

    # ------------------------------------------------------------------ hold, release, plans
    def hold(self, streams):
        self._alive()
        if self.held is None:
            self.held = []
        return "modeled: work queued while held is scheduled at release"

    def release(self):
        queued, self.held = self.held or [], None
        for later in queued:
            later()
        self._advance(self.now)

    def run_plan(self, calls, rounds, gate=False, trace=True):
        """The calls at the driver's pace: no shell time between them (the modeled host cost of each call only)."""
        self._alive()
        self._refuse_held("a repeat run on the GPU side (it waits for its work at the end)")
        if gate:
            self.hold([])
        records, per = [], []
        t0 = self.now
        try:
            for _ in range(rounds):
                r0 = self.now
                for k, (method, args) in enumerate(calls):
                    t = getattr(self, method)(*args)
                    if method in WORK_CALLS:
                        records.append([k, t.issued, t.start, t.end, t.token])
                per.append(self.now - r0)
        finally:
            if gate:
                self.release()
        host = self.now - t0
        self._wait_device("the end of the repeat")
        self._alive()
        for r in records:
            if r[2] is None:
                r[2], r[3] = self.spans.get(r[4]) or (None, None)
            self.spans.pop(r[4], None)
            del r[4]
        done = [r for r in records if r[2] is not None]
        return {"host_seconds": host, "per_round": round_stats(per),
                "gpu_seconds": max(r[3] for r in done) - min(r[2] for r in done) if done else None,
                "busy_seconds": sum(r[3] - r[2] for r in done), "records": done, "source": "modeled"}

    def close(self):
        self.held = None
        self.budget.used = 0
