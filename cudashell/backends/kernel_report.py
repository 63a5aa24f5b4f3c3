"""What a backend counted of one launch of a user's kernel (the simulator does; a GPU counts nothing): a typed object
from the backend to the `launch` command, which crosses the worker's pipe as it is. The launch's result shows it as
`counts` and `access` (`counts()`, `access_map()`): the JSON the trace, `profile`, and the advice read."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MemoryTraffic:
    """One memory kind's loads and stores: warp requests, the 32-byte sectors they moved, the bytes threads used."""

    requests: int
    sectors: int
    useful_bytes: int

    @property
    def bytes(self) -> int:
        return self.sectors * 32

    @property
    def efficiency(self) -> float:
        return self.useful_bytes / self.bytes if self.sectors else 1.0

    @property
    def pattern(self) -> str:
        eff = self.efficiency
        return ("coalesced" if eff >= 0.8 or self.sectors <= self.requests else "strided" if eff <= 0.25
                else "partly coalesced")

    def counts(self) -> dict:
        return {"requests": self.requests, "sectors": self.sectors, "bytes": self.bytes,
                "useful_bytes": self.useful_bytes,
                "sectors_per_request": self.sectors / self.requests if self.requests else 0.0,
                "efficiency": self.efficiency, "pattern": self.pattern}


@dataclass(frozen=True)
class Access:
    """One access `show-access` draws: a thread (named as the drawing names it: `3`, `3,1`, `b2:3`) read or wrote
    element `element` of a buffer."""

    buffer: str
    element: int
    element_size: int
    thread: str
    write: bool


SHOWN_ELEMENTS = 64  # show-access lists this many elements of a buffer, then says how many more


@dataclass(frozen=True)
class KernelReport:
    memory: dict[str, MemoryTraffic]  # by memory kind (device, managed, zero-copy, peer), as first touched
    loads: int
    stores: int
    shared_requests: int
    shared_wavefronts: int  # one a request when conflict-free; n for an n-way bank conflict
    atomics: int
    warp_instructions: int  # statements and expressions, per active warp
    accesses: tuple[Access, ...] = ()  # with show-access
    constant_requests: int = 0  # warp loads of __constant__ memory
    constant_addresses: int = 0  # the distinct addresses they touched: one a request is a broadcast
    readonly_loads: int = 0  # warp loads by the read-only data path (`__ldg`, `const T* __restrict__`)
    fault: str = ""  # a kernel that faults: what the checks saw (its counts are not kept, its accesses are)

    @property
    def moved(self) -> int:
        """Bytes moved to and from global memory: whole sectors."""
        return sum(m.bytes for m in self.memory.values())

    def counts(self) -> dict:
        """The counts as a launch's result shows them (its `counts`)."""
        return {"global": {kind: m.counts() for kind, m in self.memory.items()}, "loads": self.loads,
                "stores": self.stores,
                "shared": {"requests": self.shared_requests, "wavefronts": self.shared_wavefronts,
                           "conflict_ways": (self.shared_wavefronts / self.shared_requests
                                             if self.shared_requests else 0.0)},
                "atomics": self.atomics, "warp_instructions": self.warp_instructions,
                "constant": {"requests": self.constant_requests, "addresses": self.constant_addresses,
                             "addresses_per_request": (self.constant_addresses / self.constant_requests
                                                       if self.constant_requests else 0.0)},
                "readonly_loads": self.readonly_loads}

    def access_map(self) -> dict:
        """Per buffer and element, which threads read and wrote it (the first SHOWN_ELEMENTS elements touched of
        each; `more`: how many others it touched)."""
        out: dict = {}
        for a in self.accesses:
            buf = out.setdefault(a.buffer, {"element_size": a.element_size, "elements": {}})
            cell = buf["elements"].setdefault(str(a.element), {"read": [], "write": []})
            side = cell["write" if a.write else "read"]
            if a.thread not in side:
                side.append(a.thread)
        for buf in out.values():
            keys = sorted(buf["elements"], key=int)
            buf["elements"] = {k: buf["elements"][k] for k in keys[:SHOWN_ELEMENTS]}
            buf["more"] = max(0, len(keys) - SHOWN_ELEMENTS)
        return out
