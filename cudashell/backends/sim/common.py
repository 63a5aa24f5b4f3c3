"""What the simulator's parts share: its limits and costs, and the records of an allocation, a stream, a
context, an event and an operation on the virtual clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ...model import syncrules as R
from ..sparse import CHUNK, SparseBytes

MIB = 1 << 20
# a built-in kernel works on its bytes this much at a time: its arrays (the inputs read, the output) sit beside the
# storage budget, so they stay a few MiB rather than four times a buffer's size
STEP = CHUNK
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


def ns(seconds: float) -> int:
    """A duration from the profile's figures (seconds) as the clock keeps it: whole nanoseconds, rounded once here.
    A float clock of seconds loses its step as time grows (2 ms by 9e12 s); integers stay exact however long it runs."""
    return round(seconds * 1e9)


def secs(t: int) -> float:
    """A time or duration of the clock (nanoseconds) as the backend's answers give it: seconds."""
    return t / 1e9


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
    been_to_host: bool = False  # managed: prefetched to the host once, so a prefetch back no longer holds the host
    pool: bool | None = None  # the small pinned pool it came from (write-combined or not)
    device: int = 0  # the GPU of the context it was made in
    ctx: object = None  # that context's handle (None: the session GPU's primary)
    dptr: int | None = None  # the address a kernel uses for it (None: a kernel cannot reach it)
    mem_pool: object = None  # the stream-ordered pool it came from (pools.SimPool); its memory goes back there
    freed_by: object = None  # freed in stream order: the stream the free was queued on …
    free_seq: int = 0  # … its place in the order of everything queued (what an event after it has seen) …
    free_end: int = 0  # … when that stream reaches it (ns) …
    reached: bool = False  # … and whether it has
    span: int = 0  # the addresses it holds when more than its size: a block freed on its stream that it took whole
    space: str = ""  # a module's variable: constant, global or managed (a kernel reads constant memory only) …
    label: str = ""  # … and its name in the source, which a kernel's faults and access maps give it

    @property
    def cls(self) -> str:
        return R.memory_class(self.kind, self.registered)


@dataclass(eq=False)  # streams are told apart by identity, never by value
class SimStream:
    tail: int = 0  # when the last work queued on it ends (ns)
    nonblocking: bool = False
    priority: int = 0
    engine: str | None = None  # where its last operation ran
    ctx: object = None  # the context it belongs to
    seen: dict = field(default_factory=dict)  # stream → the last operation queued there it is ordered after (events)


@dataclass(eq=False)
class SimCtx:
    """A modeled context: its GPU, whether it is that GPU's primary, and its own legacy default stream."""

    device: int
    primary: bool
    default: SimStream


@dataclass(eq=False)
class SimEvent:
    time: int | float | None = None  # when the GPU reaches it (ns; math.inf while held); None until recorded
    record: list | None = None  # its latest record while held: [when the GPU reaches it], filled in at release
    ctx: object = None  # the context it was made in: it can be recorded only on that context's streams
    seen: dict = field(default_factory=dict)  # what a stream that waits for it is ordered after (SimStream.seen)


@dataclass(eq=False)
class Op:
    seq: int
    start: int  # ns, as every time on the clock
    end: int
    effect: Callable | None = None  # the data change, applied when the op completes
    fault: str | None = None
    callback: dict | None = None

    def __lt__(self, other: "Op") -> bool:
        return (self.end, self.seq) < (other.end, other.seq)
