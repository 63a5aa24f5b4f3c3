"""The host's data work on the simulator (`checksum`, `compare`, `fill`, `show`: backends/hostdata.py does it), read
straight from the simulator's storage chunk by chunk, and timed by the profile's host rates — not by how long this
machine's Python took, which says nothing of the GPU machine's host (a write-combined buffer read here is plain
RAM)."""

from __future__ import annotations

import numpy as np

from ..base import HOST_WRITECOMBINED
from ..hostdata import HostData, piece_spans
from ..sparse import CHUNK


def host_memory(a) -> str:
    """The host-memory kind a profile rate is kept for: pinned memory write-combined or cached; pageable memory
    registered is pinned; managed memory the host reads where it lives, as pageable memory; device memory through a
    copy."""
    if a.kind == "pinned":
        return "writecombined" if a.host_bits & HOST_WRITECOMBINED else "pinned"
    if a.kind == "pageable":
        return "pinned" if a.registered else "pageable"
    return "pageable" if a.kind == "managed" else "device"


class HostWork(HostData):
    """The simulator's side of the host-data calls (a mixin of SimBackend)."""

    _host_piece = CHUNK  # one storage chunk a piece: read in place, without a copy

    def _host_begin(self, buf, offset, nbytes, write=False):
        """As `read` and `write` do: device memory is read through a copy, which the held streams or an unmapped
        reservation refuse. `write` "zeros": a write of zero bytes, which frees storage rather than taking it."""
        if buf.kind == "device" and not write:
            self._alive()
            self._refuse_held("reading device memory (a synchronous copy)")
            self.vmm_check(buf, offset, nbytes, "cuMemcpyDtoH")
        else:
            self._advance(self.now)
        if write:
            if write != "zeros":  # zeros keep no storage: there is nothing for the budget to refuse
                buf.handle.data.reserve(offset, nbytes)  # the storage budget refuses before anything changes
            self.version += 1

    def _host_window(self, buf, offset, nbytes):
        return buf.handle.data.window(offset, nbytes)

    def _host_targets(self, buf, nbytes):
        """A piece of scratch to fill, stored after each is filled: the chunks are made (or unshared) as written."""
        data = buf.handle.data
        scratch = np.empty(min(nbytes, CHUNK), np.uint8)
        for pos, n in piece_spans(0, nbytes, CHUNK):
            yield pos, scratch[:n]
            data.write(pos, scratch[:n])

    def _host_memset(self, buf, byte, nbytes):
        buf.handle.data.fill(0, byte, nbytes)

    def _host_work_timing(self, measured, op, parts, draws=0):
        seconds = self.profile.host_seconds(op, [(host_memory(b.handle), n) for b, n in parts], draws)
        return self._host_call(seconds)
