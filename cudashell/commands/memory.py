"""alloc, register, unregister, free, ls, info: the buffers and their pointer pairs."""

from __future__ import annotations

from ..errors import held_error, ShellError, usage
from ..grammar import Arg, Flag, Opt
from ..sizes import format_size, format_size_exact
from ..registry import command
from ..results import Result, hexptr, timing_data
from ..session import Buffer
from ..backends.base import host_flag_names
from ..syncrules import FREE_SYNCS
from .checks import check_new_name, check_pin_limit

PINNED_FLAGS = ("portable", "mapped", "writecombined")
MANAGED_FLAGS = ("global", "host")
KIND_CALL = {"pageable": "malloc", "pinned": "cudaHostAlloc", "device": "cudaMalloc",
             "managed": "cudaMallocManaged"}


def buffer_row(buf: Buffer) -> dict:
    """One buffer as `ls` and --json show it; the pointers are the backend's, never guessed."""
    same = buf.host_ptr is not None and buf.host_ptr == buf.device_ptr
    return {"name": buf.name, "kind": buf.kind, "size": buf.size, "size_text": format_size(buf.size),
            "flags": sorted(buf.flags),
            "registered": None if buf.registered is None else sorted(buf.registered),
            "host_ptr": hexptr(buf.host_ptr), "device_ptr": hexptr(buf.device_ptr),
            "same_pointer": same, "state": buf.state(), "device": buf.device, "context": buf.context}

PINNED, MANAGED = ("pinned",), ("managed",)


def managed_only(buf, words) -> bool:
    return buf.kind == "managed"



@command("alloc", "memory", "allocate pageable, pinned, device or managed memory",
         "alloc pinned 64MB mapped portable as staging",
         "malloc / cudaHostAlloc (cuMemHostAlloc) / cudaMalloc (cuMemAlloc) / cudaMallocManaged",
         args=(Arg("KIND", choices=("pageable", "pinned", "device", "managed")), Arg("SIZE", "size")),
         flags=(Flag("portable", only_with=PINNED), Flag("mapped", only_with=PINNED),
                Flag("writecombined", ("wc",), only_with=PINNED), Flag("global", only_with=MANAGED),
                Flag("host", only_with=MANAGED)),
         opts=(Opt("as", Arg("NAME", "newname")), Opt("on", Arg("GPU", "int"), only_with=("device",))),
         details="Pinned flags combine freely: portable (every context), mapped (a device pointer; implied "
                 "under UVA), writecombined/wc (fast PCIe writes, very slow host reads). Managed: global "
                 "(default) or host attachment. Without `as NAME` the name is h0 (pageable), p0 (pinned), "
                 "d0 (device) or m0 (managed), counting up. `on N` puts device memory on GPU N (`devices` lists "
                 "them): copies reach it from anywhere; a kernel on the session's GPU only after `peer enable`.")
def alloc(session, backend, args):
    kind, size = args.get("KIND"), args.get("SIZE")
    allowed = {"pinned": PINNED_FLAGS, "managed": MANAGED_FLAGS}.get(kind, ())
    for flag in sorted(args.flags):
        if flag not in allowed:
            raise usage(f"'{flag}' does not apply to {kind} memory", args.col(flag),
                        "pinned takes portable, mapped, writecombined; managed takes global or host")
    if args.flags >= {"global", "host"}:
        raise usage("managed memory attaches global or host, not both", args.col("host"))
    if size <= 0:
        raise ShellError("CUDA_ERROR_INVALID_VALUE", "a size of 0 bytes cannot be allocated",
                         "give a size above 0", args.col("SIZE"))
    if "GPU" in args.values and kind != "device":
        raise usage(f"`on` places device memory; {kind} memory is the host's (or follows its use)", args.col("GPU"),
                    "alloc device SIZE on N")
    name = args.get("NAME") or session.next_name(kind)
    check_new_name(session, name, args.col("NAME"))
    flags = frozenset(args.flags | ({"global"} if kind == "managed" and not args.flags else set()))
    if kind == "pinned":
        check_pin_limit(session, backend, size, args.col("SIZE"))
    ctx = session.primary_context(backend, args.get("GPU")) if "GPU" in args.values else session.context
    allocation, t = backend.alloc(kind, size, flags, ctx.handle)
    buf = Buffer(name, kind, size, flags, allocation.host_ptr, allocation.device_ptr, allocation.handle,
                 device=ctx.device, context=ctx.name)
    session.add_buffer(buf)
    return Result("alloc", {"buffer": buffer_row(buf), "call": KIND_CALL[kind], **timing_data(t)}, named=buf.name)


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
    return Result("buffer", {"buffer": buffer_row(buf), "call": "cudaHostRegister"})


@command("unregister", "memory", "unpin a registered buffer", "unregister h0",
         "cudaHostUnregister (cuMemHostUnregister)",
         args=(Arg("NAME", "buffer", accepts=lambda b, words: b.registered is not None),))
def unregister(session, backend, args):
    buf = session.buffer(args.get("NAME"), args.col("NAME"))
    backend.unregister(buf)
    session.buffers.registered(buf, None, None)
    return Result("buffer", {"buffer": buffer_row(buf), "call": "cudaHostUnregister"})


@command("free", "memory", "free buffers (or `free all`)", "free p0 d0",
         "free / cudaFreeHost / cudaFree", args=(Arg("NAME", "buffer", many=True),),
         details="A registered buffer is unregistered first. `free all` releases every buffer.")
def free(session, backend, args):
    names = args.get("NAME")
    if names == ["all"]:
        bufs = list(session.buffers.values())
    else:
        bufs = [session.buffer(n, args.col("NAME")) for n in dict.fromkeys(names)]
    if backend.dead and any(b.kind != "pageable" or b.registered is not None for b in bufs):
        raise ShellError(backend.dead, "the GPU side is dead: the driver cannot free its memory",
                         "`reset` first (the buffers come back, and can then be freed), or `quit`, which "
                         "releases everything", args.col("NAME"))
    if session.held is not None and any(b.kind != "pageable" or b.registered is not None for b in bufs):
        raise held_error("cudaFree, which waits for the device,").at(args.col("NAME"))
    freed = []
    t0 = backend.clock()
    for buf in bufs:
        unregistered = session.release_buffer(backend, buf)
        del session.buffers[buf.name]
        freed.append({"name": buf.name, "kind": buf.kind, "size": buf.size, "unregistered": unregistered})
    syncs = any(f["kind"] != "pageable" or f["unregistered"] for f in freed)
    return Result("free", {"freed": freed, "host_seconds": backend.clock() - t0, "timing": backend.timing_label,
                           "sync_rule": FREE_SYNCS.why if syncs else None})


@command("ls", "memory", "list every buffer with its pointer pair and state", "ls", "(session state)", exported=False)
def ls(session, backend, args):
    session.settle(backend)
    rows = [buffer_row(b) for b in session.buffers.values()]
    totals = session.totals()
    return Result("ls", {"buffers": rows, "totals": totals})


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
               reach=[{"context": n, "reaches": hexptr(r) if isinstance(r, int) else r} for n, r in reach])
    return Result("info", row)


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
    session.track(f"prefetch {args.get('WHERE')}", stream, buf.size, t, buf)
    return Result("prefetch", {"name": buf.name, "to": args.get("WHERE"), "bytes": buf.size,
                               "stream": stream.name, **timing_data(t)})


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
    return Result("message", {"text": f"advised {buf.name}: {advice} {where or ''}".strip(),
                              "name": buf.name, "advice": advice, "where": where})
