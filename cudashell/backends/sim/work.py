"""Work: copies (the path each takes, staged or not), memsets, built-in and user kernels (run by the SIMT
interpreter, `simt/`), host functions."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...errors import ShellError
from ...model import syncrules as R
from ...model.kernels import ModuleSymbol
from ...model.launchdims import check_launch, computed
from ..base import HOST_PORTABLE, HOST_WRITECOMBINED, PLAIN_LAUNCH
from ..kernel_report import Access, KernelReport, MemoryTraffic
from ..sparse import SparseBytes
from .common import (
    CALLBACK_COST,
    ILLEGAL,
    INVALID,
    MAX_THREADS,
    REFUSED_AT_LAUNCH,
    STEP,
    SimAlloc,
    secs,
)
from .vmm import SimReservation


# cudaMemcpyBatchAsync on the H100 (CUDA 13, benchmarks/ref_batch.cu, median of 15, twice): 64 copies of 4 KiB pinned
# → device in one call held the host 58 µs (a loop of 64 cudaMemcpyAsync: 150 µs), and its copies took 65 µs between
# events around them (the loop: 165 µs, paced by the host): one start (the profile's copy latency) for the batch, then
# about 0.94 µs a copy beyond its bytes' time (a 4 KiB copy's on the path's curve).
BATCH_HOST_PER_COPY = 0.9e-6
BATCH_ENGINE_PER_COPY = 0.94e-6


class Work:
    """The simulator's work (a mixin: its state is made in SimBackend._fresh)."""

    def _refuse_readonly(self, buf, what: str) -> None:
        if buf.handle.readonly:
            raise ShellError(INVALID, f"{what} into {buf.name}, which is registered read-only",
                             "the GPU may only read a `readonly` registration")

    def _seen(self, host: SimAlloc, other: SimAlloc, ctx) -> str:
        """How a copy sees host memory: without UVA, pinned memory made without `portable` is pinned only for the
        context that made it — another (the one owning the device memory on the other side, or the copy's own)
        copies it as pageable (staged). Under UVA every pinned allocation is portable."""
        viewer = other.ctx if other.kind == "device" else ctx
        if (host.cls == "pinned" and viewer != host.ctx and not self.profile.unified_addressing
                and not host.host_bits & HOST_PORTABLE):
            return "pageable"
        return host.cls

    def _path(self, src: SimAlloc, dst: SimAlloc, ctx) -> tuple[str, str | None]:
        """The calibrated path a copy takes and the engine kind it uses."""
        s_dev, d_dev = src.kind in ("device", "managed"), dst.kind in ("device", "managed")
        if s_dev and d_dev:
            return "d2d", "compute"
        if not s_dev and not d_dev:
            return "h2h", None
        host = dst if s_dev else src
        cls = "pageable" if self._seen(host, src if s_dev else dst, ctx) == "pageable" else \
            "writecombined" if host.host_bits & HOST_WRITECOMBINED else "pinned"
        return f"{cls} {'d2h' if s_dev else 'h2d'}", "d2h" if s_dev else "h2d"

    def memcpy(self, src, src_off, dst, dst_off, nbytes, stream, async_):
        self._alive()
        self._refuse_readonly(dst, "a copy")
        self.vmm_check(src, src_off, nbytes, "cuMemcpy")
        self.vmm_check(dst, dst_off, nbytes, "cuMemcpy", write=True)
        s, d = src.handle, dst.handle
        ctx = self._ctx_of(stream)
        rule = R.memcpy_rule(self._seen(s, d, ctx), self._seen(d, s, ctx), async_, nbytes)
        if nbytes == 0:
            return self._host_call(self.profile.async_call, rule)
        path, kind = self._path(s, d, ctx)
        stage = 0.0
        here = self._context(ctx).device
        if any(x.kind == "device" and x.device != here for x in (s, d)):
            # another GPU's memory: timed whole, the host waiting for both GPUs (as on a GPU)
            self._refuse_held("a copy to or from another GPU (timed to its end)")
            rule = R.BETWEEN_GPUS
        if path == "d2d" and s.device != d.device and "managed" not in (s.kind, d.kind):  # between GPUs: over the link, or staged through the host
            direct = (s.device, d.device) in self.peers or (d.device, s.device) in self.peers
            duration = self.profile.peer_latency + nbytes / (self.profile.peer_rate if direct
                                                             else self.profile.peer_staged_rate)
            kind = "d2h"
        elif rule.stages:  # the host copies into staging memory, then the DMA runs at the pinned rate
            duration = self.profile.copy_seconds("pinned h2d", nbytes)
            stage = max(self.profile.copy_seconds(path, nbytes) - duration,
                        self.profile.staging_latency + nbytes / self.profile.staging_rate)
        else:
            duration = self.profile.copy_seconds(path, nbytes)

        def effect(snapshot: bool):
            if snapshot:  # the bytes as they are now, at issue
                data = s.data.snapshot(src_off, nbytes)
                return lambda: d.data.land(data, dst_off)
            return lambda: d.data.copy_from(s.data, src_off, dst_off, nbytes)

        if rule.stages:  # the bytes staged now are written whole
            if s.data.touched(src_off, nbytes):
                d.data.reserve(dst_off, nbytes)
        else:
            d.data.reserve_copy(s.data, src_off, dst_off, nbytes)
        return self._submit(stream, duration, self.engine(kind), rule, effect, stage=stage)

    def memcpy_batch(self, copies, stream, order):
        """The copies in stream order as one piece of work on the first copy's engine (one start, then each copy's
        own cost: BATCH_ENGINE_PER_COPY), after one call whose host cost grows with the copies
        (BATCH_HOST_PER_COPY); what the driver refuses, refused first, nothing queued."""
        self._alive()
        if stream is None:
            raise ShellError(INVALID, "cudaMemcpyBatchAsync refuses the legacy default stream",
                             "create a stream (`stream create`) and add `stream 1`")
        ctx = self._ctx_of(stream)
        rules, moves, duration, stage = [], [], 0.0, 0.0
        for src, src_off, dst, dst_off, nbytes in copies:
            self._refuse_readonly(dst, "a copy")
            if nbytes == 0:
                raise ShellError(INVALID, "a copy of 0 bytes in a batch: cuMemcpyBatchAsync refuses it",
                                 "give every copy a size, or leave it out")
            s, d = src.handle, dst.handle
            classes = (self._seen(s, d, ctx), self._seen(d, s, ctx), nbytes)
            path, kind = self._path(s, d, ctx)
            if R.batch_copy_rule(*classes[:2], order, nbytes).stages:  # staged by the host, moved at the pinned rate
                stage += self.profile.staging_latency + nbytes / self.profile.staging_rate
                path = "pinned h2d"
            duration += BATCH_ENGINE_PER_COPY + max(0.0, self.profile.copy_seconds(path, nbytes)
                                                    - self.profile.copy_seconds(path, 4096))
            rules.append(classes)
            moves.append((s, src_off, d, dst_off, nbytes, kind))
        rule = R.batch_rule(rules, order)
        duration += self.profile.copy_latency  # one start for the batch, not one a copy

        def effect(snapshot: bool):
            taken = [(d, do, s.data.snapshot(so, n)) for s, so, d, do, n, _ in moves] if snapshot else []  # as now

            def land():
                if snapshot:
                    for d, do, b in taken:
                        d.data.land(b, do)
                else:
                    for s, so, d, do, n, _ in moves:
                        d.data.copy_from(s.data, so, do, n)
            return land

        for s, so, d, do, n, _ in moves:
            d.data.reserve_copy(s.data, so, do, n)
        before = self.now
        t = self._submit(stream, duration, self.engine(moves[0][5]), rule, effect, stage=stage)
        self._elapse(BATCH_HOST_PER_COPY * len(copies))  # the copies start while the call goes on
        return replace(t, host_seconds=secs(self.now - before), issued=secs(before))

    def memset(self, buf, offset, value, nbytes, stream, async_):
        self._alive()
        self._refuse_readonly(buf, "a memset")
        self.vmm_check(buf, offset, nbytes, "cuMemsetD8", write=True)
        a = buf.handle
        if buf.device_ptr is None:  # `unchecked`: the driver does not know the pointer
            raise ShellError(INVALID, f"{buf.name} is not memory the GPU can reach",
                             "memset needs device, managed or pinned memory")
        rule = R.memset_rule(a.cls, async_, nbytes)
        if nbytes == 0:
            return self._host_call(self.profile.async_call, rule)
        if value:
            a.data.reserve(offset, nbytes)
        return self._submit(stream, self.profile.copy_latency + nbytes / self.profile.memset, "compute", rule,
                            lambda snapshot: lambda: a.data.fill(offset, value, nbytes))

    def launch(self, kernel, args, count, grid, block, shared, stream, options=PLAIN_LAUNCH):
        self._alive()
        if not kernel.builtin:
            return self._launch_user(kernel, args, grid, block, shared, stream, options.show_access)
        p = self.profile
        check_launch(grid, block, shared)  # what cuLaunchKernel refuses on the H100, before anything changes
        named = dict(zip((q.name for q in kernel.params), args))
        ctx = self._ctx_of(stream)
        here = self._context(ctx).device
        faulty = [named[q.name].name for q in kernel.params if q.is_buffer and (
            (q.writes and named[q.name].buf.handle.readonly)
            or (named[q.name].buf.device_ptr is None and not p.pageable_memory_access)
            or (named[q.name].buf.device_ptr is not None and self.reach(named[q.name].buf, ctx).refusal))]
        if kernel.runs_for is not None:  # a kernel that only takes time (spin), after what any launch takes
            return self._submit(stream, p.launch_latency + kernel.runs_for(named), "compute", R.QUEUED)
        n = computed(count, grid, block)  # one element a thread of the whole grid
        nbytes = n * 4
        bufs = {q.name: named[q.name] for q in kernel.params if q.is_buffer}
        scalars = {q.name: named[q.name] for q in kernel.params if not q.is_buffer}
        outputs = [q.name for q in kernel.params if q.writes]
        for name in outputs:  # the bytes the kernel will write must fit before anything changes
            bufs[name].buf.handle.data.reserve(bufs[name].offset, nbytes)

        def effect(snapshot):
            def run():
                for pos in range(0, nbytes, STEP):  # in pieces: a 16 GiB launch must not need 48 GiB of RAM beside it
                    size = min(STEP, nbytes - pos)
                    arrays = {k: r.buf.handle.data.read(r.offset + pos, size).view(np.float32)
                              for k, r in bufs.items()}
                    with np.errstate(over="ignore", invalid="ignore"):  # the GPU gives inf/nan silently too
                        for name, values in kernel.sim(arrays, scalars).items():
                            r = bufs[name]
                            r.buf.handle.data.write(r.offset + pos, values.astype(np.float32))
            return run

        moved = sum(nbytes * (2 if q.kind == "inout" else 1) /
                    (p.peer_rate if bufs[q.name].buf.kind == "device" and bufs[q.name].buf.handle.device != here
                     # another GPU's memory, over the link
                     else p.kernel_device_read if bufs[q.name].buf.kind in ("device", "managed")
                     else p.kernel_zero_copy_read)
                    for q in kernel.params if q.is_buffer)
        return self._submit(stream, p.launch_latency + moved, "compute", R.QUEUED, None if faulty else effect,
                            fault=ILLEGAL if faulty else None)

    def load_kernels(self, source, path=None, root=None):
        self._refuse_held("loading a module, which may wait for the device,")
        from ...simt import compile_source

        kernels = compile_source(source, path, root)
        program = kernels[0].handle[0]
        return kernels, [self._symbol(program, decl) for decl in program.symbols.values()]

    def _symbol(self, program, decl) -> ModuleSymbol:
        """One variable of a module being loaded: an allocation of its own in the current context, its bytes the
        source's initialiser (fresh each load, as the driver makes them), bound where the program's kernels find it."""
        kind = "managed" if decl.space == "managed" else "device"
        region = "alias" if kind == "device" and not self.profile.unified_addressing else kind  # as alloc's
        ctx = self.cur
        a = SimAlloc(kind, decl.type.size, SparseBytes(decl.type.size, self.budget), region=region,
                     device=self._context(ctx).device, ctx=ctx, space=decl.space, label=decl.name)
        a.addr = self._addresses(region, a.size, kind)
        if any(decl.initial):  # an untouched allocation reads as zeros
            a.data.write(0, np.frombuffer(decl.initial, np.uint8).copy())
        self.live.add(a)
        self._count(a, +1)
        program.addresses[f"@{decl.name}"] = a.addr
        return ModuleSymbol(decl.name, decl.space, a.size, a.addr, decl.dtype, a)

    def _unload_variables(self, ctx) -> None:
        """A context's modules go with it (cuCtxDestroy unloads them): so do their variables' allocations."""
        for a in [a for a in self.live if a.space and a.ctx == ctx]:
            self.addresses.give(a.region, a.addr, a.size)
            a.data.release()
            a.freed = True
            self.live.discard(a)
            self._count(a, -1)

    def _regions(self, ctx, named: dict) -> list:
        """Every live allocation as a kernel in context `ctx` sees it: the address it uses, whether it may touch
        it, and what its traffic costs (device memory, the bus for mapped host memory, the link for a peer's)."""
        from ...simt.memory import Region

        c = self._context(ctx)
        uva = self.profile.unified_addressing
        regions, arrays = [], {}
        for a in self.live:
            if isinstance(a, SimReservation):  # a mapping a region, its handle's bytes shared by its mappings
                regions.extend(self.vmm_regions(a, named.get(id(a), "a reservation"), arrays))
                continue
            if a.kind == "device":
                kind = "device" if a.device == c.device else "peer"
                ok = (uva or a.ctx == ctx) if kind == "device" else (c.primary and (c.device, a.device) in self.peers)
                addr = a.addr
                if kind == "device" and a.space == "constant":  # read through the constant cache: its own counts
                    kind = "constant"
            elif a.kind == "managed":
                kind, ok, addr = "managed", True, a.addr
            else:
                addr = a.dptr if a.dptr is not None else a.addr
                kind = "zero-copy"
                ok = a.dptr is not None and (uva or a.host_bits & HOST_PORTABLE or a.ctx == ctx) \
                    or (a.kind == "pageable" and not a.registered and self.profile.pageable_memory_access)
            regions.append(Region(named.get(id(a), a.label or f"a {a.kind} allocation"), addr, a.size, kind, ok,
                                  a.readonly or a.space == "constant",
                                  read=lambda a=a: a.data.read(0, a.size), owner=a))
        return regions

    def _run_user(self, kernel, values, grid, block, shared, ctx, named, trace=False):
        """Run a user kernel over the memory as it is now: (report, written regions) or the fault."""
        from ...simt.launch import Report, run
        from ...simt.localmem import blocks_at_once
        from ...simt.memory import Fault

        program, fn = kernel.handle
        regions = self._regions(ctx, named)
        room = self.budget.limit - self.budget.used  # the lanes' local memory: what the budget has room for
        traced = Report() if trace else None  # show-access of a kernel that faults: the accesses before the fault
        try:
            report = run(program, fn, values, grid, block, shared, regions, trace=trace, report=traced,
                         max_blocks=blocks_at_once(program, fn, block, room))
        except Fault as f:
            f.access = traced.access if traced is not None else []
            return f, []
        return report, [r for r in regions if r.dirty]

    def _launch_user(self, kernel, args, grid, block, shared, stream, trace=False):
        """A user's CUDA C kernel: run now on the memory as the host sees it, to count its traffic and model
        its time; at its modeled end its writes land — or, if anything changed memory meanwhile, it runs again
        on what is there then (so the bytes are always what the stream order gives)."""
        from ...simt.launch import shared_layout
        from ...simt.localmem import refuse_over_budget

        p = self.profile
        program, fn = kernel.handle
        _layout, static, _total = shared_layout(program, fn, shared)
        check_launch(grid, block, shared, static_shared=static)
        refuse_over_budget(program, fn, block, self.budget.limit - self.budget.used)
        threads = grid[0] * grid[1] * grid[2] * block[0] * block[1] * block[2]
        if threads > MAX_THREADS:
            raise ShellError("NOT_SUPPORTED_ON_SIM", f"{threads} threads in one launch: the simulator runs up to 2^28",
                             "launch fewer blocks (a grid-stride loop covers the same elements)")
        ctx = self._ctx_of(stream)
        values, named = [], {}
        for q, v in zip(kernel.params, args):
            if q.is_buffer:
                buf = v.buf
                base = buf.device_ptr if buf.device_ptr is not None else buf.host_ptr  # `unchecked`: as C passes it
                values.append(base + v.offset)
                named[id(buf.handle)] = buf.name
            else:
                values.append(v)
        version = self.version
        first, written = self._run_user(kernel, values, grid, block, shared, ctx, named, trace)
        if isinstance(first, Exception) and first.code in REFUSED_AT_LAUNCH:  # nothing is queued: the context lives
            raise ShellError(first.code, first.message, REFUSED_AT_LAUNCH[first.code])
        for r in written:
            r.owner.data.reserve(0, r.size)

        def effect(snapshot):
            def land():
                if self.version == version + 1:  # nothing but this kernel's own completion since its launch
                    report, regions = first, written
                else:
                    report, regions = self._run_user(kernel, values, grid, block, shared, ctx, named)
                if isinstance(report, Exception):
                    return report.code, report.message
                for r in regions:
                    r.owner.data.write(0, r.data[:r.size])
                if report.lines or report.warnings or report.dropped:
                    self.fired.append({"result": "kernel_output", "kernel": kernel.name, "lines": report.lines,
                                       "warnings": report.warnings, "dropped": report.dropped})
                return None
            return land

        if isinstance(first, Exception):  # its fault comes when the launch completes, as a GPU's does
            report = KernelReport({}, 0, 0, 0, 0, 0, 0, tuple(Access(*a) for a in first.access), fault=first.message)
            duration = p.launch_latency
        else:
            report, duration = _kernel_report(first), self.kernel_seconds(first.traffic)
        return replace(self._submit(stream, duration, "compute", R.QUEUED, effect), report=report)

    def host_callback(self, stream, text, label):
        self._alive()
        return self._submit(stream, CALLBACK_COST, None, R.QUEUED, callback={"text": text, "stream": label})

    def host_noop(self, stream):
        self._alive()
        return self._submit(stream, CALLBACK_COST, None, R.QUEUED)


def _kernel_report(report) -> KernelReport:
    """What the interpreter counted and drew of a launch (simt.launch.Report), as the contract reports it."""
    t = report.traffic
    return KernelReport({kind: MemoryTraffic(n, t.sectors[kind], t.useful[kind]) for kind, n in t.requests.items()},
                        t.loads, t.stores, t.shared_requests, t.shared_wavefronts, t.atomics, t.instructions,
                        tuple(Access(*a) for a in report.access), t.constant_requests, t.constant_addresses,
                        t.readonly_loads)
