"""The simulated device: real bytes (lazily stored), the driver's rules and error names, and timings
modeled from a Profile on a virtual clock with per-stream queues and the legacy default stream."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import ShellError
from .base import (HOST_DEVICEMAP, HOST_PORTABLE, HOST_WRITECOMBINED, Allocation, Backend, DeviceInfo,
                   Timing)
from .profile import Profile
from .sparse import Budget, SparseBytes

MIB = 1 << 20
STEP = 64 * MIB
INVALID = "CUDA_ERROR_INVALID_VALUE"
STICKY_HINT = ("the context is now unusable: every later CUDA call fails with this error; `quit` releases "
               "everything (a future `reset` will make a new context)")

# Where each kind of memory lives in the simulated address space (deterministic from run to run).
REGIONS = {"pageable": (0x7F3C_0000_0000, 4096), "pinned": (0x7F5A_0000_0000, 4096),
           "device": (0x7F8E_0000_0000, 512), "managed": (0x7FA0_0000_0000, 4096),
           "alias": (0x0000_0002_0000_0000, 4096)}  # device-side aliases of mapped memory without UVA


@dataclass
class SimAlloc:
    kind: str
    size: int
    data: SparseBytes
    host_bits: int = 0  # cuMemHostGetFlags, while pinned or registered
    readonly: bool = False
    registered: bool = False
    freed: bool = False
    managed: dict = field(default_factory=dict)  # range attributes of managed memory


@dataclass
class SimStream:
    ready_at: float = 0.0
    nonblocking: bool = False
    priority: int = 0


@dataclass
class SimEvent:
    time: float | None = None  # when the GPU reaches it; None until recorded


CALLBACK_COST = 5e-6  # a host function holds its stream this long


class SimBackend(Backend):
    name = "sim"
    timing_label = "modeled"

    def __init__(self, profile: Profile | None = None):
        self.profile = p = profile or Profile()
        self.info = DeviceInfo(p.name, 0, p.device_memory, p.compute_capability, p.pci_bus_id,
                               p.unified_addressing, p.can_map_host_memory, p.pageable_memory_access,
                               p.managed_memory, p.concurrent_managed_access, p.async_engine_count,
                               p.concurrent_kernels)
        self.budget = Budget(p.storage_budget)
        self.next_addr = {k: base for k, (base, _) in REGIONS.items()}
        self.device_used = 0
        self.host_used = 0
        self.now = 0.0  # the host's virtual clock, seconds
        self.default = SimStream()
        self.streams: list[SimStream] = []
        self.engines: dict[str, float] = {}  # copy engine → when it is free: copies queue in issue order
        self.compute_busy: list[tuple[float, float]] = []  # when kernels occupy the GPU
        self.callbacks: list[dict] = []
        self.dead: str | None = None  # a sticky error after a kernel fault, as the driver has

    # ------------------------------------------------------------------ helpers
    def _alive(self) -> None:
        if self.dead:
            raise ShellError(self.dead, "the context is unusable after an earlier kernel fault", STICKY_HINT)

    def _address(self, region: str, size: int) -> int:
        align = REGIONS[region][1]
        addr = self.next_addr[region]
        self.next_addr[region] = addr + (size + align - 1) // align * align + align
        return addr

    def _timing(self, seconds: float, host: float, blocking: bool) -> Timing:
        return Timing(seconds, host, blocking, self.timing_label)

    def engine(self, kind: str) -> str | None:
        """The hardware an operation runs on: with asyncEngineCount ≥ 2, H2D and D2H copies have an
        engine each and overlap each other and compute; with 1 they share one; with 0 copies wait for
        compute. Kernels, memsets and device-to-device copies use the compute queue."""
        if kind not in ("h2d", "d2h"):
            return kind  # "compute", or None for markers (events) that occupy no engine
        n = self.profile.async_engine_count
        return kind if n >= 2 else "copy" if n == 1 else "compute"

    def _enqueue(self, stream: SimStream | None, duration: float, blocking: bool, engine: str | None) -> Timing:
        """Put work on a stream's queue: after that stream's earlier work, after the work issued before
        it on the same engine, and, by the legacy default stream's rule, after the default stream (or,
        on it, after every blocking stream). Only different non-default streams run concurrently."""
        q = stream or self.default
        start = max(self.now + self.profile.async_call, q.ready_at)
        if stream is None:
            start = max([start] + [s.ready_at for s in self.streams if not s.nonblocking])
        elif not stream.nonblocking:
            start = max(start, self.default.ready_at)
        if engine == "compute":
            start = self._compute_slot(start, duration)
        elif engine:
            start = max(start, self.engines.get(engine, 0.0))
        end = start + duration
        q.ready_at = end
        if engine and engine != "compute":
            self.engines[engine] = end
        before = self.now
        self.now = end if blocking else self.now + self.profile.async_call
        return Timing(duration, self.now - before, blocking, self.timing_label, None, start, end)

    def _compute_slot(self, ready: float, duration: float) -> float:
        """The earliest start ≥ ready at which the compute queue is free for `duration`. Kernels run one at
        a time, but, as with Hyper-Q's many hardware queues, a kernel whose stream is ready may run in a gap
        before one issued earlier that is still waiting (copy engines, by contrast, serve in issue order)."""
        self.compute_busy = [(a, b) for a, b in self.compute_busy if b > self.now]
        start = ready
        for a, b in sorted(self.compute_busy):
            if start + duration <= a:
                break
            start = max(start, b)
        self.compute_busy.append((start, start + duration))
        return start

    def _host_rate(self, buf) -> tuple[str, float, float]:
        """(class, h2d rate, d2h rate) of a host-side buffer."""
        a: SimAlloc = buf.handle
        p = self.profile
        if a.kind == "pinned" or a.registered:
            h2d = p.writecombined_h2d if a.host_bits & HOST_WRITECOMBINED else p.pinned_h2d
            return "pinned", h2d, p.pinned_d2h
        return "pageable", p.pageable_h2d, p.pageable_d2h

    def _copy_rate(self, src, dst) -> tuple[float, bool]:
        """Bytes per second of a copy, and whether it is staged through a bounce buffer (pageable)."""
        s_dev, d_dev = src.kind in ("device", "managed"), dst.kind in ("device", "managed")
        if s_dev and d_dev:
            return self.profile.d2d / 2, False
        if not s_dev and not d_dev:
            return self.profile.h2h, False
        cls, h2d, d2h = self._host_rate(dst if s_dev else src)
        return (d2h if s_dev else h2d), cls == "pageable"

    # ------------------------------------------------------------------ memory
    def alloc(self, kind, size, flags):
        self._alive()
        p = self.profile
        if size <= 0:
            raise ShellError(INVALID, "a size of 0 bytes cannot be allocated", "give a size above 0")
        on_device = kind in ("device", "managed")
        used, limit = (self.device_used, p.device_memory) if on_device else (self.host_used, p.host_memory)
        if used + size > limit:
            raise ShellError("CUDA_ERROR_OUT_OF_MEMORY",
                             f"{size} bytes do not fit: {used} of {limit} bytes of "
                             f"{'device' if on_device else 'host'} memory in use",
                             "free something, or ask for less")
        if kind == "managed" and not p.managed_memory:
            raise ShellError("CUDA_ERROR_NOT_SUPPORTED", "this device has no managed memory")
        a = SimAlloc(kind, size, SparseBytes(size, self.budget))
        host_ptr = device_ptr = None
        cost = 1e-6
        if kind == "pageable":
            host_ptr = self._address("pageable", size)
        elif kind == "pinned":
            host_ptr = self._address("pinned", size)
            a.host_bits = ((HOST_PORTABLE if "portable" in flags else 0)
                           | (HOST_WRITECOMBINED if "writecombined" in flags else 0)
                           | (HOST_DEVICEMAP if "mapped" in flags else 0))
            device_ptr = self._map(host_ptr, size, "mapped" in flags)
            if device_ptr is not None:
                a.host_bits |= HOST_DEVICEMAP
            cost = p.pinned_alloc_per_mib * size / MIB + 5e-6
        elif kind == "device":
            device_ptr = self._address("device" if p.unified_addressing else "alias", size)
            cost = p.device_alloc
        else:
            host_ptr = device_ptr = self._address("managed", size)
            cost = p.device_alloc
        if on_device:
            self.device_used += size
        else:
            self.host_used += size
        self.now += cost
        return Allocation(a, host_ptr, device_ptr), self._timing(cost, cost, True)

    def _map(self, host_ptr: int, size: int, mapped: bool) -> int | None:
        """The device pointer of pinned memory: the host pointer itself under UVA; without UVA a
        separate alias, and only when it was mapped."""
        if self.profile.unified_addressing:
            return host_ptr
        return self._address("alias", size) if mapped else None

    def free(self, buf):
        a: SimAlloc = buf.handle
        if self.dead and a.kind != "pageable":
            self._alive()
        a.data.release()
        a.freed = True
        if a.kind in ("device", "managed"):
            self.device_used -= a.size
        else:
            self.host_used -= a.size

    def register(self, buf, flags):
        self._alive()
        a: SimAlloc = buf.handle
        if a.kind == "pinned" or a.registered:
            raise ShellError("CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
                             f"{buf.name} is already page-locked",
                             "a range can be registered once; `unregister` it first")
        if a.kind != "pageable":
            raise ShellError(INVALID, f"{buf.name} is not host memory", "register pageable host buffers")
        a.registered = True
        a.readonly = "readonly" in flags
        a.host_bits = HOST_PORTABLE if "portable" in flags else 0
        device_ptr = self._map(buf.host_ptr, a.size, "mapped" in flags)
        if device_ptr is not None:
            a.host_bits |= HOST_DEVICEMAP
        self.now += self.profile.register_per_mib * a.size / MIB
        return device_ptr

    def unregister(self, buf):
        self._alive()
        a: SimAlloc = buf.handle
        if not a.registered:
            raise ShellError("CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
                             f"{buf.name} was not registered with cudaHostRegister",
                             "only ranges pinned by `register` can be unregistered")
        a.registered, a.readonly, a.host_bits = False, False, 0

    def pointer_info(self, buf):
        a: SimAlloc = buf.handle
        pinned = a.kind == "pinned" or a.registered
        info = {"device": 0}
        if a.kind == "pageable" and not a.registered:
            info.update(memory_type=INVALID, is_managed=INVALID)
        else:
            info["memory_type"] = "host" if pinned else "device"
            info["is_managed"] = a.kind == "managed"
        info["host_flags"] = a.host_bits if pinned else INVALID
        if pinned:
            info["host_device_ptr"] = buf.device_ptr if buf.device_ptr is not None else INVALID
        else:
            info["host_device_ptr"] = INVALID
        if a.kind == "managed":
            info.update({"read_mostly": False, "preferred_location": "none", "last_prefetch_location": "none",
                         **a.managed})
        return info

    def versions(self):
        return {"driver": "simulated", "profile": self.profile.name}

    def clock(self):
        return self.now

    def memory_paths(self):
        return self.profile.memory_paths()

    def pin_limit(self):
        return self.profile.host_memory // 2, "half of the profile's host memory"

    def prefetch(self, buf, where, stream):
        self._alive()
        a: SimAlloc = buf.handle
        a.managed["last_prefetch_location"] = "device 0" if where == "device" else "host"
        rate = self.profile.pinned_h2d if where == "device" else self.profile.pinned_d2h
        engine = self.engine("h2d" if where == "device" else "d2h")
        return self._enqueue(stream, self.profile.copy_latency + a.size / rate, False, engine)

    def advise(self, buf, advice, where):
        self._alive()
        a: SimAlloc = buf.handle
        if advice == "readmostly":
            a.managed["read_mostly"] = True
        elif advice == "preferred":
            a.managed["preferred_location"] = "device 0" if where == "device" else "host"

    def read(self, buf, offset, nbytes):
        if buf.kind != "pageable":
            self._alive()
        return buf.handle.data.read(offset, nbytes)

    def write(self, buf, offset, data):
        if buf.kind != "pageable":
            self._alive()
        buf.handle.data.write(offset, data)

    def reserve(self, buf, offset, nbytes):
        buf.handle.data.reserve(offset, nbytes)

    # ------------------------------------------------------------------ work
    def memcpy(self, src, src_off, dst, dst_off, nbytes, stream, async_):
        self._alive()
        rate, staged = self._copy_rate(src, dst)
        duration = self.profile.copy_latency + nbytes / rate
        dst.handle.data.copy_from(src.handle.data, src_off, dst_off, nbytes)
        s_dev, d_dev = src.kind in ("device", "managed"), dst.kind in ("device", "managed")
        kind = ("compute" if s_dev else "h2d") if d_dev else ("d2h" if s_dev else None)
        # a sync copy, and an async one from/to pageable memory (staged), hold the host until done
        return self._enqueue(stream, duration, not async_ or staged, self.engine(kind) if kind else None)

    def memset(self, buf, offset, value, nbytes, stream, async_):
        self._alive()
        buf.handle.data.fill(offset, value, nbytes)
        return self._enqueue(stream, self.profile.copy_latency + nbytes / self.profile.memset, not async_, "compute")

    def launch(self, kernel, args, count, grid, block, shared, stream):
        self._alive()
        if not kernel.builtin:
            raise ShellError("NOT_SUPPORTED_ON_SIM", f"{kernel.name} is CUDA C, which the simulator cannot run")
        p = self.profile
        named = dict(zip((q.name for q in kernel.params), args))
        for q in kernel.params:
            if q.writes and named[q.name].handle.readonly:
                self.dead = "CUDA_ERROR_ILLEGAL_ADDRESS"
                raise ShellError(self.dead, f"the kernel wrote to {named[q.name].name}, registered read-only, "
                                 "and faulted", STICKY_HINT)
        if kernel.name == "spin":
            return self._enqueue(stream, int(named["us"]) * 1e-6, False, "compute")
        n = min(count, grid * block)
        nbytes = n * 4
        bufs = {q.name: named[q.name] for q in kernel.params if q.is_buffer}
        scalars = {q.name: named[q.name] for q in kernel.params if not q.is_buffer}
        outputs = [q.name for q in kernel.params if q.writes]
        if any(b.handle.data.touched(0, nbytes) for b in bufs.values()) or scalars:
            for name in outputs:
                bufs[name].handle.data.reserve(0, nbytes)
        for pos in range(0, nbytes, STEP):  # in pieces: a 16 GiB launch must not need 48 GiB of RAM
            size = min(STEP, nbytes - pos)
            arrays = {k: b.handle.data.read(pos, size).view(np.float32) for k, b in bufs.items()}
            with np.errstate(over="ignore", invalid="ignore"):  # the GPU gives inf/nan silently too
                for name, values in kernel.sim(arrays, scalars).items():
                    bufs[name].handle.data.write(pos, values.astype(np.float32))
        moved = sum(nbytes * (2 if q.kind == "inout" else 1) /
                    (p.kernel_device_read if bufs[q.name].kind in ("device", "managed") else p.kernel_zero_copy_read)
                    for q in kernel.params if q.is_buffer)
        return self._enqueue(stream, p.launch_latency + moved, False, "compute")

    def load_kernels(self, source):
        raise ShellError("NOT_SUPPORTED_ON_SIM", "the simulator cannot compile or run CUDA C",
                         "the built-in kernels (sum, fill, scale, saxpy, increment, touch, spin) run on both "
                         "backends; user kernels need --backend cuda")

    # ------------------------------------------------------------------ events and callbacks
    def event_create(self):
        self._alive()
        return SimEvent()

    def event_record(self, event, stream):
        self._alive()
        t = self._enqueue(stream, 0.0, False, None)
        event.time = t.end
        return t

    def event_query(self, event):
        self._alive()
        return event.time is None or event.time <= self.now

    def event_sync(self, event):
        self._alive()
        before = self.now
        self.now = max(self.now, event.time or 0.0)
        return self._timing(self.now - before, self.now - before, True)

    def event_elapsed(self, start, end):
        self._alive()
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
        q = stream or self.default
        q.ready_at = max(q.ready_at, event.time or 0.0)

    def host_callback(self, stream, text, label):
        self._alive()
        t = self._enqueue(stream, CALLBACK_COST, False, None)
        self.callbacks.append({"text": text, "at": t.start, "stream": label})
        return t

    def fired_callbacks(self):
        fired = [c for c in self.callbacks if c["at"] <= self.now]
        self.callbacks = [c for c in self.callbacks if c["at"] > self.now]
        return fired

    # ------------------------------------------------------------------ streams
    def stream_create(self, nonblocking, priority):
        self._alive()
        p = self.profile
        actual = min(max(priority, p.priority_greatest), p.priority_least)  # the driver clamps
        s = SimStream(self.now, nonblocking, actual)
        self.streams.append(s)
        return s, actual

    def stream_destroy(self, handle):
        self.streams.remove(handle)

    def stream_sync(self, handle):
        self._alive()
        q = handle or self.default
        before = self.now
        self.now = max(self.now, q.ready_at)
        return self._timing(self.now - before, self.now - before, True)

    def stream_idle(self, handle):
        return (handle or self.default).ready_at <= self.now

    def device_sync(self):
        self._alive()
        before = self.now
        self.now = max([self.now, self.default.ready_at] + [s.ready_at for s in self.streams])
        return self._timing(self.now - before, self.now - before, True)

    def priority_range(self):
        return self.profile.priority_least, self.profile.priority_greatest

    def close(self):
        self.budget.used = 0
