"""Pitched memory and 2-D/3-D copies on the simulator: the H100's pitch (Shape.h100), and a copy timed as the contiguous copy
of its bytes plus a cost for each narrow row (profile.copy_narrow_row)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...errors import ShellError
from ...model import syncrules as R
from ...model.session import Shape
from .common import INVALID

SECTOR = 32  # rows narrower than this cost per row (the H100's 4 B rows); 64 B rows did not


BLOCK = 16 << 20  # the most bytes of a side's span one step of a copy reads at once


def blocks_of(width: int, height: int, depth: int, src_pitch: int, src_rows: int, dst_pitch: int, dst_rows: int):
    """(source offset, destination offset, rows) of consecutive rows of one slice, each block's span at most
    BLOCK bytes on either side (a row at least): so a copy of millions of rows is a few numpy steps, not a loop."""
    per = max(1, BLOCK // max(src_pitch, dst_pitch))
    for z in range(depth):
        for y in range(0, height, per):
            yield (z * src_rows + y) * src_pitch, (z * dst_rows + y) * dst_pitch, min(per, height - y)


def span(rows: int, pitch: int, width: int) -> int:
    return (rows - 1) * pitch + width


def strided(data: np.ndarray, rows: int, pitch: int, width: int) -> np.ndarray:
    """The rows of a block as a (rows, width) view of its span's bytes."""
    return np.lib.stride_tricks.as_strided(data, (rows, width), (pitch, 1), writeable=True)


class Shapes:
    """The simulator's pitched memory (a mixin over Memory and Work: their state is made in SimBackend._fresh)."""

    def alloc_pitched(self, width, height, depth, ctx=None):
        if min(width, height, depth) <= 0:
            raise ShellError(INVALID, f"a pitched allocation of {width}x{height}x{depth} bytes has nothing in it",
                             "give a width, height and depth above 0")
        shape = Shape.h100(width, height, depth)
        allocation, t = self.alloc("device", shape.size, frozenset(), ctx)
        return replace(allocation, pitch=shape.pitch), t

    def memcpy_shaped(self, src, src_off, src_pitch, src_rows, dst, dst_off, dst_pitch, dst_rows, width, height,
                      depth, stream, async_):
        self._alive()
        if width > src_pitch or width > dst_pitch:  # cuMemcpy2D's own check (the shell checks it first)
            raise ShellError(INVALID, f"a row of {width} B is wider than the pitch "
                             f"({src_pitch if width > src_pitch else dst_pitch} B)", "give a width up to the pitch")
        self._refuse_readonly(dst, "a copy")
        s, d = src.handle, dst.handle
        ctx = self._ctx_of(stream)
        nbytes = width * height * depth
        rule = R.memcpy_rule(self._seen(s, d, ctx), self._seen(d, s, ctx), async_, nbytes)
        if nbytes == 0:
            return self._host_call(self.profile.async_call, rule)
        path, kind = self._path(s, d, ctx)
        blocks = list(blocks_of(width, height, depth, src_pitch, src_rows, dst_pitch, dst_rows))
        duration = self.profile.copy_seconds("pinned h2d" if rule.stages else path, nbytes)
        if width < SECTOR:
            duration += height * depth * self.profile.copy_narrow_row
        stage = 0.0
        if rule.stages:  # as memcpy: the host stages the pageable rows, then the DMA runs at the pinned rate
            stage = max(self.profile.copy_seconds(path, nbytes) - self.profile.copy_seconds("pinned h2d", nbytes),
                        self.profile.staging_latency + nbytes / self.profile.staging_rate)

        def source(so: int, n: int) -> np.ndarray | None:
            """A block's source span now, or None where it was never written (zeros)."""
            at, length = src_off + so, span(n, src_pitch, width)
            return s.data.read(at, length) if s.data.touched(at, length) else None

        def land(so: int, do: int, n: int, data: np.ndarray | None) -> None:
            """The block's rows into the destination, its padding as it was."""
            at, length = dst_off + do, span(n, dst_pitch, width)
            if data is None and not d.data.touched(at, length):
                return  # zeros onto zeros
            out = np.array(d.data.read(at, length))
            rows = strided(out, n, dst_pitch, width)
            rows[...] = 0 if data is None else strided(np.array(data), n, src_pitch, width)
            d.data.write(at, out)

        def effect(snapshot: bool):  # what the clock runs when the copy is done (it returns no fault)
            staged = [(so, do, n, source(so, n)) for so, do, n in blocks] if snapshot else None  # read at issue

            def done() -> None:
                for so, do, n, *data in staged or [(so, do, n) for so, do, n in blocks]:
                    land(so, do, n, data[0] if data else source(so, n))
            return done

        for so, do, n in blocks:
            if s.data.touched(src_off + so, span(n, src_pitch, width)):
                d.data.reserve(dst_off + do, span(n, dst_pitch, width))
        return self._submit(stream, duration, self.engine(kind), rule, effect, stage=stage)
