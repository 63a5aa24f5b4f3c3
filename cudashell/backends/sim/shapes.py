"""Pitched memory and 2-D/3-D copies on the simulator: the H100's pitch (Shape.h100), and a copy timed as the contiguous copy
of its bytes plus a cost for each narrow row (profile.copy_narrow_row)."""

from __future__ import annotations

from dataclasses import replace

from ...errors import ShellError
from ...model import syncrules as R
from ...model.session import Shape
from .common import INVALID

SECTOR = 32  # rows narrower than this cost per row (the H100's 4 B rows); 64 B rows did not


def rows_of(width: int, height: int, depth: int, src_pitch: int, src_rows: int, dst_pitch: int, dst_rows: int):
    """(source offset, destination offset) of each row a copy moves, slice by slice."""
    for z in range(depth):
        for y in range(height):
            yield (z * src_rows + y) * src_pitch, (z * dst_rows + y) * dst_pitch


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
        rows = list(rows_of(width, height, depth, src_pitch, src_rows, dst_pitch, dst_rows))
        duration = self.profile.copy_seconds("pinned h2d" if rule.stages else path, nbytes)
        if width < SECTOR:
            duration += len(rows) * self.profile.copy_narrow_row
        stage = 0.0
        if rule.stages:  # as memcpy: the host stages the pageable rows, then the DMA runs at the pinned rate
            stage = max(self.profile.copy_seconds(path, nbytes) - self.profile.copy_seconds("pinned h2d", nbytes),
                        self.profile.staging_latency + nbytes / self.profile.staging_rate)

        def effect(snapshot: bool):  # returns what the clock runs when the copy is done (a fault, or None)
            if snapshot:  # the rows as they are now, at issue
                data = [(do, s.data.read(src_off + so, width) if s.data.touched(src_off + so, width) else None)
                        for so, do in rows]

                def write_staged():
                    for do, b in data:
                        if b is None:
                            d.data.fill(dst_off + do, 0, width)
                        else:
                            d.data.write(dst_off + do, b)
                return write_staged

            def copy_rows():
                for so, do in rows:
                    d.data.copy_from(s.data, src_off + so, dst_off + do, width)
            return copy_rows

        for so, do in rows:
            if rule.stages:
                if s.data.touched(src_off + so, width):
                    d.data.reserve(dst_off + do, width)
            else:
                d.data.reserve_copy(s.data, src_off + so, dst_off + do, width)
        return self._submit(stream, duration, self.engine(kind), rule, effect, stage=stage)
