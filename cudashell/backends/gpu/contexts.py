"""Contexts and GPUs: the current context, making, using and destroying contexts, which address a context
uses for a buffer, peer access between GPUs, the devices the driver sees."""

from __future__ import annotations

import time
from contextlib import contextmanager

from ...errors import ShellError, held_error
from .. import topology
from ..base import Reach
from ..bindings import call, cu
from ..refusals import across_gpus
from .common import Ctx


class Contexts:
    """The GpuSide's contexts (a mixin: its state is made in GpuSide.__init__)."""

    def devices(self) -> dict:
        found = topology.devices()
        pairs, source = topology.peers(len(found))
        from ...model.machine import memory_nodes

        return {"devices": found, "peers": pairs, "link_source": source, "memory_nodes": memory_nodes()}

    def _start_clock(self, ctx: Ctx) -> None:
        """A context's time zero: an event recorded and reached now, placed on the trace's clock."""
        ctx.origin = int(call("cuEventCreate", 0))
        ctx.events.append(ctx.origin)
        call("cuEventRecord", ctx.origin, None)
        call("cuEventSynchronize", ctx.origin)
        ctx.origin_at = self._stamp() if ctx is not self.home else 0.0

    def _ctx(self, key) -> Ctx:
        try:
            return self.ctxs[key]
        except KeyError:
            raise ShellError("CUDA_ERROR_INVALID_CONTEXT", "that context was destroyed") from None

    def _stream_ctx(self, stream) -> Ctx:
        """The context work on `stream` runs in (the default stream's: the current one)."""
        return self.stream_ctx.get(stream, self.cur) if stream else self.cur

    @contextmanager
    def _in(self, ctx: Ctx):
        """`ctx` current for a call; the one before current again after."""
        if ctx is self.cur:
            yield
            return
        before = self.cur
        call("cuCtxSetCurrent", ctx.handle)
        self.cur = ctx
        try:
            yield
        finally:
            call("cuCtxSetCurrent", before.handle)
            self.cur = before

    def _adopt(self, key: int, handle: int, device: int, primary: bool) -> int:
        ctx = Ctx(key, handle, device, primary)
        self.ctxs[key] = ctx
        with self._in(ctx):
            self._start_clock(ctx)
        return key

    def _check_device(self, device: int) -> None:
        count = topology.device_count()
        if not 0 <= device < count:
            raise ShellError("CUDA_ERROR_INVALID_DEVICE", f"there is no GPU {device}: the driver sees {count}",
                             "`devices` lists them")

    def context_create(self, device):
        self._check_device(device)
        t0 = time.perf_counter()
        handle = int(call("cuCtxCreate", None, 0, device))  # made current, on top of ours …
        call("cuCtxPopCurrent")  # … and taken off again: ours stays current
        took = self._host_timing(t0)
        return self._adopt(handle, handle, device, False), took

    def context_primary(self, device):
        if device not in self.primaries:
            self._check_device(device)
            handle = int(call("cuDevicePrimaryCtxRetain", device))
            self.primaries[device] = self._adopt(handle, handle, device, True)
        return self.primaries[device]

    def _primary(self, device: int) -> Ctx:
        return self.ctxs[self.context_primary(device)]

    def context_use(self, handle):
        t0 = time.perf_counter()
        ctx = self._ctx(handle)
        call("cuCtxSetCurrent", ctx.handle)
        self.cur = ctx
        return self._host_timing(t0)

    def context_destroy(self, handle):
        key, ctx = handle, self._ctx(handle)
        if ctx.primary:  # ours, or another GPU's: retained until the side closes (another session may use it)
            raise ShellError("CUDA_ERROR_INVALID_CONTEXT", "a primary context is released when the session closes")
        if self.held:
            raise held_error("cuCtxDestroy, which waits for the context's work,")
        with self._in(ctx):
            call("cuCtxSynchronize")
            for ev in ctx.events:
                cu.cuEventDestroy(ev)
            for mod in ctx.modules:
                cu.cuModuleUnload(mod)
        if self.cur is ctx:
            self.context_use(None)
        call("cuCtxDestroy", ctx.handle)
        del self.ctxs[key]

    def reach(self, buf, ctx):
        ctx, a = self._ctx(ctx), buf.handle
        if a.kind == "device":
            if a.device != ctx.device:
                return across_gpus(buf.device_ptr, a.device, ctx.device, ctx.primary, self.peers)
            return Reach(buf.device_ptr)  # under UVA another context on the GPU uses it too (a kernel did, on the H100)
        if a.kind == "managed":
            return Reach(buf.device_ptr)
        with self._in(ctx):  # what the driver says in that context
            ptr = self._host_device_ptr(buf.host_ptr)
        return Reach(ptr) if isinstance(ptr, int) else Reach.refused(ptr)

    def peer_access(self, src, dst, enable):
        t0 = time.perf_counter()
        topology.check_pair(src, dst)
        other = self._primary(dst)
        with self._in(self._primary(src)):
            if enable:
                call("cuCtxEnablePeerAccess", other.handle, 0)
            else:
                call("cuCtxDisablePeerAccess", other.handle)
        (self.peers.add if enable else self.peers.discard)((src, dst))
        return self._host_timing(t0)
