"""The stream-ordered allocator's pools through the driver: each GPU's default pool (cuDeviceGetDefaultMemPool),
pools of our own (cuMemPoolCreate), their attributes, trimming and destruction. The shell holds a pool as an int;
the bindings' CUmemoryPool objects stay here, by that int."""

from __future__ import annotations

from ...errors import ShellError
from ..bindings import call, cu, location

ATTR = cu.CUmemPool_attribute
# the attribute behind each key of pool_attributes, and whether the driver holds it as a cuuint64_t (else an int)
ATTRIBUTES = {"threshold": (ATTR.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, True),
              "reserved": (ATTR.CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, True),
              "reserved_high": (ATTR.CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, True),
              "used": (ATTR.CU_MEMPOOL_ATTR_USED_MEM_CURRENT, True),
              "used_high": (ATTR.CU_MEMPOOL_ATTR_USED_MEM_HIGH, True),
              "follow_events": (ATTR.CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, False),
              "opportunistic": (ATTR.CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, False),
              "internal": (ATTR.CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, False)}
SETTABLE = {"threshold": "threshold", "follow-events": "follow_events", "opportunistic": "opportunistic",
            "internal": "internal"}


class Pools:
    """The GpuSide's pools (a mixin: its state, `mem_pools`, int → CUmemoryPool, is made in GpuSide.__init__)."""

    def _keep_pool(self, pool) -> int:
        handle = int(pool)
        self.mem_pools[handle] = pool
        return handle

    def _mem_pool(self, handle: int):
        pool = self.mem_pools.get(handle)
        if pool is None:
            raise ShellError("CUDA_ERROR_INVALID_VALUE", "no such memory pool (it was destroyed)", "`pool` lists them")
        return pool

    def pool_default(self, device):
        return self._keep_pool(call("cuDeviceGetDefaultMemPool", int(call("cuDeviceGet", device))))

    def pool_create(self, device):
        props = cu.CUmemPoolProps()
        props.allocType = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        props.handleTypes = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_NONE
        props.location = location("device", device)
        return self._keep_pool(call("cuMemPoolCreate", props))

    def pool_destroy(self, pool):
        call("cuMemPoolDestroy", self._mem_pool(pool))
        del self.mem_pools[pool]

    def pool_set(self, pool, attribute, value):
        if attribute not in SETTABLE:
            raise ShellError("CUDA_ERROR_INVALID_VALUE", f"no pool attribute {attribute}",
                             f"{', '.join(SETTABLE)}")
        attr, wide = ATTRIBUTES[SETTABLE[attribute]]
        call("cuMemPoolSetAttribute", self._mem_pool(pool), attr, cu.cuuint64_t(value) if wide else int(value))

    def pool_attributes(self, pool):
        p = self._mem_pool(pool)
        return {key: int(call("cuMemPoolGetAttribute", p, attr)) if wide
                else bool(int(call("cuMemPoolGetAttribute", p, attr)))
                for key, (attr, wide) in ATTRIBUTES.items()}

    def pool_trim(self, pool, keep):
        call("cuMemPoolTrimTo", self._mem_pool(pool), keep)
