"""Virtual memory management as the session sees it (the driver API's cuMemAddressReserve, cuMemCreate, cuMemMap,
cuMemSetAccess): reservations of addresses, physical handles, and what is mapped where with which access. A
reservation is also a session Buffer (kind device, flag `vmm`), so copies, `show` and kernels name it; this keeps
what the Buffer cannot say. Pure: `ls`, completion and the order checks read it."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..sizes import size_word

# cuMemGetAllocationGranularity for pinned device memory on the H100 (CUDA 13): minimum and recommended both 2 MiB
# (../shared/design/memory-model-facts.md, "Virtual memory management").
GRANULARITY = 2 << 20
ACCESS_MODES = ("rw", "read", "none")


@dataclass(eq=False)
class VmmHandle:
    """cuMemCreate's physical memory: its backend id; `released` once cuMemRelease was called — the memory lives on
    while any mapping of it does."""

    name: str
    size: int
    device: int
    handle: int
    released: bool = False
    mappings: list = field(default_factory=list)  # the Mappings of it, in any reservation


@dataclass(eq=False)
class Mapping:
    reservation: str
    offset: int
    handle: VmmHandle
    access: str = "none"  # a new mapping has no access until cuMemSetAccess (the driver's rule)

    @property
    def size(self) -> int:
        return self.handle.size

    @property
    def end(self) -> int:
        return self.offset + self.handle.size


@dataclass(eq=False)
class Reservation:
    name: str
    size: int
    device: int
    mappings: list = field(default_factory=list)  # by offset

    def overlapping(self, offset: int, nbytes: int) -> list[Mapping]:
        return [m for m in self.mappings if m.offset < offset + nbytes and offset < m.end]

    def covering(self, offset: int, nbytes: int) -> list[Mapping] | None:
        """The mappings that cover [offset, offset + nbytes) exactly, whole, without a hole; else None."""
        ms = sorted(self.overlapping(offset, nbytes), key=lambda m: m.offset)
        at = offset
        for m in ms:
            if m.offset != at:
                return None
            at = m.end
        return ms if ms and at == offset + nbytes else None


@dataclass
class VmmState:
    handles: dict = field(default_factory=dict)  # name → VmmHandle, until released
    reservations: dict = field(default_factory=dict)  # buffer name → Reservation

    def next_handle_name(self) -> str:
        n = 0
        while f"mem{n}" in self.handles:
            n += 1
        return f"mem{n}"

    def alive(self) -> list[VmmHandle]:
        """Handles whose memory lives: not released, or released but still mapped somewhere."""
        mapped = [m.handle for r in self.reservations.values() for m in r.mappings]
        return list({id(h): h for h in [*self.handles.values(), *mapped]}.values())

    def memory(self) -> int:
        return sum(h.size for h in self.alive())

    def rows(self) -> list[dict]:
        """Each reservation with what is mapped where (`ls`, --json)."""
        return [{"name": r.name, "size": r.size, "mappings": [
            {"offset": m.offset, "size": m.size, "handle": m.handle.name, "released": m.handle.released,
             "access": m.access} for m in r.mappings]} for r in self.reservations.values()]

    def handle_rows(self) -> list[dict]:
        return [{"name": h.name, "size": h.size, "device": h.device, "released": h.released,
                 "mapped_at": [f"{m.reservation}[{size_word(m.offset)}:]" for m in h.mappings]} for h in self.alive()]
