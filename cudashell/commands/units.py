"""units: how the shell reads a size. `64MB` here is 64 × 2^20 bytes, as `cudaMalloc(64 << 20)` is, not the
10^6 of a disk's label: a bandwidth in GB/s (10^9 bytes a second) over a size in MiB is where students slip."""

from __future__ import annotations

from typing import TypedDict

from ..language.grammar import Arg
from ..language.registry import command
from ..output.results import Result
from ..sizes import format_size, size_word


@command("units", "session", "how the shell reads a size: its bytes, its powers of two, and the decimal reading",
         "units 64MB", "(none: sizes as the shell reads them)", args=(Arg("SIZE", "size"),), exported=False,
         details="Every unit is a power of 1024 here (KB = KiB = 1024 bytes), as CUDA programs write sizes "
                 "(`64 << 20`); bandwidths are decimal (GB/s = 10^9 bytes a second), as NVIDIA quotes them.")
def units(session, backend, args):
    n = args.get("SIZE")
    return Units({"bytes": n, "text": format_size(n), "shortest": size_word(n),
                  "power_of_two": n.bit_length() - 1 if n > 0 and n & (n - 1) == 0 else None,
                  "decimal_mb": n / 1e6})


class UnitsData(TypedDict):
    bytes: int
    text: str  # 64 MiB
    shortest: str  # the shortest way to type it back: 64MB
    power_of_two: int | None  # 26 for 64MB; null when it is not one
    decimal_mb: float  # the same bytes in decimal megabytes (10^6): 67.108864


class Units(Result, kind="units"):
    Data = UnitsData

    def text(self):
        d = self.data
        power = f" = 2^{d['power_of_two']}" if d["power_of_two"] is not None else ""
        binary = f" = {d['text']}" if d["bytes"] >= 1024 else ""
        return [f"{d['shortest']} = {d['bytes']:,} bytes{power}{binary}; in decimal units {d['decimal_mb']:.6g} MB "
                "(sizes here count in 1024s; bandwidths in GB/s count in 10^9 bytes a second)"]
