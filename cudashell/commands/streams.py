"""Streams and synchronisation: create, destroy, list, and make the host wait."""

from __future__ import annotations

from ..errors import ShellError, usage
from ..grammar import Arg, Flag, Opt
from ..registry import command
from ..results import Result, timing_data
from ..session import Stream
from .checks import RESERVED


def stream_row(backend, s: Stream | None) -> dict:
    if s is None:
        return {"name": "0", "number": 0, "nonblocking": False, "priority": 0, "legacy_default": True,
                "idle": backend.stream_idle(None)}
    return {"name": s.name, "number": s.number, "nonblocking": s.nonblocking, "priority": s.priority,
            "legacy_default": False, "idle": backend.stream_idle(s.handle)}


@command("stream create", "streams", "create a stream (numbered 1, 2, …)",
         "stream create nonblocking priority -2", "cudaStreamCreateWithPriority (cuStreamCreateWithPriority)",
         flags=(Flag("nonblocking"),), opts=(Opt("priority", Arg("N", "int")), Opt("as", Arg("NAME", "newname"))),
         details="A blocking stream (the default) waits for the legacy default stream and the default stream "
                 "waits for it; `nonblocking` opts out. Lower numbers are higher priority; the driver clamps "
                 "N into its range (0 least … -5 greatest on the H100).")
def stream_create(session, backend, args):
    number = session.next_stream_number()
    name = args.get("NAME") or str(number)
    if name.lower() in RESERVED or name in session.streams or name.lower() == "0":
        raise usage(f"'{name}' cannot name a new stream", args.col("NAME"), "pick another name")
    handle, priority = backend.stream_create("nonblocking" in args.flags, args.get("N", 0))
    s = Stream(name, number, handle, "nonblocking" in args.flags, priority, backend.info.ordinal)
    session.add_stream(s)
    least, greatest = backend.priority_range()
    return Result("stream", {**stream_row(backend, s), "asked_priority": args.get("N", 0),
                             "priority_range": [least, greatest]})


@command("stream destroy", "streams", "destroy a stream", "stream destroy 1",
         "cudaStreamDestroy (cuStreamDestroy)", args=(Arg("S", "stream"),))
def stream_destroy(session, backend, args):
    s = session.stream(args.get("S"), args.col("S"))
    if s is None:
        raise ShellError("USAGE", "the default stream cannot be destroyed", None, args.col("S"))
    backend.stream_destroy(s.handle)
    del session.streams[s.name]
    return Result("message", {"text": f"stream {s.name} destroyed"})


@command("streams", "streams", "list the streams", "streams", "cudaStreamQuery (cuStreamQuery)")
def streams(session, backend, args):
    rows = [stream_row(backend, None)] + [stream_row(backend, s) for s in session.streams.values()]
    return Result("streams", {"streams": rows})


@command("sync", "streams", "wait for the device, or for one stream", "sync stream 1",
         "cudaDeviceSynchronize / cudaStreamSynchronize",
         args=(Arg("WHAT", choices=("device",), optional=True),), opts=(Opt("stream", Arg("S", "stream")),))
def sync(session, backend, args):
    if "S" in args.values:
        if "WHAT" in args.values:
            raise usage("sync either the device or one stream", args.col("S"))
        s = session.stream(args.get("S"), args.col("S"))
        t = backend.stream_sync(s.handle if s else None)
        session.clear_pending(s.name if s else "0")
        return Result("sync", {"what": f"stream {s.name if s else '0'}", **timing_data(t),
                               "completed": completed(session, backend)})
    t = backend.device_sync()
    session.clear_pending()
    return Result("sync", {"what": "device", **timing_data(t), "completed": completed(session, backend)})


def completed(session, backend) -> list[dict]:
    """The async work whose GPU time was pending and is now known."""
    return [{k: e[k] for k in ("op", "stream", "bytes", "seconds")} for e in session.resolve_pending(backend.resolve)]
