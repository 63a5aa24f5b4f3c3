"""Contexts and GPUs: making, using and destroying contexts, which address a context uses for a buffer, the
simulated GPUs and peer access between them."""

from __future__ import annotations

from ...errors import ShellError
from ..base import HOST_PORTABLE, Reach
from ..refusals import across_gpus
from .common import CONTEXT_CREATE, INVALID, INVALID_DEVICE, SimCtx, SimStream


class Contexts:
    """The simulator's contexts (a mixin: its state is made in SimBackend._fresh)."""

    def _ctx_of(self, stream) -> object:
        """The context work on `stream` runs in (the default stream's: the current one)."""
        return stream.ctx if stream is not None else self.cur

    def devices(self):
        p = self.profile
        bus = p.pci_bus_id.rsplit(":", 2)
        devices = [{"ordinal": i, "name": p.name, "pci_bus_id": f"{bus[0]}:{int(bus[1], 16) + i:02x}:{bus[2]}",
                    "numa_node": 0, "total_mem": p.device_memory, "compute_capability": p.compute_capability,
                    "async_engine_count": p.async_engine_count, "pageable_memory_access": p.pageable_memory_access}
                   for i in range(p.gpus)]
        peers = [{"src": a, "dst": b, "access": p.peer_access, "link": p.peer_link, "atomics": p.peer_access}
                 for a in range(p.gpus) for b in range(p.gpus) if a != b]
        return {"devices": devices, "peers": peers, "link_source": "the simulator's profile", "memory_nodes": [0]}

    def peer_access(self, src, dst, enable):
        self._alive()
        p = self.profile
        if not (0 <= src < p.gpus and 0 <= dst < p.gpus) or src == dst:
            raise ShellError(INVALID_DEVICE, f"no pair of GPUs {src} → {dst} in a profile of {p.gpus}")
        if not p.peer_access:
            raise ShellError("CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", f"GPU {src} cannot reach GPU {dst} directly")
        if enable and (src, dst) in self.peers:
            raise ShellError("CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", f"GPU {src} can already reach GPU {dst}")
        if not enable and (src, dst) not in self.peers:
            raise ShellError("CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", f"GPU {src} was not given access to GPU {dst}")
        (self.peers.add if enable else self.peers.discard)((src, dst))
        return self._host_call(20e-6)

    def _context(self, handle) -> SimCtx:
        try:
            return self.ctxs[handle]
        except KeyError:
            raise ShellError("CUDA_ERROR_INVALID_CONTEXT", "that context was destroyed") from None

    def context_create(self, device):
        self._alive()
        if not 0 <= device < self.profile.gpus:
            raise ShellError(INVALID_DEVICE, f"there is no GPU {device}: the profile has {self.profile.gpus}",
                             "`devices` lists them; `--sim-profile two-h200` has two")
        self.next_ctx += 1
        self.ctxs[self.next_ctx] = SimCtx(device, False, SimStream(ctx=self.next_ctx))
        return self.next_ctx, self._host_call(CONTEXT_CREATE)

    def context_primary(self, device):
        if device == 0:
            return None
        for h, c in self.ctxs.items():
            if c.primary and c.device == device:
                return h
        handle, _ = self.context_create(device)
        self.ctxs[handle].primary = True
        return handle

    def context_use(self, handle):
        self._context(handle)
        self.cur = handle
        return self._host_call(self.profile.async_call)

    def context_destroy(self, handle):
        if self._context(handle).primary:
            raise ShellError("CUDA_ERROR_INVALID_CONTEXT", "a primary context is released when the session closes")
        self._refuse_held("cuCtxDestroy, which waits for the context's work,")
        self._wait_device("cuCtxDestroy")
        self._unload_variables(handle)
        del self.ctxs[handle]
        if self.cur == handle:
            self.cur = None

    def reach(self, buf, ctx):
        """Which address a kernel in context `ctx` uses for `buf`, or the error: under UVA every context reaches
        pinned memory and its GPU's memory; without UVA, pinned memory made without `portable` is mapped only in
        the context that made it, and device memory belongs to its context alone. Another GPU's memory needs peer
        access (given to primary contexts by `peer enable`)."""
        a, c = buf.handle, self._context(ctx)
        uva = self.profile.unified_addressing
        if a.kind == "device":
            if a.device != c.device:
                return across_gpus(buf.device_ptr, a.device, c.device, c.primary, self.peers)
            return Reach(buf.device_ptr) if uva or a.ctx == ctx else Reach.refused("OTHER_CONTEXT")
        if a.kind == "managed":
            return Reach(buf.device_ptr)
        if buf.device_ptr is None:
            return Reach.refused(INVALID)
        return Reach(buf.device_ptr) if uva or a.host_bits & HOST_PORTABLE or a.ctx == ctx else Reach.refused(INVALID)
