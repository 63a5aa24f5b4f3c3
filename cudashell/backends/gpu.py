"""The GPU side of the cuda backend, run inside the worker process (`worker.py`): PyCUDA holds the context and
compiles kernels (nvcc); NVIDIA's bindings (`bindings.py`) do the rest — allocations (so a refusal has the driver's
name, which PyCUDA gives only as text), registration, pointer queries, streams with priorities, events, copies,
launches. Times are measured here, next to the
driver: CUDA events for the GPU, the host clock around each call for `blocking` — so the pipe to the
shell never shows in a figure."""

from __future__ import annotations

import atexit
import ctypes as C
import mmap
import os
import re
import resource
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

import threading

from .. import syncrules as R
from ..errors import ShellError, held_error
from ..kernels import BUILTIN_SOURCE, BUILTINS, c_linkage, parse_kernels, with_includes
from . import topology
from .bindings import HOST_FN, OK, answer, call, check, cu, done, host_fn, launch_args, location, mismatch, text
from .activity import Activity, unavailable_reason
from .base import WORK_CALLS, Allocation, DeviceInfo, Timing, round_stats

CTYPE = {"float32": C.c_float, "float64": C.c_double, "int32": C.c_int32, "uint32": C.c_uint32,
         "int64": C.c_int64, "uint64": C.c_uint64, "int8": C.c_int8, "uint8": C.c_uint8, "int16": C.c_int16}
# A call that returned after the GPU passed its start event, and held the host at least this long, waited
# for the queue ahead of it; shorter, the queue may simply have drained during the call.
OBSERVABLE = 50e-6
EVENT_MIN_BYTES = 64 << 10
HOLD_WAIT_VALUE = "cuStreamWaitValue32 on a pinned flag, one per stream"
HOLD_KERNEL = "a one-thread kernel polling a pinned flag, one per stream (no stream memory operations here)"
STUCK = 1.0  # seconds an issuing call may stay stuck while held before the watchdog lets the streams go
ADVICE = {"readmostly": cu.CUmem_advise.CU_MEM_ADVISE_SET_READ_MOSTLY,
          "preferred": cu.CUmem_advise.CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
          "accessed-by": cu.CUmem_advise.CU_MEM_ADVISE_SET_ACCESSED_BY}
HOLD_SOURCE = """__global__ void k_hold(const volatile unsigned int *flag, unsigned int gen)
{ while (*flag < gen) { __nanosleep(500); } }"""


def _nvidia_driver() -> str:
    try:
        with open("/proc/driver/nvidia/version") as f:
            m = re.search(r"\s(\d+\.\d+(?:\.\d+)?)\s", f.readline())
    except OSError:
        return "unknown"
    return m.group(1) if m else "unknown"


def host_memory_total() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 0


def _host_array(ptr: int, size: int) -> np.ndarray:
    """The bytes of a host-accessible allocation, as numpy sees them (no copy)."""
    return np.ctypeslib.as_array((C.c_ubyte * size).from_address(ptr))


@dataclass
class CudaAlloc:
    kind: str
    size: int
    array: np.ndarray | None = None  # host-accessible bytes (pageable, pinned, managed)
    owner: object = None  # the driver's pointer to free, or the mmap of pageable memory
    dptr: int | None = None  # the address CUDA copies and kernels use
    device: int = 0  # the GPU of the context it was made in
    ctx: int | None = None  # that context's handle (None: ours, the session GPU's primary)


@dataclass(eq=False)
class Ctx:
    """A context the side works in, with what is a context's own: its timing events (an event can be recorded only
    on its context's streams: CUDA_ERROR_INVALID_HANDLE on another's, seen on the H100), the time zero they are
    read against, and the modules loaded in it (a function is a context's too)."""

    key: int | None  # the handle the shell holds: None for ours
    handle: int
    device: int
    primary: bool
    origin: int = 0
    origin_at: float = 0.0  # where `origin` lies on the trace's clock
    free_events: list = field(default_factory=list)
    events: list = field(default_factory=list)  # every timing event made in it, destroyed with it
    functions: dict = field(default_factory=dict)  # CUDA C source → {symbol: CUfunction}
    modules: list = field(default_factory=list)


@dataclass
class Pending:
    start: int | None  # None: CUPTI times it, the end event only says when it is done
    end: int
    ctx: Ctx


class GpuSide:
    """The driver-facing half of the cuda backend (the worker calls it; `cuda.CudaBackend` is the contract)."""

    name = "cuda"
    timing_label = "measured"

    def __init__(self, ordinal: int = 0):
        """The driver through the bindings alone: PyCUDA (0.35 s to import on the H100 machine) is loaded when a
        kernel is first compiled, not at start."""
        try:
            call("cuInit", 0)
        except RuntimeError as e:  # the bindings found no libcuda.so.1
            raise ShellError("NO_GPU", f"no CUDA driver: {e}") from None
        self.driver_version = call("cuDriverGetVersion")
        why = mismatch(self.driver_version // 1000)
        if why:
            raise ShellError("NO_GPU", why, "install the bindings that match the driver, or use --backend sim")
        if not 0 <= ordinal < call("cuDeviceGetCount"):
            raise ShellError("NO_GPU", f"the CUDA driver sees no GPU {ordinal}")
        self.activity = None  # CUPTI, made before the context so that it sees all of it
        self.tracing_why = ("turned off (CUDASHELL_TRACING=off): engine times come from CUDA events"
                            if os.environ.get("CUDASHELL_TRACING") == "off"
                            else unavailable_reason(self.driver_version // 1000))
        if self.tracing_why is None:
            try:
                self.activity = Activity()
            except Exception as e:  # CUPTI refused (another profiler attached, an old driver)
                self.tracing_why = f"CUPTI could not start ({type(e).__name__}: {e}): engine times come from CUDA events"
        self.tracing = "CUPTI activity records" if self.activity else None
        self.dev = int(call("cuDeviceGet", ordinal))
        self.ctx = int(call("cuDevicePrimaryCtxRetain", self.dev))  # what the runtime API (and `export c`) uses
        call("cuCtxSetCurrent", self.ctx)
        self.closed = False
        atexit.register(self.close)  # the primary context is released on every exit path
        try:
            self.info = self._device_info(ordinal)
            self.home = self.cur = Ctx(None, self.ctx, ordinal, True)
            self.ctxs: dict = {None: self.home}  # the shell's handle → context
            self.primaries: dict[int, int | None] = {ordinal: None}  # GPU → its primary context's handle
            self.stream_ctx: dict[int, Ctx] = {}  # the context each stream was made in
            self.peers: set[tuple[int, int]] = set()  # (a, b): GPU a's primary context reaches GPU b's memory
            self.pending: dict[int, Pending] = {}
            self.next_token = 1
            self.streams: set[int] = set()
            self.clock_khz = self._attr("CLOCK_RATE", 1_980_000)
            self.lock = threading.Lock()
            self.fired: list[dict] = []
            self.callback_refs: list = []  # ctypes callbacks must outlive the stream reaching them
            self.held, self.hold_gen, self.hold_how = False, 0, None
            self.watchdog = None  # started with the first hold: see _watch
            self.in_call, self.beat, self.released_early = False, 0, None
            self.flag = self.flag_dptr = None
            self._start_clock(self.home)  # time zero of the trace
            self.t0 = time.perf_counter()
            if self.activity:
                self.activity.base_ns = self.activity.cupti.get_timestamp()
        except BaseException:
            self.close()
            raise

    def _attr(self, name: str, default=0):
        try:
            return call("cuDeviceGetAttribute", getattr(cu.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}"),
                        self.dev)
        except (AttributeError, ShellError):
            return default

    def _device_info(self, ordinal: int) -> DeviceInfo:
        attr = self._attr
        major, minor = attr("COMPUTE_CAPABILITY_MAJOR"), attr("COMPUTE_CAPABILITY_MINOR")
        return DeviceInfo(text(call("cuDeviceGetName", 256, self.dev)), ordinal, call("cuDeviceTotalMem", self.dev),
                          f"{major}.{minor}", text(call("cuDeviceGetPCIBusId", 32, self.dev)), bool(attr("UNIFIED_ADDRESSING")), bool(attr("CAN_MAP_HOST_MEMORY")),
                          bool(attr("PAGEABLE_MEMORY_ACCESS")), bool(attr("MANAGED_MEMORY")),
                          bool(attr("CONCURRENT_MANAGED_ACCESS")), attr("ASYNC_ENGINE_COUNT"),
                          bool(attr("CONCURRENT_KERNELS")))

    def versions(self) -> dict:
        from importlib.metadata import version

        from cuda import bindings

        v = self.driver_version
        return {"CUDA driver API": f"{v // 1000}.{v % 1000 // 10}", "PyCUDA": version("pycuda"),
                "cuda-bindings": bindings.__version__,
                "NVIDIA driver": _nvidia_driver(), "CUPTI": self._cupti_version()}

    def _cupti_version(self) -> str:
        if not self.activity:
            return "not used: " + self.tracing_why
        from importlib.metadata import version

        return f"cupti-python {version('cupti-python')}: engine times from activity records"

    def _stamp(self) -> float:
        """Now, in trace seconds, on the clock the engine times use (CUPTI's when it traces)."""
        return self.activity.now() if self.activity else time.perf_counter() - self.t0

    def clock(self) -> float:
        return time.perf_counter()

    def host_sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def memory_paths(self) -> dict:
        from ..machine import pcie_link

        clock_khz, bus_bits = self._attr("MEMORY_CLOCK_RATE"), self._attr("GLOBAL_MEMORY_BUS_WIDTH")
        return {"pcie": pcie_link(self.info.pci_bus_id),
                "hbm_peak": 2 * clock_khz * 1e3 * bus_bits / 8 if clock_khz and bus_bits else None}

    def devices(self) -> dict:
        found = topology.devices()
        pairs, source = topology.peers(len(found))
        from ..machine import memory_nodes

        return {"devices": found, "peers": pairs, "link_source": source, "memory_nodes": memory_nodes()}

    # ------------------------------------------------------------------ contexts
    def _start_clock(self, ctx: Ctx) -> None:
        """A context's time zero: an event recorded and reached now, placed on the trace's clock."""
        ctx.origin = int(call("cuEventCreate", 0))
        ctx.events.append(ctx.origin)
        call("cuEventRecord", ctx.origin, None)
        call("cuEventSynchronize", ctx.origin)
        ctx.origin_at = self._stamp() if ctx is not self.home else 0.0

    def _ctx(self, key) -> Ctx:
        try:
            return self.ctxs[key]
        except KeyError:
            raise ShellError("CUDA_ERROR_INVALID_CONTEXT", "that context was destroyed") from None

    def _stream_ctx(self, stream) -> Ctx:
        """The context work on `stream` runs in (the default stream's: the current one)."""
        return self.stream_ctx.get(stream, self.cur) if stream else self.cur

    @contextmanager
    def _in(self, ctx: Ctx):
        """`ctx` current for a call; the one before current again after."""
        if ctx is self.cur:
            yield
            return
        before = self.cur
        call("cuCtxSetCurrent", ctx.handle)
        self.cur = ctx
        try:
            yield
        finally:
            call("cuCtxSetCurrent", before.handle)
            self.cur = before

    def _adopt(self, key: int, handle: int, device: int, primary: bool) -> int:
        ctx = Ctx(key, handle, device, primary)
        self.ctxs[key] = ctx
        with self._in(ctx):
            self._start_clock(ctx)
        return key

    def _check_device(self, device: int) -> None:
        count = topology.device_count()
        if not 0 <= device < count:
            raise ShellError("CUDA_ERROR_INVALID_DEVICE", f"there is no GPU {device}: the driver sees {count}",
                             "`devices` lists them")

    def context_create(self, device):
        self._check_device(device)
        t0 = time.perf_counter()
        handle = int(call("cuCtxCreate", None, 0, device))  # made current, on top of ours …
        call("cuCtxPopCurrent")  # … and taken off again: ours stays current
        took = self._host_timing(t0)
        return self._adopt(handle, handle, device, False), took

    def context_primary(self, device):
        if device not in self.primaries:
            self._check_device(device)
            handle = int(call("cuDevicePrimaryCtxRetain", device))
            self.primaries[device] = self._adopt(handle, handle, device, True)
        return self.primaries[device]

    def _primary(self, device: int) -> Ctx:
        return self.ctxs[self.context_primary(device)]

    def context_use(self, handle):
        t0 = time.perf_counter()
        ctx = self._ctx(handle)
        call("cuCtxSetCurrent", ctx.handle)
        self.cur = ctx
        return self._host_timing(t0)

    def context_destroy(self, handle):
        key, ctx = handle, self._ctx(handle)
        if ctx.primary:  # ours, or another GPU's: retained until the side closes (another session may use it)
            raise ShellError("CUDA_ERROR_INVALID_CONTEXT", "a primary context is released when the session closes")
        if self.held:
            raise held_error("cuCtxDestroy, which waits for the context's work,")
        with self._in(ctx):
            call("cuCtxSynchronize")
            for ev in ctx.events:
                cu.cuEventDestroy(ev)
            for mod in ctx.modules:
                cu.cuModuleUnload(mod)
        if self.cur is ctx:
            self.context_use(None)
        call("cuCtxDestroy", ctx.handle)
        del self.ctxs[key]

    def reach(self, buf, ctx):
        ctx, a = self._ctx(ctx), buf.handle
        if a.kind == "device":
            if a.device != ctx.device:
                return buf.device_ptr if ctx.primary and (ctx.device, a.device) in self.peers else "NO_PEER_ACCESS"
            return buf.device_ptr  # under UVA another context on the GPU uses it too (a kernel did, on the H100)
        if a.kind == "managed":
            return buf.device_ptr
        with self._in(ctx):  # what the driver says in that context
            return self._host_device_ptr(buf.host_ptr)

    def peer_access(self, src, dst, enable):
        t0 = time.perf_counter()
        topology.check_pair(src, dst)
        other = self._primary(dst)
        with self._in(self._primary(src)):
            if enable:
                call("cuCtxEnablePeerAccess", other.handle, 0)
            else:
                call("cuCtxDisablePeerAccess", other.handle)
        (self.peers.add if enable else self.peers.discard)((src, dst))
        return self._host_timing(t0)

    def _untraced(self, what: str, measure, *args) -> float:
        """A bench's own copies, outside the session (topology's, in the GPUs' primary contexts, ours current again
        after) and untraced: with CUPTI on, staged peer copies ran at 0.94 of C."""
        if self.held:
            raise held_error(what)
        if self.activity is not None:
            self.activity.pause()
        try:
            return measure(*args)
        finally:
            if self.activity is not None:
                self.activity.resume()

    def peer_copy(self, src, dst, nbytes, reps, peer):
        return self._untraced("a copy between GPUs (timed to its end)", topology.peer_copy, src, dst, nbytes, reps,
                              peer)

    def host_copy(self, device, node, nbytes, reps, to_device):
        return self._untraced("a timed copy (it waits for its end)", topology.host_copy, device, node, nbytes, reps,
                              to_device)

    def pin_limit(self) -> tuple[int, str]:
        limit, why = host_memory_total() // 2, "half of MemTotal"
        soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
        if soft != resource.RLIM_INFINITY and soft < limit:
            limit, why = soft, "RLIMIT_MEMLOCK"
        return limit, why

    # ------------------------------------------------------------------ timing
    def _event(self) -> int:
        """A timing event of the current context."""
        if self.cur.free_events:
            return self.cur.free_events.pop()
        ev = int(call("cuEventCreate", 0))
        self.cur.events.append(ev)
        return ev

    def _timed(self, stream, name: str, args: tuple, rule: R.Rule, nbytes: int | None = None) -> Timing:
        """_timed_call in the stream's context, marked as issuing while held (for the watchdog, `_watch`)."""
        self.in_call, self.beat = self.held, self.beat + 1
        try:
            ctx = self._stream_ctx(stream)
            if ctx is self.cur:  # the usual case, on every copy and launch: no context switch to set up
                return self._timed_call(stream, name, args, rule, nbytes)
            with self._in(ctx):
                return self._timed_call(stream, name, args, rule, nbytes)
        finally:
            self.in_call = False

    def _timed_call(self, stream, name: str, args: tuple, rule: R.Rule, nbytes: int | None = None) -> Timing:
        """Call the driver function `name` between two events on `stream`, with nothing but the call between
        them, and observe whether it held the host: when work was queued ahead of it, the call waited for
        the GPU exactly when the GPU had passed the start event by the time it returned. With nothing queued
        the two cannot be told apart, and the result says it follows the documented rule. A small copy the
        rule says completes, on an idle stream, is latency-bound: its host time is its time, as C benchmarks
        take it."""
        if self.held and rule.blocks:
            raise held_error(name, rule.why)
        f = getattr(cu, name)
        tag, act = self.next_token, self.activity
        self.next_token += 1
        record = cu.cuEventRecord
        if act and rule.wait == "none" and name != "cuMemPrefetchAsync":
            # CUPTI times it on its engine (copies, memsets, kernels; a prefetch has no such record): one event,
            # to know when it is done. With work queued ahead, a call that returned before its own work had run
            # did not wait for that queue: observed, as with events (a quick return needs no query)
            queued = not done("cuStreamQuery", stream)
            end = self._event()
            issued = self._stamp()
            act.tag(tag)
            t0 = time.perf_counter()
            res = f(*args)[0]
            host = time.perf_counter() - t0
            act.untag()
            if res is not OK:
                self.cur.free_events.append(end)
                check(res, name)
            check(record(end, stream)[0], "cuEventRecord")
            self.pending[tag] = Pending(None, end, self.cur)
            blocked = queued and host >= OBSERVABLE and done("cuEventQuery", end)
            return Timing(None, host, blocked, self.timing_label, tag, rule=rule.why,
                          basis="observed" if queued else "rule", tag=tag, issued=issued)
        queued = not done("cuStreamQuery", stream)
        if rule.wait == "complete" and not queued and nbytes is not None and nbytes < EVENT_MIN_BYTES:
            issued = self._stamp()
            act and act.tag(tag)
            t0 = time.perf_counter()
            res = f(*args)[0]
            host = time.perf_counter() - t0
            act and act.untag()
            check(res, name)
            return Timing(host, host, True, self.timing_label, None, issued, issued + host, rule.why, "rule",
                          tag, issued)
        start, end = self._event(), self._event()
        issued = self._stamp()
        act and act.tag(tag)  # before the events: between them is the call alone (an idle GPU starts at once)
        check(record(start, stream)[0], "cuEventRecord")
        t0 = time.perf_counter()
        res = f(*args)[0]
        host = time.perf_counter() - t0
        if res is not OK:
            act and act.untag()
            self.cur.free_events += [start, end]
            check(res, name)
        started = done("cuEventQuery", start)
        check(record(end, stream)[0], "cuEventRecord")
        act and act.untag()
        if queued and (not started or host >= OBSERVABLE):
            blocked, basis = started, "observed"
        else:
            blocked, basis = rule.blocks, "rule"
        if rule.wait in ("complete", "device") or done("cuEventQuery", end):
            call("cuEventSynchronize", end)  # finished, or finishing now: its time is known
            seconds, t_start, t_end = self._span(start, end, self.cur)
            if basis == "rule" and seconds >= OBSERVABLE:  # long enough to see whether the call waited for it
                blocked, basis = host >= seconds / 2, "observed"
            return Timing(seconds, host, blocked, self.timing_label, None, t_start, t_end, rule.why, basis, tag,
                          issued)
        self.pending[tag] = Pending(start, end, self.cur)
        return Timing(None, host, blocked, self.timing_label, tag, rule=rule.why, basis=basis, tag=tag, issued=issued)

    def _issue(self, name: str, *args) -> None:
        """A driver call that queues work, marked as issuing while held (for the watchdog)."""
        self.in_call, self.beat = self.held, self.beat + 1
        try:
            call(name, *args)
        finally:
            self.in_call = False

    def _span(self, start: int, end: int, ctx: Ctx) -> tuple[float, float, float]:
        """(duration, start, end) of a finished event pair of `ctx`, on the trace's clock; frees the events."""
        t_start, t_end = (ctx.origin_at + self._elapsed(ctx.origin, e) for e in (start, end))
        ctx.free_events += [start, end]
        return t_end - t_start, t_start, t_end

    def resolve(self, token):
        p = self.pending.get(token)
        try:
            if p is None or not done("cuEventQuery", p.end):
                return None
        except ShellError:  # a dead context: that work never finished
            return None
        del self.pending[token]
        if p.start is None:
            return self._engine_span(token, p.end, p.ctx)
        return self._span(p.start, p.end, p.ctx)

    def _engine_span(self, tag: int, end: int, ctx: Ctx) -> tuple:
        """(duration, start, end) from CUPTI's record of finished work (flushed when not yet delivered)."""
        ctx.free_events.append(end)
        span = self.activity.span(tag)
        if span is None:
            self.activity.flush()
            span = self.activity.span(tag)
        if span is None:  # CUPTI dropped the record: when it ended is known, how long it ran is not
            t = ctx.origin_at + self._elapsed(ctx.origin, end)
            return 0.0, t, t
        return span[1] - span[0], span[0], span[1], self.tracing

    def refine(self, tags):
        if not self.activity:
            return {}
        self.activity.flush()
        spans = {t: self.activity.span(t) for t in tags}
        return {t: s for t, s in spans.items() if s is not None}

    def resolve_many(self, tokens):
        spans = {t: self.resolve(t) for t in tokens}
        return {t: s for t, s in spans.items() if s is not None}

    def _host_timing(self, t0: float) -> Timing:
        host = time.perf_counter() - t0
        return Timing(host, host, True, self.timing_label)

    # ------------------------------------------------------------------ memory
    def alloc(self, kind, size, flags, ctx=None):
        where = self._ctx(ctx)
        t0 = time.perf_counter()
        a = CudaAlloc(kind, size, device=where.device, ctx=ctx)
        with self._in(where):
            return self._alloc_here(a, flags, t0)

    def _alloc_here(self, a: CudaAlloc, flags, t0: float):
        """The driver's allocation in the current context (under UVA any context frees it, as on the H100)."""
        kind, size = a.kind, a.size
        if kind == "pageable":  # anonymous pages: page-aligned, lazily backed, like a large malloc
            a.owner = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            a.array = np.frombuffer(a.owner, np.uint8)
        elif kind == "pinned":
            bits = ((cu.CU_MEMHOSTALLOC_PORTABLE if "portable" in flags else 0)
                    | (cu.CU_MEMHOSTALLOC_DEVICEMAP if "mapped" in flags else 0)
                    | (cu.CU_MEMHOSTALLOC_WRITECOMBINED if "writecombined" in flags else 0))
            a.owner = int(call("cuMemHostAlloc", size, bits))
            a.array = _host_array(a.owner, size)
        elif kind == "device":
            a.dptr = a.owner = int(call("cuMemAlloc", size))
        else:
            attach = (cu.CUmemAttach_flags.CU_MEM_ATTACH_HOST if "host" in flags
                      else cu.CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL)
            a.dptr = a.owner = int(call("cuMemAllocManaged", size, attach))
            a.array = _host_array(a.owner, size)
        t = self._host_timing(t0)
        host_ptr = a.array.ctypes.data if a.array is not None else None
        device_ptr = a.dptr
        if kind == "pinned":
            dp = self._host_device_ptr(host_ptr)
            device_ptr = a.dptr = dp if isinstance(dp, int) else None
        return Allocation(a, host_ptr, device_ptr), t

    @staticmethod
    def _host_device_ptr(ptr: int) -> int | str:
        """cuMemHostGetDevicePointer's answer: the address, or the driver's refusal by name."""
        try:
            return int(call("cuMemHostGetDevicePointer", ptr, 0))
        except ShellError as e:
            return e.code

    def free(self, buf):
        a: CudaAlloc = buf.handle
        if a.kind != "pageable":
            if self.held:
                raise held_error("cudaFree, which waits for the device,")
            # cudaFree synchronises the device anyway; the bindings let go of the GIL while it waits, so a host
            # callback still queued (it needs the GIL) runs
            with self._in(self._ctx(a.ctx)):
                call("cuCtxSynchronize")
        a.array = None
        if a.kind == "pageable":
            a.owner.close()
        elif a.kind == "pinned":
            call("cuMemFreeHost", a.owner)
        else:
            with self._in(self._ctx(a.ctx)):
                call("cuMemFree", a.owner)

    def register(self, buf, flags):
        a: CudaAlloc = buf.handle
        if a.kind != "pageable":
            if a.kind == "pinned":
                raise ShellError("CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", f"{buf.name} is already page-locked",
                                 "a range can be registered once; `unregister` it first")
            raise ShellError("CUDA_ERROR_INVALID_VALUE", f"{buf.name} is not host memory")
        bits = ((cu.CU_MEMHOSTREGISTER_PORTABLE if "portable" in flags else 0)
                | (cu.CU_MEMHOSTREGISTER_DEVICEMAP if "mapped" in flags else 0)
                | (cu.CU_MEMHOSTREGISTER_READ_ONLY if "readonly" in flags else 0))
        call("cuMemHostRegister", buf.host_ptr, a.size, bits, hint="a range can be registered once; `unregister` it first")
        dp = self._host_device_ptr(buf.host_ptr)
        a.dptr = dp if isinstance(dp, int) else None
        a.ctx = self.cur.key
        return a.dptr

    def unregister(self, buf):
        if self.held:
            raise held_error("cudaHostUnregister, which waits for the device,")
        ptr = buf.host_ptr if buf.host_ptr is not None else buf.device_ptr
        call("cuMemHostUnregister", ptr, hint="only ranges pinned by `register` can be unregistered")
        buf.handle.dptr = None

    def pointer_info(self, buf):
        a: CudaAlloc = buf.handle
        ptr = buf.host_ptr if buf.host_ptr is not None else buf.device_ptr
        attr = cu.CUpointer_attribute
        host = buf.host_ptr is not None
        info = {"device": a.device,
                "memory_type": answer("cuPointerGetAttribute", attr.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr,
                                      convert=lambda v: cu.CUmemorytype(v).name.removeprefix("CU_MEMORYTYPE_").lower()),
                "is_managed": answer("cuPointerGetAttribute", attr.CU_POINTER_ATTRIBUTE_IS_MANAGED, ptr, convert=bool),
                "host_flags": answer("cuMemHostGetFlags", ptr) if host else "CUDA_ERROR_INVALID_VALUE",
                "host_device_ptr": self._host_device_ptr(ptr) if host else "CUDA_ERROR_INVALID_VALUE"}
        if a.kind == "managed":
            info.update(self._range_info(a))
        return info

    def _range_info(self, a: CudaAlloc) -> dict:
        def where(v) -> str:
            v = int(v)
            return "host" if v == cu.CU_DEVICE_CPU else "none" if v == -2 else f"device {v}"

        attr = cu.CUmem_range_attribute
        return {"read_mostly": answer("cuMemRangeGetAttribute", 4, attr.CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, a.dptr,
                                      a.size, convert=bool),
                "preferred_location": answer("cuMemRangeGetAttribute", 4, attr.CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION,
                                             a.dptr, a.size, convert=where),
                "last_prefetch_location": answer("cuMemRangeGetAttribute", 4,
                                                 attr.CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, a.dptr, a.size,
                                                 convert=where)}

    def read(self, buf, offset, nbytes):
        a: CudaAlloc = buf.handle
        if a.array is not None:
            return a.array[offset: offset + nbytes].copy()
        if self.held:
            raise held_error("reading device memory (a synchronous copy)")
        out = np.empty(nbytes, np.uint8)
        with self._in(self._ctx(a.ctx)):
            call("cuMemcpyDtoH", out.ctypes.data, a.dptr + offset, nbytes)
        return out

    def write(self, buf, offset, data):
        buf.handle.array[offset: offset + data.size] = data

    # ------------------------------------------------------------------ work
    @staticmethod
    def _cls(buf) -> str:
        return R.memory_class(buf.kind, buf.registered is not None)

    def _untimed(self, name: str, args: tuple, rule: R.Rule) -> Timing:
        """A call that queues no GPU work (zero bytes): the driver returns at once."""
        t0 = time.perf_counter()
        call(name, *args)
        host = time.perf_counter() - t0
        return Timing(0.0, host, False, self.timing_label, rule=rule.why, basis="rule")

    def _memcpy_call(self, src, src_off, dst, dst_off, nbytes, stream, async_):
        s_ptr = (src.host_ptr if src.host_ptr is not None else src.device_ptr) + src_off
        d_ptr = (dst.host_ptr if dst.host_ptr is not None else dst.device_ptr) + dst_off
        rule = R.memcpy_rule(self._cls(src), self._cls(dst), async_, nbytes)
        name, args = ("cuMemcpyAsync", (d_ptr, s_ptr, nbytes, stream)) if async_ else \
            ("cuMemcpy", (d_ptr, s_ptr, nbytes))
        return name, args, rule

    def memcpy(self, src, src_off, dst, dst_off, nbytes, stream, async_):
        """Through the driver for every pair, host-to-host too (cuMemcpy under UVA), so stream order holds."""
        name, args, rule = self._memcpy_call(src, src_off, dst, dst_off, nbytes, stream, async_)
        if nbytes == 0:
            return self._untimed(name, args, rule)
        here = self._stream_ctx(stream if async_ else None)
        others = {b.handle.device for b in (src, dst) if b.kind == "device"} - {here.device}
        if others:  # another GPU's memory: the copy is not all on our stream
            with self._in(here):
                return self._between_gpus(args[:3], others.pop())
        return self._timed(stream if async_ else None, name, args, rule, nbytes)

    def _between_gpus(self, args: tuple, other: int) -> Timing:
        """A copy to or from another GPU's memory: cuMemcpy, then both GPUs synchronised, timed on the host —
        the events of one GPU's stream see only its part (on the H200 pair they said 52 µs for 256 MiB staged)."""
        if self.held:
            raise held_error("a copy between GPUs (timed to its end)")
        call("cuCtxSynchronize")  # the work queued before it, out of its time
        start, t0 = self._stamp(), time.perf_counter()
        call("cuMemcpy", *args)
        call("cuCtxSynchronize")
        with self._in(self._primary(other)):
            call("cuCtxSynchronize")
        seconds = time.perf_counter() - t0
        return Timing(seconds, seconds, True, self.timing_label, None, start, start + seconds,
                      rule=R.BETWEEN_GPUS.why, basis="observed", issued=start)

    def _memset_call(self, buf, offset, value, nbytes, stream, async_):
        ptr = (buf.device_ptr if buf.device_ptr is not None else buf.host_ptr) + offset
        rule = R.memset_rule(self._cls(buf), async_, nbytes)
        name, args = ("cuMemsetD8Async", (ptr, value, nbytes, stream)) if async_ else \
            ("cuMemsetD8", (ptr, value, nbytes))
        return name, args, rule

    def memset(self, buf, offset, value, nbytes, stream, async_):
        name, args, rule = self._memset_call(buf, offset, value, nbytes, stream, async_)
        if nbytes == 0:
            return self._untimed(name, args, rule)
        return self._timed(stream if async_ else None, name, args, rule)

    def _functions(self, source: str, names: list[str], extern_c: bool, path: str | None = None) -> dict[str, int]:
        """The kernels of `source` in the current context, compiled and loaded there the first time (a module
        is its context's: another context's function is CUDA_ERROR_INVALID_HANDLE, seen on the H100). A loaded
        file's `#include "x.cuh"` finds files beside it."""
        fns = self.cur.functions.get(source)
        if fns is None:
            from pycuda.compiler import compile as nvcc_compile  # PyCUDA's nvcc driver, with its cubin cache
            from pycuda.driver import CompileError

            dirs = [str(Path(path).resolve().parent)] if path else []
            text = c_linkage(with_includes(source, path)) if extern_c else source  # kernels from a .cuh too
            try:
                arch = "sm_" + self.info.compute_capability.replace(".", "")  # given: PyCUDA needs no context of its own
                cubin = nvcc_compile(text, no_extern_c=True, include_dirs=dirs, arch=arch)
            except CompileError as e:  # nvcc's own words, first error first
                first = next((line for line in (e.stderr or str(e)).splitlines() if "error" in line), str(e))
                raise ShellError("USAGE", f"nvcc refused the source: {first.strip()}",
                                 "the simulator's `kernel define` shows file:line:col for the same source") from None
            mod = int(call("cuModuleLoadData", cubin))
            self.cur.modules.append(mod)
            fns = self.cur.functions[source] = {name: int(call("cuModuleGetFunction", mod, name.encode()))
                                                for name in names}
        return fns

    def _builtin(self, kernel) -> int:
        if BUILTIN_SOURCE not in self.cur.functions:
            fns = self._functions(BUILTIN_SOURCE, [k.symbol for k in BUILTINS.values()], extern_c=False)
            # one empty launch now, so lazy loading is not billed to the user's first launch (not while held:
            # its wait would never end)
            args, _keepalive = launch_args(fns["k_fill"], (1, 1, 1), (1, 1, 1), None, C.c_uint64(0), C.c_float(0),
                                           C.c_int(0))
            call("cuLaunchKernel", *args)
            if not self.held:
                call("cuCtxSynchronize")
        return self.cur.functions[BUILTIN_SOURCE][kernel.symbol]

    def _launch_call(self, kernel, args, count, grid, block, shared, stream):
        fn = self._builtin(kernel) if kernel.builtin else self._functions(
            kernel.source, [k.symbol for k in parse_kernels(with_includes(kernel.source, kernel.path))], True,
            kernel.path)[kernel.symbol]
        values = []
        for param, arg in zip(kernel.params, args):
            if param.is_buffer:  # `unchecked`: a pointer the GPU cannot reach goes as C would pass it
                buf = arg.buf
                values.append(C.c_uint64((buf.device_ptr if buf.device_ptr is not None else buf.host_ptr)
                                         + arg.offset))
            elif kernel.name == "spin" and kernel.builtin:
                values.append(C.c_int64(int(arg) * self.clock_khz // 1000))
            else:
                values.append(CTYPE[param.dtype](arg.item()))
        if kernel.builtin and kernel.name != "spin":
            values.append(C.c_int(count))
        return launch_args(fn, grid, block, stream, *values, shared=shared)

    def launch(self, kernel, args, count, grid, block, shared, stream):
        with self._in(self._stream_ctx(stream)):
            call, _keepalive = self._launch_call(kernel, args, count, grid, block, shared, stream)
            return self._timed(stream, "cuLaunchKernel", call, R.QUEUED)

    def load_kernels(self, source, path=None):
        if self.held:
            raise held_error("loading a module, which may wait for the device,")
        kernels = parse_kernels(with_includes(source, path))
        fns = self._functions(source, [k.symbol for k in kernels], extern_c=True, path=path)
        return [replace(k, handle=fns[k.symbol], source=source, path=path or "") for k in kernels]

    # ------------------------------------------------------------------ events and callbacks
    def event_create(self):
        return int(call("cuEventCreate", 0))

    def event_record(self, event, stream):
        t0 = time.perf_counter()
        with self._in(self._stream_ctx(stream)):
            self._issue("cuEventRecord", event, stream)
        host = time.perf_counter() - t0
        return Timing(0.0, host, False, self.timing_label)

    def event_query(self, event):
        return done("cuEventQuery", event)

    def event_sync(self, event):
        if self.held and not done("cuEventQuery", event):
            raise held_error("cuEventSynchronize")
        t0 = time.perf_counter()
        call("cuEventSynchronize", event)
        return self._host_timing(t0)

    @staticmethod
    def _elapsed(start: int, end: int) -> float:
        return call("cuEventElapsedTime", start, end) / 1e3

    def event_elapsed(self, start, end):
        return self._elapsed(start, end)

    def event_destroy(self, event):
        call("cuEventDestroy", event)

    def stream_wait(self, stream, event):
        self._issue("cuStreamWaitEvent", stream, event, 0)

    def host_callback(self, stream, text, label):
        def fire(_):
            with self.lock:
                self.fired.append({"text": text, "stream": label, "at": self._stamp()})

        fn = HOST_FN(fire)
        self.callback_refs.append(fn)
        t0 = time.perf_counter()
        self._issue("cuLaunchHostFunc", stream, host_fn(fn), 0)
        return self._queued_timing(t0)

    def host_noop(self, stream):
        t0 = time.perf_counter()
        self._issue("cuLaunchHostFunc", *self._noop_call(stream))
        return self._queued_timing(t0)

    def _queued_timing(self, t0: float) -> Timing:
        """A call that only queued work and returned (cuLaunchHostFunc): it did not hold the host for it."""
        host = time.perf_counter() - t0
        return Timing(0.0, host, False, self.timing_label, rule=R.QUEUED.why, basis="rule")

    def _noop_call(self, stream) -> tuple:
        """libc's free(NULL) does nothing, in C: a host function with no interpreter to wake."""
        return stream, host_fn(C.CDLL(None).free), 0

    def fired_callbacks(self):
        with self.lock:
            fired, self.fired = self.fired, []
        return fired

    def _prefetch_call(self, buf, where, stream):
        return buf.device_ptr, buf.size, location(where, self._stream_ctx(stream).device), 0, stream

    def prefetch(self, buf, where, stream):
        return self._timed(stream, "cuMemPrefetchAsync", self._prefetch_call(buf, where, stream), R.QUEUED)

    def advise(self, buf, advice, where):
        call("cuMemAdvise", buf.device_ptr, buf.size, ADVICE[advice], location(where, self.cur.device))

    # ------------------------------------------------------------------ streams
    def stream_create(self, nonblocking, priority):
        least, greatest = self.priority_range()
        actual = min(max(priority, greatest), least)  # what the driver clamps to
        flags = cu.CUstream_flags.CU_STREAM_NON_BLOCKING if nonblocking else cu.CUstream_flags.CU_STREAM_DEFAULT
        h = int(call("cuStreamCreateWithPriority", flags, priority))
        self.streams.add(h)
        self.stream_ctx[h] = self.cur
        return h, actual

    def stream_destroy(self, handle):
        call("cuStreamDestroy", handle)
        self.streams.discard(handle)
        self.stream_ctx.pop(handle, None)

    def stream_sync(self, handle):
        if self.held:
            raise held_error("cuStreamSynchronize")
        t0 = time.perf_counter()
        call("cuStreamSynchronize", handle)
        return self._host_timing(t0)

    def stream_idle(self, handle):
        return done("cuStreamQuery", handle)

    def device_sync(self):
        if self.held:
            raise held_error("cuCtxSynchronize")
        t0 = time.perf_counter()
        call("cuCtxSynchronize")
        return self._host_timing(t0)

    def priority_range(self):
        return call("cuCtxGetStreamPriorityRange")

    def mem_info(self) -> tuple[int, int]:
        return call("cuMemGetInfo")

    # ------------------------------------------------------------------ hold, release, plans
    def hold(self, streams):
        """Each stream waits for a pinned flag to reach this hold's number: cuStreamWaitValue32 where the device
        has stream memory operations, else a one-thread kernel polling the flag (nvbandwidth's spin gate)."""
        for ctx in {self._stream_ctx(s) for s in streams}:  # loaded now: loading a module while held may wait
            with self._in(ctx):  # for the held work
                self._builtin(BUILTINS["fill"])
        if self.flag is None:  # portable: a kernel in any context reads it
            ptr = int(call("cuMemHostAlloc", 4, cu.CU_MEMHOSTALLOC_DEVICEMAP | cu.CU_MEMHOSTALLOC_PORTABLE))
            self.flag = _host_array(ptr, 4).view(np.uint32)
            self.flag[0] = 0
            dp = self._host_device_ptr(self.flag.ctypes.data)
            self.flag_dptr = dp if isinstance(dp, int) else self.flag.ctypes.data
        if not self.held:
            self.hold_gen += 1
            self.held, self.released_early = True, None
        for stream in streams:
            self._hold_one(stream)
        if self.watchdog is None:
            self.watchdog = threading.Thread(target=self._watch, daemon=True)
            self.watchdog.start()
        return self.hold_how

    def _watch(self) -> None:
        """The driver's queue is finite (with CUPTI tracing, its record buffer too: on the H100 a thousand 64 KiB
        copies issued while held blocked the call that issued them). A call stuck that way while held would wait
        forever for the release only its own thread can give: after STUCK seconds without progress, let go."""
        last = None
        while not self.closed:
            time.sleep(STUCK / 4)
            now = (self.held and self.in_call, self.beat)
            if now[0] and last == now:
                stuck_since = getattr(self, "_stuck_since", None) or time.perf_counter()
                self._stuck_since = stuck_since
                if time.perf_counter() - stuck_since >= STUCK:
                    self.released_early = (f"the driver's queue filled while held ({self.beat} calls issued): the "
                                           "streams were let go early, and the work issued since ran as issued")
                    self.flag[0] = self.hold_gen
                    self.held = False
            else:
                self._stuck_since = None
            last = now

    def _hold_one(self, stream) -> None:
        with self._in(self._stream_ctx(stream)):
            self._hold_stream(stream)

    def _hold_stream(self, stream) -> None:
        if self.hold_how != HOLD_KERNEL:
            res = cu.cuStreamWaitValue32(stream, self.flag_dptr, self.hold_gen,
                                         cu.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ)[0]
            if res is OK:
                self.hold_how = HOLD_WAIT_VALUE
                return
            if self.hold_how == HOLD_WAIT_VALUE:  # it worked before: this is a real error
                check(res, "cuStreamWaitValue32")
            self.hold_how = HOLD_KERNEL
        hold_fn = self._functions(HOLD_SOURCE, ["k_hold"], extern_c=True)["k_hold"]
        args, _keep = launch_args(hold_fn, (1, 1, 1), (1, 1, 1), stream, C.c_uint64(self.flag_dptr),
                                  C.c_uint32(self.hold_gen))
        call("cuLaunchKernel", *args)

    def release(self):
        """Returns why the streams had already been let go, if the watchdog did it."""
        if self.held:
            self.flag[0] = self.hold_gen
            self.held = False
        early, self.released_early = self.released_early, None
        return early

    def _plan_call(self, method: str, args) -> tuple:
        """(driver function, its arguments, what must outlive the call, stream) for one call of a plan."""
        if method == "memcpy":
            name, cargs, _ = self._memcpy_call(*args)
            return name, cargs, None, args[5] if args[6] else None
        if method == "memset":
            name, cargs, _ = self._memset_call(*args)
            return name, cargs, None, args[4] if args[5] else None
        if method == "launch":
            cargs, keep = self._launch_call(*args)
            return "cuLaunchKernel", cargs, keep, args[6]
        if method == "prefetch":
            return "cuMemPrefetchAsync", self._prefetch_call(*args), None, args[2]
        if method == "event_record":
            return "cuEventRecord", (args[0], args[1]), None, args[1]
        if method == "stream_wait":
            return "cuStreamWaitEvent", (args[0], args[1], 0), None, args[0]
        if method == "stream_sync":
            return "cuStreamSynchronize", (args[0],), None, args[0]
        if method == "device_sync":
            return "cuCtxSynchronize", (), None, None
        if method == "host_noop":
            return "cuLaunchHostFunc", self._noop_call(args[0]), None, args[0]
        raise ShellError("NOT_PLANNABLE", f"{method} cannot run without the shell")

    def run_plan(self, calls, rounds, gate=False, trace=True):
        """The rounds as a tight loop of driver calls (no events or checks between them), events around it all."""
        if self.held:
            raise held_error("a repeat run on the GPU side (it waits for its work at the end)")
        plan = [self._plan_call(m, a) for m, a in calls]
        fns = [(getattr(cu, name), cargs, name) for name, cargs, _, _ in plan]
        streams = list(dict.fromkeys([None] + [p[3] for p in plan]))
        if gate:
            self.hold(streams)
        record = cu.cuEventRecord
        starts, ends = [self._event() for _ in streams], [self._event() for _ in streams]
        per = np.empty(rounds)
        tag, act = self.next_token, self.activity if trace else None
        self.next_token += 1
        if self.activity and not trace:  # CUPTI stamps each operation on the GPU too: a bench must not pay that
            self.activity.pause()
        try:
            for ev, s in zip(starts, streams):
                check(record(ev, s)[0], "cuEventRecord")
            act and act.tag(tag)
            self.in_call = self.held
            t0 = last = time.perf_counter()
            for i in range(rounds):
                for f, cargs, name in fns:
                    res = f(*cargs)[0]
                    if res is not OK:
                        check(res, f"{name} (in round {i + 1} on the GPU side)")
                now = time.perf_counter()
                per[i] = now - last
                last = now
                self.beat = i
            self.in_call = False
            host = last - t0
            act and act.untag()
            for ev, s in zip(ends, streams):
                check(record(ev, s)[0], "cuEventRecord")
        except BaseException:
            self.in_call = False
            act and self._untag_quietly()
            raise
        finally:
            self.release() if gate else None
        call("cuCtxSynchronize")
        if self.activity and not trace:
            self.activity.resume()
        ctx = self.cur
        first = ctx.origin_at + min(self._elapsed(ctx.origin, e) for e in starts)
        last_end = ctx.origin_at + max(self._elapsed(ctx.origin, e) for e in ends)
        ctx.free_events += starts + ends
        records = []
        if act:
            act.flush()
            records = act.plan_records(tag, [k for k, (m, _) in enumerate(calls) if m in WORK_CALLS], rounds)
        if records:
            first, last_end = min(r[2] for r in records), max(r[3] for r in records)
        return {"host_seconds": host, "per_round": round_stats(per), "gpu_seconds": last_end - first,
                "busy_seconds": sum(r[3] - r[2] for r in records) if records else None, "records": records,
                "source": "CUPTI" if records else "CUDA events", "span": (first, last_end)}

    def _untag_quietly(self) -> None:
        try:
            self.activity.untag()
        except Exception:  # it was not pushed: the failure came before
            pass

    def close(self):
        """Pop the context on every exit path; teardown errors of a dead context are ignored."""
        if self.closed:
            return
        self.closed = True
        if getattr(self, "held", False):
            self.release()
        cu.cuCtxSynchronize()  # teardown: a dead context's errors are ignored
        if getattr(self, "activity", None):
            self.activity.close()  # let queued host callbacks run before PyCUDA (holding the GIL) tears down
        for h in getattr(self, "streams", ()):
            cu.cuStreamDestroy(h)
        for ctx in getattr(self, "ctxs", {}).values():  # each context's own, in it; then the context
            cu.cuCtxSetCurrent(ctx.handle)
            for ev in ctx.events:
                cu.cuEventDestroy(ev)
            for mod in ctx.modules:
                cu.cuModuleUnload(mod)
            if ctx.key is not None:
                cu.cuCtxSetCurrent(self.ctx)
                if ctx.primary:
                    cu.cuDevicePrimaryCtxRelease(ctx.device)
                else:
                    cu.cuCtxDestroy(ctx.handle)
        if getattr(self, "flag", None) is not None:
            cu.cuMemFreeHost(self.flag.ctypes.data)
        cu.cuCtxSetCurrent(0)
        cu.cuDevicePrimaryCtxRelease(self.dev)
