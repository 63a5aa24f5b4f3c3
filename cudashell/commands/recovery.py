"""reset: the same session on a fresh GPU side — after a sticky fault, after the GPU was given up, or when
asked. A faulted context cannot be revived (on a GPU not even in the same process), so everything is made
again: buffers with their names, kinds, sizes and flags (new pointers), registrations, streams, events and
loaded kernels. Host memory outlives the context, so its contents come back; device memory's do not."""

from __future__ import annotations

from contextlib import suppress
from dataclasses import replace
from typing import TypedDict

from ..errors import ShellError
from ..export.cemit import ident, refuse
from ..language.registry import c_writer, command
from ..model.scratch import AskedAgain, interrupts_held
from ..output.render import fit
from ..output.results import Result, hexptr
from ..sizes import format_size_exact


def _salvage(backend, bufs) -> tuple[dict, dict]:
    """Host contents worth keeping, and why the rest is lost. Managed memory last: reading its host view on
    a dead context is what may fail (or take the worker down), and it must not cost the others theirs."""
    saved, lost = {}, {}
    for buf in sorted(bufs, key=lambda b: b.kind == "managed"):
        if buf.kind == "device":
            lost[buf.name] = "device memory"
            continue
        try:
            saved[buf.name] = backend.salvage(buf)
        except ShellError as e:
            lost[buf.name] = f"unreadable ({e.code})"
    return saved, lost


def _reload_kernels(session, backend) -> tuple[list[str], dict]:
    """Compile each loaded source again and point its kernels at the new functions."""
    by_source: dict[tuple, list[str]] = {}
    for name, k in session.kernels.items():
        if not k.builtin:  # one load a module: two loads of one source have variables of their own
            by_source.setdefault((k.source, k.path or None, k.module), []).append(name)
    done, failed = [], {}
    for (source, path, module), names in by_source.items():
        try:
            loaded, symbols = backend.load_kernels(source, path, session.root)
        except (ShellError, KeyboardInterrupt) as e:  # (Ctrl-C: held by reset, raised only by a call itself)
            code = getattr(e, "code", "INTERRUPTED")
            for n in names:
                failed[n] = code
                del session.kernels[n]
            for n in [n for n, b in session.buffers.items() if b.symbol and b.module == module]:
                del session.buffers[n]  # its module did not load again
                session.gone[n] = f"went with module {module}, which did not load again ({code})"
            continue
        fresh = {k.symbol: k.handle for k in loaded}
        _rebind_symbols(session, module, {s.name: s for s in symbols})
        for n in names:
            session.kernels[n] = replace(session.kernels[n], handle=fresh[session.kernels[n].symbol])
            done.append(n)
    return done, failed


def _rebind_symbols(session, module: str, symbols: dict) -> None:
    """A module's variables at their fresh addresses (initialised from the source again, as a load makes them)."""
    for buf in session.buffers.values():
        sym = symbols.get(buf.source_name) if buf.symbol and buf.module == module else None
        if sym is not None:
            buf.handle, buf.device_ptr = sym.handle, sym.address
            buf.host_ptr = sym.address if buf.kind == "managed" else None
            buf.pending.clear()


def _rebuild_contexts(session, backend, dropped: dict) -> None:
    """Each context made again (a primary retained again), and in it its streams and events; a stream or event the
    fresh side refuses (or that Ctrl-C stopped) leaves the session, named in `dropped`, rather than stay with a
    handle the fresh side lacks."""
    for c in session.contexts.values():
        if c.handle is not None:
            c.handle = backend.context_primary(c.device) if c.primary else backend.context_create(c.device)[0]
    for c in session.contexts.values():
        backend.context_use(c.handle)
        for s in [s for s in session.streams.values() if s.context == c.name]:
            if not _remade(dropped, f"stream {s.name}", lambda s=s: _made_stream(backend, s)):
                del session.streams[s.name]
        for ev in [e for e in session.events.values() if e.context == c.name]:
            if not _remade(dropped, f"event {ev.name}", lambda ev=ev: _made_event(backend, ev)):
                del session.events[ev.name]
    backend.context_use(session.context.handle)


def _made_stream(backend, s) -> None:
    s.handle, s.priority = backend.stream_create(s.nonblocking, s.priority)


def _made_event(backend, ev) -> None:
    ev.handle, ev.stream = backend.event_create(), None


def _remade(dropped: dict, name: str, make) -> bool:
    """Make one thing again on the fresh side; False, its code in `dropped`, when the side refused it or Ctrl-C
    fell in the call (what the rest of the session needs is still made: a half-made session has stale handles)."""
    try:
        make()
    except ShellError as e:
        dropped[name] = e.code
        return False
    except KeyboardInterrupt:
        dropped[name] = "INTERRUPTED"
        return False
    return True


def _rebuild_buffer(session, backend, buf, saved: dict, lost: dict) -> dict:
    old = {"host_ptr": buf.host_ptr, "device_ptr": buf.device_ptr}
    ctx = session.contexts[buf.context].handle
    shape = buf.shape  # pitched memory is made pitched again: the same driver gives the same pitch
    alloc, _ = (backend.alloc_pitched(shape.width, shape.height, shape.depth, ctx) if shape
                else backend.alloc(buf.kind, buf.size, buf.flags, ctx))
    buf.handle, buf.host_ptr, buf.device_ptr = alloc.handle, alloc.host_ptr, alloc.device_ptr
    try:
        if buf.registered is not None:
            buf.device_ptr = backend.register(buf, buf.registered)
        buf.pending.clear()
        if buf.name in saved:
            backend.restore(buf, saved.pop(buf.name))
    except BaseException:  # refused, or Ctrl-C in the call: the buffer leaves the session, so its memory goes too
        with suppress(ShellError):
            backend.free(buf)
        raise
    return {"name": buf.name, "kind": buf.kind, "size": buf.size, "flags": buf.flag_text(),
            "old_host_ptr": hexptr(old["host_ptr"]), "old_device_ptr": hexptr(old["device_ptr"]),
            "host_ptr": hexptr(buf.host_ptr), "device_ptr": hexptr(buf.device_ptr),
            "contents": "kept" if buf.name not in lost else "lost: " + lost[buf.name]}


def _rebuild_reservation(session, backend, buf) -> dict:
    """A `vmm reserve` range made again, at its new address; its mappings come back with the handles."""
    old = hexptr(buf.device_ptr)
    alloc, _ = backend.vmm_reserve(buf.size, session.contexts[buf.context].handle)
    buf.handle, buf.device_ptr = alloc.handle, alloc.device_ptr
    buf.pending.clear()
    return {"name": buf.name, "kind": buf.kind, "size": buf.size, "flags": buf.flag_text(), "old_host_ptr": None,
            "old_device_ptr": old, "host_ptr": None, "device_ptr": hexptr(buf.device_ptr),
            "contents": "lost: device memory"}


def _rebuild_handles(session, backend) -> None:
    """Every `vmm create` handle still alive (named, or released but mapped) made again and mapped where it was, with
    its access; a released one released again once mapped."""
    vmm = session.vmm
    mapped = [m for r in vmm.reservations.values() for m in r.mappings]
    handles = list({id(h): h for h in [*vmm.handles.values(), *(m.handle for m in mapped)]}.values())
    for h in handles:
        h.handle = backend.vmm_create(h.size, h.device)
    for m in mapped:
        buf = session.buffers[m.reservation]
        backend.vmm_map(buf, m.offset, m.handle.handle)
        if m.access != "none":
            backend.vmm_access(buf, m.offset, m.size, m.access, session.vmm.reservations[buf.name].device)
    for h in handles:
        if h.released:
            backend.vmm_release(h.handle)


def _rebuild(session, backend, saved: dict, lost: dict) -> tuple[list, dict, list, dict]:
    """Everything the session holds made again on the fresh side: (the buffers' rows, what could not be made and
    why, the kernels recompiled, those that were not)."""
    backend = AskedAgain(backend)  # a call that raised Ctrl-C itself (held here): a skipped context or stream
    # would leave the session's handles stale
    session.held = None  # the fresh side holds nothing
    session.unresolved = []
    dropped: dict[str, str] = {}
    _rebuild_contexts(session, backend, dropped)
    for pool in session.pools.values():  # made again, with the driver's defaults (its settings were the old side's)
        pool.handle = backend.pool_create(pool.device)
    session.order.host_waited(session.traced() - 1)  # nothing of the old side is still running
    for a, b in list(session.peers):  # peer access belongs to the contexts: given again on the fresh side
        if not _remade({}, "", lambda a=a, b=b: backend.peer_access(a, b, True)):
            session.peers.discard((a, b))
    kernels, kernel_failures = _reload_kernels(session, backend)
    rows = []
    for buf in list(session.buffers.values()):
        if buf.symbol:  # a module's variable: made again, from the source, by its module's load
            continue
        if not _remade(dropped, buf.name, lambda buf=buf: rows.append(
                _rebuild_buffer(session, backend, buf, saved, lost) if "vmm" not in buf.flags
                else _rebuild_reservation(session, backend, buf))):
            del session.buffers[buf.name]  # the session must not keep a handle the fresh side lacks
            session.vmm.reservations.pop(buf.name, None)
    _rebuild_handles(session, backend)
    return rows, dropped, kernels, kernel_failures


@command("reset", "session", "rebuild the session on a fresh GPU side (after a fault or a hang, or any time)",
         "reset", "cuCtxDestroy, then cuCtxCreate (in a new worker process) and every allocation again",
         details="Every buffer comes back with its name, kind, size and flags at new pointers, registrations are "
                 "redone, streams (numbers, flags, priorities) and events are made again and loaded kernels "
                 "recompiled. Host contents (pageable, pinned, registered, managed when its host view can be "
                 "read) are kept; device contents are lost, and so is work that never finished. After a kernel "
                 "fault every CUDA call fails until `reset`; after Ctrl-C or `set gpu-timeout` gave a hung GPU "
                 "up, `reset` is the way back.")
def reset(session, backend, args):
    cause = backend.dead or "asked"
    try:
        session.settle(backend)
    except ShellError:
        pass  # a dead side cannot say what finished: what is still unresolved is lost below
    unfinished = [e.fields("op", "stream") for e in session.unresolved]
    saved, lost = _salvage(backend, session.buffers.values())
    backend.reset()
    with interrupts_held():  # from here every handle is stale until made again: Ctrl-C waits for the rebuild
        rows, dropped, kernels, kernel_failures = _rebuild(session, backend, saved, lost)
    return Reset({"cause": cause, "buffers": rows, "dropped": dropped,
                            "streams": [s.name for s in session.streams.values()],
                            "events": list(session.events), "kernels": kernels,
                            "kernels_lost": kernel_failures, "unfinished": unfinished,
                            "timing": backend.timing_label})


@c_writer("reset")
def c_reset(w, a, i, text):
    """cudaDeviceReset on every GPU the session used, then what the shell makes again, each in its context:
    buffers (host contents kept, device contents lost: zeroed, as new memory is), registrations, streams,
    events and peer access; the runtime loads the kernels again."""
    if w.held:
        raise refuse(text, "the work held since `hold` never runs in the session; cudaDeviceReset would wait "
                     "for it forever", "`release` before `reset`")
    if w.created:
        raise refuse(text, f"the shell makes context {', '.join(w.created)} again; cudaDeviceReset resets "
                     "the GPUs' primary contexts alone", "destroy the contexts you made before `reset`")
    missing = [n for n in w.buffers if n not in w.buf_make] + \
        [s for s in w.stream_ctx if s not in w.stream_make]
    if missing:
        raise refuse(text, f"the program does not know how {', '.join(missing)} were made")
    gpus = sorted(w.devices)
    w.emit("{  // reset: a fresh context, and everything made again in it", i)
    j = i + 1
    for d in gpus:
        w.in_ctx(f"gpu{d}", j, lambda: w.emit("CHECK(cudaDeviceSynchronize());", j, "cuCtxSynchronize"))
    for n, (kind, size) in w.buffers.items():
        if kind in ("pinned", "managed"):
            var = ident("b", n)
            w.emit(f"unsigned char *keep_{var} = (unsigned char *)malloc({size}); "
                   f"memcpy(keep_{var}, {var}, {size});", j, replay=True)
    for d in gpus:
        w.in_ctx(f"gpu{d}", j, lambda: w.emit("CHECK(cudaDeviceReset());", j, "cuDevicePrimaryCtxReset"))
    if "hold" in w.helpers:
        w.emit("hold_flag = nullptr;  // freed with the context: the next `hold` makes it again", j,
               replay=True)
    for n, (kind, size) in w.buffers.items():
        var = ident("b", n)
        if kind in ("pageable", "registered"):  # malloc's pages outlive the context; their pinning does not
            if kind == "registered":
                w.emit(w.buf_make[n + "\0registered"], j, "cuMemHostRegister_v2")
            continue

        def remake(n=n, kind=kind, size=size, var=var):
            w.emit(w.buf_make[n], j)
            if kind == "device":
                w.emit(f"CHECK(cudaMemset({var}, 0, {size}));", j, replay=True)
            else:
                w.emit(f"memcpy({var}, keep_{var}, {size}); free(keep_{var});", j, replay=True)
        w.in_ctx(w.buf_ctx.get(n, w.ctx), j, remake)
    for s_ in w.stream_ctx:
        w.in_ctx(w.stream_ctx[s_], j, lambda s_=s_: w.emit(w.stream_make[s_], j))
    for e in sorted(w.events):
        var = ident("e", e)
        w.in_ctx(w.event_ctx.get(e, w.ctx), j,
                 lambda var=var: w.emit(f"CHECK(cudaEventCreate(&{var}));", j, "cuEventCreate"))
    for src, dst in sorted(w.peers):
        w.emit(f"{w.switch(f'gpu{src}')} CHECK(cudaDeviceEnablePeerAccess({dst}, 0)); "
               f"{w.switch(w.ctx)}", j, "cuCtxEnablePeerAccess")
    w.emit("}", i)


# ------------------------------------------------------------------ the results of these commands
class ResetDataBuffersItem(TypedDict):
    name: str
    kind: str
    size: int
    flags: str
    old_host_ptr: str | None
    old_device_ptr: str | None  # None: host memory the GPU has no pointer for (pageable)
    host_ptr: str | None
    device_ptr: str | None
    contents: str


class ResetDataUnfinishedItem(TypedDict):
    op: str
    stream: str


class ResetData(TypedDict):
    cause: str
    buffers: list[ResetDataBuffersItem]
    dropped: dict[str, str]
    streams: list[str]
    events: list[str]
    kernels: list[str]
    kernels_lost: dict[str, str]
    unfinished: list[ResetDataUnfinishedItem]
    timing: str


class Reset(Result, kind="reset"):
    Data = ResetData

    def lines(self, tablefmt="simple", width=0):
        d = self.data
        cause = "on request" if d["cause"] == "asked" else f"after {d['cause']}"
        lines = [f"reset {cause}: a fresh GPU side; the session was rebuilt on it ({d['timing']})"]
        if d["buffers"]:
            rows = [[b["name"], b["kind"], format_size_exact(b["size"]), b["flags"],
                     f"{b['old_host_ptr'] or '-'} → {b['host_ptr'] or '-'}",
                     f"{b['old_device_ptr'] or '-'} → {b['device_ptr'] or '-'}", b["contents"]] for b in d["buffers"]]
            lines.append(fit(rows, ["buffer", "kind", "size", "flags", "host ptr", "device ptr", "contents"],
                             tablefmt, width))
        lines += [f"  {b}: could not be made again ({code}); it is gone" for b, code in d["dropped"].items()]
        if d["streams"] or d["events"]:
            lines.append("  streams made again: " + (", ".join(d["streams"]) or "none")
                         + "; events made again (not recorded yet): " + (", ".join(d["events"]) or "none"))
        if d["kernels"]:
            lines.append("  kernels recompiled: " + ", ".join(d["kernels"]))
        lines += [f"  kernel {k}: could not be recompiled ({code}); it is gone" for k, code in d["kernels_lost"].items()]
        if d["unfinished"]:
            lines.append("  never finished: " + ", ".join(f"{u['op']} (stream {u['stream']})" for u in d["unfinished"]))
        return lines
