"""Virtual memory management through the driver (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess,
cuMemUnmap, cuMemRelease, cuMemAddressFree): a reservation is a device allocation at its reserved address, which
copies and kernels use as any other; what is not mapped and accessible the driver itself refuses."""

from __future__ import annotations

import time

from ...errors import held_error
from ..base import Allocation
from ..bindings import call, cu
from .common import CudaAlloc

ACCESS = {"rw": "CU_MEM_ACCESS_FLAGS_PROT_READWRITE", "read": "CU_MEM_ACCESS_FLAGS_PROT_READ",
          "none": "CU_MEM_ACCESS_FLAGS_PROT_NONE"}


def _prop(device: int):
    """Pinned device memory on one GPU: what `vmm create` makes and `vmm granularity` asks about."""
    prop = cu.CUmemAllocationProp()
    prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = device
    return prop


class Vmm:
    """The GpuSide's virtual memory management (a mixin: `vmm_handles` is made in GpuSide.__init__)."""

    def vmm_granularity(self, device):
        self._check_device(device)  # the same refusal as the simulator's, before the driver sees the number
        flags = cu.CUmemAllocationGranularity_flags
        prop = _prop(device)
        return (int(call("cuMemGetAllocationGranularity", prop, flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM)),
                int(call("cuMemGetAllocationGranularity", prop, flags.CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)))

    def vmm_reserve(self, size, ctx=None):
        where = self._ctx(ctx)
        t0 = time.perf_counter()
        with self._in(where):
            ptr = int(call("cuMemAddressReserve", size, 0, 0, 0))
        return (Allocation(CudaAlloc("device", size, owner=ptr, dptr=ptr, device=where.device, ctx=ctx), None, ptr),
                self._host_timing(t0))

    def vmm_create(self, size, device):
        self._check_device(device)
        handle = call("cuMemCreate", size, _prop(device), 0)
        self.vmm_next += 1
        self.vmm_handles[self.vmm_next] = (handle, size)
        return self.vmm_next

    def vmm_map(self, buf, offset, handle):
        h, size = self.vmm_handles[handle]
        call("cuMemMap", buf.device_ptr + offset, size, 0, h, 0)

    def vmm_access(self, buf, offset, size, mode, device):
        self._check_device(device)
        desc = cu.CUmemAccessDesc()
        desc.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        desc.location.id = device
        desc.flags = getattr(cu.CUmemAccess_flags, ACCESS[mode])
        call("cuMemSetAccess", buf.device_ptr + offset, size, [desc], 1)

    def vmm_unmap(self, buf, offset, size):
        if self.held:  # as the simulator: work queued on the range would run after its memory went
            raise held_error("cuMemUnmap, which waits for the device,")
        with self._in(self._ctx(buf.handle.ctx)):
            call("cuCtxSynchronize")
        call("cuMemUnmap", buf.device_ptr + offset, size)

    def vmm_release(self, handle):
        h, _size = self.vmm_handles.pop(handle)
        call("cuMemRelease", h)

    def vmm_free(self, buf):
        call("cuMemAddressFree", buf.device_ptr, buf.size)
