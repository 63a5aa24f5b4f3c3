"""Synchronisation: streams with priorities, events, waits, and `hold`/`release` (a pinned flag each held
stream waits for, with a watchdog for a driver queue that fills while held)."""

from __future__ import annotations

import ctypes as C
import threading
import time

from ...errors import held_error
from ...model.kernels import BUILTINS
from ..base import Timing
from ..bindings import OK, call, check, cu, done, launch_args
from .common import HOLD_KERNEL, HOLD_SOURCE, HOLD_WAIT_VALUE, STUCK, _host_array


class Sync:
    """The GpuSide's sync (a mixin: its state is made in GpuSide.__init__)."""

    def event_create(self):
        return int(call("cuEventCreate", 0))

    def event_record(self, event, stream):
        t0 = time.perf_counter()
        with self._in(self._stream_ctx(stream)):
            self._issue("cuEventRecord", event, stream)
        host = time.perf_counter() - t0
        return Timing(0.0, host, False, self.timing_label)

    def event_query(self, event):
        return done("cuEventQuery", event)

    def event_sync(self, event):
        if self.held and not done("cuEventQuery", event):
            raise held_error("cuEventSynchronize")
        t0 = time.perf_counter()
        call("cuEventSynchronize", event)
        return self._host_timing(t0)

    @staticmethod
    def _elapsed(start: int, end: int) -> float:
        return call("cuEventElapsedTime", start, end) / 1e3

    def event_elapsed(self, start, end):
        return self._elapsed(start, end)

    def event_destroy(self, event):
        call("cuEventDestroy", event)

    def stream_wait(self, stream, event):
        self._issue("cuStreamWaitEvent", stream, event, 0)

    def stream_create(self, nonblocking, priority):
        least, greatest = self.priority_range()
        actual = min(max(priority, greatest), least)  # what the driver clamps to
        flags = cu.CUstream_flags.CU_STREAM_NON_BLOCKING if nonblocking else cu.CUstream_flags.CU_STREAM_DEFAULT
        h = int(call("cuStreamCreateWithPriority", flags, priority))
        self.streams.add(h)
        self.stream_ctx[h] = self.cur
        return h, actual

    def stream_destroy(self, handle):
        call("cuStreamDestroy", handle)
        self.streams.discard(handle)
        self.stream_ctx.pop(handle, None)

    def stream_sync(self, handle):
        if self.held:
            raise held_error("cuStreamSynchronize")
        t0 = time.perf_counter()
        call("cuStreamSynchronize", handle)
        return self._host_timing(t0)

    def stream_idle(self, handle):
        return done("cuStreamQuery", handle)

    def device_sync(self):
        if self.held:
            raise held_error("cuCtxSynchronize")
        t0 = time.perf_counter()
        call("cuCtxSynchronize")
        return self._host_timing(t0)

    def priority_range(self):
        return call("cuCtxGetStreamPriorityRange")

    def hold(self, streams):
        """Each stream waits for a pinned flag to reach this hold's number: cuStreamWaitValue32 where the device
        has stream memory operations, else a one-thread kernel polling the flag (nvbandwidth's spin gate)."""
        self._trace_ready()  # not while held: starting CUPTI may wait for the GPU
        for ctx in {self._stream_ctx(s) for s in streams}:  # loaded now: loading a module while held may wait
            with self._in(ctx):  # for the held work
                self._builtin(BUILTINS["fill"])
        if self.flag is None:  # portable: a kernel in any context reads it
            ptr = int(call("cuMemHostAlloc", 4, cu.CU_MEMHOSTALLOC_DEVICEMAP | cu.CU_MEMHOSTALLOC_PORTABLE))
            self.flag = _host_array(ptr, 4).view("<u4")
            self.flag[0] = 0
            dp = self._host_device_ptr(self.flag.ctypes.data)
            self.flag_dptr = dp if isinstance(dp, int) else self.flag.ctypes.data
        if not self.held:
            self.hold_gen += 1
            self.held, self.released_early = True, None
        for stream in streams:
            self._hold_one(stream)
        if self.watchdog is None:
            self.watchdog = threading.Thread(target=self._watch, daemon=True)
            self.watchdog.start()
        return self.hold_how

    def _watch(self) -> None:
        """The driver's queue is finite (with CUPTI tracing, its record buffer too: on the H100 a thousand 64 KiB
        copies issued while held blocked the call that issued them). A call stuck that way while held would wait
        forever for the release only its own thread can give: after STUCK seconds without progress, let go."""
        last = None
        while not self.closed:
            time.sleep(STUCK / 4)
            now = (self.held and self.in_call, self.beat)
            if now[0] and last == now:
                stuck_since = getattr(self, "_stuck_since", None) or time.perf_counter()
                self._stuck_since = stuck_since
                if time.perf_counter() - stuck_since >= STUCK:
                    self.released_early = (f"the driver's queue filled while held ({self.beat} calls issued): the "
                                           "streams were let go early, and the work issued since ran as issued")
                    self.flag[0] = self.hold_gen
                    self.held = False
            else:
                self._stuck_since = None
            last = now

    def _hold_one(self, stream) -> None:
        with self._in(self._stream_ctx(stream)):
            self._hold_stream(stream)

    def _hold_stream(self, stream) -> None:
        if self.hold_how != HOLD_KERNEL:
            res = cu.cuStreamWaitValue32(stream, self.flag_dptr, self.hold_gen,
                                         cu.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ)[0]
            if res is OK:
                self.hold_how = HOLD_WAIT_VALUE
                return
            if self.hold_how == HOLD_WAIT_VALUE:  # it worked before: this is a real error
                check(res, "cuStreamWaitValue32")
            self.hold_how = HOLD_KERNEL
        hold_fn = self._functions(HOLD_SOURCE, ["k_hold"], extern_c=True)["k_hold"]
        args, _keep = launch_args(hold_fn, (1, 1, 1), (1, 1, 1), stream, C.c_uint64(self.flag_dptr),
                                  C.c_uint32(self.hold_gen))
        call("cuLaunchKernel", *args)

    def release(self):
        """Returns why the streams had already been let go, if the watchdog did it."""
        if self.held:
            self.flag[0] = self.hold_gen
            self.held = False
        early, self.released_early = self.released_early, None
        return early
