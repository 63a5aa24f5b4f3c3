"""Pitched memory and 2-D/3-D copies through the driver: cuMemAllocPitch (whose pitch is the answer the shell shows)
and cuMemcpy2D[Async] / cuMemcpy3D[Async] with each end's memory type, timed as the other copies are."""

from __future__ import annotations

import time

from ...errors import ShellError
from ...model import syncrules as R
from ..base import Allocation
from ..bindings import call, cu
from .common import CudaAlloc

# cuMemAllocPitch's ElementSizeBytes: the largest a kernel reads in one access (4, 8 or 16), as cudaMallocPitch asks
ELEMENT_BYTES = 16
MEMORY_TYPE = {"device": cu.CUmemorytype.CU_MEMORYTYPE_DEVICE, "managed": cu.CUmemorytype.CU_MEMORYTYPE_UNIFIED}
HOST = cu.CUmemorytype.CU_MEMORYTYPE_HOST  # pageable or pinned (registered too): the host pointer


def _side(m, end: str, buf, offset: int, pitch: int) -> None:
    """One end of a CUDA_MEMCPY2D/3D: its memory type named, as cudaMemcpy2D's kind would (the host pointer for
    host memory, the device address for device memory, the unified address for managed memory)."""
    kind = MEMORY_TYPE.get(buf.kind, HOST)
    setattr(m, f"{end}MemoryType", kind)
    if kind is HOST:
        setattr(m, f"{end}Host", buf.host_ptr + offset)
    else:
        setattr(m, f"{end}Device", buf.device_ptr + offset)
    setattr(m, f"{end}Pitch", pitch)


class Shapes:
    """The GpuSide's pitched memory (a mixin: its state is made in GpuSide.__init__)."""

    def alloc_pitched(self, width, height, depth, ctx=None):
        """cuMemAllocPitch for height × depth rows (cudaMalloc3D's layout: a slice is `height` rows)."""
        if min(width, height, depth) <= 0:
            raise ShellError("CUDA_ERROR_INVALID_VALUE", f"a pitched allocation of {width}x{height}x{depth} bytes "
                             "has nothing in it", "give a width, height and depth above 0")
        where = self._ctx(ctx)
        with self._in(where):
            t0 = time.perf_counter()
            ptr, pitch = call("cuMemAllocPitch", width, height * depth, ELEMENT_BYTES)
            t = self._host_timing(t0)
        ptr, pitch = int(ptr), int(pitch)
        a = CudaAlloc("device", pitch * height * depth, owner=ptr, dptr=ptr, device=where.device, ctx=ctx)
        return Allocation(a, None, ptr, pitch), t

    def memcpy_shaped(self, src, src_off, src_pitch, src_rows, dst, dst_off, dst_pitch, dst_rows, width, height,
                      depth, stream, async_):
        """cuMemcpy2D[Async] for one slice, cuMemcpy3D[Async] for several, on the stream's GPU."""
        rule = R.memcpy_rule(self._cls(src), self._cls(dst), async_, width * height * depth)
        if depth == 1:
            m = cu.CUDA_MEMCPY2D()
        else:
            m = cu.CUDA_MEMCPY3D()
            m.srcHeight, m.dstHeight, m.Depth = src_rows, dst_rows, depth
        _side(m, "src", src, src_off, src_pitch)
        _side(m, "dst", dst, dst_off, dst_pitch)
        m.WidthInBytes, m.Height = width, height
        name = "cuMemcpy2D" if depth == 1 else "cuMemcpy3D"
        args = (m, stream) if async_ else (m,)
        name += "Async" if async_ else ""
        if width * height * depth == 0:
            return self._untimed(name, args, rule)
        return self._timed(stream if async_ else None, name, args, rule, width * height * depth)
