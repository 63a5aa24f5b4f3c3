"""memcpy2d and memcpy3d: rectangles and boxes of bytes between pitched or linear buffers (cudaMemcpy2D,
cudaMemcpy3D). Each side's rows lie a pitch apart — a pitched buffer's own, a linear one's the copy's width unless
told — and the rectangle is checked to fit both buffers before the driver sees it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from ..errors import ShellError
from ..export.cemit import ident
from ..language.grammar import Arg, Flag, Opt
from ..language.registry import c_writer, command
from ..model.operations import MEMCPY_SHAPED
from ..output.render import gpu_time, how_text, timing_note
from ..output.results import TIMING_FIELDS, Result, timing_data
from ..sizes import format_size_exact
from .checks import check_on_this_gpu, region

KINDS = {"h2d": "cudaMemcpyHostToDevice", "d2h": "cudaMemcpyDeviceToHost", "d2d": "cudaMemcpyDeviceToDevice",
         "h2h": "cudaMemcpyHostToHost"}


@dataclass(frozen=True)
class Side:
    """One side of a shaped copy: its region, its rows' pitch, and its rows a slice (cudaPitchedPtr's ysize)."""

    part: object  # a session Region
    pitch: int
    rows: int


def _direction(src, dst) -> str:
    """As memcpy infers it (cudaMemcpyDefault): device memory, managed memory included, is the device side."""
    return f"{'d' if 'd' in src.side else 'h'}2{'d' if 'd' in dst.side else 'h'}"


def _side(session, args, key: str, pitch_key: str, width: int, height: int, depth: int, word: str) -> Side:
    """A side's region and layout, checked: the width within its pitch (else the driver's CUDA_ERROR_INVALID_VALUE),
    the rectangle inside its row (pitched memory) and every row inside the region."""
    part = region(session, args.get(key), args.col(key), "copy")
    buf, shape = part.buf, part.buf.shape
    pitch = args.get(pitch_key) if pitch_key in args.values else shape.pitch if shape else width
    rows = shape.height if shape else height
    col = args.col(pitch_key) if pitch_key in args.values else args.col(key)
    if width > pitch:
        raise ShellError("CUDA_ERROR_INVALID_VALUE", f"rows of {width} B are wider than {buf.name}'s pitch "
                         f"({pitch} B): the driver refuses the copy", "give a width up to the pitch", col)
    if shape and pitch == shape.pitch and part.offset % pitch + width > pitch:
        raise ShellError("OUT_OF_BOUNDS", f"the {word}'s rectangle starts {part.offset % pitch} B into a row of "
                         f"{buf.name}: {width} B from there cross into the next row (pitch {pitch})",
                         "start the rectangle further left, or copy fewer bytes a row", args.col(key))
    if depth > 1 and height > rows:
        raise ShellError("OUT_OF_BOUNDS", f"{height} rows a slice do not fit {buf.name}'s slices of {rows} rows",
                         "copy fewer rows, or allocate deeper slices", args.col(key))
    end = ((depth - 1) * rows + height - 1) * pitch + width
    if end > part.nbytes:
        raise ShellError("OUT_OF_BOUNDS", f"the {word}'s {width}x{height}" + (f"x{depth}" if depth > 1 else "")
                         + f" B rectangle (rows {pitch} B apart) needs {end} B from {part.label()}, which has "
                         f"{format_size_exact(part.nbytes)}", "copy a smaller rectangle, or start it earlier",
                         args.col(key))
    return Side(part, pitch, rows)


def _extent(args, dims: int) -> tuple[int, int, int]:
    extent = args.get("EXTENT")
    if not isinstance(extent, tuple) or len(extent) != dims:
        shape = "WIDTHxHEIGHT" if dims == 2 else "WIDTHxHEIGHTxDEPTH"
        raise ShellError("USAGE", f"memcpy{dims}d takes its extent as {shape}", f"e.g. memcpy{dims}d h img "
                         + ("1000x64" if dims == 2 else "1000x64x8"), args.col("EXTENT"))
    width, height, depth = (*extent, 1)[:3]
    if min(width, height, depth) <= 0:
        raise ShellError("USAGE", f"an extent of {'x'.join(map(str, extent))} copies nothing",
                         "give a width, height and depth above 0", args.col("EXTENT"))
    return width, height, depth


def _copy(session, backend, args, dims: int):
    width, height, depth = _extent(args, dims)
    src = _side(session, args, "SRC", "SP", width, height, depth, "source")
    dst = _side(session, args, "DST", "DP", width, height, depth, "destination")
    stream = session.stream(args.get("S"), args.col("S"))
    for key, side in (("SRC", src), ("DST", dst)):
        check_on_this_gpu(side.part.buf, stream.device, args.col(key), f"cudaMemcpy{dims}D")
    direction = _direction(src.part.buf, dst.part.buf)
    async_ = "async" in args.flags
    t = backend.memcpy_shaped(src.part.buf, src.part.offset, src.pitch, src.rows, dst.part.buf, dst.part.offset,
                              dst.pitch, dst.rows, width, height, depth, stream.handle, async_)
    nbytes = width * height * depth
    session.track(MEMCPY_SHAPED[(f"{dims}d", direction)], stream, nbytes, t, src.part.buf, dst.part.buf)
    dst.part.buf.view = src.part.buf.view
    return ShapedCopy({"direction": direction, "src": src.part.name, "dst": dst.part.name,
                       "src_offset": src.part.offset, "dst_offset": dst.part.offset, "width": width, "height": height,
                       "depth": depth, "src_pitch": src.pitch, "dst_pitch": dst.pitch, "bytes": nbytes,
                       "gbps": nbytes / t.seconds / 1e9 if t.seconds else None, "async": async_, "stream": stream.name,
                       "call": f"cudaMemcpy{dims}D" + ("Async" if async_ else ""), **timing_data(t)})


COMMON = {"flags": (Flag("async"),),
          "opts": (Opt("spitch", Arg("SP", "size")), Opt("dpitch", Arg("DP", "size")),
                   Opt("stream", Arg("S", "stream"), needs="async"))}


@command("memcpy2d", "copies", "copy a rectangle of rows between pitched or linear buffers",
         "memcpy2d h img 1000x64 async stream 1", "cudaMemcpy2D / cudaMemcpy2DAsync (cuMemcpy2D, cuMemcpy2DAsync)",
         args=(Arg("SRC", "part"), Arg("DST", "part"), Arg("EXTENT", "extent")), **COMMON,
         details="HEIGHT rows of WIDTH bytes, source first. Each side's rows lie a pitch apart: a pitched buffer's "
                 "(`alloc pitched`), a linear buffer's the width, unless `spitch N` / `dpitch N` says otherwise. "
                 "A part picks the rectangle's origin: `img[2048:]` starts at row 2 of a 1024-byte pitch. The "
                 "rectangle must fit each buffer (OUT_OF_BOUNDS names which), and a width over a pitch is the "
                 "driver's CUDA_ERROR_INVALID_VALUE. Narrow rows cost per row: 4-byte rows moved 0.97 GB/s on the "
                 "H100, 4096-byte rows 54.5 GB/s. The direction is what the buffers imply, as for memcpy.")
def memcpy2d(session, backend, args):
    return _copy(session, backend, args, 2)


@command("memcpy3d", "copies", "copy a box of slices of rows between pitched or linear buffers",
         "memcpy3d h vol 256x64x8", "cudaMemcpy3D / cudaMemcpy3DAsync (cuMemcpy3D, cuMemcpy3DAsync)",
         args=(Arg("SRC", "part"), Arg("DST", "part"), Arg("EXTENT", "extent")), **COMMON,
         details="DEPTH slices of HEIGHT rows of WIDTH bytes. A pitched buffer brings its pitch and its slices' "
                 "height (`alloc pitched 256x64x8`); a linear one is packed: rows WIDTH (or `spitch`/`dpitch`) bytes "
                 "apart, slices HEIGHT rows apart. Checked as memcpy2d is, slice by slice.")
def memcpy3d(session, backend, args):
    return _copy(session, backend, args, 3)


def _c_pitch(w, part, given, width: int) -> str:
    """The pitch C passes for a side: told, the driver's (the program's `pitch_NAME`), or the width."""
    if given is not None:
        return str(given)
    return ident("pitch", part.name) if part.name in w.pitched else str(width)


def _c_direction(w, src, dst) -> str:
    dev = ("device", "managed")
    return KINDS[f"{'d' if w.buffers[src.name][0] in dev else 'h'}2{'d' if w.buffers[dst.name][0] in dev else 'h'}"]


def _c_emit(w, a, i, call: str, args: str, driver: str) -> None:
    if "async" in a.flags:
        w.in_ctx(w.ctx_of_stream(a.get("S")), i, lambda: w.emit(
            f"CHECK({call}Async({args}, {w.stream(a.get('S'))}));", i, driver + "Async"))
    else:
        w.emit(f"CHECK({call}({args}));", i, driver)


@c_writer("memcpy2d")
def c_memcpy2d(w, a, i, text):
    src, dst = a.get("SRC"), a.get("DST")
    width, height = a.get("EXTENT")
    _c_emit(w, a, i, "cudaMemcpy2D", f"{w.ptr(dst)}, {_c_pitch(w, dst, a.get('DP'), width)}, {w.ptr(src)}, "
            f"{_c_pitch(w, src, a.get('SP'), width)}, {width}, {height}, {_c_direction(w, src, dst)}", "cuMemcpy2D")


@c_writer("memcpy3d")
def c_memcpy3d(w, a, i, text):
    """cudaMemcpy3D's parameters: each side a cudaPitchedPtr (pointer, pitch, width, rows a slice)."""
    src, dst = a.get("SRC"), a.get("DST")
    width, height, depth = a.get("EXTENT")

    def pitched(part, given) -> str:
        rows = w.pitched.get(part.name, height)
        return f"make_cudaPitchedPtr({w.ptr(part)}, {_c_pitch(w, part, given, width)}, {width}, {rows})"

    w.emit(f"{{ cudaMemcpy3DParms p = {{}}; p.srcPtr = {pitched(src, a.get('SP'))}; "
           f"p.dstPtr = {pitched(dst, a.get('DP'))}; p.extent = make_cudaExtent({width}, {height}, {depth}); "
           f"p.kind = {_c_direction(w, src, dst)};", i)
    _c_emit(w, a, i + 1, "cudaMemcpy3D", "&p", "cuMemcpy3D")
    w.emit("}", i)


# ------------------------------------------------------------------ the result of these commands
ShapedCopyData = TypedDict("ShapedCopyData", {
    "direction": str,
    "src": str,
    "dst": str,
    "src_offset": int,
    "dst_offset": int,
    "width": int,
    "height": int,
    "depth": int,
    "src_pitch": int,
    "dst_pitch": int,
    "bytes": int,
    "gbps": float | None,
    "async": bool,
    "stream": str,
    "call": str,
    **TIMING_FIELDS,
})


class ShapedCopy(Result, kind="copy_shaped"):
    Data = ShapedCopyData

    def text(self):
        d = self.data
        box = f"{d['width']}x{d['height']}" + (f"x{d['depth']}" if d["depth"] > 1 else "")
        rate = f" = {d['gbps']:.2f} GB/s" if d["gbps"] else ""
        where = f" on stream {d['stream']}" if d["async"] else ""
        src, dst = (f"{d[k]}[{d[k + '_offset']}:]" if d[k + "_offset"] else d[k] for k in ("src", "dst"))
        return [f"memcpy{d['call'][10:12].lower()} {d['direction']} {src} → {dst}: "
                f"{box} B (pitch {d['src_pitch']} → {d['dst_pitch']}), {format_size_exact(d['bytes'])} in "
                f"{gpu_time(d)}{rate}{where}; {d['call']}, {how_text(d)} {timing_note(d)}"]
