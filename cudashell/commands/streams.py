"""Streams and synchronisation: create, destroy, list, and make the host wait."""

from __future__ import annotations

from typing import TypedDict

from ..errors import ShellError, usage
from ..export.cemit import ident
from ..language.argkinds import parse_int
from ..language.grammar import Arg, Flag, Opt
from ..language.registry import c_writer, command
from ..model.session import Stream
from ..output.render import fit
from ..output.results import Message, Result, Synced, timing_data
from .checks import RESERVED


def stream_row(backend, s: Stream, session=None) -> dict:
    """One stream as `streams` lists it; another context's default stream is asked about from that context (its
    handle, NULL, means the current context's)."""
    if session is not None and s.is_default and s.context != session.current:
        backend.context_use(session.contexts[s.context].handle)
        try:
            idle = backend.stream_idle(None)
        finally:
            backend.context_use(session.context.handle)
    else:
        idle = backend.stream_idle(s.handle)
    return {"name": s.name, "number": s.number, "nonblocking": s.nonblocking, "priority": s.priority,
            "legacy_default": s.is_default, "idle": idle, "context": s.context}


@command("stream create", "streams", "create a stream (numbered 1, 2, …)",
         "stream create nonblocking priority -2", "cudaStreamCreateWithPriority (cuStreamCreateWithPriority)",
         flags=(Flag("nonblocking"),), opts=(Opt("priority", Arg("PRIORITY", "word")), Opt("as", Arg("NAME", "newname"))),
         details="A blocking stream (the default) waits for the legacy default stream and the default stream "
                 "waits for it; `nonblocking` opts out. Lower numbers are higher priority; the driver clamps "
                 "N into its range (0 least … -5 greatest on the H100); `high` and `low` name its ends.")
def stream_create(session, backend, args):
    number = session.next_stream_number()
    name = args.get("NAME") or str(number)
    if name.lower() in RESERVED or name in session.streams or name.lower() == "0":
        raise usage(f"'{name}' cannot name a new stream", args.col("NAME"), "pick another name")
    least, greatest = backend.priority_range()
    asked = args.get("PRIORITY", "0").lower()
    asked = {"high": greatest, "low": least}.get(asked) if asked in ("high", "low") else parse_int(asked, args.col("PRIORITY"))
    handle, priority = backend.stream_create("nonblocking" in args.flags, asked)
    if session.held is not None:  # held streams are every stream, those made later too
        backend.hold([handle])
    s = Stream(name, number, handle, "nonblocking" in args.flags, priority, session.context.device, session.current)
    session.add_stream(s)
    return StreamMade({**stream_row(backend, s), "asked_priority": asked,
                             "priority_range": [least, greatest]}, named=name)


@c_writer("stream create")
def c_stream_create(w, a, i, text):
    name = w.named(a, text)
    var = ident("s", name)
    w.declare(f"cudaStream_t {var};")
    prio = a.get("PRIORITY", "0")
    prio_expr = {"high": "greatest", "low": "least"}.get(str(prio).lower(), str(prio))
    line = (f"{{ int least, greatest; CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest)); "
            f"(void)least; (void)greatest; CHECK(cudaStreamCreateWithPriority(&{var}, "
            f"{'cudaStreamNonBlocking' if 'nonblocking' in a.flags else 'cudaStreamDefault'}, {prio_expr})); }}")
    w.emit(line, i, "cuStreamCreateWithPriority")
    w.stream_ctx[name] = w.ctx
    w.stream_make[name] = line
    if w.held:  # held streams are every stream, those made later too
        w.emit(f"k_hold<<<1, 1, 0, {var}>>>(hold_flag, hold_gen); CHECK(cudaGetLastError());", i,
               "cuLaunchKernel")


@command("stream destroy", "streams", "destroy a stream", "stream destroy 1",
         "cudaStreamDestroy (cuStreamDestroy)", args=(Arg("S", "stream"),))
def stream_destroy(session, backend, args):
    s = session.stream(args.get("S"), args.col("S"))
    if s.is_default:
        raise ShellError("USAGE", "the default stream cannot be destroyed", None, args.col("S"))
    busy = not backend.stream_idle(s.handle)
    backend.stream_destroy(s.handle)
    del session.streams[s.name]
    session.gone["stream " + s.name] = "was destroyed"
    text = f"stream {s.name} destroyed" + (" (its queued work still runs to the end)" if busy else "")
    return Message({"text": text, "name": s.name, "busy": busy, "call": "cudaStreamDestroy"})


@c_writer("stream destroy")
def c_stream_destroy(w, a, i, text):
    s = a.get("S")
    w.in_ctx(w.ctx_of_stream(s), i, lambda: w.emit(
        f"CHECK(cudaStreamDestroy({w.stream(s)}));", i, "cuStreamDestroy_v2"))
    w.stream_ctx.pop(s, None)
    w.stream_make.pop(s, None)


@command("stream query", "streams", "is a stream's work done?", "stream query 1", "cudaStreamQuery (cuStreamQuery)",
         args=(Arg("S", "stream"),), exported=False)
def stream_query(session, backend, args):
    s = session.stream(args.get("S"), args.col("S"))
    row = stream_row(backend, s)
    return Message({"text": f"stream {row['name']}: {'idle' if row['idle'] else 'busy'}", **row})


@command("streams", "streams", "list the streams", "streams", "cudaStreamQuery (cuStreamQuery)", exported=False)
def streams(session, backend, args):
    rows = [stream_row(backend, s, session) for s in session.all_streams()]
    return StreamList({"streams": rows})


@command("sync", "streams", "wait for the device, or for one stream", "sync stream 1",
         "cudaDeviceSynchronize / cudaStreamSynchronize",
         args=(Arg("WHAT", choices=("device",), optional=True),),
         opts=(Opt("stream", Arg("S", "stream")), Opt("event", Arg("E", "event"))),
         details="`sync` (or `sync device`) waits for the current context's work (cuCtxSynchronize; with several "
                 "contexts, `context use` another to wait for its work, or sync its streams).")
def sync(session, backend, args):
    if len([k for k in ("WHAT", "S", "E") if k in args.values]) > 1:
        raise usage("sync the device, one stream or one event", args.col("S"))
    if "E" in args.values:
        event = session.event(args.get("E"), args.col("E"))
        t = backend.event_sync(event.handle)
        session.order.host_waited(session.traced() - 1, event=event.name)
        return Synced({"what": f"event {event.name}", "call": "cudaEventSynchronize", **timing_data(t),
                               "completed": session.completed(backend)})
    if "S" in args.values:
        s = session.stream(args.get("S"), args.col("S"))
        t = backend.stream_sync(s.handle)
        session.order.host_waited(session.traced() - 1, stream=s.name)
        return Synced({"what": f"stream {s.name}", "call": "cudaStreamSynchronize",
                               **timing_data(t),
                               "completed": session.completed(backend)})
    t = backend.device_sync()
    session.order.host_waited(session.traced() - 1)
    return Synced({"what": "device", "call": "cudaDeviceSynchronize", **timing_data(t),
                           "completed": session.completed(backend)})


@c_writer("sync")
def c_sync(w, a, i, text):
    if a.get("E"):
        w.emit(f"CHECK(cudaEventSynchronize({ident('e', a.get('E'))}));", i, "cuEventSynchronize")
    elif a.get("S") is not None:
        s = a.get("S")
        w.in_ctx(w.ctx_of_stream(s), i, lambda: w.emit(
            f"CHECK(cudaStreamSynchronize({w.stream(s)}));", i, "cuStreamSynchronize"))
    else:
        w.emit("CHECK(cudaDeviceSynchronize());", i, "cuCtxSynchronize")


@command("sleep", "streams", "let the host wait while the GPU works on", "sleep 5",
         "usleep (no CUDA call: host time passes)", args=(Arg("MS", "count"),),
         details="The host does nothing for MS milliseconds (at most 60000); queued GPU work carries on, so a "
                 "later `stream query` or `show` sees what finished meanwhile. On the simulator the virtual "
                 "clock advances by MS.")
def sleep(session, backend, args):
    ms = args.get("MS")
    if ms > 60000:
        raise usage(f"{ms} ms is over a minute", args.col("MS"), "sleep at most 60000 ms")
    t0 = backend.clock()
    backend.host_sleep(ms / 1e3)
    return Message({"text": f"host slept {ms} ms", "ms": ms, "host_seconds": backend.clock() - t0})


@c_writer("sleep")
def c_sleep(w, a, i, text):
    w.emit(f"std::this_thread::sleep_for(std::chrono::milliseconds({a.get('MS')}));", i,
           "(none: host time passes)")


# ------------------------------------------------------------------ the results of these commands
class StreamData(TypedDict):
    name: str
    number: int
    nonblocking: bool
    priority: int
    legacy_default: bool
    idle: bool
    context: str
    asked_priority: int
    priority_range: list[int]


class StreamMade(Result, kind="stream"):
    Data = StreamData

    def text(self):
        d = self.data
        clamp = f" (asked {d['asked_priority']}, range {d['priority_range'][0]}..{d['priority_range'][1]})" \
            if d["asked_priority"] != d["priority"] else ""
        return [f"stream {d['name']}: {'nonblocking' if d['nonblocking'] else 'blocking'}, priority "
                f"{d['priority']}{clamp}"]


class StreamsDataStreamsItem(TypedDict):
    name: str
    number: int
    nonblocking: bool
    priority: int
    legacy_default: bool
    idle: bool
    context: str


class StreamsData(TypedDict):
    streams: list[StreamsDataStreamsItem]


class StreamList(Result, kind="streams"):
    Data = StreamsData

    def lines(self, tablefmt="simple", width=0):
        d = self.data
        ctxs = len({r["context"] for r in d["streams"]}) > 1
        rows = [[r["name"] + (" (legacy default)" if r["legacy_default"] else ""),
                 "nonblocking" if r["nonblocking"] else "blocking", r["priority"], "idle" if r["idle"] else "busy"]
                + ([r["context"]] if ctxs else []) for r in d["streams"]]
        return [fit(rows, ["stream", "sync with default", "priority", "work"] + (["context"] if ctxs else []),
                    tablefmt, width)]
