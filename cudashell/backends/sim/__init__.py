"""The simulated device: a discrete-event model on one virtual clock. Real bytes (lazily stored) change
when an operation *completes* in virtual time; the host's clock moves by each call's modeled cost and by
every wait; engines and streams follow the driver's ordering rules (a hardware queue a stream, copies sharing
their engine, kernels of different streams concurrently, the legacy default stream's implicit synchronisation);
which calls hold the host comes from the one table in `syncrules`. Deterministic: the same script gives the same
figures.

Its parts, by the contract's concerns (base.CONTRACT): memory.py (pools.py: the stream-ordered pools), work.py,
sync.py, contexts.py, measurement.py, on the virtual clock of clock.py; starting, resetting and closing are here."""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable

from ...errors import ShellError, held_error
from ..addresses import AddressSpaces
from ..base import Backend, Capabilities, DeviceInfo
from ..profile import Profile
from ..sparse import Budget
from .clock import Clock
from .common import Op, SimAlloc, SimCtx, SimStream, ns
from .contexts import Contexts
from .hostwork import HostWork
from .measurement import Measurement
from .memory import Memory
from .pools import Pools, SimPool
from .sync import Sync
from .shapes import Shapes
from .vmm import Vmm
from .work import Work


class SimBackend(Memory, HostWork, Pools, Vmm, Work, Shapes, Sync, Contexts, Measurement, Clock, Backend):
    name = "sim"
    timing_label = "modeled"
    tracing = "modeled"
    drops_all_on_close = True  # the simulated device goes whole: its queued work need not finish first

    def __init__(self, profile: Profile | None = None):
        self.profile = p = profile or Profile.load(None)
        self.capabilities = Capabilities(models_time=True, draws_accesses=True, profile=p)
        self.info = DeviceInfo(p.name, 0, p.device_memory, p.compute_capability, p.pci_bus_id,
                               p.unified_addressing, p.can_map_host_memory, p.pageable_memory_access,
                               p.managed_memory, p.concurrent_managed_access, p.async_engine_count,
                               p.concurrent_kernels)
        self.budget = Budget(p.storage_budget)
        self.now = 0  # the host's virtual clock, ns (clock.py)
        # what every call costs, as the clock counts it: rounded once (a backend's profile is fixed for its life)
        self.call_ns, self.sync_ns = ns(p.async_call), ns(p.sync_latency)
        self.switch_ns, self.overhead_ns = ns(p.engine_switch), ns(p.shell_overhead)
        self.gpu_timeout: float | None = None
        self.fired: list[dict] = []
        self._fresh()

    def _fresh(self) -> None:
        """The device side, new: what a new context starts with (the host's clock runs on)."""
        self.addresses = AddressSpaces(self.profile.address_bits)
        self.live: set[SimAlloc] = set()
        self.stale: OrderedDict[int, SimAlloc] = OrderedDict()  # freed small device blocks, by address
        self.pooled = 0  # live device allocations carved from the small pool
        self.host_pools: dict[bool, tuple[int, int]] = {}  # write-combined? → (PORTABLE bit, live allocations)
        self.device_used = self.host_used = 0
        self.mem_pools: dict[int, SimPool] = {}  # handle → a stream-ordered pool (pools.py)
        self.default_pools: dict[int, int] = {}  # GPU → its default pool's handle
        self.next_pool = 0
        self.freed_on: dict[SimStream, list[SimAlloc]] = {}  # stream → blocks freed on it no synchronize has seen done
        self.vmm_handles: dict = {}  # cuMemCreate's handles by number (vmm.PhysHandle), until released and unmapped
        self.vmm_next = 0
        self.peers: set[tuple[int, int]] = set()  # (a, b): GPU a may reach GPU b's memory
        self.ctxs: dict = {None: SimCtx(0, True, SimStream())}  # handle → context; None: GPU 0's primary
        self.cur = None  # the current context's handle
        self.next_ctx = 0
        self.streams: list[SimStream] = []
        self.retired = 0  # the tail of destroyed blocking streams: the default stream still waits for it
        self.engines: dict[str, tuple[list, list]] = {}  # engine → (starts, ends) of its busy spans, in time order
        self.ops: list[Op] = []  # queued work, by completion time
        self.spans: OrderedDict[int, tuple[int, int]] = OrderedDict()  # work reported as still running (ns)
        self.seq = 0
        self.planned: dict[int, tuple[int, int]] | None = None  # during run_plan: token → its operation's span (ns)
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
        for a in list(self.live) + list(self.stale.values()) + list(self.vmm_handles.values()):
            if a not in self.salvaged:
                a.data.release()
        self._fresh()

    def close(self):
        self.held = None
        self.budget.clear()
