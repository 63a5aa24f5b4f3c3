"""memcpy and memset, sync or async on a stream, each reporting bytes, time, GB/s and blocking."""

from __future__ import annotations

from typing import TypedDict

from ..errors import usage
from ..language.grammar import Arg, Flag, Opt
from ..language.registry import c_writer, command
from ..model.operations import MEMCPY, MEMSET
from ..output.render import gpu_time, how_text, timing_note
from ..output.results import TIMING_FIELDS, Result, timing_data
from ..sizes import format_size_exact
from .checks import (
    check_device_accessible,
    check_direction,
    check_on_this_gpu,
    check_range,
    common_size,
    infer_direction,
    region,
)

DIRECTIONS = ("h2d", "d2h", "d2d", "h2h")
def _fits(buf, words: list[str], end: int) -> bool:
    """Completion after `memcpy h2d`: sources on the direction's first side, destinations on its second."""
    direction = words[1].lower() if len(words) > 1 else ""
    return direction not in DIRECTIONS or direction[end] in buf.side


def stream_for(session, args):
    return session.stream(args.get("S"), args.col("S"))


@command("memcpy", "copies", "copy between buffers or parts of them (direction inferred when left out)",
         "memcpy h2d p0[32MB:] d0[32MB:] async stream 1", "cudaMemcpy / cudaMemcpyAsync (cuMemcpy, cuMemcpyAsync)",
         args=(Arg("DIR", choices=DIRECTIONS, optional=True), Arg("SRC", "part", accepts=lambda b, w: _fits(b, w, 0)),
               Arg("DST", "part", accepts=lambda b, w: _fits(b, w, 2)),
               Arg("SIZE", "size", optional=True)),
         flags=(Flag("async"), Flag("unchecked")), opts=(Opt("stream", Arg("S", "stream"), needs="async"),),
         details="Source first, as the direction reads. A buffer or a part of one: `p0[32MB:]` (from 32 MiB to the "
                 "end), `p0[1MB:+64KB]` (64 KiB from 1 MiB), `p0[0:4KB]` (start and end) — C's `p0 + offset`. "
                 "SIZE defaults to the ranges' length, else the rest of the source. Reports bytes, "
                 "time, GB/s, whether the host call blocked (an async copy from pageable memory does: it is "
                 "staged through a pinned buffer), and whether the time was measured or modeled. `unchecked` skips "
                 "the shell's direction check (cuMemcpy infers it from the pointers); bounds are always checked.")
def memcpy(session, backend, args):
    src = region(session, args.get("SRC"), args.col("SRC"), "copy")
    dst = region(session, args.get("DST"), args.col("DST"), "copy")
    direction = args.get("DIR")
    if direction and "unchecked" not in args.flags:
        check_direction(direction, src.buf, dst.buf, args.col("DIR"))
    direction = direction or infer_direction(src.buf, dst.buf)  # under UVA the pointers decide; the name is what was said
    nbytes = common_size((src, dst), args.get("SIZE"), args.col("SIZE"), (args.col("SRC"), args.col("DST")))
    size_col = args.col("SIZE") if "SIZE" in args.values else None
    check_range(src.buf, src.offset, nbytes, size_col or args.col("SRC"), "copy")
    check_range(dst.buf, dst.offset, nbytes, size_col or args.col("DST"), "copy")
    stream = stream_for(session, args)
    async_ = "async" in args.flags
    t = backend.memcpy(src.buf, src.offset, dst.buf, dst.offset, nbytes, stream.handle, async_)
    session.track(MEMCPY[direction], stream, nbytes, t, src.buf, dst.buf)
    dst.buf.view = src.buf.view  # the bytes came as what they were
    return Copy({"direction": direction, "src": src.name, "dst": dst.name, "bytes": nbytes,
                           "src_offset": src.offset, "dst_offset": dst.offset,
                           "src_part": src.label(nbytes), "dst_part": dst.label(nbytes),
                           "gbps": nbytes / t.seconds / 1e9 if t.seconds else None,
                           "async": async_, "stream": stream.name,
                           "call": _copy_call(src.buf, dst.buf) + ("Async" if async_ else ""), **timing_data(t)})


def _copy_call(src, dst) -> str:
    """The runtime call a copy is: to or from a module's variable, the symbol calls (cuMemcpy to its address)."""
    return "cudaMemcpyToSymbol" if dst.symbol else "cudaMemcpyFromSymbol" if src.symbol else "cudaMemcpy"


MEMCPY_KIND = {"h2d": "cudaMemcpyHostToDevice", "d2h": "cudaMemcpyDeviceToHost", "d2d": "cudaMemcpyDeviceToDevice",
               "h2h": "cudaMemcpyHostToHost"}


@c_writer("memcpy")
def c_memcpy(w, a, i, text):
    src, dst = a.get("SRC"), a.get("DST")
    nbytes = a.get("SIZE")
    if nbytes is None:
        nbytes = w.length(src) if w.length(src) is not None else w.rest(src) \
            if w.length(dst) is None else w.length(dst)
    direction = a.get("DIR") or _c_direction(w.buffers[src.name][0], w.buffers[dst.name][0])
    if dst.name in w.symbols:  # a module's variable: by its name, at an offset
        _maybe_async(w, a, i, "cudaMemcpyToSymbol", f"{w.symbols[dst.name]}, {w.ptr(src)}, {nbytes}, {dst.start}, "
                     f"{MEMCPY_KIND[direction]}", "cuMemcpy")
    elif src.name in w.symbols:
        _maybe_async(w, a, i, "cudaMemcpyFromSymbol", f"{w.ptr(dst)}, {w.symbols[src.name]}, {nbytes}, {src.start}, "
                     f"{MEMCPY_KIND[direction]}", "cuMemcpy")
    else:
        _maybe_async(w, a, i, "cudaMemcpy", f"{w.ptr(dst)}, {w.ptr(src)}, {nbytes}, {MEMCPY_KIND[direction]}",
                     "cuMemcpy")


@command("memset", "copies", "set bytes of device-accessible memory", "memset d0[1MB:+64KB] 0 async",
         "cudaMemset / cudaMemsetAsync (cuMemsetD8)",
         args=(Arg("NAME", "part", accepts=lambda b, w: b.device_accessible), Arg("BYTE", "int"),
               Arg("SIZE", "size", optional=True)),
         flags=(Flag("async"), Flag("unchecked")), opts=(Opt("stream", Arg("S", "stream"), needs="async"),),
         details="The GPU writes the bytes, so the buffer must be device-accessible (device, managed, or "
                 "pinned/registered under UVA); `unchecked` hands the driver the host pointer anyway. A part of a "
                 "buffer (`d0[1MB:+64KB]`) sets only those bytes; SIZE defaults to the range's length.")
def memset(session, backend, args):
    part = region(session, args.get("NAME"), args.col("NAME"), "memset")
    buf = part.buf
    value = args.get("BYTE")
    if not 0 <= value <= 255:
        raise usage(f"memset sets bytes: {value} is not 0..255", args.col("BYTE"))
    nbytes = common_size((part,), args.get("SIZE"), args.col("SIZE"), (args.col("NAME"),))
    check_range(buf, part.offset, nbytes, args.col("SIZE") if "SIZE" in args.values else args.col("NAME"), "memset")
    if "unchecked" not in args.flags:
        check_device_accessible(buf, args.col("NAME"), backend.info.unified_addressing)
    stream = stream_for(session, args)
    check_on_this_gpu(buf, stream.device, args.col("NAME"), "cudaMemset")
    async_ = "async" in args.flags
    t = backend.memset(buf, part.offset, value, nbytes, stream.handle, async_)
    session.track(MEMSET, stream, nbytes, t, buf)
    buf.view = "uint8"
    return Memset({"name": buf.name, "offset": part.offset, "part": part.label(nbytes), "value": value, "bytes": nbytes,
                             "async": async_, "stream": stream.name,
                             "call": "cudaMemsetAsync" if async_ else "cudaMemset", **timing_data(t)})


@c_writer("memset")
def c_memset(w, a, i, text):
    part = a.get("NAME")
    nbytes = a.get("SIZE", w.rest(part))
    _maybe_async(w, a, i, "cudaMemset", f"{w.ptr(part)}, {a.get('BYTE')}, {nbytes}", "cuMemsetD8")


def _maybe_async(w, a, i, call: str, args: str, driver: str) -> None:
    """`call`, or its Async form on the command's stream, issued in that stream's context."""
    if "async" in a.flags:
        w.in_ctx(w.ctx_of_stream(a.get("S")), i, lambda: w.emit(
            f"CHECK({call}Async({args}, {w.stream(a.get('S'))}));", i, driver + "Async"))
    else:
        w.emit(f"CHECK({call}({args}));", i, driver + ("_v2" if driver == "cuMemsetD8" else ""))


def _c_direction(src_kind: str, dst_kind: str) -> str:
    """The direction the program's buffers imply (its kinds: a registered buffer is host memory)."""
    dev = ("device", "managed")
    return f"{'d' if src_kind in dev else 'h'}2{'d' if dst_kind in dev else 'h'}"


# ------------------------------------------------------------------ the results of these commands
CopyData = TypedDict("CopyData", {
    "direction": str,
    "src": str,
    "dst": str,
    "bytes": int,
    "src_offset": int,
    "dst_offset": int,
    "src_part": str,
    "dst_part": str,
    "gbps": float | None,
    "async": bool,
    "stream": str,
    "call": str,
    **TIMING_FIELDS,
})


class Copy(Result, kind="copy"):
    Data = CopyData

    def text(self):
        d = self.data
        how = how_text(d)
        rate = f" = {d['gbps']:.2f} GB/s" if d["gbps"] else ""
        where = f" on stream {d['stream']}" if d["async"] else ""
        return [f"memcpy {d['direction']} {d['src_part']} → {d['dst_part']}: {format_size_exact(d['bytes'])} in "
                f"{gpu_time(d)}{rate}{where}; {d['call']}, {how} {timing_note(d)}"]


MemsetData = TypedDict("MemsetData", {
    "name": str,
    "offset": int,
    "part": str,
    "value": int,
    "bytes": int,
    "async": bool,
    "stream": str,
    "call": str,
    **TIMING_FIELDS,
})


class Memset(Result, kind="memset"):
    Data = MemsetData

    def text(self):
        d = self.data
        return [f"memset {d['part']} = {d['value']}: {format_size_exact(d['bytes'])} in {gpu_time(d)}; "
                f"{d['call']}, {how_text(d)} {timing_note(d)}"]
