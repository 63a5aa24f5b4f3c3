"""What each kind of argument is: how a word of the command becomes its value (with the errors and columns the
parser reports), what completion offers for it, and how it is confined as a path (language/confinement.py): grading
confines every path, a script, a cell or a lesson's answers the paths it writes. `Arg(kind=...)` names one
of KINDS; an unknown name fails when the command's module is imported. Pure: no CUDA, no terminal."""

from __future__ import annotations

import difflib
import glob
import os
import re
from dataclasses import dataclass
from typing import Callable

from ..errors import ShellError, usage
from ..model.launchdims import C_UINT_MAX
from ..model.settings import SETTABLE
from ..sizes import parse_count, parse_size, size_word


def shipped_demos() -> dict[str, str]:
    """The shipped demos' names and titles, read when completion asks: the catalogue is teaching's, a layer above."""
    from ..teaching.shipped import demos

    return demos()


# ---------------------------------------------------------------- numbers


def parse_int(text: str, col: int | None = None) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise usage(f"expected an integer, got '{text}'", col) from None


# ---------------------------------------------------------------- extents of pitched memory and 2-D/3-D copies

EXTENT_HINT = "an extent is WIDTHxHEIGHT or WIDTHxHEIGHTxDEPTH without spaces, the width in bytes: 1000x64, 4KBx16x8"


def parse_extent(text: str, col: int | None = None) -> int | tuple[int, ...]:
    """`64MB` → a size (what `alloc` takes for the other kinds); `1000x64` or `4KBx16x8` → (width, height[, depth]):
    the width a size in bytes, the others counts. A size is read first, so hex (`0x100`) stays a size."""
    try:
        return parse_size(text, col)
    except ShellError:
        if "x" not in text.lower():  # no extent in view: the size's own error (with its hint)
            raise
    parts = text.lower().split("x")
    if not 2 <= len(parts) <= 3 or not all(parts):
        raise usage(f"'{text}' is neither a size nor an extent", col, EXTENT_HINT)
    try:
        return (parse_size(parts[0], col), *(parse_count(p, col) for p in parts[1:]))
    except ShellError:
        raise usage(f"bad extent '{text}'", col, EXTENT_HINT) from None


# ---------------------------------------------------------------- launch shapes

DIM3_HINT = "a launch shape is X, X,Y or X,Y,Z without spaces: grid 64,64 block 16,16"


def parse_dim3(text: str, col: int | None = None) -> tuple[int, int, int]:
    """`256`, `16,16`, `8,8,4` → (x, y, z), missing dimensions 1 (C's dim3). Each number is a count
    (`2^20`, `1K`) within C's unsigned int; an error points at the bad number's column. Whether the device
    takes the shape is the driver's to say (`launchdims.check_launch`)."""
    parts = text.split(",")
    dims, at = [], col or 1
    for k, part in enumerate(parts):
        if k == 3:
            raise usage(f"'{text}' has {len(parts)} dimensions; a dim3 has at most 3 (x,y,z)", at, DIM3_HINT)
        if not part:
            raise usage(f"'{text}' lacks its {'xyz'[k]} dimension", at, DIM3_HINT)
        try:
            value = parse_count(part, at)
        except ShellError:
            where = f" in '{text}'" if len(parts) > 1 else ""
            raise usage(f"bad {'xyz'[k]} dimension '{part}'{where}", at, DIM3_HINT) from None
        if value > C_UINT_MAX:
            raise usage(f"{part} is outside an unsigned int (0..2^32-1)", at, DIM3_HINT)
        dims.append(value)
        at += len(part) + 1
    return tuple(dims + [1, 1])[:3]  # type: ignore[return-value]


# ---------------------------------------------------------------- parts of buffers

_PART = re.compile(r"^(?P<name>[^\[\]]+)\[(?P<start>[^\]:]*):(?P<plus>\+?)(?P<stop>[^\]]*)\]$")
PART_HINT = "a part of a buffer looks like p0[32MB:], p0[1MB:+64KB] (start and length) or p0[0:4KB] (start and end)"


@dataclass(frozen=True)
class Part:
    """`p0`, `p0[32MB:]`, `p0[1MB:+64KB]`, `p0[:4KB]`, `p0[1MB:2MB]`: a buffer's name and a byte range of it, as
    C's `p0 + start` with a length. Open ends are None; whether the range fits the buffer is the session's to say."""

    name: str
    start: int = 0
    stop: int | None = None  # exclusive end, as in a Python slice
    length: int | None = None  # the `+N` form
    col: int | None = None  # where the range starts in the line, for errors about it

    @property
    def whole(self) -> bool:
        return self.start == 0 and self.stop is None and self.length is None


def parse_part(text: str, col: int | None = None) -> Part:
    """A buffer name with an optional `[start:end]` / `[start:+length]` byte range (sizes as everywhere)."""
    if "[" not in text and "]" not in text:
        return Part(text, col=col)
    m = _PART.match(text)
    if m is None:
        raise usage(f"bad range '{text}'", col, PART_HINT)
    at = (col or 1) + len(m.group("name")) + 1
    start = parse_size(m.group("start"), at) if m.group("start") else 0
    end_at = at + len(m.group("start")) + 1 + len(m.group("plus"))
    stop_text = m.group("stop")
    if m.group("plus") and not stop_text:
        raise usage(f"'+' needs a length in '{text}'", end_at, PART_HINT)
    stop = parse_size(stop_text, end_at) if stop_text else None
    if m.group("plus"):
        return Part(m.group("name"), start, None, stop, at)
    if stop is not None and stop < start:
        raise usage(f"the range in '{text}' ends ({stop}) before it starts ({start})", end_at,
                    f"write p0[{start}:+LENGTH] for a length")
    return Part(m.group("name"), start, stop, None, at)


# ---------------------------------------------------------------- other values

DTYPES = ("uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64",
          "float16", "float32", "float64")
VALUE_WORDS = ("iota", "random")


def parse_points(text: str, col: int | None) -> int | float:
    """`points N` (a check's worth in `cudashell grade`): a number ≥ 0, whole or not."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value < float("inf"):
        raise usage(f"bad points '{text}'", col, "points are a number ≥ 0, such as 10 or 2.5")
    return int(value) if value.is_integer() else value


def parse_dtype(text: str, col: int | None) -> str:
    low = text.lower()
    if low not in DTYPES:
        raise usage(f"unknown dtype '{text}'", col, "dtypes: " + ", ".join(DTYPES))
    return low


def parse_value(text: str, col: int | None) -> int | float | str:
    """A fill value: a number (decimals and exponents make it a float) or one of VALUE_WORDS."""
    low = text.lower()
    if low in VALUE_WORDS:
        return low
    try:
        return float(text) if any(c in low for c in ".en") else int(text, 0)
    except ValueError:
        raise usage(f"expected a number, iota or random, got '{text}'", col) from None


def _text(text: str, col: int | None) -> str:
    return text


# ---------------------------------------------------------------- completion


@dataclass(frozen=True)
class Typing:
    """Where completion stands: the session, the command's words before the cursor, the word being typed, and the
    shell's command words (the registry's, passed in: the registry sits above the kinds)."""

    session: object
    words: list[str]
    partial: str
    commands: Callable[[], list[str]]


Offers = list[tuple[str, str]]  # (text, why) pairs


def _nothing(arg, at: Typing) -> Offers:
    return []


def _buffers(arg, at: Typing) -> Offers:
    """The buffers the argument accepts (its spec says which)."""
    bufs = [b for b in at.session.buffers.values() if arg.accepts is None or arg.accepts(b, at.words)]
    return [(b.name, f"{b.kind} {b.size} B") for b in bufs]


def _parts(arg, at: Typing) -> Offers:
    """As _buffers; once a buffer's `[` is typed (`p0[`), its halves."""
    if "[" not in at.partial:
        return _buffers(arg, at)
    buf = at.session.buffers.get(at.partial.split("[")[0])
    if buf is None:
        return []
    half = size_word(buf.size // 2)
    return [(f"{buf.name}[0:+{half}]", "first half"), (f"{buf.name}[{half}:]", "second half")]


def _files(arg, at: Typing) -> Offers:
    out = []
    for path in sorted(glob.glob(os.path.expanduser(at.partial) + "*"))[:50]:
        out.append((path + ("/" if os.path.isdir(path) else ""), "dir" if os.path.isdir(path) else "file"))
    return out


SHAPES = {"B": ("256", "16,16", "8,8,4"), "G": ("64", "64,64", "16,16,16")}  # block, grid


def _shapes(arg, at: Typing) -> Offers:
    """A few launch shapes of each rank (`16,16`); after `32,` the square one, `32,32`."""
    shapes = list(SHAPES.get(arg.name, ()))
    parts = at.partial.split(",")
    if len(parts) in (2, 3) and parts[-1] == "" and parts[-2]:
        shapes.insert(0, at.partial + parts[-2])
    rank = {1: "1-D", 2: "2-D", 3: "3-D"}
    return [(sh, f"{rank[sh.count(',') + 1]} {'block' if arg.name == 'B' else 'grid'}") for sh in shapes]


def _contexts(arg, at: Typing) -> Offers:
    return [(c.name, f"GPU {c.device} {'primary' if c.primary else 'context'}") for c in at.session.contexts.values()]


# ---------------------------------------------------------------- kinds


def _never(value) -> bool:
    return False


def _always(value) -> bool:
    return True


class ArgKind:
    """One kind of argument. `convert(text, col)` makes the value (raising USAGE at the column); `offer(arg, at)`
    is what completion offers; `path(value)` says whether the value is a file the command reads or writes (grading
    confines it), `writes` that the command writes it (a script, a cell, a lesson's answers confine it too);
    `cuda`: the file it names (or else the value itself) is CUDA C, whose `#include "…"` lines grading follows too; `buffer(value)` the buffer name a value holds; `makes`: the value names what the command makes;
    `rest`: it takes the rest of the line as it stands; `label`: how help writes it, when not by its name.
    Kinds compare by identity: comparing one with a string (the old `arg.kind == "file"`) is a bug, and raises."""

    def __init__(self, name: str, convert: Callable = _text, offer: Callable = _nothing, *, path: Callable = _never,
                 writes: bool = False, cuda: bool = False, buffer: Callable | None = None, makes: bool = False,
                 rest: bool = False, label: str | None = None):
        self.name, self.convert, self.offer, self.path, self.cuda = name, convert, offer, path, cuda
        self.writes = writes
        self.buffer, self.makes, self.rest, self.label = buffer, makes, rest, label

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            raise TypeError(f"compare an argument's kind with its ArgKind (argkinds.KINDS[{other!r}]), not a string")
        return self is other

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"ArgKind({self.name!r})"


_KINDS = [
    ArgKind("word"),
    ArgKind("rest", rest=True),
    ArgKind("code"),
    ArgKind("newname", makes=True),
    ArgKind("buffer", offer=_buffers, buffer=lambda value: value),
    ArgKind("part", parse_part, _parts, buffer=lambda value: value.name),
    ArgKind("stream", offer=lambda arg, at: [("0", "default stream")] + [(s, "stream") for s in at.session.streams]),
    ArgKind("event", offer=lambda arg, at: [(e, "event") for e in at.session.events]),
    ArgKind("pool", offer=lambda arg, at: [("default", "default pool")] + [(p, "pool") for p in at.session.pools]),
    ArgKind("context", offer=_contexts),
    ArgKind("kernel", offer=lambda arg, at: [(k, v.signature()) for k, v in at.session.kernels.items()]),
    ArgKind("size", parse_size),
    ArgKind("count", parse_count),
    ArgKind("extent", parse_extent, label="SIZE|WxH[xD]"),
    ArgKind("points", parse_points),
    ArgKind("int", parse_int),
    ArgKind("dim3", parse_dim3, _shapes, label="X[,Y[,Z]]"),
    ArgKind("dtype", parse_dtype, lambda arg, at: [(d, "dtype") for d in DTYPES]),
    ArgKind("value", parse_value, lambda arg, at: [(v, "fill") for v in VALUE_WORDS]),
    ArgKind("file", offer=_files, path=_always),  # a file the command reads
    ArgKind("written-file", offer=_files, path=_always, writes=True),  # one it writes (save, export c, --csv, …)
    ArgKind("file-or-off", offer=_files, path=lambda value: value != "off", writes=True),  # `output off` ends it
    ArgKind("cuda-file", offer=_files, path=_always, cuda=True),
    ArgKind("cuda-source", cuda=True),  # CUDA C between <<< >>>: its includes are found from the script's folder
    ArgKind("commands"),  # a block of the shell's commands between <<< >>> (each is confined as it runs)
    ArgKind("lesson", path=lambda value: value.endswith(".toml") or "/" in value),  # else a shipped lesson's name
    ArgKind("command", offer=lambda arg, at: [(w, "command") for w in at.commands()]),
    ArgKind("demo", offer=lambda arg, at: list(shipped_demos().items())),
    ArgKind("key", offer=lambda arg, at: [(k, "setting") for k in SETTABLE]),
]
KINDS: dict[str, ArgKind] = {kind.name: kind for kind in _KINDS}
WORD = KINDS["word"]


def kind_named(name: str) -> ArgKind:
    """The kind an `Arg(kind="...")` names; an unknown name is a ValueError at once, so a typo fails on import."""
    try:
        return KINDS[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(KINDS), n=1)
        raise ValueError(f"no argument kind {name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                         + f"; the kinds are {', '.join(KINDS)}") from None
