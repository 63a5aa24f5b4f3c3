"""The GPU side of the cuda backend, run inside the worker process (`worker.py`): PyCUDA makes the context
(with MAP_HOST), the allocations and the compiled kernels; the driver shim does registration, pointer
queries, streams with priorities, events, copies and launches. Times are measured here, next to the
driver: CUDA events for the GPU, the host clock around each call for `blocking` — so the pipe to the
shell never shows in a figure."""

from __future__ import annotations

import atexit
import ctypes as C
import mmap
import re
import resource
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np

import threading

from .. import syncrules as R
from ..errors import ShellError
from ..kernels import BUILTIN_SOURCE, BUILTINS, parse_kernels
from . import driver as D
from .base import Allocation, DeviceInfo, Timing

CTYPE = {"float32": C.c_float, "float64": C.c_double, "int32": C.c_int32, "uint32": C.c_uint32,
         "int64": C.c_int64, "uint64": C.c_uint64, "int8": C.c_int8, "uint8": C.c_uint8, "int16": C.c_int16}
# A call that returned after the GPU passed its start event, and held the host at least this long, waited
# for the queue ahead of it; shorter, the queue may simply have drained during the call.
OBSERVABLE = 50e-6
EVENT_MIN_BYTES = 64 << 10


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


@dataclass
class CudaAlloc:
    kind: str
    size: int
    array: np.ndarray | None = None  # host-accessible bytes (pageable, pinned, managed)
    owner: object = None  # the PyCUDA allocation, or the mmap of pageable memory
    dptr: int | None = None  # the address CUDA copies and kernels use
    extra: dict = field(default_factory=dict)


@dataclass
class Pending:
    start: int
    end: int


class GpuSide:
    """The driver-facing half of the cuda backend (the worker calls it; `cuda.CudaBackend` is the contract)."""

    name = "cuda"
    timing_label = "measured"

    def __init__(self, ordinal: int = 0):
        import pycuda.driver as cuda

        self.cuda = cuda
        cuda.init()
        self.dev = cuda.Device(ordinal)
        self.drv = D.Driver()
        self.ctx = self.dev.make_context(flags=cuda.ctx_flags.MAP_HOST | cuda.ctx_flags.SCHED_AUTO)
        self.closed = False
        atexit.register(self.close)  # the context stack must be empty when the interpreter exits
        try:
            self.info = self._device_info(ordinal)
            self.free_events: list[int] = []
            self.all_events: list[int] = []
            self.pending: dict[int, Pending] = {}
            self.next_token = 1
            self.streams: set[int] = set()
            self.modules: list[int] = []
            self.builtin_fns: dict[str, int] | None = None
            self.clock_khz = self._attr("CLOCK_RATE", 1_980_000)
            self.lock = threading.Lock()
            self.fired: list[dict] = []
            self.callback_refs: list = []  # ctypes callbacks must outlive the stream reaching them
            self.origin = self.drv.event()  # time zero of the trace
            self.all_events.append(self.origin)
            self.drv.call("cuEventRecord", self.origin, None)
            self.drv.call("cuEventSynchronize", self.origin)
            self.t0 = time.perf_counter()
        except BaseException:
            self.close()
            raise

    def _attr(self, name: str, default=0):
        try:
            return self.dev.get_attribute(getattr(self.cuda.device_attribute, name))
        except (AttributeError, self.cuda.Error):
            return default

    def _device_info(self, ordinal: int) -> DeviceInfo:
        attr = self._attr
        major, minor = self.dev.compute_capability()
        return DeviceInfo(self.dev.name(), ordinal, self.dev.total_memory(), f"{major}.{minor}",
                          self.dev.pci_bus_id(), bool(attr("UNIFIED_ADDRESSING")), bool(attr("CAN_MAP_HOST_MEMORY")),
                          bool(attr("PAGEABLE_MEMORY_ACCESS")), bool(attr("MANAGED_MEMORY")),
                          bool(attr("CONCURRENT_MANAGED_ACCESS")), attr("ASYNC_ENGINE_COUNT"),
                          bool(attr("CONCURRENT_KERNELS")))

    @contextmanager
    def _pycuda_errors(self):
        """PyCUDA raises 'cuX failed: <description>': give it the driver's error name."""
        try:
            yield
        except self.cuda.Error as e:
            text = str(e)
            desc = text.split("failed:", 1)[-1].strip()
            code = self.drv.name_for_description(desc) or "CUDA_ERROR_UNKNOWN"
            raise ShellError(code, text) from None

    def versions(self) -> dict:
        v = self.cuda.get_driver_version()
        import pycuda

        return {"CUDA driver API": f"{v // 1000}.{v % 1000 // 10}", "PyCUDA": pycuda.VERSION_TEXT,
                "NVIDIA driver": _nvidia_driver()}

    def clock(self) -> float:
        return time.perf_counter()

    def host_sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def memory_paths(self) -> dict:
        from ..machine import pcie_link

        clock_khz, bus_bits = self._attr("MEMORY_CLOCK_RATE"), self._attr("GLOBAL_MEMORY_BUS_WIDTH")
        return {"pcie": pcie_link(self.info.pci_bus_id),
                "hbm_peak": 2 * clock_khz * 1e3 * bus_bits / 8 if clock_khz and bus_bits else None}

    def pin_limit(self) -> tuple[int, str]:
        limit, why = host_memory_total() // 2, "half of MemTotal"
        soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
        if soft != resource.RLIM_INFINITY and soft < limit:
            limit, why = soft, "RLIMIT_MEMLOCK"
        return limit, why

    # ------------------------------------------------------------------ timing
    def _event(self) -> int:
        if self.free_events:
            return self.free_events.pop()
        ev = self.drv.event()
        self.all_events.append(ev)
        return ev

    def _timed(self, stream, name: str, args: tuple, rule: R.Rule, nbytes: int | None = None) -> Timing:
        """Call the driver function `name` between two events on `stream`, with nothing but the call between
        them, and observe whether it held the host: when work was queued ahead of it, the call waited for
        the GPU exactly when the GPU had passed the start event by the time it returned. With nothing queued
        the two cannot be told apart, and the result says it follows the documented rule. A small copy the
        rule says completes, on an idle stream, is latency-bound: its host time is its time, as C benchmarks
        take it."""
        f, check = self.drv.fn[name], self.drv.check
        queued = not self.drv.stream_done(stream)
        if rule.wait == "complete" and not queued and nbytes is not None and nbytes < EVENT_MIN_BYTES:
            t0 = time.perf_counter()
            res = f(*args)
            host = time.perf_counter() - t0
            check(res, name)
            return Timing(host, host, True, self.timing_label, None, t0 - self.t0, t0 - self.t0 + host,
                          rule.why, "rule")
        start, end = self._event(), self._event()
        record = self.drv.fn["cuEventRecord"]
        check(record(start, stream), "cuEventRecord")
        t0 = time.perf_counter()
        res = f(*args)
        host = time.perf_counter() - t0
        if res != D.CUDA_SUCCESS:
            self.free_events += [start, end]
            check(res, name)
        started = self.drv.event_done(start)
        check(record(end, stream), "cuEventRecord")
        if queued and (not started or host >= OBSERVABLE):
            blocked, basis = started, "observed"
        else:
            blocked, basis = rule.blocks, "rule"
        if rule.wait in ("complete", "device") or self.drv.event_done(end):
            self.drv.call("cuEventSynchronize", end)  # finished, or finishing now: its time is known
            seconds, t_start, t_end = self._span(start, end)
            return Timing(seconds, host, blocked, self.timing_label, None, t_start, t_end, rule.why, basis)
        token = self.next_token
        self.next_token += 1
        self.pending[token] = Pending(start, end)
        return Timing(None, host, blocked, self.timing_label, token, rule=rule.why, basis=basis)

    def _span(self, start: int, end: int) -> tuple[float, float, float]:
        """(duration, start, end) of a finished event pair, on the trace's clock; frees the events."""
        t_start, t_end = self.drv.elapsed(self.origin, start), self.drv.elapsed(self.origin, end)
        self.free_events += [start, end]
        return t_end - t_start, t_start, t_end

    def resolve(self, token):
        p = self.pending.get(token)
        try:
            if p is None or not self.drv.event_done(p.end):
                return None
        except ShellError:  # a dead context: that work never finished
            return None
        del self.pending[token]
        return self._span(p.start, p.end)

    def _host_timing(self, t0: float) -> Timing:
        host = time.perf_counter() - t0
        return Timing(host, host, True, self.timing_label)

    # ------------------------------------------------------------------ memory
    def alloc(self, kind, size, flags):
        cuda = self.cuda
        t0 = time.perf_counter()
        a = CudaAlloc(kind, size)
        with self._pycuda_errors():
            if kind == "pageable":  # anonymous pages: page-aligned, lazily backed, like a large malloc
                a.owner = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
                a.array = np.frombuffer(a.owner, np.uint8)
            elif kind == "pinned":
                bits = ((cuda.host_alloc_flags.PORTABLE if "portable" in flags else 0)
                        | (cuda.host_alloc_flags.DEVICEMAP if "mapped" in flags else 0)
                        | (cuda.host_alloc_flags.WRITECOMBINED if "writecombined" in flags else 0))
                a.array = cuda.pagelocked_empty(size, np.uint8, mem_flags=bits)
                a.owner = a.array.base
            elif kind == "device":
                a.owner = cuda.mem_alloc(size)
                a.dptr = int(a.owner)
            else:
                attach = cuda.mem_attach_flags.HOST if "host" in flags else cuda.mem_attach_flags.GLOBAL
                a.array = cuda.managed_empty(size, np.uint8, mem_flags=attach)
                a.owner = a.array.base
                a.dptr = a.array.ctypes.data
        t = self._host_timing(t0)
        host_ptr = a.array.ctypes.data if a.array is not None else None
        device_ptr = a.dptr
        if kind == "pinned":
            dp = self.drv.out_uint64("cuMemHostGetDevicePointer_v2", C.c_void_p(host_ptr), 0)
            device_ptr = a.dptr = dp if isinstance(dp, int) else None
        return Allocation(a, host_ptr, device_ptr), t

    def free(self, buf):
        a: CudaAlloc = buf.handle
        if a.kind != "pageable":
            # cudaFree synchronises the device anyway; do it here, through ctypes, which lets go of the GIL: PyCUDA's
            # free holds it, and a host callback still queued needs it to run — waiting inside PyCUDA deadlocks
            self.drv.call("cuCtxSynchronize")
        a.array = None
        with self._pycuda_errors():
            if a.kind == "pageable":
                a.owner.close()
            else:
                a.owner.free()

    def register(self, buf, flags):
        a: CudaAlloc = buf.handle
        if a.kind != "pageable":
            if a.kind == "pinned":
                raise ShellError("CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", f"{buf.name} is already page-locked",
                                 "a range can be registered once; `unregister` it first")
            raise ShellError("CUDA_ERROR_INVALID_VALUE", f"{buf.name} is not host memory")
        bits = ((D.REGISTER_PORTABLE if "portable" in flags else 0)
                | (D.REGISTER_DEVICEMAP if "mapped" in flags else 0)
                | (D.REGISTER_READ_ONLY if "readonly" in flags else 0))
        self.drv.call("cuMemHostRegister_v2", C.c_void_p(buf.host_ptr), a.size, bits,
                      hint="a range can be registered once; `unregister` it first")
        dp = self.drv.out_uint64("cuMemHostGetDevicePointer_v2", C.c_void_p(buf.host_ptr), 0)
        a.dptr = dp if isinstance(dp, int) else None
        return a.dptr

    def unregister(self, buf):
        ptr = buf.host_ptr if buf.host_ptr is not None else buf.device_ptr
        self.drv.call("cuMemHostUnregister", C.c_void_p(ptr),
                      hint="only ranges pinned by `register` can be unregistered")
        buf.handle.dptr = None

    def pointer_info(self, buf):
        a: CudaAlloc = buf.handle
        ptr = buf.host_ptr if buf.host_ptr is not None else buf.device_ptr
        mt = self.drv.pointer_attribute(D.POINTER_MEMORY_TYPE, ptr)
        managed = self.drv.pointer_attribute(D.POINTER_IS_MANAGED, ptr)
        info = {"device": self.info.ordinal,
                "memory_type": D.MEMORYTYPE.get(mt, mt) if isinstance(mt, int) else mt,
                "is_managed": bool(managed) if isinstance(managed, int) else managed,
                "host_flags": self.drv.host_flags(ptr) if buf.host_ptr is not None else "CUDA_ERROR_INVALID_VALUE",
                "host_device_ptr": (self.drv.out_uint64("cuMemHostGetDevicePointer_v2", C.c_void_p(ptr), 0)
                                    if buf.host_ptr is not None else "CUDA_ERROR_INVALID_VALUE")}
        if a.kind == "managed":
            info.update(self._range_info(a))
        return info

    def _range_info(self, a: CudaAlloc) -> dict:
        def where(v):
            return v if isinstance(v, str) else ("host" if v == D.DEVICE_CPU else
                                                 "none" if v == -2 else f"device {v}")

        rm = self.drv.range_attribute(D.RANGE_READ_MOSTLY, a.dptr, a.size)
        return {"read_mostly": bool(rm) if isinstance(rm, int) else rm,
                "preferred_location": where(self.drv.range_attribute(D.RANGE_PREFERRED_LOCATION, a.dptr, a.size)),
                "last_prefetch_location": where(self.drv.range_attribute(D.RANGE_LAST_PREFETCH_LOCATION, a.dptr,
                                                                         a.size))}

    def read(self, buf, offset, nbytes):
        a: CudaAlloc = buf.handle
        if a.array is not None:
            return a.array[offset: offset + nbytes].copy()
        out = np.empty(nbytes, np.uint8)
        self.drv.call("cuMemcpyDtoH_v2", out.ctypes.data, a.dptr + offset, nbytes)
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
        self.drv.call(name, *args)
        host = time.perf_counter() - t0
        return Timing(0.0, host, False, self.timing_label, rule=rule.why, basis="rule")

    def memcpy(self, src, src_off, dst, dst_off, nbytes, stream, async_):
        """Through the driver for every pair, host-to-host too (cuMemcpy under UVA), so stream order holds."""
        s_ptr = (src.host_ptr if src.host_ptr is not None else src.device_ptr) + src_off
        d_ptr = (dst.host_ptr if dst.host_ptr is not None else dst.device_ptr) + dst_off
        rule = R.memcpy_rule(self._cls(src), self._cls(dst), async_, nbytes)
        name, args = ("cuMemcpyAsync", (d_ptr, s_ptr, nbytes, stream)) if async_ else \
            ("cuMemcpy", (d_ptr, s_ptr, nbytes))
        if nbytes == 0:
            return self._untimed(name, args, rule)
        return self._timed(stream if async_ else None, name, args, rule, nbytes)

    def memset(self, buf, offset, value, nbytes, stream, async_):
        ptr = (buf.device_ptr if buf.device_ptr is not None else buf.host_ptr) + offset
        rule = R.memset_rule(self._cls(buf), async_, nbytes)
        name, args = ("cuMemsetD8Async", (ptr, value, nbytes, stream)) if async_ else \
            ("cuMemsetD8_v2", (ptr, value, nbytes))
        if nbytes == 0:
            return self._untimed(name, args, rule)
        return self._timed(stream if async_ else None, name, args, rule)

    def _load(self, source: str, names: list[str], extern_c: bool) -> dict[str, int]:
        from pycuda.compiler import compile as nvcc_compile

        with self._pycuda_errors():
            cubin = nvcc_compile(source, no_extern_c=not extern_c)
        mod = self.drv.load_module(cubin)
        self.modules.append(mod)
        return {name: self.drv.function(mod, name) for name in names}

    def _builtin(self, kernel) -> int:
        if self.builtin_fns is None:
            self.builtin_fns = self._load(BUILTIN_SOURCE, [k.symbol for k in BUILTINS.values()], extern_c=False)
            # one empty launch now, so lazy loading is not billed to the user's first launch
            args, _keepalive = self.drv.launch_args(self.builtin_fns["k_fill"], 1, 1, None, C.c_uint64(0),
                                                    C.c_float(0), C.c_int(0))
            self.drv.call("cuLaunchKernel", *args)
            self.drv.call("cuCtxSynchronize")
        return self.builtin_fns[kernel.symbol]

    def launch(self, kernel, args, count, grid, block, shared, stream):
        fn = self._builtin(kernel) if kernel.builtin else kernel.handle
        values = []
        for param, arg in zip(kernel.params, args):
            if param.is_buffer:  # `unchecked`: a pointer the GPU cannot reach goes as C would pass it
                values.append(C.c_uint64(arg.device_ptr if arg.device_ptr is not None else arg.host_ptr))
            elif kernel.name == "spin" and kernel.builtin:
                values.append(C.c_int64(int(arg) * self.clock_khz // 1000))
            else:
                values.append(CTYPE[param.dtype](arg.item()))
        if kernel.builtin and kernel.name != "spin":
            values.append(C.c_int(count))
        call, _keepalive = self.drv.launch_args(fn, grid, block, stream, *values, shared=shared)
        return self._timed(stream, "cuLaunchKernel", call, R.QUEUED)

    def load_kernels(self, source):
        kernels = parse_kernels(source)
        fns = self._load(source, [k.symbol for k in kernels], extern_c=True)
        return [replace(k, handle=fns[k.symbol], source=source) for k in kernels]

    # ------------------------------------------------------------------ events and callbacks
    def event_create(self):
        ev = self.drv.event()
        return ev

    def event_record(self, event, stream):
        t0 = time.perf_counter()
        self.drv.call("cuEventRecord", event, stream)
        host = time.perf_counter() - t0
        return Timing(0.0, host, False, self.timing_label)

    def event_query(self, event):
        return self.drv.event_done(event)

    def event_sync(self, event):
        t0 = time.perf_counter()
        self.drv.call("cuEventSynchronize", event)
        return self._host_timing(t0)

    def event_elapsed(self, start, end):
        return self.drv.elapsed(start, end)

    def event_destroy(self, event):
        self.drv.call("cuEventDestroy_v2", event)

    def stream_wait(self, stream, event):
        self.drv.call("cuStreamWaitEvent", stream, event, 0)

    def host_callback(self, stream, text, label):
        def fire(_):
            with self.lock:
                self.fired.append({"text": text, "stream": label, "at": time.perf_counter() - self.t0})

        fn = D.HOST_FN(fire)
        self.callback_refs.append(fn)
        t0 = time.perf_counter()
        self.drv.call("cuLaunchHostFunc", stream, C.cast(fn, C.c_void_p), None)
        return self._host_timing(t0)

    def fired_callbacks(self):
        with self.lock:
            fired, self.fired = self.fired, []
        return fired

    def prefetch(self, buf, where, stream):
        loc = D.CUmemLocation(D.LOCATION_DEVICE if where == "device" else D.LOCATION_HOST,
                              self.info.ordinal if where == "device" else 0)
        return self._timed(stream, "cuMemPrefetchAsync_v2", (buf.device_ptr, buf.size, loc, 0, stream), R.QUEUED)

    def advise(self, buf, advice, where):
        loc = D.CUmemLocation(D.LOCATION_HOST if where == "host" else D.LOCATION_DEVICE,
                              0 if where == "host" else self.info.ordinal)
        self.drv.call("cuMemAdvise_v2", buf.device_ptr, buf.size, D.ADVISE[advice], loc)

    # ------------------------------------------------------------------ streams
    def stream_create(self, nonblocking, priority):
        least, greatest = self.priority_range()
        actual = min(max(priority, greatest), least)  # what the driver clamps to
        h = self.drv.stream_create(nonblocking, priority)
        self.streams.add(h)
        return h, actual

    def stream_destroy(self, handle):
        self.drv.call("cuStreamDestroy_v2", handle)
        self.streams.discard(handle)

    def stream_sync(self, handle):
        t0 = time.perf_counter()
        self.drv.call("cuStreamSynchronize", handle)
        return self._host_timing(t0)

    def stream_idle(self, handle):
        return self.drv.stream_done(handle)

    def device_sync(self):
        t0 = time.perf_counter()
        self.drv.call("cuCtxSynchronize")
        return self._host_timing(t0)

    def priority_range(self):
        return self.drv.priority_range()

    def mem_info(self) -> tuple[int, int]:
        return self.drv.mem_info()

    def close(self):
        """Pop the context on every exit path; teardown errors of a dead context are ignored."""
        if self.closed:
            return
        self.closed = True
        self.drv.raw("cuCtxSynchronize")  # let queued host callbacks run before PyCUDA (holding the GIL) tears down
        for name, handles in (("cuStreamDestroy_v2", list(self.streams)),
                              ("cuEventDestroy_v2", list(getattr(self, "all_events", [])))):
            for h in handles:
                self.drv.raw(name, h)
        for mod in getattr(self, "modules", []):
            self.drv.raw("cuModuleUnload", mod)
        try:
            self.ctx.pop()
        finally:
            self.ctx.detach()
