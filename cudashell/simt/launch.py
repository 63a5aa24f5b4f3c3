"""One launch of a user kernel on the simulator: the grid cut into chunks of whole blocks, each chunk run as
lanes by the interpreter over the same global memory; what it counted and printed, or the fault that ended it
(with the thread, the address and the line, as compute-sanitizer would say them)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import heap, ir
from .ctype import Array, Pointer
from .interp import Machine
from .memory import LOCAL_BASE, SHARED_BASE, WARP, Memory, Region, Traffic
from .racecheck import Watch

LANES = 1 << 17  # lanes a chunk runs at once: large enough that numpy, not Python, sets the pace …
MIN_LANES = 1 << 13
LANE_BYTES = 256  # … but no more than one lane for each 256 bytes of the kernel's buffers: a chunk's own arrays
# (values, addresses, racecheck's tables: about that much a lane) stay within what the buffers hold
TRIM_LANES = 1 << 16  # chunks this large (half a MiB an int64 value) give their heap back after the launch
MAX_LINES = 4096  # printf lines kept from one launch (the GPU's printf buffer is finite too)


@dataclass
class Report:
    traffic: Traffic = field(default_factory=Traffic)
    lines: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    dropped: int = 0
    access: list = field(default_factory=list)  # show-access: (buffer, element, size, thread, write) per access
    open: bool = False  # the last printf left its line unfinished

    def printf(self, text: str) -> None:
        """One thread's printf: its text goes on the current line, as the GPU's buffer prints it."""
        parts = text.split("\n")
        if self.lines and self.open:
            self.lines[-1] += parts[0]
            parts = parts[1:]
        self.open = not text.endswith("\n")
        if not self.open:  # what follows the last newline is no line (counted as one, each was dropped twice)
            parts = parts[:-1]
        for part in parts:
            if len(self.lines) < MAX_LINES:
                self.lines.append(part)
            else:
                self.dropped += 1

    def warn(self, text: str) -> None:
        if text not in self.warnings and len(self.warnings) < 32:
            self.warnings.append(text)


def shared_layout(program, fn: ir.Function, dynamic: int) -> tuple[dict, int, int]:
    """Offsets of the kernel's __shared__ variables in its block's shared memory; `extern` arrays all start
    where the static ones end (they alias the launch's dynamic shared memory). Returns (layout, static bytes,
    total bytes)."""
    layout, extern, offset = {}, [], 0
    seen = set()

    def walk(node):
        if isinstance(node, ir.Decl) and node.shared:
            if node.extern or (isinstance(node.var.type, Array) and node.var.type.n is None):
                extern.append(node.var.name)
            else:
                nonlocal offset
                align = 16 if node.var.type.size >= 16 else max(1, _align(node.var.type))
                offset = -(-offset // align) * align
                layout[node.var.name] = offset
                offset += node.var.type.size
        elif isinstance(node, ir.Call) and node.name in program.functions and node.name not in seen:
            seen.add(node.name)
            walk(program.functions[node.name].body)
        for child in _children(node):
            walk(child)

    for decl in program.shared_globals:  # file-scope __shared__: every kernel's
        walk(decl)
    walk(fn.body)
    static = offset
    start = -(-static // 16) * 16
    for name in extern:
        layout[name] = start
    return layout, static, start + dynamic if extern or dynamic else static


def _align(t) -> int:
    while isinstance(t, Array):
        t = t.elem
    return getattr(t, "align", None) or t.size


def _children(node):
    if isinstance(node, list):
        return node
    if not hasattr(node, "__dataclass_fields__"):
        return []
    out = []
    for name in node.__dataclass_fields__:
        v = getattr(node, name)
        if isinstance(v, (ir.Node, list)):
            out.append(v)
        elif isinstance(v, tuple) and v and isinstance(v[0], list):
            out.extend(v)
    if isinstance(node, ir.Switch):
        out = [node.value] + [s for _, s in node.items]
    return out


def run(program, fn: ir.Function, args: list, grid: tuple, block: tuple, dynamic: int, regions: list[Region],
        racecheck: bool = True, trace: bool = False, max_blocks: int | None = None,
        report: Report | None = None) -> Report:
    """Run a launch over `regions`; `report` (else a new one) gathers its counts and, with `trace`, its accesses —
    kept in it up to a fault, which is raised. `max_blocks`: the most blocks a chunk may run at once (their local
    memory is what the budget holds)."""
    report = report if report is not None else Report()
    layout, _, shared_total = shared_layout(program, fn, dynamic)
    threads = block[0] * block[1] * block[2]
    tpb = -(-threads // WARP) * WARP
    blocks = grid[0] * grid[1] * grid[2]
    held = sum(r.size for r in regions if any(r.start <= a < r.end for a in _pointers(fn, args)))
    lanes = max(MIN_LANES, min(LANES, 1 << max(0, (held // LANE_BYTES).bit_length() - 1)))
    per_chunk = max(1, lanes // tpb if max_blocks is None else min(lanes // tpb, max_blocks))
    values = [_arg(p, a) for p, a in zip(fn.params, args)]
    watch = Watch(report, tpb, min(per_chunk, blocks), shared_total) if racecheck else None
    patterns: dict = {}  # shared accesses every block made alike, checked and counted: one dict for every chunk
    shapes: dict = {}  # a chunk's lane numbers, thread indices, shuffles' sources: made once for the launch
    with heap.kept(trim=lanes >= TRIM_LANES):  # lanes' arrays come and go by the megabyte: the heap keeps them
        for first in range(0, blocks, per_chunk):
            ids = np.arange(first, min(blocks, first + per_chunk), dtype=np.int64)
            block_ids = (ids % grid[0], (ids // grid[0]) % grid[1], ids // (grid[0] * grid[1]))
            lanes = len(ids) * tpb

            def describe(lane, addr, size, what, loc, why, _ids=block_ids):
                return _describe(lane, addr, size, what, loc, why, _ids, tpb, block, regions)

            mem = Memory(regions, shared_total, len(ids), lanes, tpb, report.traffic, describe)
            mem.patterns = patterns
            if watch is not None:
                watch.chunk(describe, first * tpb)
                mem.watch = watch
            if trace:
                mem.trace = []
            mach = Machine(program, mem, lanes, tpb, threads, block, grid, block_ids, layout, report, shapes)
            try:
                with np.errstate(all="ignore"):
                    mach.run(fn, values)
            finally:  # a fault too: show-access draws what the threads touched up to it, where it helps most
                if trace:
                    report.access += [(name, elem, size, _label(lane, tpb, block, block_ids, grid), write)
                                      for name, elem, size, lane, write in mem.trace]
            report.traffic.instructions += mach.statements
    return report


def _label(lane, tpb, block, block_ids, grid) -> str:
    """A thread as the drawing names it: `3` (x), `3,1` (x,y) where the block has a y, prefixed `b2:` by its
    block (`b2,1:` in a 2-D grid) where the grid has more than one."""
    thread, blk = _thread(lane, tpb, block, block_ids)
    t = ",".join(str(v) for v in thread[:_dims(block)])
    if grid[0] * grid[1] * grid[2] == 1:
        return t
    return "b" + ",".join(str(v) for v in blk[:_dims(grid)]) + ":" + t


def _dims(shape) -> int:
    return 3 if shape[2] > 1 else 2 if shape[1] > 1 else 1


def _pointers(fn: ir.Function, args: list) -> list[int]:
    return [int(a) for p, a in zip(fn.params, args) if isinstance(p.type, Pointer)]


def _arg(param: ir.Var, value):
    if isinstance(param.type, Pointer):
        return np.int64(value)
    return value


def _thread(lane: int, tpb: int, block: tuple, block_ids) -> tuple:
    b, t = divmod(lane, tpb)
    bx, by, _ = block
    thread = (t % bx, (t // bx) % by, t // (bx * by))
    return thread, tuple(int(ids[b]) for ids in block_ids)


def _describe(lane, addr, size, what, loc, why, block_ids, tpb, block, regions) -> str:
    thread, blk = _thread(lane, tpb, block, block_ids)
    where = f"{loc[0]}:{loc[1]}:{loc[2]}" if loc else "the kernel"
    text = f"{what} at {where} by thread ({thread[0]},{thread[1]},{thread[2]}) in block ({blk[0]},{blk[1]},{blk[2]})"
    if addr is None:
        return text + (f": {why}" if why else "")
    text += f": address 0x{addr:x}"
    if addr >= LOCAL_BASE or addr >= SHARED_BASE:
        return text + (f" ({why})" if why else "")
    if why == "misaligned":
        return text + f" is misaligned for a {size}-byte access"
    near = min(regions, key=lambda r: 0 if r.start <= addr < r.end else min(abs(addr - r.start), abs(addr - r.end)),
               default=None)
    if near is None:
        return text + " is outside every allocation"
    if near.start <= addr < near.end:
        if why == "read-only memory":
            return text + (f" is in {near.name}, __constant__ memory (read-only for kernels)" if near.kind == "constant"
                           else f" is in {near.name}, registered read-only")
        if why:
            return text + f" is in {near.name}, {why}"
        return text + f" overruns {near.name} (0x{near.start:x}, {near.size} bytes) by {addr + size - near.end} bytes"
    if addr >= near.end:
        return text + (f" is {addr - near.end} bytes after the nearest allocation {near.name} "
                       f"(0x{near.start:x}, {near.size} bytes)")
    return text + (f" is {near.start - addr} bytes before the nearest allocation {near.name} "
                   f"(0x{near.start:x}, {near.size} bytes)")
