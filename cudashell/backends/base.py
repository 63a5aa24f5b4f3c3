"""The contract every backend meets. It is shaped after the driver (and PyCUDA): allocations are
opaque handles with a host pointer and a device pointer, copies and kernels take a stream handle, and
every call either succeeds or raises ShellError with the driver's `CUDA_ERROR_*` name."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where it is used: the GPU side starts without it
    from pathlib import Path

    import numpy as np

    from .kernel_report import KernelReport
    from .profile import Profile


# cuMemHostGetFlags bits
HOST_PORTABLE, HOST_DEVICEMAP, HOST_WRITECOMBINED = 1, 2, 4
HOST_FLAG_NAMES = {HOST_PORTABLE: "PORTABLE", HOST_DEVICEMAP: "DEVICEMAP", HOST_WRITECOMBINED: "WRITECOMBINED"}
UNLIMITED = (1 << 64) - 1  # a pool's release threshold `max` (UINT64_MAX): nothing is given back at a synchronize


def host_flag_names(bits: int) -> list[str]:
    return [n for b, n in HOST_FLAG_NAMES.items() if bits & b]


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    ordinal: int
    total_mem: int
    compute_capability: str
    pci_bus_id: str
    unified_addressing: bool
    can_map_host_memory: bool
    pageable_memory_access: bool
    managed_memory: bool
    concurrent_managed_access: bool
    async_engine_count: int
    concurrent_kernels: bool

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Allocation:
    handle: object
    host_ptr: int | None
    device_ptr: int | None
    pitch: int = 0  # pitched memory (alloc_pitched): the bytes from one row to the next, as the driver chose


@dataclass(frozen=True)
class Timing:
    """`seconds`: how long the GPU (or the modeled GPU) took; `host_seconds`: how long the host call
    held the caller; `blocking`: whether the host waited for the work to finish."""

    seconds: float | None  # None while async GPU work is still running: `resolve(token)` later
    host_seconds: float
    blocking: bool
    label: str  # "measured" or "modeled"
    token: int | None = None
    start: float | None = None  # GPU-side start and end, seconds since the session began
    end: float | None = None
    rule: str | None = None  # the API synchronisation rule (syncrules) that applies to the call
    basis: str = ""  # how `blocking` is known: "observed" on the GPU, "rule" where it could not be seen, "modeled"
    tag: int | None = None  # the backend's id for the work, to ask the profiler's records for its engine time later
    issued: float | None = None  # when the host issued it (seconds since the session began): start - issued is
    # how long it waited in its queue
    report: KernelReport | None = None  # a user kernel on the simulator: what it counted, and drew


@dataclass(frozen=True)
class Capabilities:
    """What a backend is, declared by it: the commands ask this, never the backend's name, so a third backend (or
    the simulator behind the worker's pipe) is judged by what it does."""

    models_time: bool  # its times come from a calibrated model (the simulator), not from a GPU's clock
    draws_accesses: bool  # a launch of a user's kernel can record which thread touched which element (show-access)
    profile: Profile | None = None  # the calibrated profile it models: its host memory, its name, its RAM budget


@dataclass(frozen=True)
class LaunchOptions:
    """How a launch runs, besides its shape and arguments: one object, so a new option (a cooperative launch…)
    changes no signature on either side, in the pipe or in a repeat plan. `show_access`: record which thread
    touched which element (where `Capabilities.draws_accesses`)."""

    show_access: bool = False


PLAIN_LAUNCH = LaunchOptions()


@dataclass(frozen=True)
class Reach:
    """What a kernel in a context gets for a buffer: the address it uses, or `refusal`, why it cannot use it — the
    driver's error (cuMemHostGetDevicePointer's, for host memory) or a shell code (OTHER_CONTEXT, NO_PEER_ACCESS)."""

    address: int | None
    refusal: str | None = None

    @classmethod
    def refused(cls, code: str) -> Reach:
        return cls(None, code)


@dataclass(frozen=True)
class Call:
    """One method of the contract, and what the shell may do with it. role: "query" asks and changes nothing a
    `repeat` plan depends on; "work" queues work on the GPU (or waits for it); "change" makes, ends or alters
    memory, streams, events or contexts; "lifecycle" starts, resets or ends the GPU side. `plan`: runs in a plan's
    rounds (run_plan); `traced`: the GPU runs it, with a trace record each; `worker`: the GPU worker answers it
    (else the shell's process does: its clock, the simulator's storage); `forward`: the cuda backend sends it to
    the worker as it is (the others it answers or adapts itself); `allocation`: "makes" for a call that returns an
    Allocation (the worker numbers its handle: the object stays in that process), "ends" for one that takes the
    allocation's buffer first and ends it (the number is forgotten), "module" for a module's load, whose
    variables (ModuleSymbols) are allocations the worker numbers too."""

    concern: str  # memory | work | sync | contexts | measurement | lifecycle
    role: str
    plan: bool = False
    traced: bool = False
    forward: bool = True
    worker: bool = True
    allocation: str = ""


Q, W, C, L = "query", "work", "change", "lifecycle"
# Every method the worker answers, once: the worker's forwarders, the repeat planner's queries and the plan calls
# all come from here.
CONTRACT: dict[str, Call] = {
    # memory
    "alloc": Call("memory", C, forward=False, allocation="makes"),
    "free": Call("memory", C, forward=False, allocation="ends"),
    "alloc_async": Call("memory", C, traced=True, allocation="makes"),
    "free_async": Call("memory", C, traced=True, allocation="ends"),
    # virtual memory management (the driver API): a reservation is an allocation (a buffer); physical handles are
    # the side's own numbers
    "vmm_granularity": Call("memory", Q), "vmm_reserve": Call("memory", C, allocation="makes"),
    "vmm_create": Call("memory", C), "vmm_map": Call("memory", C), "vmm_access": Call("memory", C),
    "vmm_unmap": Call("memory", C), "vmm_release": Call("memory", C),
    "vmm_free": Call("memory", C, allocation="ends"),
    "pool_default": Call("memory", Q), "pool_create": Call("memory", C), "pool_destroy": Call("memory", C),
    "pool_set": Call("memory", C), "pool_attributes": Call("memory", Q), "pool_trim": Call("memory", C),
    "alloc_pitched": Call("memory", C, allocation="makes"),
    "register": Call("memory", C), "unregister": Call("memory", C), "pointer_info": Call("memory", Q),
    "read": Call("memory", Q, forward=False), "write": Call("memory", C), "reach": Call("memory", Q),
    # the host's data work, where the bytes are (the cuda backend answers the reads itself once the worker is given
    # up, from the worker's rescue thread, as `read` does)
    "host_checksum": Call("memory", Q, forward=False), "host_compare": Call("memory", Q, forward=False),
    "host_read": Call("memory", Q, forward=False), "host_fill": Call("memory", C),
    "prefetch": Call("memory", W, plan=True, traced=True), "advise": Call("memory", C),
    "mem_info": Call("memory", Q, forward=False), "pin_limit": Call("memory", Q, forward=False),
    "room": Call("memory", Q, forward=False, worker=False),
    # work
    "memcpy": Call("work", W, plan=True, traced=True), "memcpy_batch": Call("work", W, plan=True, traced=True),
    "memcpy_shaped": Call("work", W, plan=True, traced=True),
    "memset": Call("work", W, plan=True, traced=True),
    "launch": Call("work", W, plan=True, traced=True), "load_kernels": Call("work", C, allocation="module"),
    "host_callback": Call("work", W), "host_noop": Call("work", W, plan=True),
    # synchronisation: streams and events
    "stream_create": Call("sync", C), "stream_destroy": Call("sync", C), "stream_sync": Call("sync", W, plan=True),
    "stream_idle": Call("sync", Q), "device_sync": Call("sync", W, plan=True),
    "stream_wait": Call("sync", W, plan=True),
    "event_create": Call("sync", C), "event_record": Call("sync", W, plan=True), "event_query": Call("sync", Q),
    "event_sync": Call("sync", W), "event_elapsed": Call("sync", Q), "event_destroy": Call("sync", C),
    "hold": Call("sync", C, forward=False), "release": Call("sync", C),
    "priority_range": Call("sync", Q, forward=False),
    # contexts and GPUs
    "context_create": Call("contexts", C), "context_primary": Call("contexts", C), "context_use": Call("contexts", C),
    "context_destroy": Call("contexts", C), "devices": Call("contexts", Q), "peer_access": Call("contexts", C),
    # measurement
    "resolve": Call("measurement", Q, forward=False), "resolve_many": Call("measurement", Q, forward=False),
    "refine": Call("measurement", Q, forward=False), "plan_records": Call("measurement", Q),
    "fired_callbacks": Call("measurement", Q, forward=False),
    "run_plan": Call("measurement", W, forward=False), "peer_copy": Call("measurement", W),
    "host_copy": Call("measurement", W), "memory_paths": Call("measurement", Q, forward=False),
    "versions": Call("measurement", Q, forward=False), "clock": Call("measurement", Q, forward=False, worker=False),
    "command_started": Call("measurement", Q, forward=False, worker=False),
    "host_sleep": Call("measurement", W, forward=False, worker=False),
    # lifecycle (`ping` costs one round trip and does nothing; reset and its salvage are the shell side's)
    "ping": Call("lifecycle", Q, forward=False), "close": Call("lifecycle", L, forward=False),
    "salvage": Call("lifecycle", Q, forward=False, worker=False),
    "reset": Call("lifecycle", L, forward=False, worker=False),
    "restore": Call("lifecycle", C, forward=False, worker=False),
}
PLAN_CALLS = frozenset(name for name, c in CONTRACT.items() if c.plan)
WORK_CALLS = frozenset(name for name, c in CONTRACT.items() if c.traced)  # those the GPU runs: a trace record each
QUERIES = frozenset(name for name, c in CONTRACT.items() if c.role == Q)


@cache
def _parameters(name: str):
    import inspect  # here: the module is on the GPU worker's start path, which imports nothing it need not

    return inspect.signature(getattr(Backend, name))


def in_contract_order(name: str, args: tuple, kwargs: dict) -> tuple:
    """A contract call's arguments by position, in the contract's order with its defaults filled in, however the
    caller passed them: how a call is kept in a repeat plan and sent down the worker's pipe."""
    bound = _parameters(name).bind(None, *args, **kwargs)  # None stands for self
    bound.apply_defaults()
    return bound.args[1:]


def round_stats(per_round) -> dict:
    """Median and spread of per-round host times (seconds), as `repeat` and `bench latency` report them. Read off
    the sorted array: np.median's first call loads numpy's machinery for it, 74 ms on the H100 machine — inside the
    events a demo records around its first `repeat`."""
    import numpy as np  # here: not on the start path

    a = np.sort(np.asarray(per_round, dtype=float))
    if a.size == 0:
        return {"rounds": 0}
    median = (a[(a.size - 1) // 2] + a[a.size // 2]) / 2
    return {"rounds": int(a.size), "median": float(median), "min": float(a[0]), "max": float(a[-1]),
            "p10": float(a[int(0.1 * (a.size - 1))]), "p90": float(a[int(0.9 * (a.size - 1))])}


class Backend(ABC):
    name: str
    timing_label: str
    info: DeviceInfo
    capabilities: Capabilities
    dead: str | None = None  # why the GPU side is unusable (a sticky CUDA error, GPU_ABANDONED): `reset` cures it
    gpu_timeout: float | None = None  # `set gpu-timeout`: one wait on the GPU longer than this gives it up
    ask_abandon = None  # set by the REPL: (what, seconds waited) -> give the GPU up? Scripts decide: yes
    drops_all_on_close = False  # close() gives back everything at once (no buffer need be freed first)

    @abstractmethod
    def alloc(self, kind: str, size: int, flags: frozenset, ctx=None) -> tuple[Allocation, Timing]:
        """kind: pageable | pinned (flags portable/mapped/writecombined) | device | managed (global/host), made in
        context `ctx` (a handle from context_create / context_primary; None: the session GPU's primary)."""

    # contexts: handles are the backend's own; None is the session GPU's primary context, current at the start
    @abstractmethod
    def context_create(self, device: int) -> tuple[object, Timing]:
        """A new context on GPU `device` (cuCtxCreate), and how long making it took; the current context stays
        current."""

    @abstractmethod
    def context_primary(self, device: int) -> object:
        """GPU `device`'s primary context (cuDevicePrimaryCtxRetain, held until close); None for the session's GPU."""

    @abstractmethod
    def context_use(self, handle) -> Timing:
        """Make a context current (cuCtxSetCurrent): allocations, streams and events are made in it from now on,
        and a stream handle of None means its default stream."""

    @abstractmethod
    def context_destroy(self, handle) -> None:
        """cuCtxDestroy (or the primary's release) of a context that holds nothing any more."""

    @abstractmethod
    def reach(self, buf, ctx) -> Reach:
        """The address a kernel in context `ctx` uses for `buf`, or why it cannot use it."""

    @abstractmethod
    def free(self, buf) -> None: ...

    @abstractmethod
    def alloc_async(self, size: int, stream, pool=None) -> tuple[Allocation, Timing]:
        """Device memory from the default pool of the stream's GPU (cuMemAllocAsync), or from `pool` (a handle of
        pool_default / pool_create: cuMemAllocFromPoolAsync), in stream order: the address is the driver's at once,
        but only work queued after it on `stream` (or ordered after it by an event) may use the memory — the Timing
        is the allocation's place in the stream, pending until the stream reaches it."""

    @abstractmethod
    def free_async(self, buf, stream) -> Timing:
        """Give device memory back to its pool in stream order (cuMemFreeAsync): the host does not wait; work queued
        before it on `stream` may still use it, nothing after it may."""

    # the stream-ordered allocator's pools: handles are ints on every side
    @abstractmethod
    def pool_default(self, device: int) -> int:
        """GPU `device`'s default pool (cuDeviceGetDefaultMemPool): what cudaMallocAsync allocates from."""

    @abstractmethod
    def pool_create(self, device: int) -> int:
        """A new pool of device memory on GPU `device` (cuMemPoolCreate)."""

    @abstractmethod
    def pool_destroy(self, pool: int) -> None:
        """cuMemPoolDestroy: its memory goes once its last allocation is freed; a default pool is the driver's
        CUDA_ERROR_INVALID_VALUE."""

    @abstractmethod
    def pool_set(self, pool: int, attribute: str, value: int) -> None:
        """cuMemPoolSetAttribute: `threshold` (bytes, 2^64-1 for max) or a reuse policy (`follow-events`,
        `opportunistic`, `internal`: 1 on, 0 off)."""

    @abstractmethod
    def pool_attributes(self, pool: int) -> dict:
        """cuMemPoolGetAttribute of each: threshold, reserved, reserved_high, used, used_high (bytes), and the reuse
        policies follow-events, opportunistic, internal (bools)."""

    @abstractmethod
    def pool_trim(self, pool: int, keep: int) -> None:
        """cuMemPoolTrimTo: give idle memory back until at most `keep` bytes stay reserved."""

    @abstractmethod
    def vmm_granularity(self, device: int) -> tuple[int, int]:
        """cuMemGetAllocationGranularity of pinned device memory on GPU `device`: (minimum, recommended) bytes."""

    @abstractmethod
    def vmm_reserve(self, size: int, ctx=None) -> tuple[Allocation, Timing]:
        """cuMemAddressReserve: addresses without memory behind them (the Allocation's device pointer); copies and
        kernels may use only the parts mapped (vmm_map) and made accessible (vmm_access)."""

    @abstractmethod
    def vmm_create(self, size: int, device: int) -> int:
        """cuMemCreate of pinned device memory on GPU `device`: the side's number for the physical handle."""

    @abstractmethod
    def vmm_map(self, buf, offset: int, handle: int) -> None:
        """cuMemMap of the handle's whole size at the reservation's address + offset; no access yet."""

    @abstractmethod
    def vmm_access(self, buf, offset: int, size: int, mode: str, device: int) -> None:
        """cuMemSetAccess over [offset, offset + size) of a reservation: mode rw, read or none for GPU `device`."""

    @abstractmethod
    def vmm_unmap(self, buf, offset: int, size: int) -> None:
        """cuMemUnmap of whole mappings; memory of a released handle is freed with its last mapping."""

    @abstractmethod
    def vmm_release(self, handle: int) -> None:
        """cuMemRelease: the handle is gone; its memory lives until its last mapping is unmapped."""

    @abstractmethod
    def vmm_free(self, buf) -> None:
        """cuMemAddressFree of a reservation with nothing mapped in it any more."""

    @abstractmethod
    def alloc_pitched(self, width: int, height: int, depth: int, ctx=None) -> tuple[Allocation, Timing]:
        """Pitched device memory for `height` × `depth` rows of `width` bytes (cuMemAllocPitch; cudaMalloc3D's rows
        are height × depth): the Allocation's `pitch` is the driver's row stride, its size pitch × height × depth."""

    @abstractmethod
    def register(self, buf, flags: frozenset) -> int | None:
        """Pin a pageable buffer in place (cuMemHostRegister); return its device pointer or None."""

    @abstractmethod
    def unregister(self, buf) -> None: ...

    @abstractmethod
    def pointer_info(self, buf) -> dict:
        """What the driver says of the buffer's pointer: memory_type, is_managed, host_flags,
        device_ptr, device — each value, or the CUDA_ERROR name the query returned."""

    @abstractmethod
    def read(self, buf, offset: int, nbytes: int) -> np.ndarray:
        """Bytes of any buffer (device memory through a copy) — for show/compare, not timed."""

    @abstractmethod
    def write(self, buf, offset: int, data: np.ndarray) -> None:
        """Store bytes into a host-accessible buffer (fill)."""

    # the host's data work (backends/hostdata.py), done where the bytes are, each with a Timing of the host's time:
    # measured on a GPU's host, modeled from the profile's host rates on the simulator
    @abstractmethod
    def host_checksum(self, buf) -> tuple[int, Timing]:
        """`checksum`: Σ byte[i]·(i mod 251 + 1) mod 2^64 over the whole buffer (device memory through a copy)."""

    @abstractmethod
    def host_compare(self, a, a_offset: int, b, b_offset: int, nbytes: int) -> tuple[int | None, Timing]:
        """`compare`: the first byte (from each start) where two ranges differ, or None."""

    @abstractmethod
    def host_read(self, buf, offset: int, nbytes: int) -> tuple[np.ndarray, Timing]:
        """`show`: a range's bytes, and how long the host took to read them."""

    @abstractmethod
    def host_fill(self, buf, value, dtype: str, seed: int) -> Timing:
        """`fill`: every whole element of a host-accessible buffer, as dtype, ← a number, "iota" or "random" (seeded
        SplitMix64, the same `export c` writes)."""

    def room(self, nbytes: int) -> None:
        """Raise now if this many more bytes of written data could not be kept (the simulator's RAM budget): a
        measurement asks before it touches memory. A GPU's driver refuses at allocation instead."""

    @abstractmethod
    def memcpy(self, src, src_off: int, dst, dst_off: int, nbytes: int, stream, async_: bool) -> Timing: ...

    @abstractmethod
    def memcpy_batch(self, copies: list, stream, order: str) -> Timing:
        """cuMemcpyBatchAsync (CUDA 12.8+): `copies` as [src, src_off, dst, dst_off, nbytes] lists (lists cross the
        worker's pipe with their buffers), queued by one call on `stream` with one source-access order for all
        (syncrules.BATCH_ORDERS). The driver refuses the legacy default stream (None) and a copy of 0 bytes with
        CUDA_ERROR_INVALID_VALUE (H100, CUDA 13), an older driver with CUDA_ERROR_NOT_SUPPORTED."""
    def memcpy_shaped(self, src, src_off: int, src_pitch: int, src_rows: int, dst, dst_off: int, dst_pitch: int,
                      dst_rows: int, width: int, height: int, depth: int, stream, async_: bool) -> Timing:
        """A 2-D or 3-D copy (cuMemcpy2D[Async], cuMemcpy3D[Async]): `depth` slices of `height` rows of `width`
        bytes; each side's rows `pitch` bytes apart and its slices `rows` rows apart (cudaPitchedPtr's ysize). The
        shell has checked the rectangles' bounds and that `width` fits both pitches."""

    @abstractmethod
    def memset(self, buf, offset: int, value: int, nbytes: int, stream, async_: bool) -> Timing: ...

    @abstractmethod
    def stream_create(self, nonblocking: bool, priority: int) -> tuple[object, int]:
        """Return the stream handle and the priority the driver actually gave it."""

    @abstractmethod
    def stream_destroy(self, handle) -> None: ...

    @abstractmethod
    def stream_sync(self, handle) -> Timing: ...

    @abstractmethod
    def stream_idle(self, handle) -> bool: ...

    @abstractmethod
    def device_sync(self) -> Timing: ...

    @abstractmethod
    def priority_range(self) -> tuple[int, int]:
        """(least, greatest) as cuCtxGetStreamPriorityRange returns them."""

    @abstractmethod
    def launch(self, kernel, args: list, count: int, grid: tuple[int, int, int], block: tuple[int, int, int],
               shared: int, stream, options: LaunchOptions = PLAIN_LAUNCH) -> Timing:
        """Launch a Kernel (built-in or loaded) with its arguments in order: Buffers for its buffer
        parameters, numpy scalars for the others; built-ins get `count` as their element count. `grid` and
        `block` are (x, y, z) as cuLaunchKernel takes them; a shape the device refuses is the driver's
        CUDA_ERROR_INVALID_VALUE (the simulator's through `launchdims.check_launch`). A user's kernel on a backend
        that counts it reports what it moved in the Timing's `report`."""

    @abstractmethod
    def load_kernels(self, source: str, path: str | None = None, root: Path | None = None) -> tuple[list, list]:
        """Compile CUDA C and load it as a new module: its kernels with backend handles, and its variables
        (`__constant__`, `__device__`, `__managed__`) as ModuleSymbols — allocations the module owns, fresh each
        load, initialised from the source. With `root` (grading), a source that reads a file outside that folder
        (CUDA's own headers aside) is OUTSIDE_SUBMISSION, refused before its text can reach an error message."""

    # events and host callbacks
    @abstractmethod
    def event_create(self): ...

    @abstractmethod
    def event_record(self, event, stream) -> Timing: ...

    @abstractmethod
    def event_query(self, event) -> bool: ...

    @abstractmethod
    def event_sync(self, event) -> Timing: ...

    @abstractmethod
    def event_elapsed(self, start, end) -> float:
        """Seconds between two completed events (cuEventElapsedTime)."""

    @abstractmethod
    def event_destroy(self, event) -> None: ...

    @abstractmethod
    def stream_wait(self, stream, event) -> None:
        """Make `stream` wait for `event` (cuStreamWaitEvent)."""

    @abstractmethod
    def host_callback(self, stream, text: str, label: str) -> Timing:
        """Queue a host function that reports `text` when the stream reaches it (cuLaunchHostFunc)."""

    @abstractmethod
    def host_noop(self, stream) -> Timing:
        """Queue a host function that does nothing (a C function, no Python): what a callback costs, alone."""

    @abstractmethod
    def fired_callbacks(self) -> list[dict]:
        """Callbacks that ran since the last call: {text, stream, at} (seconds since the session began)."""

    def resolve(self, token: int) -> tuple | None:
        """(seconds, start, end) of async work reported as pending, once it has finished; a fourth item names
        what timed it on its engine (CUPTI), where that was not the events around it."""
        return None

    def resolve_many(self, tokens: list[int]) -> dict:
        """token → (seconds, start, end) for those that have finished: one question for many (one round trip)."""
        spans = {t: self.resolve(t) for t in tokens}
        return {t: s for t, s in spans.items() if s is not None}

    def refine(self, tags: list[int]) -> dict:
        """tag → (start, end) on the engine, from the profiler's activity records where the backend has them
        (CUPTI): finished work timed by the GPU itself, not by the events around it. {} where there are none."""
        return {}

    def plan_records(self, tag: int) -> list:
        """A traced plan's records, when run_plan left them to be read later (`records_tag`): [call index, issued,
        start, end] for each work call of each round, [] where there are none. Asked once."""
        return []

    tracing: str | None = None  # what gives engine times: "CUPTI activity records", "modeled"; None: events only
    tracing_why: str = ""  # why not CUPTI, in one line, when it is not
    proc = None  # the worker process the GPU side runs in (the cuda backend's), which grading must be able to end

    # hold / release, and work run without the shell in the loop
    @abstractmethod
    def hold(self, streams: list) -> str:
        """Keep each stream (handles; None is the default stream) from starting what is queued on it from now
        until `release`; returns how. Calls made while held that would wait for the GPU raise STREAMS_HELD."""

    @abstractmethod
    def release(self) -> str | None:
        """Let every held stream go at once; returns why they had been let go already, if they had."""

    @abstractmethod
    def run_plan(self, calls: list, rounds: int, gate: bool = False, trace: bool = True) -> dict:
        """Run `calls` ([method, args] of this contract: memcpy, memset, launch, prefetch, event_record,
        stream_wait, stream_sync, device_sync) `rounds` times as direct driver calls, then wait for the device.
        `gate`: hold the streams while they are queued, so the GPU runs them back to back. `trace`: False
        turns the profiler's records off meanwhile (a bench times what an untraced program would). Returns
        {host_seconds, per_round (round_stats), gpu_seconds (first start to last end on the GPU), busy_seconds,
        records: [[call index, issued, start, end], …] for the work calls (where the backend can time them
        one by one), source}."""

    @abstractmethod
    def pin_limit(self) -> tuple[int, str]:
        """How many bytes may be page-locked in all, and why that much."""

    @abstractmethod
    def prefetch(self, buf, where: str, stream) -> Timing:
        """Migrate a managed buffer's pages to 'device' or 'host' (cuMemPrefetchAsync)."""

    @abstractmethod
    def advise(self, buf, advice: str, where: str) -> None:
        """cuMemAdvise: readmostly | preferred (device/host) | accessed-by (device)."""

    @abstractmethod
    def versions(self) -> dict:
        """Driver and runtime versions, as words."""

    def command_started(self) -> None:
        """A shell command begins. The simulator charges the shell's own time per command (as calibrated),
        so the gaps between commands in a script are as long as on the GPU it was calibrated on."""

    @abstractmethod
    def host_sleep(self, seconds: float) -> None:
        """Let host time pass while the GPU works on (the simulator advances its virtual clock)."""

    @abstractmethod
    def clock(self) -> float:
        """The host's clock in seconds: real on a GPU, the simulator's virtual one on the simulator."""

    @abstractmethod
    def devices(self) -> dict:
        """Every GPU the driver sees and how each pair is joined: {"devices": [{ordinal, name, pci_bus_id,
        numa_node, total_mem, compute_capability}], "peers": [{src, dst, access, link, atomics}] for every
        ordered pair, "link_source": where the link names come from, "memory_nodes": the NUMA nodes with memory}."""

    @abstractmethod
    def peer_access(self, src: int, dst: int, enable: bool) -> Timing:
        """Let GPU `src` reach GPU `dst`'s memory (cuCtxEnablePeerAccess in src's context), or stop it; the driver's
        error when it is already so (PEER_ACCESS_ALREADY_ENABLED / NOT_ENABLED) or the pair cannot."""

    @abstractmethod
    def peer_copy(self, src: int, dst: int, nbytes: int, reps: int, peer: bool) -> float:
        """Seconds per copy of `nbytes` from device `src`'s memory to device `dst`'s (cuMemcpyPeerAsync, `reps`
        back to back on one stream, timed by events) — with peer access enabled both ways, or not (staged
        through the host)."""

    @abstractmethod
    def host_copy(self, device: int, node: int | None, nbytes: int, reps: int, to_device: bool) -> float:
        """Seconds per pinned copy of `nbytes` between host memory on NUMA node `node` (None: not bound) and GPU
        `device`, `reps` back to back on one stream, timed by events (nvbandwidth's host-to-device tests)."""

    @abstractmethod
    def memory_paths(self) -> dict:
        """{"pcie": {current_gen, current_width, max_gen, max_width, numa_node} or None, "hbm_peak": B/s}."""

    # reset: a fresh GPU side under the same session
    @abstractmethod
    def salvage(self, buf) -> object:
        """The host contents of a host buffer, kept across `reset` (a faulted or abandoned side too); raises
        ShellError when they cannot be read."""

    @abstractmethod
    def reset(self) -> None:
        """Give up the GPU side, whatever its state, and start a fresh one: every handle is void after it."""

    @abstractmethod
    def restore(self, buf, saved) -> None:
        """Put salvaged contents into a buffer of the fresh side."""

    @abstractmethod
    def close(self) -> None:
        """Release the context and everything in it; safe to call twice."""
