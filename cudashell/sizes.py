"""Sizes in bytes as people write them (`4096`, `4KiB`, `64MB`, `2^20`, `0x1000`) and as the shell prints them.
Pure: the grammar, the settings and the renderers all read and write sizes through here."""

from __future__ import annotations

import re
from functools import lru_cache

from .errors import usage

_UNITS = {
    "": 1, "b": 1,
    "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
    "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
    "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
}
# ASCII digits only (re.ASCII): `\d` and int() take Arabic-Indic and fullwidth digits too, which no C compiler,
# no other tool and no reader of a script takes for a size
_SIZE = re.compile(r"^(0x[0-9a-f]+|\d[\d_]*)([a-z]*)$", re.I | re.ASCII)
_POW = re.compile(r"^(\d+)\^(\d+)$", re.ASCII)
SIZE_HINT = "sizes look like 4096, 4KiB, 64MB, 1GiB or 2^20 (KB/MB/GB are powers of 1024)"


SIZE_LIMIT = 1 << 64  # no address space is larger: past it a size is a typo, and floats of it overflow


def _whole_number(text: str, col: int | None) -> int:
    """`4096`, `010` (decimal), `100_000`, `0x1000`; a bad or endless one is a USAGE error."""
    if len(text) > 40:
        raise usage(f"size {text[:20]}… is absurdly large", col, SIZE_HINT)
    try:
        return int(text, 16) if text[:2].lower() == "0x" else int(text, 10)
    except ValueError:
        raise usage(f"bad size '{text}'", col, SIZE_HINT) from None


def parse_size(text: str, col: int | None = None) -> int:
    """Bytes from `4096`, `4KB`/`4KiB`, `64MB`, `1GiB`, `2^20`, `0x1000` (all units powers of 1024)."""
    m = _POW.match(text)
    if m:
        base, exp = _whole_number(m.group(1), col), _whole_number(m.group(2), col)
        value = base**exp if exp <= 64 and base < SIZE_LIMIT else SIZE_LIMIT
    else:
        m = _SIZE.match(text)
        if not m or m.group(2).lower() not in _UNITS:
            raise usage(f"bad size '{text}'", col, SIZE_HINT)
        value = _whole_number(m.group(1), col) * _UNITS[m.group(2).lower()]
    if value >= SIZE_LIMIT:
        raise usage(f"size {text} is absurdly large (2^64 bytes or more)", col, SIZE_HINT)
    return value


def parse_count(text: str, col: int | None = None) -> int:
    """A plain count such as an element count: `1000`, `100_000`, `2^20`, `1M` (units of 1024)."""
    return parse_size(text, col)


@lru_cache(maxsize=4096)  # a session's few sizes, drawn again on every `ls`
def format_size(n: int) -> str:
    """`64 MiB` for round sizes, `390.62 KiB` otherwise, plain bytes under 1 KiB."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            v = n / scale
            return f"{v:.0f} {unit}" if n % scale == 0 else f"{v:.2f} {unit}"
    return f"{n} B"


@lru_cache(maxsize=4096)
def format_size_exact(n: int) -> str:
    return f"{format_size(n)} ({n} B)" if n >= 1024 else f"{n} B"


def size_word(n: int) -> str:
    """A size as the shell reads it back, shortest exact form: `32MB`, `64KB`, `1000`."""
    if 0 <= n < 1024:  # no unit divides it (a part's offset and length are mostly such)
        return str(n)
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)
