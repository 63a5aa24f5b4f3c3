"""Memory: allocations through the driver, registration, what the driver says of a pointer, host reads and
writes, managed prefetch and advice."""

from __future__ import annotations

import mmap
import resource
import time

from ...errors import ShellError, held_error
from ...model import syncrules as R
from ...model.machine import host_memory_total
from ..base import Allocation
from ..bindings import answer, call, cu, location
from ..refusals import refuse_register
from .common import ADVICE, CudaAlloc, _host_array


class Memory:
    """The GpuSide's memory (a mixin: its state is made in GpuSide.__init__)."""

    def pin_limit(self) -> tuple[int, str]:
        limit, why = host_memory_total() // 2, "half of MemTotal"
        soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
        if soft != resource.RLIM_INFINITY and soft < limit:
            limit, why = soft, "RLIMIT_MEMLOCK"
        return limit, why

    def alloc(self, kind, size, flags, ctx=None):
        import numpy  # noqa: F401 — loaded before the clock starts (0.3 s once on the H100 machine), not in its time

        where = self._ctx(ctx)
        t0 = time.perf_counter()
        a = CudaAlloc(kind, size, device=where.device, ctx=ctx)
        with self._in(where):
            return self._alloc_here(a, flags, t0)

    def _alloc_here(self, a: CudaAlloc, flags, t0: float):
        """The driver's allocation in the current context (under UVA any context frees it, as on the H100)."""
        import numpy

        kind, size = a.kind, a.size
        if kind == "pageable":  # anonymous pages: page-aligned, lazily backed, like a large malloc
            try:
                a.owner = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            except OSError as e:  # the host's refusal, not the driver's (the simulator names it the same)
                raise ShellError("HOST_OUT_OF_MEMORY", f"malloc: {size} bytes do not fit: {e.strerror}",
                                 "free something, or ask for less") from None
            a.array = numpy.frombuffer(a.owner, numpy.uint8)
        elif kind == "pinned":
            bits = ((cu.CU_MEMHOSTALLOC_PORTABLE if "portable" in flags else 0)
                    | (cu.CU_MEMHOSTALLOC_DEVICEMAP if "mapped" in flags else 0)
                    | (cu.CU_MEMHOSTALLOC_WRITECOMBINED if "writecombined" in flags else 0))
            a.owner = int(call("cuMemHostAlloc", size, bits))
            a.array = _host_array(a.owner, size)
        elif kind == "device":
            a.dptr = a.owner = int(call("cuMemAlloc", size))
        else:
            attach = (cu.CUmemAttach_flags.CU_MEM_ATTACH_HOST if "host" in flags
                      else cu.CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL)
            a.dptr = a.owner = int(call("cuMemAllocManaged", size, attach))
            a.array = _host_array(a.owner, size)
        t = self._host_timing(t0)
        host_ptr = a.array.ctypes.data if a.array is not None else None
        device_ptr = a.dptr
        if kind == "pinned":
            dp = self._host_device_ptr(host_ptr)
            device_ptr = a.dptr = dp if isinstance(dp, int) else None
        return Allocation(a, host_ptr, device_ptr), t

    @staticmethod
    def _host_device_ptr(ptr: int) -> int | str:
        """cuMemHostGetDevicePointer's answer: the address, or the driver's refusal by name."""
        try:
            return int(call("cuMemHostGetDevicePointer", ptr, 0))
        except ShellError as e:
            return e.code

    def free(self, buf):
        a: CudaAlloc = buf.handle
        if a.kind != "pageable":
            if self.held:
                raise held_error("cudaFree, which waits for the device,")
            # cudaFree synchronises the device anyway; the bindings let go of the GIL while it waits, so a host
            # callback still queued (it needs the GIL) runs
            with self._in(self._ctx(a.ctx)):
                call("cuCtxSynchronize")
        a.array = None
        if a.kind == "pageable":
            a.owner.close()
        elif a.kind == "pinned":
            call("cuMemFreeHost", a.owner)
        else:
            with self._in(self._ctx(a.ctx)):
                call("cuMemFree", a.owner)

    def alloc_async(self, size, stream, pool=None):
        """cuMemAllocAsync in the stream's context, from its GPU's default pool — or cuMemAllocFromPoolAsync from
        `pool` (pools.py): timed as queued work is (events around the call on `stream`); the pointer is the call's
        answer."""
        where = self._stream_ctx(stream)
        if pool is None:
            t = self._timed(stream, "cuMemAllocAsync", (size, stream), R.QUEUED)
        else:
            t = self._timed(stream, "cuMemAllocFromPoolAsync", (size, self._mem_pool(pool), stream), R.QUEUED)
        ptr = int(self.returned[1])
        return Allocation(CudaAlloc("device", size, owner=ptr, dptr=ptr, device=where.device, ctx=where.key),
                          None, ptr), t

    def free_async(self, buf, stream):
        """cuMemFreeAsync: the memory goes back to its pool when the stream reaches it (memory from cuMemAlloc too:
        the driver frees it then). Host memory is not its to free: the driver's refusal, as the simulator's."""
        a: CudaAlloc = buf.handle
        if a.kind != "device":
            raise ShellError("CUDA_ERROR_INVALID_VALUE", f"{buf.name} is {a.kind} memory: cudaFreeAsync frees device "
                             "memory", "free it without `async`")
        return self._timed(stream, "cuMemFreeAsync", (a.owner, stream), R.QUEUED)

    def register(self, buf, flags):
        a: CudaAlloc = buf.handle
        refuse_register(buf.name, a.kind, False)  # a second registration: the driver's answer
        bits = ((cu.CU_MEMHOSTREGISTER_PORTABLE if "portable" in flags else 0)
                | (cu.CU_MEMHOSTREGISTER_DEVICEMAP if "mapped" in flags else 0)
                | (cu.CU_MEMHOSTREGISTER_READ_ONLY if "readonly" in flags else 0))
        call("cuMemHostRegister", buf.host_ptr, a.size, bits,
             hint="a range can be registered once; `unregister` it first")
        dp = self._host_device_ptr(buf.host_ptr)
        a.dptr = dp if isinstance(dp, int) else None
        a.ctx = self.cur.key
        return a.dptr

    def unregister(self, buf):
        if self.held:
            raise held_error("cudaHostUnregister, which waits for the device,")
        ptr = buf.host_ptr if buf.host_ptr is not None else buf.device_ptr
        call("cuMemHostUnregister", ptr, hint="only ranges pinned by `register` can be unregistered")
        buf.handle.dptr = None

    def pointer_info(self, buf):
        a: CudaAlloc = buf.handle
        ptr = buf.host_ptr if buf.host_ptr is not None else buf.device_ptr
        attr = cu.CUpointer_attribute
        host = buf.host_ptr is not None
        info = {"device": a.device,
                "memory_type": answer("cuPointerGetAttribute", attr.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr,
                                      convert=lambda v: cu.CUmemorytype(v).name.removeprefix("CU_MEMORYTYPE_").lower()),
                "is_managed": answer("cuPointerGetAttribute", attr.CU_POINTER_ATTRIBUTE_IS_MANAGED, ptr, convert=bool),
                "host_flags": answer("cuMemHostGetFlags", ptr) if host else "CUDA_ERROR_INVALID_VALUE",
                "host_device_ptr": self._host_device_ptr(ptr) if host else "CUDA_ERROR_INVALID_VALUE"}
        if a.kind == "managed":
            info.update(self._range_info(a))
        return info

    def _range_info(self, a: CudaAlloc) -> dict:
        def where(v) -> str:
            v = int(v)
            return "host" if v == cu.CU_DEVICE_CPU else "none" if v == -2 else f"device {v}"

        attr = cu.CUmem_range_attribute
        return {"read_mostly": answer("cuMemRangeGetAttribute", 4, attr.CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, a.dptr,
                                      a.size, convert=bool),
                "preferred_location": answer("cuMemRangeGetAttribute", 4,
                                             attr.CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, a.dptr, a.size,
                                             convert=where),
                "last_prefetch_location": answer("cuMemRangeGetAttribute", 4,
                                                 attr.CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, a.dptr, a.size,
                                                 convert=where)}

    def read(self, buf, offset, nbytes):
        a: CudaAlloc = buf.handle
        if a.array is not None:
            return a.array[offset: offset + nbytes].copy()
        if self.held:
            raise held_error("reading device memory (a synchronous copy)")
        import numpy as np

        out = np.empty(nbytes, np.uint8)
        with self._in(self._ctx(a.ctx)):
            call("cuMemcpyDtoH", out.ctypes.data, a.dptr + offset, nbytes)
        return out

    def write(self, buf, offset, data):
        buf.handle.array[offset: offset + data.size] = data

    def _prefetch_call(self, buf, where, stream):
        return buf.device_ptr, buf.size, location(where, self._stream_ctx(stream).device), 0, stream

    def prefetch(self, buf, where, stream):
        """Timed as queued work: whether the call held the host (a first prefetch to the device does, on the H100) is
        what the events around it observe, and its host time says."""
        return self._timed(stream, "cuMemPrefetchAsync", self._prefetch_call(buf, where, stream),
                           R.prefetch_rule(where, False))

    def advise(self, buf, advice, where):
        call("cuMemAdvise", buf.device_ptr, buf.size, ADVICE[advice], location(where, self.cur.device))

    def mem_info(self) -> tuple[int, int]:
        return call("cuMemGetInfo")
