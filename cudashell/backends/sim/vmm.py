"""Virtual memory management on the simulator: a reservation is an allocation whose bytes are a view over the
physical handles mapped into it, so one handle mapped at two addresses is one set of bytes (as on the H100:
../shared/design/memory-model-facts.md, "Virtual memory management"); what is not mapped and accessible is
refused as the driver refuses it (a copy or memset there: CUDA_ERROR_INVALID_VALUE; a kernel's access faults)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import ShellError
from ...model.vmm import GRANULARITY
from ...sizes import size_word
from ..base import Allocation
from ..sparse import CHUNK, Budget, SparseBytes
from .common import INVALID, INVALID_DEVICE, SimAlloc

VMM_CALL = 2e-6  # a reserve, map, access, unmap or release: a host call of a few µs (no engine work)


@dataclass(eq=False)
class PhysHandle:
    """cuMemCreate's memory: its bytes (what kernels write back into: `owner` of their regions), mapped where."""

    size: int
    data: SparseBytes
    device: int
    released: bool = False
    mapped: int = 0  # how many mappings of it exist


@dataclass(eq=False)
class SimMapping:
    offset: int
    phys: PhysHandle
    access: str = "none"

    @property
    def end(self) -> int:
        return self.offset + self.phys.size


class _Chunks:
    """The reservation's chunks as a SparseBytes source reads them (`chunks.get(i)`): the mapped handle's own chunk
    (mappings start at multiples of 2 MiB, so chunks line up), None elsewhere."""

    def __init__(self, view: MappedBytes):
        self.view = view

    def get(self, idx: int):
        m = self.view.mapping_at(idx * CHUNK)
        return None if m is None else m.phys.data.chunks.get((idx * CHUNK - m.offset) // CHUNK)


class MappedBytes:
    """A reservation's bytes, with SparseBytes' interface: each range goes to the handles mapped over it."""

    def __init__(self, size: int):
        self.size = size
        self.mappings: list[SimMapping] = []
        self.chunks = _Chunks(self)

    def mapping_at(self, offset: int) -> SimMapping | None:
        return next((m for m in self.mappings if m.offset <= offset < m.end), None)

    def _pieces(self, offset: int, nbytes: int):
        """(mapping, offset in its handle, offset in the range, length) for the mapped parts of a range."""
        for m in self.mappings:
            lo, hi = max(offset, m.offset), min(offset + nbytes, m.end)
            if lo < hi:
                yield m, lo - m.offset, lo - offset, hi - lo

    def read(self, offset, nbytes):
        import numpy as np

        out = np.zeros(nbytes, np.uint8)
        for m, at, pos, n in self._pieces(offset, nbytes):
            out[pos:pos + n] = m.phys.data.read(at, n)
        return out

    def window(self, offset, nbytes):
        return self.read(offset, nbytes) if self.touched(offset, nbytes) else None

    def write(self, offset, data):
        import numpy as np

        data = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        for m, at, pos, n in self._pieces(offset, data.size):
            m.phys.data.write(at, data[pos:pos + n])

    def fill(self, offset, value, nbytes):
        for m, at, _pos, n in self._pieces(offset, nbytes):
            m.phys.data.fill(at, value, n)

    def touched(self, offset, nbytes):
        return any(m.phys.data.touched(at, n) for m, at, _pos, n in self._pieces(offset, nbytes))

    def reserve(self, offset, nbytes):
        for m, at, _pos, n in self._pieces(offset, nbytes):
            m.phys.data.reserve(at, n)

    def reserve_copy(self, src, src_off, dst_off, nbytes):
        for m, at, pos, n in self._pieces(dst_off, nbytes):
            m.phys.data.reserve_copy(src, src_off + pos, at, n)

    def copy_from(self, src, src_off, dst_off, nbytes):
        for m, at, pos, n in self._pieces(dst_off, nbytes):
            m.phys.data.copy_from(src, src_off + pos, at, n)

    def snapshot(self, offset, nbytes):
        """The mapped bytes of a range as they are now, apart (SparseBytes.snapshot): unmapped parts are zeros."""
        snap = None
        for m, at, pos, n in self._pieces(offset, nbytes):
            snap = snap or SparseBytes(nbytes, m.phys.data.budget)
            snap.copy_from(m.phys.data, at, pos, n)
        return snap or SparseBytes(nbytes, Budget(0))

    def land(self, snap, offset):
        self.copy_from(snap, 0, offset, snap.size)
        snap.release()

    def release(self):
        """The handles' bytes are theirs: a reservation going away leaves them."""


@dataclass(eq=False)
class SimReservation(SimAlloc):
    """cuMemAddressReserve's range: a device allocation whose `data` is the MappedBytes view."""

    handles: dict = field(default_factory=dict)


class Vmm:
    """The simulator's virtual memory management (a mixin: `vmm_handles` is made in SimBackend._fresh)."""

    def _gpu(self, device: int) -> None:
        """A GPU the profile has, checked as the GPU side checks it (before the driver sees the number)."""
        if not 0 <= device < self.profile.gpus:
            raise ShellError(INVALID_DEVICE, f"there is no GPU {device}: the profile has {self.profile.gpus}",
                             "`devices` lists them")

    def vmm_granularity(self, device):
        self._alive()
        self._gpu(device)
        self._elapse(VMM_CALL)
        return GRANULARITY, GRANULARITY

    def _granular(self, size: int, what: str) -> None:
        if size <= 0 or size % GRANULARITY:
            raise ShellError(INVALID, f"{what}: {size} bytes is not a multiple of the allocation granularity "
                             f"({GRANULARITY >> 20} MiB)", "`vmm granularity` says it; round the size up to it")

    def vmm_reserve(self, size, ctx=None):
        self._alive()
        self._granular(size, "cuMemAddressReserve")
        device = self._context(ctx).device
        view = MappedBytes(size)
        a = SimReservation("device", size, view, region="device", device=device, ctx=ctx)
        a.addr = self._addresses("device", size, "device")
        self.live.add(a)  # its addresses only: no memory is counted until handles are created
        return Allocation(a, None, a.addr), self._host_call(VMM_CALL)

    def vmm_create(self, size, device):
        self._alive()
        self._granular(size, "cuMemCreate")
        self._gpu(device)
        self._room_for("device", size, device)
        self.vmm_next += 1
        self.vmm_handles[self.vmm_next] = PhysHandle(size, SparseBytes(size, self.budget), device)
        if not device:  # the session GPU's memory in use (another GPU's is counted from `live`)
            self.device_used += size
        self._elapse(VMM_CALL)
        return self.vmm_next

    def _phys(self, handle: int, call: str) -> PhysHandle:
        phys = self.vmm_handles.get(handle)
        if phys is None or phys.released:
            raise ShellError(INVALID, f"{call}: that handle was released", "`vmm create` another")
        return phys

    def vmm_map(self, buf, offset, handle):
        self._alive()
        a: SimReservation = buf.handle
        phys = self._phys(handle, "cuMemMap")
        view: MappedBytes = a.data
        if offset % GRANULARITY or offset + phys.size > a.size or any(view._pieces(offset, phys.size)):
            raise ShellError(INVALID, f"cuMemMap: {phys.size} bytes at offset {offset} of {buf.name} are not an "
                             "unmapped, granularity-aligned part of the reservation",
                             "map at a free offset that is a multiple of 2 MiB, inside the reservation")
        view.mappings.append(SimMapping(offset, phys))
        view.mappings.sort(key=lambda m: m.offset)
        phys.mapped += 1
        self._elapse(VMM_CALL)

    def _covering(self, a: SimReservation, offset: int, size: int, call: str) -> list[SimMapping]:
        ms = [m for m in a.data.mappings if m.offset < offset + size and offset < m.end]
        at = offset
        for m in ms:
            if m.offset != at:
                break
            at = m.end
        else:
            if ms and at == offset + size:
                return ms
        raise ShellError(INVALID, f"{call}: [{offset}, {offset + size}) is not whole mappings of the reservation",
                         "name a range of whole mappings (`ls` shows them)")

    def vmm_access(self, buf, offset, size, mode, device):
        self._alive()
        self._gpu(device)
        for m in self._covering(buf.handle, offset, size, "cuMemSetAccess"):
            m.access = mode
        self._elapse(VMM_CALL)

    def vmm_unmap(self, buf, offset, size):
        self._alive()
        a: SimReservation = buf.handle
        ms = self._covering(a, offset, size, "cuMemUnmap")
        self._refuse_held("cuMemUnmap, which waits for the device,")
        self._wait_device("cuMemUnmap, which waits for the device")  # work queued on the range finishes first
        for m in ms:
            a.data.mappings.remove(m)
            m.phys.mapped -= 1
            self._vmm_drop(m.phys)
        self._elapse(VMM_CALL)

    def vmm_release(self, handle):
        self._alive()
        phys = self._phys(handle, "cuMemRelease")
        phys.released = True
        self._vmm_drop(phys)
        self._elapse(VMM_CALL)

    def _vmm_drop(self, phys: PhysHandle) -> None:
        """Memory freed once released and unmapped everywhere (cuMemRelease's and cuMemUnmap's rule)."""
        if phys.released and not phys.mapped:
            phys.data.release()
            if not phys.device:
                self.device_used -= phys.size
            self.vmm_handles = {k: v for k, v in self.vmm_handles.items() if v is not phys}

    def vmm_free(self, buf):
        self._alive()
        a: SimReservation = buf.handle
        self.addresses.give(a.region, a.addr, a.size)
        a.freed = True
        self.live.discard(a)
        self._elapse(VMM_CALL)

    def vmm_check(self, buf, offset: int, nbytes: int, call: str, write: bool = False) -> None:
        """A copy or memset of a reservation's bytes: every byte mapped with access (write access to write), else
        the driver's CUDA_ERROR_INVALID_VALUE (H100: cuMemsetD8 before cuMemSetAccess)."""
        a = buf.handle
        if not isinstance(a, SimReservation) or nbytes <= 0:
            return
        ms = [m for m in a.data.mappings if m.offset < offset + nbytes and offset < m.end]
        covered = sum(min(offset + nbytes, m.end) - max(offset, m.offset) for m in ms)
        allowed = ("rw",) if write else ("rw", "read")
        if covered < nbytes or any(m.access not in allowed for m in ms):
            part = f"{buf.name}[{size_word(offset)}:+{size_word(nbytes)}]"
            raise ShellError(INVALID, f"{call}: {part} is not all mapped with "
                             f"{'read-write' if write else 'read'} access",
                             f"`vmm map` memory there and `vmm access {buf.name} rw` first")

    def vmm_regions(self, a: SimReservation, name: str, arrays: dict) -> list:
        """A kernel's view of a reservation: one region a mapping, its bytes one array a handle (shared by every
        mapping of it in this launch, so a write through one address reads back through the other)."""
        from ...simt.memory import Region

        regions = []
        for m in a.data.mappings:
            phys = m.phys

            def read(phys=phys):
                if id(phys) not in arrays:
                    arrays[id(phys)] = phys.data.read(0, phys.size)
                return arrays[id(phys)]
            regions.append(Region(name, a.addr + m.offset, phys.size, "device", m.access != "none",
                                  m.access == "read", read=read, owner=phys))
        return regions
