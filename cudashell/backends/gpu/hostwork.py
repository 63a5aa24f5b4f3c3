"""The host's data work on the GPU's host (`checksum`, `compare`, `fill`, `show`: backends/hostdata.py does it),
here in the worker where the host buffers live: read and written in place, each piece a view of the buffer (device
memory through a copy), and timed by the host's clock around it."""

from __future__ import annotations

from ...model import syncrules as R
from ..base import Timing
from ..hostdata import HostData, piece_spans


class HostWork(HostData):
    """The GPU side's host-data calls (a mixin of GpuSide)."""

    def _host_begin(self, buf, offset, nbytes, write=False):
        """Nothing to check first: a device piece's copy (`read`) refuses held streams itself."""

    def _host_window(self, buf, offset, nbytes):
        a = buf.handle
        return a.array[offset: offset + nbytes] if a.array is not None else self.read(buf, offset, nbytes)

    def _host_targets(self, buf, nbytes):
        array = buf.handle.array
        for pos, n in piece_spans(0, nbytes, self._host_piece):
            yield pos, array[pos: pos + n]

    def _host_memset(self, buf, byte, nbytes):
        buf.handle.array[:nbytes] = byte

    def _host_work_timing(self, measured, op, parts, draws=0):
        return Timing(measured, measured, R.HOST_ONLY.blocks, self.timing_label, rule=R.HOST_ONLY.why, basis="observed")
