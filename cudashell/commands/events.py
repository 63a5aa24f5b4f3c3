"""Events, cross-stream waits and host callbacks: ordering work between streams and seeing when it ran."""

from __future__ import annotations

from typing import TypedDict

from ..errors import ShellError
from ..export.cemit import cstr, ident
from ..language.grammar import Arg, Opt
from ..language.registry import c_writer, command
from ..model.session import Event
from ..output.results import Message, Result, Synced, TimingData, timing_data
from .checks import check_name


@command("event record", "streams", "record an event on a stream (made on first use)", "event record start stream 1",
         "cudaEventRecord (cuEventRecord)", args=(Arg("E", "newname"),), opts=(Opt("stream", Arg("S", "stream")),))
def event_record(session, backend, args):
    stream = session.stream(args.get("S"), args.col("S"))
    name = args.get("E")
    event = session.events.get(name)
    created = event is None
    if created:
        check_name(name, args.col("E"), "an event")
        event = Event(name, backend.event_create(), context=session.current)
    try:
        t = backend.event_record(event.handle, stream.handle)
    except ShellError:
        if created:  # a failed command leaves nothing behind
            backend.event_destroy(event.handle)
        raise
    event.stream = stream.name
    session.events[name] = event
    session.order.recorded(name, stream.name, session.traced() - 1)
    return EventRecorded({"name": name, "stream": event.stream, "created": created, "call": "cudaEventRecord",
                            **timing_data(t)})


@c_writer("event record")
def c_event_record(w, a, i, text):
    name = a.get("E")
    var = ident("e", name)
    if name not in w.events:  # made on first use, in the current context (again after `event destroy`)
        w.events.add(name)
        w.event_ctx[name] = w.ctx
        w.declare(f"cudaEvent_t {var} = nullptr;")
        w.emit(f"if (!{var}) CHECK(cudaEventCreate(&{var}));", i, "cuEventCreate", replay=True)
        w.shown.append(f"CHECK(cudaEventCreate(&{var}));")
    w.in_ctx(w.ctx_of_stream(a.get("S")), i, lambda: w.emit(
        f"CHECK(cudaEventRecord({var}, {w.stream(a.get('S'))}));", i, "cuEventRecord"))


@command("event destroy", "streams", "destroy an event", "event destroy start", "cudaEventDestroy (cuEventDestroy)",
         args=(Arg("E", "event"),))
def event_destroy(session, backend, args):
    event = session.event(args.get("E"), args.col("E"))
    backend.event_destroy(event.handle)
    del session.events[event.name]
    return Message({"text": f"destroyed event {event.name}", "name": event.name})


@c_writer("event destroy")
def c_event_destroy(w, a, i, text):
    name = a.get("E")
    var = ident("e", name)
    w.emit(f"CHECK(cudaEventDestroy({var}));", i, "cuEventDestroy_v2")
    w.emit(f"{var} = nullptr;", i, replay=True)
    w.events.discard(name)


@command("event sync", "streams", "wait on the host until the GPU reaches an event", "event sync stop",
         "cudaEventSynchronize (cuEventSynchronize)", args=(Arg("E", "event"),))
def event_sync(session, backend, args):
    event = session.event(args.get("E"), args.col("E"))
    t = backend.event_sync(event.handle)
    session.order.host_waited(session.traced() - 1, event=event.name)
    return Synced({"what": f"event {event.name}", "call": "cudaEventSynchronize", **timing_data(t),
                           "completed": session.completed(backend)})


@c_writer("event sync")
def c_event_sync(w, a, i, text):
    w.emit(f"CHECK(cudaEventSynchronize({ident('e', a.get('E'))}));", i, "cuEventSynchronize")


@command("event query", "streams", "has the GPU reached an event yet?", "event query stop",
         "cudaEventQuery (cuEventQuery)", args=(Arg("E", "event"),), exported=False)
def event_query(session, backend, args):
    event = session.event(args.get("E"), args.col("E"))
    done = backend.event_query(event.handle)
    return Message({"text": f"event {event.name}: {'reached' if done else 'not reached yet'}",
                              "name": event.name, "done": done})


@command("elapsed", "streams", "milliseconds between two recorded events", "elapsed start stop",
         "cudaEventElapsedTime (cuEventElapsedTime)", args=(Arg("E1", "event"), Arg("E2", "event")))
def elapsed(session, backend, args):
    e1, e2 = session.event(args.get("E1"), args.col("E1")), session.event(args.get("E2"), args.col("E2"))
    seconds = backend.event_elapsed(e1.handle, e2.handle)
    return Elapsed({"from": e1.name, "to": e2.name, "ms": seconds * 1e3, "timing": backend.timing_label})


@c_writer("elapsed")
def c_elapsed(w, a, i, text):
    e1, e2 = a.get("E1"), a.get("E2")
    w.emit(f'{{ float ms; CHECK(cudaEventElapsedTime(&ms, {ident("e", e1)}, {ident("e", e2)})); '
           f'printf("elapsed {e1} {e2} %.3f ms\\n", ms); }}', i, "cuEventElapsedTime")


@command("wait", "streams", "make a stream wait for an event (recorded on another stream)", "wait 1 copied",
         "cudaStreamWaitEvent (cuStreamWaitEvent)", args=(Arg("S", "stream"), Arg("E", "event")))
def wait(session, backend, args):
    stream = session.stream(args.get("S"), args.col("S"))
    event = session.event(args.get("E"), args.col("E"))
    backend.stream_wait(stream.handle, event.handle)
    session.order.waited(stream.name, event.name)
    return Message({"text": f"stream {stream.name} waits for event {event.name}",
                              "stream": stream.name, "event": event.name})


@c_writer("wait")
def c_wait(w, a, i, text):
    s = a.get("S")
    w.in_ctx(w.ctx_of_stream(s), i, lambda: w.emit(
        f"CHECK(cudaStreamWaitEvent({w.stream(s)}, {ident('e', a.get('E'))}, 0));", i, "cuStreamWaitEvent"))


@command("callback", "streams", "print TEXT on the host when a stream reaches this point", "callback 1 copy done",
         "cudaLaunchHostFunc (cuLaunchHostFunc)", args=(Arg("S", "stream"), Arg("TEXT", "rest")),
         details="The text appears (with the time) once the stream has run everything queued before it — "
                 "shown after the command during which it fired, e.g. a `sync`.")
def callback(session, backend, args):
    stream = session.stream(args.get("S"), args.col("S"))
    t = backend.host_callback(stream.handle, args.get("TEXT"), stream.name)
    return Message({"text": f"callback queued on stream {stream.name}", "stream": stream.name,
                              "call": "cudaLaunchHostFunc", **timing_data(t)})


@c_writer("callback")
def c_callback(w, a, i, text):
    s = a.get("S")
    w.in_ctx(w.ctx_of_stream(s), i, lambda: w.emit(
        f"CHECK(cudaLaunchHostFunc({w.stream(s)}, host_print, (void *){cstr(a.get('TEXT'))}));", i,
        "cuLaunchHostFunc"))


# ------------------------------------------------------------------ the results of these commands
ElapsedData = TypedDict("ElapsedData", {
    "from": str,
    "to": str,
    "ms": float,
    "timing": str,
})


class Elapsed(Result, kind="elapsed"):
    Data = ElapsedData

    def text(self):
        d = self.data
        return [f"elapsed {d['from']} → {d['to']}: {d['ms']:.3f} ms ({d['timing']})"]


class EventData(TimingData):
    name: str
    stream: str
    created: bool
    call: str


class EventRecorded(Result, kind="event"):
    Data = EventData

    def text(self):
        d = self.data
        return [f"event {d['name']} recorded on stream {d['stream']}" + (" (new)" if d["created"] else "")]
