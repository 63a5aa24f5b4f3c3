"""memcpy and memset, sync or async on a stream, each reporting bytes, time, GB/s and blocking."""

from __future__ import annotations

from ..errors import ShellError, usage
from ..grammar import Arg, Flag, Opt
from ..registry import command
from ..results import Result, timing_data
from .checks import check_device_accessible, check_range

DIRECTIONS = ("h2d", "d2h", "d2d", "h2h")
SIDE_WORD = {"h": "host", "d": "device", "hd": "managed (host or device)"}


def infer_direction(src, dst) -> str:
    """Like cudaMemcpyDefault: the direction the two buffers imply (managed counts as device)."""
    s = "d" if "d" in src.side else "h"
    d = "d" if "d" in dst.side else "h"
    return f"{s}2{d}"


def check_direction(direction: str, src, dst, col: int) -> None:
    s, d = direction[0], direction[2]
    if s not in src.side or d not in dst.side:
        right = infer_direction(src, dst)
        raise ShellError("KIND_MISMATCH",
                         f"{direction} copies {SIDE_WORD[s]} to {SIDE_WORD[d]}, but {src.name} is {src.kind} "
                         f"and {dst.name} is {dst.kind}",
                         f"did you mean `memcpy {right} {src.name} {dst.name}`? (or leave the direction out)", col)


def stream_for(session, args):
    stream_name = args.get("S")
    if stream_name is not None and "async" not in args.flags:
        raise usage("a stream applies only to async work", args.col("S"), "add `async`")
    return session.stream(stream_name, args.col("S"))


@command("memcpy", "copies", "copy between buffers (direction inferred when left out)",
         "memcpy h2d p0 d0 async stream 1", "cudaMemcpy / cudaMemcpyAsync (cuMemcpy, cuMemcpyAsync)",
         args=(Arg("DIR", choices=DIRECTIONS, optional=True), Arg("SRC", "buffer"), Arg("DST", "buffer"),
               Arg("SIZE", "size", optional=True)),
         flags=(Flag("async"), Flag("unchecked")), opts=(Opt("stream", Arg("S", "stream")),),
         details="Source first, as the direction reads. SIZE defaults to the whole source. Reports bytes, "
                 "time, GB/s, whether the host call blocked (an async copy from pageable memory does: it is "
                 "staged through a pinned buffer), and whether the time was measured or modeled. `unchecked` skips the shell's direction check (cuMemcpy "
                 "infers it from the pointers); bounds are always checked.")
def memcpy(session, backend, args):
    src = session.buffer(args.get("SRC"), args.col("SRC"))
    dst = session.buffer(args.get("DST"), args.col("DST"))
    direction = args.get("DIR")
    if direction and "unchecked" not in args.flags:
        check_direction(direction, src, dst, args.col("DIR"))
    direction = infer_direction(src, dst)  # what the driver does under UVA, whatever was said
    nbytes = args.get("SIZE", src.size)
    check_range(src, 0, nbytes, args.col("SIZE"), "copy")
    check_range(dst, 0, nbytes, args.col("SIZE") if "SIZE" in args.values else args.col("DST"), "copy")
    stream = stream_for(session, args)
    async_ = "async" in args.flags
    t = backend.memcpy(src, 0, dst, 0, nbytes, stream.handle, async_)
    session.track(f"memcpy {direction}", stream, nbytes, t, src, dst)
    dst.view = src.view  # the bytes came as what they were
    return Result("copy", {"direction": direction, "src": src.name, "dst": dst.name, "bytes": nbytes,
                           "gbps": nbytes / t.seconds / 1e9 if t.seconds else None,
                           "async": async_, "stream": stream.name,
                           "call": "cudaMemcpyAsync" if async_ else "cudaMemcpy", **timing_data(t)})


@command("memset", "copies", "set bytes of device-accessible memory", "memset d0 0 1MB async",
         "cudaMemset / cudaMemsetAsync (cuMemsetD8)",
         args=(Arg("NAME", "buffer"), Arg("BYTE", "int"), Arg("SIZE", "size", optional=True)),
         flags=(Flag("async"), Flag("unchecked")), opts=(Opt("stream", Arg("S", "stream")),),
         details="The GPU writes the bytes, so the buffer must be device-accessible (device, managed, or "
                 "pinned/registered under UVA); `unchecked` hands the driver the host pointer anyway.")
def memset(session, backend, args):
    buf = session.buffer(args.get("NAME"), args.col("NAME"))
    value = args.get("BYTE")
    if not 0 <= value <= 255:
        raise usage(f"memset sets bytes: {value} is not 0..255", args.col("BYTE"))
    nbytes = args.get("SIZE", buf.size)
    check_range(buf, 0, nbytes, args.col("SIZE"), "memset")
    if "unchecked" not in args.flags:
        check_device_accessible(buf, args.col("NAME"), backend.info.unified_addressing)
    stream = stream_for(session, args)
    async_ = "async" in args.flags
    t = backend.memset(buf, 0, value, nbytes, stream.handle, async_)
    session.track("memset", stream, nbytes, t, buf)
    buf.view = "uint8"
    return Result("memset", {"name": buf.name, "value": value, "bytes": nbytes, "async": async_,
                             "stream": stream.name,
                             "call": "cudaMemsetAsync" if async_ else "cudaMemset", **timing_data(t)})
