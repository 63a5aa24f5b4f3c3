"""What the GPU side's parts share: the C types of kernel arguments, thresholds, and the records of an
allocation, a context and work in flight."""

from __future__ import annotations

import ctypes as C
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from ..bindings import cu

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


def _host_array(ptr: int, size: int) -> np.ndarray:
    """The bytes of a host-accessible allocation, as numpy sees them (no copy)."""
    import numpy as np  # here: the GPU side starts without it (0.3 s on the H100 machine)

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
    loaded: set = field(default_factory=set)  # the functions of modules `kernel load`/`define` made here
    modules: list = field(default_factory=list)


@dataclass
class Pending:
    start: int | None  # None: CUPTI times it, the end event only says when it is done
    end: int | None  # None too: issued while held, it has only its CUPTI record (see Measurement._record_only)
    ctx: Ctx
    stream: int | None = None
