"""alloc, register, unregister, free, ls, info: the buffers and their pointer pairs."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from ..backends.base import host_flag_names
from ..errors import ShellError, held_error, usage
from ..export.cemit import ident
from ..language.grammar import Arg, Flag, Opt
from ..language.registry import c_writer, command
from ..model.operations import ALLOC_ASYNC, FREE_ASYNC, PREFETCH
from ..model.session import Buffer, Shape
from ..model.syncrules import FREE_SYNCS
from ..output.render import (
    Whole,
    buffer_line,
    device_ptr_text,
    fit,
    flags_text,
    fmt_seconds,
    gpu_time,
    how_text,
    timing_note,
    wrap,
)
from ..output.results import Message, Result, TimingData, hexptr, timing_data
from ..sizes import format_size, format_size_exact
from .checks import c_pool, check_new_name, check_pin_limit, resolve_pool

KIND_CALL = {"pageable": "malloc", "pinned": "cudaHostAlloc", "device": "cudaMalloc",
             "managed": "cudaMallocManaged"}


def buffer_row(buf: Buffer) -> BufferRow:
    """One buffer as `ls` and --json show it; the pointers are the backend's, never guessed."""
    same = buf.host_ptr is not None and buf.host_ptr == buf.device_ptr
    row = {"name": buf.name, "kind": buf.shown_kind, "size": buf.size, "size_text": format_size(buf.size),
           "flags": sorted(buf.flags),
           "registered": None if buf.registered is None else sorted(buf.registered),
           "host_ptr": hexptr(buf.host_ptr), "device_ptr": hexptr(buf.device_ptr),
           "same_pointer": same, "state": buf.state(), "device": buf.device, "context": buf.context}
    if buf.shape:
        row["shape"] = buf.shape.fields()
    return row

PINNED, MANAGED, DEVICE = ("pinned",), ("managed",), ("device",)


def managed_only(buf, words) -> bool:
    return buf.kind == "managed"



@command("alloc", "memory", "allocate pageable, pinned, device, managed or pitched memory",
         "alloc pinned 64MB mapped portable as staging",
         "malloc / cudaHostAlloc (cuMemHostAlloc) / cudaMalloc (cuMemAlloc) / cudaMallocManaged / "
         "cudaMallocAsync (cuMemAllocAsync) / cudaMallocFromPoolAsync (cuMemAllocFromPoolAsync) / cudaMallocPitch, cudaMalloc3D (cuMemAllocPitch)",
         args=(Arg("KIND", choices=("pageable", "pinned", "device", "managed", "pitched"), noun="memory"),
               Arg("SIZE", "extent")),
         flags=(Flag("portable", only_with=PINNED), Flag("mapped", only_with=PINNED),
                Flag("writecombined", ("wc",), only_with=PINNED), Flag("global", only_with=MANAGED, excludes=("host",)),
                Flag("host", only_with=MANAGED), Flag("async", only_with=DEVICE)),
         opts=(Opt("as", Arg("NAME", "newname")), Opt("on", Arg("GPU", "int"), only_with=DEVICE),
               Opt("stream", Arg("S", "stream"), only_with=DEVICE, needs="async"),
               Opt("pool", Arg("P", "pool"), only_with=DEVICE, needs="async")),
         details="Pinned flags combine freely: portable (every context), mapped (a device pointer; implied "
                 "under UVA), writecombined/wc (fast PCIe writes, very slow host reads). Managed: global "
                 "(default) or host attachment. Without `as NAME` the name is h0 (pageable), p0 (pinned), "
                 "d0 (device) or m0 (managed), counting up. A NAME starts with a letter or _, then letters, digits, "
                 "_ . -; it is not a keyword (as, async, stream, …), nor `ref` (`compare ref` is the reference "
                 "figures). `on N` puts device memory on GPU N (`devices` lists "
                 "them): copies reach it from anywhere; a kernel on the session's GPU only after `peer enable`. "
                 "`alloc device SIZE async [stream S]` is cudaMallocAsync, from the default pool of the stream's GPU "
                 "(stream 0 unless told): the address is known at once, the memory usable in stream order — the "
                 "buffer is pending on its stream until the stream reaches the allocation (`alloc device 64MB async "
                 "stream 1 as tmp`; `free tmp async stream 1` gives it back); `pool P` takes it from pool P instead "
                 "(cudaMallocFromPoolAsync: `pool` lists the pools). `alloc pitched WIDTHxHEIGHT[xDEPTH]` "
                 "is cudaMallocPitch (cudaMalloc3D with a depth): device memory whose rows of WIDTH bytes lie a pitch "
                 "apart, the driver's choice (512-byte steps on the H100) — `ls` and `info` show it, `memcpy2d` uses "
                 "it, and a kernel gets it as `NAME.pitch` (`alloc pitched 1000x64 as img`).")
def alloc(session, backend, args):
    kind, size = args.get("KIND"), args.get("SIZE")
    if (kind == "pitched") != isinstance(size, tuple):
        raise usage(f"alloc pitched takes WIDTHxHEIGHT[xDEPTH], not the size {size}" if kind == "pitched" else
                    f"alloc {kind} takes a size, not the extent {'x'.join(map(str, size))}", args.col("SIZE"),
                    "alloc pitched 1000x64 (rows of 1000 B, 64 of them); alloc device 64MB")
    if kind == "pitched":
        return _alloc_pitched(session, backend, args, *size)
    if size <= 0:
        raise ShellError("CUDA_ERROR_INVALID_VALUE", "a size of 0 bytes cannot be allocated",
                         "give a size above 0", args.col("SIZE"))
    name = args.get("NAME") or session.next_name(kind)
    check_new_name(session, name, args.col("NAME"))
    flags = frozenset(args.flags | ({"global"} if kind == "managed" and not args.flags else set()))
    if "async" in args.flags:
        return _alloc_async(session, backend, args, name, size)
    if kind == "pinned":
        check_pin_limit(session, backend, size, args.col("SIZE"))
    ctx = session.primary_context(backend, args.get("GPU")) if "GPU" in args.values else session.context
    allocation, t = backend.alloc(kind, size, flags, ctx.handle)
    buf = Buffer(name, kind, size, flags, allocation.host_ptr, allocation.device_ptr, allocation.handle,
                 device=ctx.device, context=ctx.name)
    session.add_buffer(buf)
    return Allocated({"buffer": buffer_row(buf), "call": KIND_CALL[kind], **timing_data(t)}, named=buf.name)


def _alloc_async(session, backend, args, name: str, size: int) -> Allocated:
    """cudaMallocAsync on a stream: the buffer exists at once, pending on its stream until the allocation is reached."""
    stream = session.stream(args.get("S"), args.col("S"))
    gpu = args.get("GPU")
    if gpu is not None and gpu != stream.device:
        raise usage(f"cudaMallocAsync allocates on its stream's GPU: stream {stream.name} is GPU {stream.device}'s, "
                    f"not GPU {gpu}'s", args.col("GPU"), "leave `on` out, or name a stream of that GPU")
    pool = resolve_pool(session, backend, args.get("P"), args.col("P")) if "P" in args.values else None
    if pool is not None and pool.device != stream.device:
        raise usage(f"pool {pool.name} is GPU {pool.device}'s, stream {stream.name} GPU {stream.device}'s",
                    args.col("P"), "allocate from a pool of the stream's GPU")
    allocation, t = backend.alloc_async(size, stream.handle, None if pool is None else pool.handle)
    buf = Buffer(name, "device", size, frozenset(), None, allocation.device_ptr, allocation.handle,
                 device=stream.device, context=stream.context)
    session.add_buffer(buf)
    session.track(ALLOC_ASYNC, stream, size, t, buf)
    via = {} if pool is None else {"pool": pool.name}
    return Allocated({"buffer": buffer_row(buf), "call": "cudaMallocFromPoolAsync" if pool else "cudaMallocAsync",
                      "stream": stream.name, **via, **timing_data(t)}, named=buf.name)


def _alloc_pitched(session, backend, args, width: int, height: int, depth: int = 1) -> Allocated:
    """cudaMallocPitch / cudaMalloc3D: a device buffer of pitch × height × depth bytes, the pitch the driver's."""
    if min(width, height, depth) <= 0:
        raise ShellError("CUDA_ERROR_INVALID_VALUE", f"an extent of {width}x{height}x{depth} holds no bytes",
                         "give a width, height and depth above 0", args.col("SIZE"))
    name = args.get("NAME") or session.next_name("device")
    check_new_name(session, name, args.col("NAME"))
    ctx = session.context
    allocation, t = backend.alloc_pitched(width, height, depth, ctx.handle)
    pitch = allocation.pitch
    buf = Buffer(name, "device", pitch * height * depth, frozenset(), None, allocation.device_ptr, allocation.handle,
                 device=ctx.device, context=ctx.name, shape=Shape(width, height, depth, pitch))
    session.add_buffer(buf)
    return Allocated({"buffer": buffer_row(buf), "call": "cudaMalloc3D" if depth > 1 else "cudaMallocPitch",
                      **timing_data(t)}, named=buf.name)


HOST_ALLOC_FLAGS = {"portable": "cudaHostAllocPortable", "mapped": "cudaHostAllocMapped",
                    "writecombined": "cudaHostAllocWriteCombined"}


@c_writer("alloc")
def c_alloc(w, a, i, text):
    kind, size = a.get("KIND"), a.get("SIZE")
    name = w.named(a, text)
    var = ident("b", name)
    w.declare(f"unsigned char *{var} = nullptr;")
    if kind == "pitched":
        kind, size = "device", Shape.h100(*size).size
        there, line = _c_alloc_pitched(w, a, i, name, var)
    else:
        there, line = (_c_alloc_async if "async" in a.flags else _c_alloc_now)(w, a, i, var, kind, size)
    w.buffers[name] = (kind, size)
    w.buf_ctx[name] = there
    w.buf_make[name] = line
    device = w.ctx_device(there)
    w.devices.add(device)
    if device:
        w.gpu_of[name] = device
    if w.depth:
        w.conditional.add(name)


def _c_alloc_now(w, a, i, var: str, kind: str, size: int) -> tuple[str, str]:
    """malloc, cudaHostAlloc, cudaMalloc or cudaMallocManaged, in the GPU's primary context `on` names; returns that
    context and the allocation's statement."""
    flags = " | ".join(HOST_ALLOC_FLAGS[f] for f in sorted(a.flags) if f in HOST_ALLOC_FLAGS) \
        or "cudaHostAllocDefault"
    line, driver = {
        "pageable": (f"{var} = (unsigned char *)calloc({size}, 1);", "mmap (pageable pages)"),
        "pinned": (f"CHECK(cudaHostAlloc((void **)&{var}, {size}, {flags}));", "cuMemHostAlloc"),
        "device": (f"CHECK(cudaMalloc((void **)&{var}, {size}));", "cuMemAlloc_v2"),
        "managed": (f"CHECK(cudaMallocManaged((void **)&{var}, {size}, "
                    f"{'cudaMemAttachHost' if 'host' in a.flags else 'cudaMemAttachGlobal'}));",
                    "cuMemAllocManaged")}[kind]
    here = w.ctx
    gpu = a.get("GPU")
    there = f"gpu{gpu}" if gpu is not None else here
    if there != here:  # another GPU's memory: made with its primary context current
        w.emit(w.switch(there), i, "cuCtxSetCurrent")
    w.emit(line, i, driver)
    if kind != "pageable":  # the shell's memory starts zeroed, as calloc's does
        _zero(w, var, kind, size, i)
    if there != here:
        w.emit("CHECK(cudaDeviceSynchronize());", i, replay=True)
        w.emit(w.switch(here), i)
        if kind != "device":
            w.emit("CHECK(cudaDeviceSynchronize());", i, replay=True)
    return there, line


def _c_alloc_async(w, a, i, var: str, kind: str, size: int) -> tuple[str, str]:
    """cudaMallocAsync on its stream, in the stream's context; zeroed in stream order, as the shell's memory starts."""
    stream, there = w.stream(a.get("S")), w.ctx_of_stream(a.get("S"))
    line, driver = f"CHECK(cudaMallocAsync((void **)&{var}, {size}, {stream}));", "cuMemAllocAsync"
    if a.get("P"):
        line, driver = c_pool(w, a.get("P"), lambda mp: f"CHECK(cudaMallocFromPoolAsync((void **)&{var}, {size}, "
                              f"{mp}, {stream}));"), "cuMemAllocFromPoolAsync"

    def write():
        w.emit(line, i, driver)
        w.emit(f"CHECK(cudaMemsetAsync({var}, 0, {size}, {stream}));", i, replay=True)

    w.in_ctx(there, i, write)
    return there, line


def _c_alloc_pitched(w, a, i, name: str, var: str) -> tuple[str, str]:
    """cudaMallocPitch, or cudaMalloc3D with a depth: the pitch is the driver's, in `pitch_NAME` for the copies and
    kernels after it; zeroed whole (padding too), as the shell's memory starts."""
    width, height, depth = (*a.get("SIZE"), 1)[:3]
    pitch = ident("pitch", name)
    w.declare(f"size_t {pitch} = 0;")
    w.pitched[name] = height
    if depth == 1:
        line, driver = f"CHECK(cudaMallocPitch((void **)&{var}, &{pitch}, {width}, {height}));", "cuMemAllocPitch"
    else:
        line, driver = (f"{{ cudaPitchedPtr pp; CHECK(cudaMalloc3D(&pp, make_cudaExtent({width}, {height}, {depth}))); "
                        f"{var} = (unsigned char *)pp.ptr; {pitch} = pp.pitch; }}", "cuMemAllocPitch")
    w.emit(line, i, driver)
    _zero(w, var, "device", f"{pitch} * {height * depth}", i)
    return w.ctx, line


def _zero(w, var: str, kind: str, size: int | str, i: int) -> None:
    """New memory zeroed, as the shell's is. While held the default stream waits for `release` (and a
    synchronous memset of pinned memory would wait for it forever): pinned memory is zeroed by the host,
    GPU memory on a stream of its own."""
    if not w.held:
        w.emit(f"CHECK(cudaMemset({var}, 0, {size}));", i, replay=True)
    elif kind == "pinned":
        w.emit(f"memset({var}, 0, {size});", i, replay=True)
    else:
        w.emit(f"{{ cudaStream_t z; CHECK(cudaStreamCreateWithFlags(&z, cudaStreamNonBlocking)); "
               f"CHECK(cudaMemsetAsync({var}, 0, {size}, z)); CHECK(cudaStreamSynchronize(z)); "
               f"CHECK(cudaStreamDestroy(z)); }}", i, replay=True)


@command("register", "memory", "pin an existing pageable buffer in place",
         "register h0 mapped", "cudaHostRegister (cuMemHostRegister)",
         args=(Arg("NAME", "buffer", accepts=lambda b, words: b.kind == "pageable" and b.registered is None),),
         flags=(Flag("portable"), Flag("mapped"), Flag("readonly")),
         details="Page-locks the buffer's pages where they are, so DMA can reach them. Under UVA the GPU "
                 "can then use the host pointer itself. A read-only registration faults a kernel that writes.")
def register(session, backend, args):
    buf = session.buffer(args.get("NAME"), args.col("NAME"))
    if buf.kind in ("device", "managed"):
        raise ShellError("KIND_MISMATCH", f"{buf.name} is {buf.kind} memory, not host memory",
                         "register pins pageable host buffers (alloc pageable …)", args.col("NAME"))
    flags = frozenset(args.flags)
    if buf.registered is None:  # registering twice is the driver's error to give
        check_pin_limit(session, backend, buf.size, args.col("NAME"))
    device_ptr = backend.register(buf, flags)
    session.buffers.registered(buf, flags, device_ptr)
    return BufferChange({"buffer": buffer_row(buf), "call": "cudaHostRegister"})


REGISTER_FLAGS = {"portable": "cudaHostRegisterPortable", "mapped": "cudaHostRegisterMapped",
                  "readonly": "cudaHostRegisterReadOnly"}


@c_writer("register")
def c_register(w, a, i, text):
    name = a.get("NAME")
    flags = " | ".join(REGISTER_FLAGS[f] for f in sorted(a.flags)) or "cudaHostRegisterDefault"
    line = f"CHECK(cudaHostRegister({ident('b', name)}, {w.buffers[name][1]}, {flags}));"
    w.emit(line, i, "cuMemHostRegister_v2")
    w.buffers[name] = ("registered", w.buffers[name][1])
    w.buf_make[name + "\0registered"] = line


@command("unregister", "memory", "unpin a registered buffer", "unregister h0",
         "cudaHostUnregister (cuMemHostUnregister)",
         args=(Arg("NAME", "buffer", accepts=lambda b, words: b.registered is not None),))
def unregister(session, backend, args):
    buf = session.buffer(args.get("NAME"), args.col("NAME"))
    backend.unregister(buf)
    session.buffers.registered(buf, None, None)
    return BufferChange({"buffer": buffer_row(buf), "call": "cudaHostUnregister"})


@c_writer("unregister")
def c_unregister(w, a, i, text):
    name = a.get("NAME")
    w.emit(f"CHECK(cudaHostUnregister({ident('b', name)}));", i, "cuMemHostUnregister")
    w.buffers[name] = ("pageable", w.buffers[name][1])
    w.buf_make.pop(name + "\0registered", None)


@command("free", "memory", "free buffers (or `free all`)", "free p0 d0",
         "free / cudaFreeHost / cudaFree / cudaFreeAsync (cuMemFreeAsync)",
         args=(Arg("NAME", "buffer", many=True, also=(("all", "every buffer"),)),),
         flags=(Flag("async"),), opts=(Opt("stream", Arg("S", "stream"), needs="async"),),
         details="A registered buffer is unregistered first. `free all` releases every buffer, and virtual memory "
                 "(every mapping unmapped, every handle released, every reservation freed). cudaFree waits for "
                 "the whole device first; `free NAME… async [stream S]` is cudaFreeAsync, for device memory: queued "
                 "on the stream (0 unless told), the host does not wait, and the memory goes back to its pool when "
                 "the stream reaches the free (a later `alloc device … async` on the same stream may reuse it at "
                 "once: stream order makes it safe) — the buffer is gone from the session at once (`free tmp async "
                 "stream 1`).")
def free(session, backend, args):
    names = args.get("NAME")
    if names == ["all"]:
        bufs = [b for b in session.buffers.values() if not b.symbol and "vmm" not in b.flags]  # a module's
        # variables live with the module; a reservation goes with `vmm free`
    else:
        bufs = [session.buffer(n, args.col("NAME")) for n in dict.fromkeys(names)]
    for buf in bufs:
        if "vmm" in buf.flags:
            raise usage(f"{buf.name} is a `vmm reserve` range: cudaFree does not free it", args.col("NAME"),
                        f"`vmm unmap {buf.name}`, then `vmm free {buf.name}` (cuMemAddressFree)")
        if buf.symbol:
            raise usage(f"{buf.name} is module {buf.module}'s __{'device' if buf.symbol == 'global' else buf.symbol}__ "
                        f"variable {buf.source_name}: it lives as long as the module, and is not freed",
                        args.col("NAME"), "a module's variables cannot be freed; `kernel load` it again for fresh ones")
    if backend.dead and any(b.kind != "pageable" or b.registered is not None for b in bufs):
        raise ShellError(backend.dead, "the GPU side is dead: the driver cannot free its memory",
                         "`reset` first (the buffers come back, and can then be freed), or `quit`, which "
                         "releases everything", args.col("NAME"))
    if "async" in args.flags:  # queued: neither held streams nor the device make it wait
        return _free_async(session, backend, args, bufs)
    everything = names == ["all"]
    if session.held is not None and (any(b.kind != "pageable" or b.registered is not None for b in bufs)
                                     or (everything and session.vmm.reservations)):
        raise held_error("cudaFree, which waits for the device,").at(args.col("NAME"))
    freed = []
    t0 = backend.clock()
    if everything:
        freed += _free_vmm(session, backend)
    for buf in bufs:
        unregistered = session.release_buffer(backend, buf)
        del session.buffers[buf.name]
        session.gone[buf.name] = "was freed"
        freed.append({"name": buf.name, "kind": buf.kind, "size": buf.size, "unregistered": unregistered})
    syncs = any(f["kind"] != "pageable" or f["unregistered"] for f in freed)
    if syncs:  # cudaFree waited for the device: everything issued so far is ordered before what comes next
        session.order.host_waited(session.traced() - 1)
    return Freed({"freed": freed, "host_seconds": backend.clock() - t0, "timing": backend.timing_label,
                           "sync_rule": FREE_SYNCS.why if syncs else None})


def _free_vmm(session, backend) -> list[dict]:
    """`free all` gives virtual memory back too, in the driver's order: every mapping unmapped, every handle released,
    every reservation's addresses freed (cuMemUnmap, cuMemRelease, cuMemAddressFree)."""
    vmm, freed = session.vmm, []
    for res in list(vmm.reservations.values()):
        buf = session.buffers[res.name]
        for m in list(res.mappings):
            backend.vmm_unmap(buf, m.offset, m.size)
            res.mappings.remove(m)
            m.handle.mappings.remove(m)
    for h in list(vmm.handles.values()):
        backend.vmm_release(h.handle)
        del vmm.handles[h.name]
        session.gone["vmm " + h.name] = "was released"
    for res in list(vmm.reservations.values()):
        backend.vmm_free(session.buffers[res.name])
        del session.buffers[res.name], vmm.reservations[res.name]
        session.gone[res.name] = "was freed"
        freed.append({"name": res.name, "kind": "device", "size": res.size, "unregistered": False})
    return freed


def _free_async(session, backend, args, bufs: list) -> Freed:
    """cudaFreeAsync of each buffer on one stream: checked whole before the first is queued."""
    stream = session.stream(args.get("S"), args.col("S"))
    for buf in bufs:
        if buf.kind != "device":
            raise ShellError("KIND_MISMATCH", f"{buf.name} is {buf.kind} memory: cudaFreeAsync frees device memory",
                             "free it without `async`", args.col("NAME"))
    freed = []
    t0 = backend.clock()
    for buf in bufs:
        session.free_in_order(buf, stream)  # a race is the user's to see, not a refusal: the GPU frees it too
    for buf in bufs:
        t = backend.free_async(buf, stream.handle)
        session.track(FREE_ASYNC, stream, buf.size, t)  # no buffer is pending: it is gone from the session
        del session.buffers[buf.name]
        session.gone[buf.name] = "was freed"
        freed.append({"name": buf.name, "kind": buf.kind, "size": buf.size, "unregistered": False})
    return Freed({"freed": freed, "host_seconds": backend.clock() - t0, "timing": backend.timing_label,
                  "sync_rule": None, "stream": stream.name})


@c_writer("free")
def c_free(w, a, i, text):
    names = list(w.buffers) if a.get("NAME") == ["all"] else list(dict.fromkeys(a.get("NAME")))
    for name in names:
        kind, size = w.buffers.pop(name)
        var = ident("b", name)
        if name in w.unchecked:  # a `vmm reserve` range (`free all`): unmapped, then its addresses freed
            w.unchecked.discard(name)
            w.emit(f"vmm_unmap_range({ident('vr', name)}, 0, {size}); "
                   f"CU(vmm.addressFree((CUdeviceptr){var}, {size})); {var} = nullptr;", i, "cuMemAddressFree")
            continue
        if kind == "registered":
            w.emit(f"CHECK(cudaHostUnregister({var}));", i, "cuMemHostUnregister")
        line, driver = {"pageable": (f"free({var});", "munmap"), "registered": (f"free({var});", "munmap"),
                        "pinned": (f"CHECK(cudaFreeHost({var}));", "cuMemFreeHost")}.get(
                            kind, (f"CHECK(cudaFree({var}));", "cuMemFree_v2"))
        w.gpu_of.pop(name, None)
        there = w.buf_ctx.pop(name, w.ctx)
        if "async" in a.flags:  # device memory, on the stream, in the stream's context
            line, driver, there = (f"CHECK(cudaFreeAsync({var}, {w.stream(a.get('S'))}));", "cuMemFreeAsync",
                                   w.ctx_of_stream(a.get("S")))
        for key in (name, name + "\0registered"):
            w.buf_make.pop(key, None)
        w.conditional.discard(name)
        if kind == "pageable":  # malloc's memory: no context to be in
            there = w.ctx
        w.emit(f"{w.switch(there)} {line} {w.switch(w.ctx)}"
               if there != w.ctx else line, i, driver)
        w.emit(f"{var} = nullptr;", i, replay=True)


@command("ls", "memory", "list every buffer with its pointer pair and state", "ls", "(session state)", exported=False)
def ls(session, backend, args):
    session.settle(backend)
    rows = [buffer_row(b) for b in session.buffers.values()]
    totals = session.totals()
    vmm = {"reservations": session.vmm.rows(), "vmm_handles": session.vmm.handle_rows()} \
        if session.vmm.reservations or session.vmm.handles else {}  # only once `vmm` made something: keys added
    return Listing({"buffers": rows, "totals": totals, **vmm})


@command("info", "memory", "what the driver says about one buffer's pointer", "info p0",
         "cuPointerGetAttribute, cuMemHostGetFlags, cuMemHostGetDevicePointer",
         args=(Arg("NAME", "buffer"),), exported=False)
def info(session, backend, args):
    buf = session.buffer(args.get("NAME"), args.col("NAME"))
    driver = backend.pointer_info(buf)
    session.settle(backend)
    flags = driver.get("host_flags")
    if isinstance(flags, int):
        driver["host_flag_names"] = host_flag_names(flags)
    hdp = driver.get("host_device_ptr")
    if isinstance(hdp, int):
        driver["host_device_ptr"] = hexptr(hdp)
    row = buffer_row(buf)
    reach = [(c.name, backend.reach(buf, c.handle)) for c in session.contexts.values()]
    row.update(size_text=format_size_exact(buf.size), host_accessible=buf.host_accessible,
               device_accessible=buf.device_accessible, driver=driver,
               reach=[{"context": n, "reaches": r.refusal or hexptr(r.address)} for n, r in reach])
    return PointerInfo(row)


@command("prefetch", "memory", "migrate a managed buffer's pages to the device or the host",
         "prefetch m0 device stream 1", "cudaMemPrefetchAsync (cuMemPrefetchAsync_v2)",
         args=(Arg("NAME", "buffer", accepts=managed_only), Arg("WHERE", choices=("device", "host"))),
         opts=(Opt("stream", Arg("S", "stream")),))
def prefetch(session, backend, args):
    buf = session.buffer(args.get("NAME"), args.col("NAME"))
    if buf.kind != "managed":
        raise ShellError("KIND_MISMATCH", f"{buf.name} is {buf.kind} memory; only managed memory migrates",
                         "alloc managed SIZE", args.col("NAME"))
    stream = session.stream(args.get("S"), args.col("S"))
    t = backend.prefetch(buf, args.get("WHERE"), stream.handle)
    session.track(PREFETCH[args.get("WHERE")], stream, buf.size, t, buf)
    return Prefetched({"name": buf.name, "to": args.get("WHERE"), "bytes": buf.size,
                               "stream": stream.name, **timing_data(t)})


@c_writer("prefetch")
def c_prefetch(w, a, i, text):
    name, where = a.get("NAME"), a.get("WHERE")
    loc = (f"cudaMemLocationTypeDevice, {w.ctx_device(w.ctx_of_stream(a.get('S')))}" if where == "device"
           else "cudaMemLocationTypeHost, 0")
    w.in_ctx(w.ctx_of_stream(a.get("S")), i, lambda: w.emit(
        f"{{ cudaMemLocation loc = {{{loc}}}; CHECK(cudaMemPrefetchAsync({ident('b', name)}, "
        f"{w.buffers[name][1]}, loc, 0, {w.stream(a.get('S'))})); }}", i, "cuMemPrefetchAsync_v2"))


@command("advise", "memory", "tell the driver how a managed buffer will be used",
         "advise m0 preferred device", "cudaMemAdvise (cuMemAdvise_v2)",
         args=(Arg("NAME", "buffer", accepts=managed_only), Arg("ADVICE", choices=("readmostly", "preferred", "accessed-by")),
               Arg("WHERE", choices=("device", "host"), optional=True)),
         details="readmostly: pages may be duplicated for reading; preferred device|host: where pages "
                 "should live; accessed-by device: map the pages for the device so it does not fault.")
def advise(session, backend, args):
    buf = session.buffer(args.get("NAME"), args.col("NAME"))
    if buf.kind != "managed":
        raise ShellError("KIND_MISMATCH", f"{buf.name} is {buf.kind} memory; advice applies to managed memory",
                         "alloc managed SIZE", args.col("NAME"))
    advice, where = args.get("ADVICE"), args.get("WHERE")
    if advice == "readmostly" and where:
        raise usage("readmostly takes no location", args.col("WHERE"))
    if advice != "readmostly" and not where:
        raise usage(f"{advice} needs device or host", args.end_col)
    if advice == "accessed-by" and where != "device":
        raise usage("accessed-by takes device", args.col("WHERE"))
    backend.advise(buf, advice, where or "device")
    return Message({"text": f"advised {buf.name}: {advice} {where or ''}".strip(),
                              "name": buf.name, "advice": advice, "where": where})


@c_writer("advise")
def c_advise(w, a, i, text):
    name, advice, where = a.get("NAME"), a.get("ADVICE"), a.get("WHERE") or "device"
    what = {"readmostly": "cudaMemAdviseSetReadMostly", "preferred": "cudaMemAdviseSetPreferredLocation",
            "accessed-by": "cudaMemAdviseSetAccessedBy"}[advice]
    loc = f"cudaMemLocationTypeDevice, {w.device}" if where == "device" else "cudaMemLocationTypeHost, 0"
    w.emit(f"{{ cudaMemLocation loc = {{{loc}}}; CHECK(cudaMemAdvise({ident('b', name)}, "
           f"{w.buffers[name][1]}, {what}, loc)); }}", i, "cuMemAdvise_v2")


# ------------------------------------------------------------------ the results of these commands
class BufferRow(TypedDict):
    """One buffer as `ls`, `alloc` and --json show it (buffer_row)."""

    name: str
    kind: str
    size: int
    size_text: str
    flags: list[str]
    registered: list[str] | None
    host_ptr: str | None
    device_ptr: str | None
    same_pointer: bool
    state: str
    device: int
    context: str
    shape: NotRequired[ShapeRow]  # pitched memory only


class ShapeRow(TypedDict):
    """Pitched memory's layout: `width` bytes used of each row, rows `pitch` bytes apart (the driver's choice)."""

    width: int
    height: int
    depth: int
    pitch: int


class AllocData(TimingData):
    buffer: BufferRow
    call: str
    stream: NotRequired[str]  # `alloc device … async`: the stream the allocation was queued on (cudaMallocAsync)
    pool: NotRequired[str]  # `… pool P`: the pool it came from (cudaMallocFromPoolAsync)


class Allocated(Result, kind="alloc"):
    Data = AllocData

    def text(self):
        d = self.data
        if "stream" in d:  # the address now, the memory when the stream reaches the allocation
            return [f"{buffer_line(d['buffer'])}  — {d['call']} on stream {d['stream']}, {how_text(d)}; "
                    f"{d['buffer']['state']} {timing_note(d)}"]
        shape = f" ({shape_text(d['buffer']['shape'])})" if "shape" in d["buffer"] else ""
        return [f"{buffer_line(d['buffer'])}{shape}  — {d['call']} {fmt_seconds(d['seconds'])} {timing_note(d)}"]


def shape_text(shape: ShapeRow) -> str:
    """`1000x64 B, pitch 1024`: the extent asked for and the pitch the driver chose."""
    depth = f"x{shape['depth']}" if shape["depth"] > 1 else ""
    return f"{shape['width']}x{shape['height']}{depth}, pitch {shape['pitch']}"


class BufferData(TypedDict):
    buffer: BufferRow
    call: str


class BufferChange(Result, kind="buffer"):
    Data = BufferData

    def text(self):
        d = self.data
        return [buffer_line(d["buffer"]) + f"  — {d['call']}"]


class FreeDataFreedItem(TypedDict):
    name: str
    kind: str
    size: int
    unregistered: bool


class FreeData(TypedDict):
    freed: list[FreeDataFreedItem]
    host_seconds: float
    timing: str
    sync_rule: str | None  # why the host waited (cudaFree's rule); None when nothing made it wait
    stream: NotRequired[str]  # `free … async`: the stream the frees were queued on (cudaFreeAsync)


class Freed(Result, kind="free"):
    Data = FreeData
    FREE_CALL = {"device": "cudaFree", "managed": "cudaFree", "pinned": "cudaFreeHost"}  # pageable: free(), not CUDA

    @property
    def api_call(self):
        """For `profile`'s API table: cudaFreeAsync, or the one free call of the kinds freed (a mixed `free all`
        made several calls and is not one row)."""
        d = self.data
        calls = {"cudaFreeAsync"} if "stream" in d else {self.FREE_CALL.get(f["kind"]) for f in d["freed"]}
        return (calls.pop(), d["host_seconds"]) if len(calls) == 1 and None not in calls and "host_seconds" in d \
            else None

    def text(self):
        d = self.data
        if not d["freed"]:
            return ["nothing to free"]
        out = ["freed " + ", ".join(f"{f['name']} ({f['kind']} {format_size(f['size'])}"
                                    f"{', unregistered first' if f['unregistered'] else ''})" for f in d["freed"])
               + (f" in stream order on stream {d['stream']} (cudaFreeAsync: the host did not wait)"
                  if "stream" in d else "")]
        if d.get("sync_rule") and d["host_seconds"] >= 1e-4:  # only worth a line when the wait was real
            out.append(f"  took {fmt_seconds(d['host_seconds'])}: {d['sync_rule']} ({d['timing']})")
        return out


class InfoDataDriver(TypedDict):
    device: int
    memory_type: str
    is_managed: bool | str
    host_flags: int | str
    host_device_ptr: str
    host_flag_names: NotRequired[list[str]]
    read_mostly: NotRequired[bool | str]  # on the GPU, the error a query answered (bindings.answer)
    preferred_location: NotRequired[str]
    last_prefetch_location: NotRequired[str]


class InfoDataReachItem(TypedDict):
    context: str
    reaches: str


class InfoData(TypedDict):
    name: str
    kind: str
    size: int
    size_text: str
    flags: list[str]
    registered: list[str] | None
    host_ptr: str | None
    device_ptr: str | None
    same_pointer: bool
    state: str
    device: int
    context: str
    shape: NotRequired[ShapeRow]
    host_accessible: bool
    device_accessible: bool
    driver: InfoDataDriver
    reach: list[InfoDataReachItem]


class PointerInfo(Result, kind="info"):
    Data = InfoData

    def text(self):
        return self.lines()

    def lines(self, tablefmt="simple", width=0):
        """Three aligned columns — what, its value, where it comes from — however long a context's name; a value
        longer than a pointer (an error's name) runs past its column, and a note too long for the terminal
        continues under the notes."""
        d = self.data
        drv = d["driver"]
        flags = drv["host_flags"]
        host_flags = f"{flags} ({'|'.join(drv['host_flag_names']) or 'none'})" if isinstance(flags, int) else flags
        yes = {True: "yes", False: "no"}
        rows = [("host pointer", d["host_ptr"] or "-", f"(host-accessible: {yes[d['host_accessible']]})"),
                ("device pointer", d["device_ptr"] or "-", f"(device-accessible: {yes[d['device_accessible']]}"
                 + (", same as host: UVA)" if d["same_pointer"] else ")")),
                ("memory type", drv["memory_type"], "(cuPointerGetAttribute MEMORY_TYPE)"),
                ("is managed", drv["is_managed"], ""),
                ("host flags", host_flags, "(cuMemHostGetFlags)"),
                ("host→device ptr", drv["host_device_ptr"], "(cuMemHostGetDevicePointer)"),
                ("device", drv["device"], "")]
        rows += [(label, drv[key], "(cuMemRangeGetAttribute)") for key, label in
                 (("read_mostly", "read mostly"), ("preferred_location", "preferred at"),
                  ("last_prefetch_location", "last prefetched to")) if key in drv]
        if "shape" in d:
            rows.append(("extent, pitch", shape_text(d["shape"]), "(cuMemAllocPitch: rows a pitch apart)"))
        rows += [(f"kernel in {r['context']}", r["reaches"],
                  "" if r["reaches"].startswith("0x") else "(it cannot use it there)") for r in d["reach"]]
        label = max(len(r[0]) for r in rows)
        value = max((len(str(r[1])) for r in rows if len(str(r[1])) <= 18), default=0)
        out = [f"{d['name']}: {d['kind']} {d['size_text']}, flags {flags_text(d)}, {d['state']}"]
        for k, v, note in rows:
            line = f"  {k:<{label}}  {v!s:<{value}}  {note}".rstrip()
            out += map(Whole, wrap([line], width, indent=" " * (label + value + 6)))
        return out


class LsDataTotals(TypedDict):
    pageable: int
    pinned: int
    device: int
    managed: int


class LsMapping(TypedDict):
    offset: int
    size: int
    handle: str
    released: bool
    access: str


class LsReservation(TypedDict):
    name: str
    size: int
    mappings: list[LsMapping]


class LsVmmHandle(TypedDict):
    name: str
    size: int
    device: int
    released: bool
    mapped_at: list[str]


class LsData(TypedDict):
    buffers: list[BufferRow]
    totals: LsDataTotals
    reservations: NotRequired[list[LsReservation]]  # `vmm reserve` ranges and what is mapped where
    vmm_handles: NotRequired[list[LsVmmHandle]]  # `vmm create` handles whose memory lives


class Listing(Result, kind="ls"):
    Data = LsData

    def lines(self, tablefmt="simple", width=0):
        d = self.data
        if not d["buffers"]:
            return ["no buffers"] + self._vmm_lines(tablefmt, width)
        gpus = len({r["device"] for r in d["buffers"]}) > 1 or any(r["device"] for r in d["buffers"])
        ctxs = any(r["context"] != f"gpu{r['device']}" for r in d["buffers"])  # a context of `context create`'s
        rows = [[r["name"], r["kind"], format_size_exact(r["size"]), flags_text(r), r["host_ptr"] or "-",
                 device_ptr_text(r), r["state"]] + ([str(r["device"]) if r["kind"] == "device" else "-"] if gpus else [])
                + ([r["context"]] if ctxs else []) for r in d["buffers"]]
        headers = ["name", "kind", "size", "flags", "host ptr", "device ptr", "state"] + (["GPU"] if gpus else []) \
            + (["context"] if ctxs else [])
        if any("shape" in r for r in d["buffers"]):  # pitched memory: its extent and pitch, in a column of its own
            rows = [row + [shape_text(r["shape"]) if "shape" in r else "-"] for row, r in zip(rows, d["buffers"])]
            headers.append("extent, pitch")
        def short():
            return [[r[0], r[1], format_size(d["buffers"][i]["size"]), *r[3:]] for i, r in enumerate(rows)], headers

        return [fit(rows, headers, tablefmt, width, short, ["left"] * len(headers))] + self._vmm_lines(tablefmt, width)

    def _vmm_lines(self, tablefmt, width) -> list[str]:
        """Each reservation's mappings (offset, size, handle, access), and the handles alive."""
        d = self.data
        maps = [[r["name"], f"+{format_size(m['offset'])}", format_size(m["size"]),
                 m["handle"] + (" (released)" if m["released"] else ""), m["access"]]
                for r in d.get("reservations", ()) for m in r["mappings"]]
        handles = [[h["name"], format_size(h["size"]), str(h["device"]), "yes" if h["released"] else "no",
                    ", ".join(h["mapped_at"]) or "-"] for h in d.get("vmm_handles", ())]
        out = []
        if maps:
            out.append(fit(maps, ["reservation", "offset", "size", "handle", "access"], tablefmt, width))
        if handles:
            out.append(fit(handles, ["vmm handle", "size", "GPU", "released", "mapped at"], tablefmt, width))
        return out


class PrefetchData(TimingData):
    name: str
    to: str
    bytes: int
    stream: str


class Prefetched(Result, kind="prefetch"):
    Data = PrefetchData

    def text(self):
        d = self.data
        return ([f"prefetch {d['name']} → {d['to']}: {format_size_exact(d['bytes'])} on stream "
                f"{d['stream']}, {gpu_time(d)}; {how_text(d)} {timing_note(d)}"])
