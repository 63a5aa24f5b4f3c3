"""The bytes a command names — a buffer or a range of one (`p0[1MB:+64KB]`) — checked to lie inside it, and how
many bytes a copy or comparison of several moves. Pure checks over the session (no backend), shared by the command
handlers and the advice rules."""

from __future__ import annotations

from ..errors import ShellError
from ..sizes import format_size_exact
from .session import Region


def _past_end(buf) -> str:
    """The code a range past a buffer's end gets: the shell's own, or for a module's variable the driver's (the
    H100 answers cudaMemcpyToSymbol past a symbol's end with CUDA_ERROR_INVALID_VALUE)."""
    return "CUDA_ERROR_INVALID_VALUE" if buf.symbol else "OUT_OF_BOUNDS"


def check_range(buf, offset: int, nbytes: int, col: int | None, what: str = "access") -> None:
    if offset < 0 or nbytes < 0 or offset + nbytes > buf.size:
        raise ShellError(_past_end(buf),
                         f"{what} of {nbytes} B at offset {offset} runs past the end of {buf.name} "
                         f"({format_size_exact(buf.size)})",
                         f"keep offset + size ≤ {buf.size}", col)


def region(session, part, col: int | None, what: str = "access") -> Region:
    """The bytes a `p0[start:end]` / `p0[start:+length]` names, checked to lie inside the buffer."""
    buf = session.buffer(part.name, col)
    at = part.col or col
    if part.start > buf.size:
        raise ShellError(_past_end(buf), f"{what} starts at {part.start}, past the end of {buf.name} "
                         f"({format_size_exact(buf.size)})", f"keep the start ≤ {buf.size}", at)
    if part.length is not None:
        end, explicit = part.start + part.length, True
    elif part.stop is not None:
        end, explicit = part.stop, True
    else:
        end, explicit = buf.size, False
    check_range(buf, part.start, end - part.start, at, what)
    return Region(buf, part.start, end - part.start, explicit)


def check_within(part: Region, nbytes: int, col: int | None, what: str) -> None:
    """`nbytes` from a region's start must stay inside the region (its buffer, or the range the text gave)."""
    if not part.explicit:
        check_range(part.buf, part.offset, nbytes, col, what)
    elif nbytes > part.nbytes:
        raise ShellError("OUT_OF_BOUNDS", f"{what} ({nbytes} B) run past the end of {part.label()} "
                         f"({format_size_exact(part.nbytes)})", f"keep it ≤ {part.nbytes} B or widen the range", col)


def common_size(regions, size: int | None, size_col: int | None, cols) -> int:
    """How many bytes a copy or comparison of these regions moves: SIZE when given, else the explicit lengths
    (which must agree), else the first region's rest — and every region must hold that many."""
    explicit = [(r, c) for r, c in zip(regions, cols) if r.explicit]
    if size is not None:
        for r, c in explicit:
            if r.nbytes != size:
                raise ShellError("USAGE", f"{r.label()} is {r.nbytes} B, but the size says {size}",
                                 "give the size once: in the range or as SIZE", size_col)
        nbytes = size
    elif explicit:
        nbytes = explicit[0][0].nbytes
        for r, c in explicit[1:]:
            if r.nbytes != nbytes:
                raise ShellError("USAGE", f"{explicit[0][0].label()} is {nbytes} B but {r.label()} is {r.nbytes} B",
                                 "both ranges must have the same length", c)
    else:
        nbytes = regions[0].nbytes
    return nbytes
