"""Synchronisation: streams, events, waits, and `hold`/`release`."""

from __future__ import annotations

import math

from ...errors import ShellError
from ...model import syncrules as R
from ..base import Timing
from .common import SimEvent, SimStream, secs


class Sync:
    """The simulator's sync (a mixin: its state is made in SimBackend._fresh)."""

    def event_create(self):
        self._alive()
        return SimEvent(ctx=self.cur)

    def _same_context(self, event, ctx) -> None:
        if event.ctx != ctx:
            raise ShellError("CUDA_ERROR_INVALID_HANDLE", "an event belongs to the context it was made in",
                             "record it on a stream of that context (`contexts` says which)")

    def event_record(self, event, stream):
        self._alive()
        self._same_context(event, self._ctx_of(stream))
        if self.held is not None:  # the GPU reaches it after the release
            record = event.record = [math.inf]
            event.time = math.inf

            def reached():
                record[0] = self._schedule(stream, 0, None)[1]
                if event.record is record:  # not recorded again since
                    event.time, event.record = record[0], None
            self.held.append(reached)
        else:
            _, event.time = self._schedule(stream, 0, None)
        q = stream or self.default  # what a stream waiting for it will be ordered after (the pools' event reuse)
        event.seen = {**q.seen, q: self.seq}
        return self._host_call(self.profile.async_call, R.QUEUED)

    def event_query(self, event):
        self._alive()
        return event.time is None or event.time <= self.now

    def event_sync(self, event):
        self._alive()
        if event.time is not None and event.time > self.now:
            self._refuse_held("cuEventSynchronize")
        before = self.now
        self._wait(self._noticed(event.time or 0), "cuEventSynchronize")
        self._alive()
        self._pools_synchronized()
        return Timing(secs(self.now - before), secs(self.now - before), True, self.timing_label, basis="modeled")

    def event_elapsed(self, start, end):
        self._alive()
        self._same_context(end, start.ctx)
        if start.time is None or end.time is None:
            raise ShellError("CUDA_ERROR_INVALID_HANDLE", "an event that was never recorded has no time",
                             "`event record` both events first")
        if max(start.time, end.time) > self.now:
            raise ShellError("CUDA_ERROR_NOT_READY", "the GPU has not reached both events yet",
                             "`event sync` the later one first")
        return secs(end.time - start.time)

    def event_destroy(self, event):
        pass

    def stream_wait(self, stream, event):
        self._alive()
        q = stream or self.default
        for s, seq in event.seen.items():
            q.seen[s] = max(q.seen.get(s, 0), seq)
        if self.held is not None:  # it waits for the record made before this call, as cuStreamWaitEvent does —
            # a record made later in the hold must not move it
            record = event.record or [event.time]
            self.held.append(lambda: self._wait_for(stream, record[0]))
            return
        self._wait_for(stream, event.time)

    def _wait_for(self, stream, time: int | None) -> None:
        if time is not None:
            q = stream or self.default
            q.tail = max(q.tail, time)

    def stream_create(self, nonblocking, priority):
        self._alive()
        p = self.profile
        actual = min(max(priority, p.priority_greatest), p.priority_least)  # the driver clamps
        s = SimStream(0, nonblocking, actual, ctx=self.cur)
        self.streams.append(s)
        return s, actual

    def stream_destroy(self, handle):
        """Returns at once; work still queued on the stream runs to the end (callbacks fire, events complete)."""
        self._alive()  # after a fault the driver answers its sticky error (the H100 did)
        self.streams = [s for s in self.streams if s is not handle]
        if not handle.nonblocking:
            self.retired = max(self.retired, handle.tail)

    def _stream_tail(self, handle) -> int:
        q = handle or self.default
        return max(q.tail, self._blocking_tails()) if q is self.default else q.tail

    def stream_sync(self, handle):
        self._alive()
        self._refuse_held("cuStreamSynchronize")
        before = self.now
        self._wait(self._noticed(self._stream_tail(handle)), "cuStreamSynchronize")
        self._alive()
        self._pools_synchronized()
        return Timing(secs(self.now - before), secs(self.now - before), True, self.timing_label, basis="modeled")

    def stream_idle(self, handle):
        self._alive()
        if self.held:  # work waits for the release
            return False
        return self._stream_tail(handle) <= self.now

    def device_sync(self):
        self._alive()
        self._refuse_held("cuCtxSynchronize")
        before = self.now
        self._wait_device()
        self._alive()
        self._pools_synchronized()
        return Timing(secs(self.now - before), secs(self.now - before), True, self.timing_label, basis="modeled")

    def priority_range(self):
        return self.profile.priority_least, self.profile.priority_greatest

    def hold(self, streams):
        self._alive()
        if self.held is None:
            self.held = []
        return "modeled: work queued while held is scheduled at release"

    def release(self):
        queued, self.held = self.held or [], None
        for later in queued:
            later()
        self._advance(self.now)
