"""fill, show, compare: put known bytes in, look at them, check that copies kept them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported by the commands that use it: not at start (0.3 s on the H100 machine)
    import numpy as np

from typing import NotRequired, TypedDict

from ..errors import ShellError, usage
from ..export.cemit import CTYPES, ident
from ..language.grammar import Arg, Opt
from ..language.registry import c_writer, command
from ..output.render import fmt_seconds, pending_notes, plural
from ..output.results import Expectation, Result
from ..sizes import format_size_exact
from .checks import (
    GRADED,
    POINTS,
    check_host_accessible,
    check_range,
    check_within,
    common_size,
    region,
)


def pending(session, backend, *bufs) -> dict:
    """{buffer: [streams]} for buffers the GPU still has work on, as the host touches them."""
    session.settle(backend)
    return marked(*bufs)


def marked(*bufs) -> dict:
    """{buffer: [streams]} as the session last knew it (no look at the backend)."""
    return {b.name: b.pending_streams() for b in bufs if b.pending}

def host_readable(buf, words) -> bool:
    """Completion offers what the host can read or write."""
    return buf.host_accessible


SHOW_LIMIT = 1 << 20


def host_time(d) -> str:
    """How long the host's own work took, as a line's end says it: measured on a GPU's host, modeled on the
    simulator (from the profile's host rates, not this machine's)."""
    return f" — host {fmt_seconds(d['host_seconds'])} ({d['timing']})"


def _check_value(value, dtype: np.dtype, col: int) -> None:
    import numpy as np

    if isinstance(value, str):
        return
    if dtype.kind == "f" and isinstance(value, int) and abs(value) > 1e300:
        raise usage(f"{str(value)[:20]}… does not fit {dtype.name}", col, "floats go up to about 3.4e38 (float32)")
    if dtype.kind in "iu":
        if isinstance(value, float) and not value.is_integer():
            raise usage(f"{value} is not an integer, but dtype is {dtype.name}", col, "add `dtype float32`")
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise usage(f"{value} does not fit {dtype.name} ({info.min}..{info.max})", col,
                        "pick a wider dtype, e.g. `dtype int32`")


@command("fill", "data", "fill a host-accessible buffer with a value, iota (0,1,2,…) or random",
         "fill h0 iota dtype float32", "memset / a host loop (the host writes the bytes)",
         args=(Arg("NAME", "buffer", accepts=host_readable), Arg("VALUE", "value")),
         opts=(Opt("dtype", Arg("T", "dtype")), Opt("seed", Arg("SEED", "int"))),
         details="The host writes every element of the buffer as dtype T (default uint8); trailing bytes "
                 "that do not make a whole element stay as they were. `random` is repeatable with `seed`: "
                 "SplitMix64's 64-bit words, whose little-endian bytes an integer dtype takes in order (so "
                 "`dtype uint8` and `dtype uint32` write the same bytes), or one word an element of a float "
                 "dtype, as a number in [0, 1).")
def fill(session, backend, args):
    import numpy as np

    buf = session.buffer(args.get("NAME"), args.col("NAME"))
    check_host_accessible(buf, args.col("NAME"))
    dtype = np.dtype(args.get("T", "uint8"))
    value = args.get("VALUE")
    _check_value(value, dtype, args.col("VALUE"))
    count = buf.size // dtype.itemsize
    seed = args.get("SEED", 0)
    if not 0 <= seed < 1 << 64:
        raise usage(f"seed {seed} is not 0..2^64-1", args.col("SEED"))
    timing = backend.host_fill(buf, value, dtype.name, seed)
    buf.view = dtype.name
    return Filled({"name": buf.name, "value": value, "dtype": dtype.name, "elements": count,
                   "host_seconds": timing.host_seconds, "timing": timing.label,
                   "pending": pending(session, backend, buf)})


FILL_TYPES = {**CTYPES, "float16": "f16"}  # the prelude's fill_* templates: f16 is its half


@c_writer("fill")
def c_fill(w, a, i, text):
    name, value, dtype = a.get("NAME"), a.get("VALUE"), a.get("T", "uint8")
    ctype = FILL_TYPES[dtype]
    var, size = ident("b", name), w.buffers[name][1]
    if value == "iota":
        w.emit(f"fill_iota<{ctype}>({var}, {size});", i)
    elif value == "random":
        w.emit(f"fill_random<{ctype}>({var}, {size}, {a.get('SEED', 0)}ull, "
               f"{str(dtype.startswith('float')).lower()});", i)
    else:
        w.emit(f"fill_value<{ctype}>({var}, {size}, {value!r});", i)


@command("show", "data", "print the elements of a host-accessible buffer, or of a part of it",
         "show h0[1MB:] dtype float32 count 8", "(the host reads the memory)", args=(Arg("NAME", "part", accepts=host_readable),),
         opts=(Opt("dtype", Arg("T", "dtype")), Opt("count", Arg("COUNT", "count")), Opt("offset", Arg("B", "size"))),
         details="Shows `count` elements (default: the `count` setting, 16, or all of a range such as "
                 "`h0[1MB:+64]`) from byte `offset` (or the range's start) as dtype T — by "
                 "default the dtype its bytes were last written as: `fill … dtype`, float32 after a built-in kernel "
                 "wrote it, its source's after a `memcpy`, uint8 after a `memset`.")
def show(session, backend, args):
    import numpy as np

    part = region(session, args.get("NAME"), args.col("NAME"), "show")
    buf = part.buf
    check_host_accessible(buf, args.col("NAME"))
    dtype = np.dtype(args.get("T", buf.view))
    if "B" in args.values and not args.get("NAME").whole:
        raise usage("give the start once: in the range or as `offset`", args.col("B"))
    offset = args.get("B", part.offset)
    check_range(buf, offset, 0, args.col("B"), "show")
    end = part.offset + part.nbytes if part.explicit else buf.size
    available = max(0, end - offset) // dtype.itemsize
    if "COUNT" in args.values or part.explicit:
        count = args.get("COUNT", available)
        where = args.col("COUNT") if "COUNT" in args.values else args.col("NAME")
        if count > SHOW_LIMIT:  # each element becomes a Python number and a word on screen
            raise usage(f"show prints at most {SHOW_LIMIT} elements, not {count}", where,
                        "`checksum` or `compare` look at a whole buffer")
        if part.explicit:
            check_within(part, count * dtype.itemsize, where, f"{count} {dtype.name} elements")
        else:
            check_range(buf, offset, count * dtype.itemsize, where, "show")
    else:
        count = min(int(session.settings["count"]), available)
    raw, timing = backend.host_read(buf, offset, count * dtype.itemsize)
    values = raw.view(dtype).tolist()
    return Shown({"name": buf.name, "dtype": dtype.name, "offset": offset, "count": count,
                  "elements": available + (0 if part.explicit else offset // dtype.itemsize),
                  "values": values, "host_seconds": timing.host_seconds, "timing": timing.label,
                  "pending": pending(session, backend, buf)})


@c_writer("show")
def c_show(w, a, i, text):
    pass  # the host reads the memory: nothing for the program to do


def compare_buffers(session, backend, a_part, b_part, size, cols, settle: bool = True) -> dict:
    """The comparison's record; `settle` False: the pending marks as the session last knew them (a failing
    `expect equal` must leave the session as it was)."""
    a = region(session, a_part, cols[0], "compare")
    b = region(session, b_part, cols[1], "compare")
    nbytes = min(a.nbytes, b.nbytes) if size is None and not (a.explicit or b.explicit) else \
        common_size((a, b), size, cols[2], cols[:2])
    check_range(a.buf, a.offset, nbytes, cols[2] or cols[0], "compare")
    check_range(b.buf, b.offset, nbytes, cols[2] or cols[1], "compare")
    at, timing = backend.host_compare(a.buf, a.offset, b.buf, b.offset, nbytes)
    same_length = size is not None or a.explicit or b.explicit or a.nbytes == b.nbytes
    out = {"a": a.name, "b": b.name, "a_offset": a.offset, "b_offset": b.offset, "a_part": a.label(nbytes),
           "b_part": b.label(nbytes), "bytes": nbytes, "equal": at is None and same_length,
           "host_seconds": timing.host_seconds, "timing": timing.label,
           "pending": pending(session, backend, a.buf, b.buf) if settle else marked(a.buf, b.buf)}
    if at is not None:
        out.update(offset=at, a_byte=int(backend.read(a.buf, a.offset + at, 1)[0]),
                   b_byte=int(backend.read(b.buf, b.offset + at, 1)[0]))
    elif not out["equal"]:
        out["sizes"] = [a.nbytes, b.nbytes]
    return out


@command("compare", "data", "compare two buffers (or parts of them) byte for byte", "compare h0 h1[4KB:]",
         "memcmp (device memory is read through a copy)",
         args=(Arg("A", "part"), Arg("B", "part"), Arg("SIZE", "size", optional=True)),
         details="Without SIZE or a range's length the buffers must have the same size. Says the first differing "
                 "offset, counted from the start of the compared bytes.", exported=False)
def compare(session, backend, args):
    data = compare_buffers(session, backend, args.get("A"), args.get("B"), args.get("SIZE"),
                           (args.col("A"), args.col("B"), args.col("SIZE") if "SIZE" in args.values else None))
    return Comparison(data)


@command("expect equal", "scripts", "check that two buffers hold the same bytes", "expect equal h0 h1[4KB:+4KB]",
         "(none)", args=(Arg("A", "part"), Arg("B", "part"), Arg("SIZE", "size", optional=True)), opts=(POINTS,),
         details=GRADED, exported=False, saved=False)
def expect_equal(session, backend, args):
    data = compare_buffers(session, backend, args.get("A"), args.get("B"), args.get("SIZE"),
                           (args.col("A"), args.col("B"), args.col("SIZE") if "SIZE" in args.values else None),
                           settle=False)
    if not data["equal"]:
        where = (f"first difference at byte {data['offset']}: {data['a_byte']} vs {data['b_byte']}"
                 if "offset" in data else f"sizes differ: {data['sizes'][0]} vs {data['sizes'][1]}")
        raise ShellError("EXPECT_FAILED", f"{data['a']} and {data['b']} differ — {where}", None, args.col("A"))
    data["pending"] = pending(session, backend, *(session.buffers[n] for n in data["pending"]))
    return Expectation({"expected": "equal", "passed": True, **data})


@command("checksum", "data", "a position-sensitive checksum of buffers (the same one `export c` prints)",
         "checksum h0 d0", "(a host loop; device memory is read through a copy)", args=(Arg("NAME", "buffer", many=True),), exported=False)
def checksum_(session, backend, args):
    bufs = [session.buffer(n, c) for n, c in zip(args.get("NAME"), args.many_cols["NAME"])]
    sums, seconds, label = {}, 0.0, backend.timing_label
    for b in bufs:
        sums[b.name], timing = backend.host_checksum(b)
        seconds, label = seconds + timing.host_seconds, timing.label
    return Checksums({"checksums": sums, "host_seconds": seconds, "timing": label,
                      "pending": pending(session, backend, *bufs)})


# ------------------------------------------------------------------ the results of these commands
class ChecksumsData(TypedDict):
    checksums: dict[str, int]
    host_seconds: float  # the host's time to read and sum them all: measured on a GPU's host, modeled on the simulator
    timing: str
    pending: dict[str, list[str]]


class Checksums(Result, kind="checksums"):
    Data = ChecksumsData

    def text(self):
        d = self.data
        return ([f"checksum {k} {v}" for k, v in d["checksums"].items()]  # each line as `export c`'s program prints it
                + [f"host time {fmt_seconds(d['host_seconds'])} ({d['timing']})"] + pending_notes(d))


class CompareData(TypedDict):
    a: str
    b: str
    a_offset: int
    b_offset: int
    a_part: str
    b_part: str
    bytes: int
    equal: bool
    host_seconds: float  # the host's time to read both: measured on a GPU's host, modeled on the simulator
    timing: str
    pending: dict[str, list[str]]
    offset: NotRequired[int]
    a_byte: NotRequired[int]
    b_byte: NotRequired[int]
    sizes: NotRequired[list[int]]


class Comparison(Result, kind="compare"):
    Data = CompareData

    def text(self):
        d = self.data
        a, b = d["a_part"], d["b_part"]
        if d["equal"]:
            line = f"{a} == {b} ({format_size_exact(d['bytes'])})"
        elif "offset" in d:
            line = f"{a} != {b}: first difference at byte {d['offset']}: {d['a_byte']} vs {d['b_byte']}"
        else:
            line = (f"{a} != {b}: the first {d['bytes']} bytes match but the sizes differ "
                    f"({d['sizes'][0]} vs {d['sizes'][1]})")
        return [line + host_time(d)] + pending_notes(d)


class FillData(TypedDict):
    name: str
    value: int | str
    dtype: str
    elements: int
    host_seconds: float  # the host's time to write them: measured on a GPU's host, modeled on the simulator
    timing: str
    pending: dict[str, list[str]]


class Filled(Result, kind="fill"):
    Data = FillData

    def text(self):
        d = self.data
        return [f"{d['name']}: {plural(d['elements'], d['dtype'] + ' element')} ← {d['value']}{host_time(d)}"] + \
            pending_notes(d)


class ShowData(TypedDict):
    name: str
    dtype: str
    offset: int
    count: int
    elements: int
    values: list[float]
    host_seconds: float  # the host's time to read them (the line does not say it: a few elements take no time)
    timing: str
    pending: dict[str, list[str]]


class Shown(Result, kind="show"):
    Data = ShowData

    def text(self):
        d = self.data
        values = [str(v) for v in d["values"]]
        printed = len(values)
        if len(values) > 64:  # long output is elided in the middle; --json has every value
            values = values[:48] + [f"… {len(values) - 56} more …"] + values[-8:]
            printed = 56
        shown = " ".join(values)
        more = ""
        if d["count"] < d["elements"] or printed < d["count"]:
            more = f"  ({d['count']} of {d['elements']} read" + (f", {printed} printed: --json has them all)"
                                                                  if printed < d["count"] else ")")
        return [f"{d['name']} [{d['dtype']}] @{d['offset']}: {shown}{more}"] + pending_notes(d)
