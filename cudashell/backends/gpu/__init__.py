"""The GPU side of the cuda backend, run inside the worker process (`worker.py`): PyCUDA holds the context and
compiles kernels (nvcc); NVIDIA's bindings (`bindings.py`) do the rest — allocations (so a refusal has the driver's
name, which PyCUDA gives only as text), registration, pointer queries, streams with priorities, events, copies,
launches. Times are measured here, next to the driver: CUDA events (or CUPTI) for the GPU, the host clock around
each call for `blocking` — so the pipe to the shell never shows in a figure.

Its parts, by the contract's concerns (base.CONTRACT): memory.py (pools.py: the stream-ordered pools), work.py,
sync.py, contexts.py, measurement.py; starting and closing are here."""

from __future__ import annotations

import atexit
import os
import threading
import time

from ...errors import ShellError
from ..activity import unavailable_reason
from ..base import Capabilities, DeviceInfo
from ..bindings import call, cu, mismatch, text
from .common import Ctx, Pending
from .contexts import Contexts
from .hostwork import HostWork
from .measurement import Measurement
from .memory import Memory
from .pools import Pools
from .sync import Sync
from .shapes import Shapes
from .vmm import Vmm
from .work import Work


class GpuSide(Memory, HostWork, Pools, Vmm, Work, Shapes, Sync, Contexts, Measurement):
    """The driver-facing half of the cuda backend (the worker calls it; `cuda.CudaBackend` is the contract)."""

    name = "cuda"
    timing_label = "measured"
    capabilities = Capabilities(models_time=False, draws_accesses=False)

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
        self.activity = None  # CUPTI: started before the first timed call (Measurement._trace_ready), not here
        self.tracing_why = ("turned off (CUDASHELL_TRACING=off): engine times come from CUDA events"
                            if os.environ.get("CUDASHELL_TRACING") == "off"
                            else unavailable_reason(self.driver_version // 1000))
        self.tracing = "CUPTI activity records" if self.tracing_why is None else None
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
            self.mem_pools: dict = {}  # the shell's int → the bindings' CUmemoryPool (pools.py)
            self.unread_plans: dict[int, tuple] = {}  # plan tag → (work calls, traced rounds, flushes): plan_records
            self.next_token = 1
            self.vmm_handles: dict = {}  # `vmm create`'s handles by number: (CUmemGenericAllocationHandle, size)
            self.vmm_next = 0
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
                          f"{major}.{minor}", text(call("cuDeviceGetPCIBusId", 32, self.dev)),
                          bool(attr("UNIFIED_ADDRESSING")), bool(attr("CAN_MAP_HOST_MEMORY")),
                          bool(attr("PAGEABLE_MEMORY_ACCESS")), bool(attr("MANAGED_MEMORY")),
                          bool(attr("CONCURRENT_MANAGED_ACCESS")), attr("ASYNC_ENGINE_COUNT"),
                          bool(attr("CONCURRENT_KERNELS")))

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
