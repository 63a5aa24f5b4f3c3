"""Measurement: the trace's clock, each call timed between events (or by CUPTI) and whether it held the host,
work resolved when it finished, plans run as a loop of driver calls, bench copies between GPUs and NUMA nodes."""

from __future__ import annotations

import math
import time

from ...errors import ShellError, held_error
from ...model import syncrules as R
from .. import topology
from ..activity import Activity
from ..base import WORK_CALLS, Timing, round_stats
from ..bindings import OK, call, check, cu, done
from .common import EVENT_MIN_BYTES, OBSERVABLE, Ctx, Pending, _nvidia_driver

# queued work CUPTI has no engine record of (memcpy, memset or kernel): timed by the events around it instead
NO_ENGINE_RECORD = frozenset({"cuMemPrefetchAsync", "cuMemAllocAsync", "cuMemAllocFromPoolAsync", "cuMemFreeAsync"})
KEEP_PLANS = 1000  # traced plans whose records nobody has asked for yet: the oldest are forgotten
TRACE_ALL = 100  # a plan of this many operations or fewer is traced whole; a longer one, its first rounds:
TRACED_SHARE = 0.02  # this share of them (at least one): CUPTI costs ~2 µs an operation (a third of a 4-byte copy's)


class Measurement:
    """The GpuSide's measurement (a mixin: its state is made in GpuSide.__init__)."""

    def versions(self) -> dict:
        from importlib.metadata import version

        from cuda import bindings

        v = self.driver_version
        return {"CUDA driver API": f"{v // 1000}.{v % 1000 // 10}", "PyCUDA": version("pycuda"),
                "cuda-bindings": bindings.__version__,
                "NVIDIA driver": _nvidia_driver(), "CUPTI": self._cupti_version()}

    def _cupti_version(self) -> str:
        if not self.tracing:
            return "not used: " + self.tracing_why
        from importlib.metadata import version

        return f"cupti-python {version('cupti-python')}: engine times from activity records"

    def _trace_ready(self, records: bool = False) -> None:
        """CUPTI, started before the first work, event or plan rather than with the worker: loading it (cupti-python
        and the numpy it needs: 0.32 s on the H100 machine) is paid once, outside every timed region, and the prompt
        does not wait for it. Its clock takes over from the trace's where the trace's has reached. `records`: the
        call is work whose records are wanted — tracing paused after a plan (`idle` had no time to resume it) is
        resumed first."""
        if self.activity is not None:
            if records and self.activity.work_paused:
                self.activity.resume_work()
            return
        if not self.tracing:
            return
        try:
            act = Activity()
        except Exception as e:  # CUPTI refused (another profiler attached, an old driver, a broken install)
            self.tracing, self.tracing_why = None, (f"CUPTI could not start ({type(e).__name__}: {e}): engine times "
                                                    "come from CUDA events")
            return
        act.base_ns = act.cupti.get_timestamp() - round((time.perf_counter() - self.t0) * 1e9)
        self.activity = act

    def idle(self) -> None:
        """The worker has replied and no request waits: CUPTI's work records, paused for a plan's untraced rounds,
        are turned on again now (70 µs) rather than before the reply — where the user's next `event record` would
        have waited for it (the pageable demo's loop) — or before the next command's work."""
        if self.activity is not None and self.activity.work_paused:
            self.activity.resume_work()

    def rest(self) -> None:
        """No request for a while: the records of finished work (and of plans) CUPTI still holds are flushed and read
        now, so the command that next settles that work (`sync`, `ls`, `timeline`, a query) finds them delivered
        instead of flushing itself (0.2 ms, and ~11 µs a copy's records to read). Not while any of it runs: a
        forced flush would hand over its records unfinished."""
        act = self.activity
        if act is None:
            return
        self.idle()
        awaiting = [p for t, p in self.pending.items() if p.start is None and not act.delivered(t)]
        plans = any(flushes == act.flushes for _, _, flushes in self.unread_plans.values())
        if (awaiting or plans) and all(map(self._ran, awaiting)):
            act.flush()

    def _ran(self, p: Pending) -> bool:
        """Whether a CUPTI-timed piece of work has finished (its event; while held it has none: its stream)."""
        try:
            return done("cuEventQuery", p.end) if p.end is not None else done("cuStreamQuery", p.stream)
        except ShellError:  # a dead context: there is nothing to read
            return False

    def _stamp(self) -> float:
        """Now, in trace seconds, on the clock the engine times use (CUPTI's when it traces)."""
        return self.activity.now() if self.activity else time.perf_counter() - self.t0

    def clock(self) -> float:
        return time.perf_counter()

    def host_sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def memory_paths(self) -> dict:
        from ...model.machine import pcie_link

        clock_khz, bus_bits = self._attr("MEMORY_CLOCK_RATE"), self._attr("GLOBAL_MEMORY_BUS_WIDTH")
        return {"pcie": pcie_link(self.info.pci_bus_id),
                "hbm_peak": 2 * clock_khz * 1e3 * bus_bits / 8 if clock_khz and bus_bits else None}

    def _untraced(self, what: str, measure, *args) -> float:
        """A bench's own copies, outside the session (topology's, in the GPUs' primary contexts, ours current again
        after) and untraced: with CUPTI on, staged peer copies ran at 0.94 of C."""
        if self.held:
            raise held_error(what)
        if self.activity is not None:
            self.activity.pause()
        try:
            return measure(*args)
        finally:
            if self.activity is not None:
                self.activity.resume()

    def peer_copy(self, src, dst, nbytes, reps, peer):
        return self._untraced("a copy between GPUs (timed to its end)", topology.peer_copy, src, dst, nbytes, reps,
                              peer)

    def host_copy(self, device, node, nbytes, reps, to_device):
        return self._untraced("a timed copy (it waits for its end)", topology.host_copy, device, node, nbytes, reps,
                              to_device)

    def _event(self) -> int:
        """A timing event of the current context."""
        if self.cur.free_events:
            return self.cur.free_events.pop()
        ev = int(call("cuEventCreate", 0))
        self.cur.events.append(ev)
        return ev

    def _timed(self, stream, name: str, args: tuple, rule: R.Rule, nbytes: int | None = None) -> Timing:
        """_timed_call in the stream's context, marked as issuing while held (for the watchdog, `_watch`)."""
        self._trace_ready(records=True)
        self.in_call, self.beat = self.held, self.beat + 1
        try:
            ctx = self._stream_ctx(stream)
            if ctx is self.cur:  # the usual case, on every copy and launch: no context switch to set up
                return self._timed_call(stream, name, args, rule, nbytes)
            with self._in(ctx):
                return self._timed_call(stream, name, args, rule, nbytes)
        finally:
            self.in_call = False

    def _timed_call(self, stream, name: str, args: tuple, rule: R.Rule, nbytes: int | None = None) -> Timing:
        """Call the driver function `name` between two events on `stream`, with nothing but the call between
        them, and observe whether it held the host: when work was queued ahead of it, the call waited for
        the GPU exactly when the GPU had passed the start event by the time it returned. With nothing queued
        the two cannot be told apart, and the result says it follows the documented rule. A small copy the
        rule says completes, on an idle stream, is latency-bound: its host time is its time, as C benchmarks
        take it."""
        if self.held and rule.blocks:
            raise held_error(name, rule.why)
        f = getattr(cu, name)
        tag, act = self.next_token, self.activity
        self.next_token += 1
        record = cu.cuEventRecord
        if act and rule.wait == "none" and name not in NO_ENGINE_RECORD:
            # CUPTI times it on its engine (copies, memsets, kernels; NO_ENGINE_RECORD have no such record): one event,
            # to know when it is done. With work queued ahead, a call that returned before its own work had run
            # did not wait for that queue: observed, as with events (a quick return needs no query). While held, not
            # even that event: it would run inside the batch the user times around the held work (200 of them were
            # 0.2 ms of the pinned demo's 2.7)
            queued = not done("cuStreamQuery", stream)
            end = None if self.held else self._event()
            issued = self._stamp()
            act.tag(tag)
            t0 = time.perf_counter()
            res = f(*args)[0]
            host = time.perf_counter() - t0
            act.untag()
            if res is not OK:
                self.cur.free_events += [end] if end is not None else []
                check(res, name)
            if end is not None:
                check(record(end, stream)[0], "cuEventRecord")
            self.pending[tag] = Pending(None, end, self.cur, stream)
            blocked = queued and host >= OBSERVABLE and end is not None and done("cuEventQuery", end)
            return Timing(None, host, blocked, self.timing_label, tag, rule=rule.why,
                          basis="observed" if queued else "rule", tag=tag, issued=issued)
        queued = not done("cuStreamQuery", stream)
        if rule.wait == "complete" and not queued and nbytes is not None and nbytes < EVENT_MIN_BYTES:
            issued = self._stamp()
            act and act.tag(tag)
            t0 = time.perf_counter()
            res = f(*args)[0]
            host = time.perf_counter() - t0
            act and act.untag()
            check(res, name)
            return Timing(host, host, True, self.timing_label, None, issued, issued + host, rule.why, "rule",
                          tag, issued)
        start, end = self._event(), self._event()
        issued = self._stamp()
        act and act.tag(tag)  # before the events: between them is the call alone (an idle GPU starts at once)
        check(record(start, stream)[0], "cuEventRecord")
        t0 = time.perf_counter()
        self.returned = f(*args)  # (result, values…): cuMemAllocAsync's pointer is its caller's (NO_ENGINE_RECORD)
        res = self.returned[0]
        host = time.perf_counter() - t0
        if res is not OK:
            act and act.untag()
            self.cur.free_events += [start, end]
            check(res, name)
        if rule.wait == "complete":  # it returned with its work done, so past the start event: the end event goes in
            check(record(end, stream)[0], "cuEventRecord")  # at once, the shell's own steps after it not in its time
            started = True
        else:
            started = done("cuEventQuery", start)
            check(record(end, stream)[0], "cuEventRecord")
        act and act.untag()
        if queued and (not started or host >= OBSERVABLE):
            blocked, basis = started, "observed"
        else:
            blocked, basis = rule.blocks, "rule"
        if rule.wait in ("complete", "device") or done("cuEventQuery", end):
            call("cuEventSynchronize", end)  # finished, or finishing now: its time is known
            seconds, t_start, t_end = self._span(start, end, self.cur)
            if basis == "rule" and seconds >= OBSERVABLE:  # long enough to see whether the call waited for it
                blocked, basis = host >= seconds / 2, "observed"
            return Timing(seconds, host, blocked, self.timing_label, None, t_start, t_end, rule.why, basis, tag,
                          issued)
        self.pending[tag] = Pending(start, end, self.cur)
        return Timing(None, host, blocked, self.timing_label, tag, rule=rule.why, basis=basis, tag=tag, issued=issued)

    def _issue(self, name: str, *args) -> None:
        """A driver call that queues work, marked as issuing while held (for the watchdog)."""
        self._trace_ready()
        self.in_call, self.beat = self.held, self.beat + 1
        try:
            call(name, *args)
        finally:
            self.in_call = False

    def _span(self, start: int, end: int, ctx: Ctx) -> tuple[float, float, float]:
        """(duration, start, end) of a finished event pair of `ctx`, on the trace's clock; frees the events."""
        t_start, t_end = (ctx.origin_at + self._elapsed(ctx.origin, e) for e in (start, end))
        ctx.free_events += [start, end]
        return t_end - t_start, t_start, t_end

    def resolve(self, token):
        return self._resolve(token, True)

    def _resolve(self, token, flush: bool):
        p = self.pending.get(token)
        if p is not None and p.end is None:
            return self._record_only(token, p, flush)
        try:
            if p is None or not done("cuEventQuery", p.end):
                return None
        except ShellError:  # a dead context: that work never finished
            return None
        del self.pending[token]
        if p.start is None:
            return self._engine_span(token, p.end, p.ctx)
        return self._span(p.start, p.end, p.ctx)

    def finished(self, tokens) -> dict:
        """For the worker's replies, cheaply: token → its span where the work has finished and its times are known
        now, None where it is still running; left out where it finished but CUPTI has not delivered its record
        yet (asking `resolve` flushes CUPTI, about a millisecond: not after every request)."""
        out = {}
        for token in tokens:
            p = self.pending.get(token)
            if p is not None and p.end is None:  # its record comes with a flush: `resolve` asks for it
                continue
            try:
                if p is None or not done("cuEventQuery", p.end):
                    out[token] = None
                    continue
            except ShellError:  # a dead context: the shell hears why when it asks
                continue
            if p.start is None and not self.activity.delivered(token):
                continue
            out[token] = self.resolve(token)
        return out

    def _record_only(self, token: int, p: Pending, flush: bool):
        """Work issued while held, timed by its CUPTI record alone: finished once CUPTI has the record, or once its
        stream is idle (then the record is delivered by a flush — or CUPTI lost it)."""
        span = self.activity.span(token)
        if span is None and flush:
            self.activity.flush()
            span = self.activity.span(token)
        if span is None:
            try:
                if not done("cuStreamQuery", p.stream):  # still running (or still held)
                    return None
            except ShellError:  # a dead context: that work never finished
                return None
            self.activity.flush()  # it ran: its record is delivered now, looked at after the stream was idle
            span = self.activity.span(token)
        del self.pending[token]
        if span is None:  # CUPTI lost it: it ran, when is not known
            t = self._stamp()
            return 0.0, t, t
        return span[1] - span[0], span[0], span[1], self.tracing

    def _engine_span(self, tag: int, end: int, ctx: Ctx) -> tuple:
        """(duration, start, end) from CUPTI's record of finished work (flushed when not yet delivered)."""
        ctx.free_events.append(end)
        span = self.activity.span(tag)
        if span is None:
            self.activity.flush()
            span = self.activity.span(tag)
        if span is None:  # CUPTI dropped the record: when it ended is known, how long it ran is not
            t = ctx.origin_at + self._elapsed(ctx.origin, end)
            return 0.0, t, t
        return span[1] - span[0], span[0], span[1], self.tracing

    def refine(self, tags):
        if not self.activity:
            return {}
        if not all(map(self.activity.delivered, tags)):  # finished work: a flush delivers the rest (read at rest: none)
            self.activity.flush()
        spans = {t: self.activity.span(t) for t in tags}
        return {t: s for t, s in spans.items() if s is not None}

    def resolve_many(self, tokens):
        if any((p := self.pending.get(t)) is not None and p.end is None and not self.activity.delivered(t)
               for t in tokens):
            self.activity.flush()  # once, for all the work issued while held
        spans = {t: self._resolve(t, False) for t in tokens}
        return {t: s for t, s in spans.items() if s is not None}

    def _host_timing(self, t0: float) -> Timing:
        host = time.perf_counter() - t0
        return Timing(host, host, True, self.timing_label)

    def _plan_call(self, method: str, args) -> tuple:
        """(driver function, its arguments, what must outlive the call, stream) for one call of a plan."""
        if method == "memcpy":
            name, cargs, _ = self._memcpy_call(*args)
            return name, cargs, None, args[5] if args[6] else None
        if method == "memcpy_batch":
            cargs, _ = self._memcpy_batch_call(*args)
            return "cuMemcpyBatchAsync", cargs, None, args[1]
        if method == "memset":
            name, cargs, _ = self._memset_call(*args)
            return name, cargs, None, args[4] if args[5] else None
        if method == "launch":
            cargs, keep = self._launch_call(*args)
            return "cuLaunchKernel", cargs, keep, args[6]
        if method == "prefetch":
            return "cuMemPrefetchAsync", self._prefetch_call(*args), None, args[2]
        if method == "event_record":
            return "cuEventRecord", (args[0], args[1]), None, args[1]
        if method == "stream_wait":
            return "cuStreamWaitEvent", (args[0], args[1], 0), None, args[0]
        if method == "stream_sync":
            return "cuStreamSynchronize", (args[0],), None, args[0]
        if method == "device_sync":
            return "cuCtxSynchronize", (), None, None
        if method == "host_noop":
            return "cuLaunchHostFunc", self._noop_call(args[0]), None, args[0]
        raise ShellError("NOT_PLANNABLE", f"{method} cannot run without the shell")

    def run_plan(self, calls, rounds, gate=False, trace=True):
        """The rounds as a tight loop of driver calls (no events or checks between them), events around it all."""
        if self.held:
            raise held_error("a repeat run on the GPU side (it waits for its work at the end)")
        self._trace_ready(records=trace)
        plan = [self._plan_call(m, a) for m, a in calls]
        fns = [(getattr(cu, name), cargs, name) for name, cargs, _, _ in plan]
        streams = list(dict.fromkeys([None] + [p[3] for p in plan]))
        if gate:
            self.hold(streams)
        record = cu.cuEventRecord
        starts, ends = [self._event() for _ in streams], [self._event() for _ in streams]
        import numpy as np

        per = np.empty(rounds)
        tag, act = self.next_token, self.activity if trace else None
        self.next_token += 1
        work = [k for k, (m, _) in enumerate(calls) if m in WORK_CALLS]
        traced = rounds if act is None or rounds * len(work) <= TRACE_ALL else \
            min(rounds, max(1, math.ceil(rounds * TRACED_SHARE)))
        untraced_from = traced if traced < rounds else -1  # the round before which CUPTI pauses
        i = -1
        if self.activity and not trace:  # CUPTI stamps each operation on the GPU too: a bench must not pay that
            self.activity.pause_work()
        try:
            for ev, s in zip(starts, streams):
                check(record(ev, s)[0], "cuEventRecord")
            act and act.tag(tag)
            self.in_call = self.held
            t0 = last = time.perf_counter()
            for i in range(rounds):
                if i == untraced_from:  # tens of µs; the records of work in flight still come
                    act.untag()
                    act.pause_work()
                for f, cargs, name in fns:
                    res = f(*cargs)[0]
                    if res is not OK:
                        check(res, f"{name} (in round {i + 1} on the GPU side)")
                now = time.perf_counter()
                per[i] = now - last
                last = now
                self.beat = i
            self.in_call = False
            host = last - t0
            if act and untraced_from < 0:
                act.untag()
            for ev, s in zip(ends, streams):
                check(record(ev, s)[0], "cuEventRecord")
        except BaseException:  # paused in the loop: CUPTI records again when work next needs it (_trace_ready)
            self.in_call = False
            act and self._untag_quietly()
            raise
        finally:
            self.release() if gate else None
        call("cuCtxSynchronize")  # paused for untraced rounds, CUPTI stays so until the reply is sent (idle)
        ctx = self.cur
        first = ctx.origin_at + min(self._elapsed(ctx.origin, e) for e in starts)
        last_end = ctx.origin_at + max(self._elapsed(ctx.origin, e) for e in ends)
        ctx.free_events += starts + ends
        if act:  # its records are read when the trace is (plan_records), not now: see there
            self.unread_plans[tag] = (work, traced, act.flushes)  # read by a flush after this one: all of them
            while len(self.unread_plans) > KEEP_PLANS:
                del self.unread_plans[next(iter(self.unread_plans))]
        return {"host_seconds": host, "per_round": round_stats(per), "gpu_seconds": last_end - first,
                "busy_seconds": None, "records": [], "records_tag": tag if act else None,
                "rounds": rounds, "traced_rounds": traced if act else 0, "source": "CUDA events",
                "span": (first, last_end)}

    def plan_records(self, tag):
        """Read after the command that ran the plan, when the trace is shown: flushing CUPTI and reading a plan's
        records took ~11 µs a copy on the H100 — 2–6 ms for the pageable demo's 200 copies, which fell between
        its loop and the user's next `event record` (the GPU idle, the figure 15–40% over C's)."""
        unread = self.unread_plans.pop(tag, None)
        if unread is None or not self.activity:
            return []
        work, traced, flushes = unread
        if self.activity.flushes == flushes:  # no flush since the plan ended (`rest` does one)
            self.activity.flush()
        return self.activity.plan_records(tag, work, traced)

    def _untag_quietly(self) -> None:
        try:
            self.activity.untag()
        except Exception:  # it was not pushed: the failure came before
            pass
