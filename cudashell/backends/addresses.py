"""The simulator's address spaces, shaped after what the driver does on the H100: freed ranges are handed
back to the next allocation that fits (lowest address first), small allocations are carved from pools at
512-byte granularity, larger ones get 1 MiB (exactly 1 MiB) or 2 MiB granularity and alignment, and
pageable memory comes in pages (the cuda backend maps it with mmap). Deterministic from run to run."""

from __future__ import annotations

import bisect

MIB = 1 << 20
SMALL = MIB  # below this, pinned, device and managed memory are sub-allocated from a pool

# (small-pool base, large base) per region; without UVA device memory lives at low "alias" addresses
BASES = {"pageable": (0x7F3C_0000_0000, 0x7F3C_0000_0000), "pinned": (0x7F5A_0000_0000, 0x7F5B_0000_0000),
         "device": (0x7F8E_0000_0000, 0x7F8F_0000_0000), "managed": (0x7FA0_0000_0000, 0x7FA1_0000_0000),
         "alias": (0x0000_0002_0000_0000, 0x0000_0003_0000_0000)}


def granule(region: str, size: int) -> int:
    """The rounding and alignment of one allocation."""
    if region == "pageable":
        return 4096
    if size < SMALL:
        return 512
    return MIB if size == SMALL else 2 * MIB


class Space:
    """One pool: a bump pointer and a sorted, coalesced free list of (address, length)."""

    def __init__(self, base: int):
        self.top = base
        self.free: list[tuple[int, int]] = []

    def take(self, size: int, align: int) -> int:
        size = -(-size // align) * align
        for i, (addr, length) in enumerate(self.free):
            start = -(-addr // align) * align
            if start + size <= addr + length:
                del self.free[i]
                if start > addr:
                    self._insert(addr, start - addr)
                if start + size < addr + length:
                    self._insert(start + size, addr + length - start - size)
                return start
        start = -(-self.top // align) * align
        self.top = start + size
        return start

    def give(self, addr: int, size: int, align: int) -> None:
        self._insert(addr, -(-size // align) * align)

    def _insert(self, addr: int, length: int) -> None:
        i = bisect.bisect(self.free, (addr, length))
        self.free.insert(i, (addr, length))
        # coalesce with the neighbours
        if i + 1 < len(self.free) and addr + length == self.free[i + 1][0]:
            length += self.free.pop(i + 1)[1]
            self.free[i] = (addr, length)
        if i > 0 and self.free[i - 1][0] + self.free[i - 1][1] == addr:
            prev = self.free.pop(i - 1)
            self.free[i - 1] = (prev[0], prev[1] + length)


class AddressSpaces:
    def __init__(self):
        self.spaces = {(region, small): Space(bases[0] if small else bases[1])
                       for region, bases in BASES.items() for small in (True, False)}

    def _space(self, region: str, size: int) -> Space:
        return self.spaces[(region, region != "pageable" and size < SMALL)]

    def take(self, region: str, size: int) -> int:
        return self._space(region, size).take(size, granule(region, size))

    def give(self, region: str, addr: int, size: int) -> None:
        self._space(region, size).give(addr, size, granule(region, size))
