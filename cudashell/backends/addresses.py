"""The simulator's address spaces, shaped after what the driver does on the H100: freed ranges are handed
back to the next allocation that fits (lowest address first), small allocations are carved from pools at
512-byte granularity, larger ones get 1 MiB (exactly 1 MiB) or 2 MiB granularity and alignment, and
pageable memory comes in pages (the cuda backend maps it with mmap): page-aligned and no more — where the kernel
puts a mapping is its choice, so 64 KiB or 2 MiB alignment is luck, and the simulator's pageable space starts a few
pages past a 64 KiB boundary so that nobody comes to count on it. Deterministic from run to run."""

from __future__ import annotations

import bisect

MIB = 1 << 20
SMALL = MIB  # below this, pinned, device and managed memory are sub-allocated from a pool

PAGEABLE_SKEW = 0x7000  # 7 pages past a 2 MiB boundary: mmap's addresses are page-aligned, not 64 KiB-aligned
# (small-pool base, large base) per region; without UVA device memory lives at low "alias" addresses
BASES = {"pageable": (0x7F3C_0000_0000 + PAGEABLE_SKEW, 0x7F3C_0000_0000 + PAGEABLE_SKEW), "pinned": (0x7F5A_0000_0000, 0x7F5B_0000_0000),
         "device": (0x7F8E_0000_0000, 0x7F8F_0000_0000), "managed": (0x7FA0_0000_0000, 0x7FA1_0000_0000),
         "alias": (0x0000_0002_0000_0000, 0x0000_0003_0000_0000)}
# a 32-bit process (the `no-uva` profile): 4 GiB of addresses in all, so each region ends where the next begins —
# the heap above the program, pinned memory and managed memory in the middle, the device's own space on top
# (device and alias share it: a profile has UVA or not, so only one of them is used)
BASES_32 = {"pageable": (0x0900_0000 + PAGEABLE_SKEW, 0x0900_0000 + PAGEABLE_SKEW), "pinned": (0x3000_0000, 0x3100_0000),
            "managed": (0x6000_0000, 0x6100_0000), "device": (0x8000_0000, 0x8100_0000),
            "alias": (0x8000_0000, 0x8100_0000)}
ENDS_32 = {"pageable": 0x3000_0000, "pinned": 0x6000_0000, "managed": 0x8000_0000, "device": 0xFFFF_0000,
           "alias": 0xFFFF_0000}


class AddressSpaceFull(Exception):
    """No room left in a region of a 32-bit address space: the driver's out of memory, whatever memory is free."""


def granule(region: str, size: int) -> int:
    """The rounding and alignment of one allocation."""
    if region == "pageable":
        return 4096
    if size < SMALL:
        return 512
    return MIB if size == SMALL else 2 * MIB


class Space:
    """One pool: a bump pointer and a sorted, coalesced free list of (address, length)."""

    def __init__(self, base: int, end: int | None = None):
        self.top = base
        self.end = end  # the first address past the pool, where the address space bounds it
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
        if self.end is not None and start + size > self.end:
            raise AddressSpaceFull(self.end)
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
    """Every region's pools, in a 48-bit address space (x86-64's virtual addresses) or a 32-bit one."""

    def __init__(self, bits: int = 48):
        if bits == 32:
            self.spaces = {(region, small): Space(lo, hi) if small else Space(hi, ENDS_32[region])
                           for region, (lo, hi) in BASES_32.items() for small in (True, False)}
        else:
            self.spaces = {(region, small): Space(bases[0] if small else bases[1])
                           for region, bases in BASES.items() for small in (True, False)}

    def _space(self, region: str, size: int) -> Space:
        return self.spaces[(region, region != "pageable" and size < SMALL)]

    def take(self, region: str, size: int) -> int:
        return self._space(region, size).take(size, granule(region, size))

    def give(self, region: str, addr: int, size: int) -> None:
        self._space(region, size).give(addr, size, granule(region, size))
