"""The virtual clock: operations queued under their synchronisation rule, scheduled on their stream and engine
(Hyper-Q: one hardware queue a stream), completed in time order — their bytes change then — and the host's waits.
Every time on it is an int of nanoseconds (common.ns): exact however long a session runs; seconds only in what leaves
the backend (Timing, callbacks, the clock the shell reads)."""

from __future__ import annotations

import bisect
import heapq

from ...errors import RESET_HINT, ShellError, held_error
from ...model import syncrules as R
from ..base import Timing
from .common import Op, SimStream, ns, secs


class Clock:
    """The simulator's clock (a mixin: its state is made in SimBackend._fresh)."""

    def _advance(self, t: int) -> None:
        """Move the host's clock to t (ns), completing (in completion order) everything that ends by then."""
        self.now = max(self.now, t)
        while self.ops and self.ops[0].end <= self.now:
            op = heapq.heappop(self.ops)
            if self.dead:
                continue  # after a fault nothing more runs
            if op.fault:
                self.dead = op.fault
            elif op.effect:
                self.version += 1
                try:
                    fault = op.effect()
                except ShellError as e:  # the simulator's own storage ran out as the work ended: said once, not sticky
                    self.unkept = e
                    continue
                if fault:
                    self.dead, self.fault_detail = fault
            if op.callback is not None:
                self.fired.append({**op.callback, "at": secs(op.end)})

    def _elapse(self, seconds: float) -> None:
        """The host spends `seconds` (a modeled cost) on a call: its clock moves on by them."""
        self._advance(self.now + ns(seconds))

    def _alive(self) -> None:
        """Every GPU call: time passes first, so a fault that has happened by now surfaces here."""
        self._advance(self.now)
        if self.unkept is not None:
            e, self.unkept = self.unkept, None
            raise ShellError(e.code, f"{e.message}: work that finished meanwhile could not keep its bytes", e.hint)
        if self.dead == "GPU_ABANDONED":
            raise ShellError(self.dead, "the GPU side was given up; nothing more can run on it", RESET_HINT)
        if self.dead:
            seen = f" ({self.fault_detail})" if self.fault_detail else ""
            raise ShellError(self.dead, f"the context is unusable after an earlier kernel fault{seen}", RESET_HINT)

    def _wait(self, t: int, what: str) -> None:
        """The host waits for the GPU until t — or, past `gpu_timeout`, gives it up as a person would."""
        if self.gpu_timeout and t - self.now > ns(self.gpu_timeout):
            self._elapse(self.gpu_timeout)
            if not self.dead:
                self.dead = "GPU_ABANDONED"
                raise ShellError(self.dead, f"gave the GPU up after {self.gpu_timeout:g} s waiting in {what} "
                                 f"(gpu-timeout {self.gpu_timeout:g} s); work still queued there will never finish",
                                 RESET_HINT)
        self._advance(t)

    def _blocking_tails(self, ctx=None) -> int:
        return max([self.retired] + [s.tail for s in self.streams if not s.nonblocking and s.ctx == ctx])

    def _ready(self, q: SimStream) -> int:
        """When work queued now on q may start: after q's earlier work and the host's call, and by the legacy
        default stream's rule after its context's default stream (blocking streams) or every blocking stream of
        its context (default)."""
        ready = max(self.now + self.call_ns, q.tail)
        default = self.ctxs[q.ctx].default
        if q is default:
            return max(ready, self._blocking_tails(q.ctx))
        return ready if q.nonblocking else max(ready, default.tail)

    def engine(self, kind: str | None) -> str | None:
        """The hardware an operation runs on: with asyncEngineCount ≥ 2, H2D and D2H copies have an engine
        each; with 1 they share one; with 0 copies wait for compute. Kernels, memsets and device-to-device
        copies run on the SMs, concurrently across streams when the device has concurrentKernels."""
        if kind in ("h2d", "d2h"):
            n = self.profile.async_engine_count
            return kind if n >= 2 else "copy" if n == 1 else "compute"
        return kind

    def _schedule(self, handle, duration: int, engine: str | None) -> tuple[int, int]:
        q = handle or self.default
        start = self._ready(q)
        if engine and q.engine and engine != q.engine and start == q.tail:  # handed over to another engine
            start += self.switch_ns
        if engine:
            q.engine = engine
        serial = engine and (engine != "compute" or not self.profile.concurrent_kernels)
        if serial:
            start = self._engine_slot(engine, start, duration)
        end = start + duration
        q.tail = end
        return start, end

    def _engine_slot(self, engine: str, ready: int, duration: int) -> int:
        """When an operation ready at `ready` runs on `engine`, which it then holds. With Hyper-Q, in the first idle
        gap long enough (work queued earlier but waiting for its stream leaves the engine to others: on the H100 a
        copy on a non-blocking stream ran while a blocking stream's copy waited for a kernel); without, after
        everything issued before it."""
        starts, ends = self.engines.setdefault(engine, ([], []))
        gone = bisect.bisect_right(ends, self.now)  # spans over before now can hold nothing up
        if gone > 64:
            del starts[:gone], ends[:gone]
        if not self.profile.hyper_q:
            at = max(ready, ends[-1]) if ends else ready
            i = len(starts)
        else:
            at, i = ready, bisect.bisect_right(ends, ready)
            while i < len(starts) and starts[i] < at + duration:
                at = max(at, ends[i])
                i += 1
        starts.insert(i, at)
        ends.insert(i, at + duration)
        return at

    def _submit(self, handle, seconds: float, engine: str | None, rule: R.Rule, effect=None, *,
                stage: float = 0.0, fault: str | None = None, callback: dict | None = None) -> Timing:
        """Queue one operation of `seconds` (the host staging its bytes for `stage`) under its synchronisation rule
        and return what the host saw. While held, the operation is scheduled at release (its bytes, if staged, are
        read now)."""
        if self.held is not None and rule.blocks:
            raise held_error("this call", rule.why)
        duration = ns(seconds)
        before = self.now
        if rule.stages:  # a sync copy first waits for its stream; then the host stages the bytes
            if rule.wait == "queue":
                self._wait(self._ready(handle or self.default) - self.call_ns, "a synchronous copy")
            self.now += ns(stage)
            effect = effect(snapshot=True) if effect else None
        elif effect:
            effect = effect(snapshot=False)
        self.seq += 1
        token = self.seq
        if self.held is not None:
            self.held.append(lambda: self._enqueue(token, handle, duration, engine, effect, fault, callback))
            self.now = max(self.now, before + self.call_ns)
            self._advance(self.now)
            self._keep_span(token, None)
            return Timing(None, secs(self.now - before), False, self.timing_label, token, rule=rule.why,
                          basis="modeled", issued=secs(before))
        start, end = self._enqueue(token, handle, duration, engine, effect, fault, callback)
        if rule.wait == "complete":
            self._wait(end + self.sync_ns, "a synchronous call")
        else:
            self.now = max(self.now, before + self.call_ns)
            self._advance(self.now)
        if end > self.now:
            self._keep_span(token, (start, end))
        else:
            token = None
        return Timing(secs(duration), secs(self.now - before), rule.blocks, self.timing_label, token, secs(start),
                      secs(end), rule=rule.why, basis="modeled", issued=secs(before))

    def _enqueue(self, token: int, handle, duration: int, engine, effect, fault, callback) -> tuple[int, int]:
        start, end = self._schedule(handle, duration, engine)
        heapq.heappush(self.ops, Op(token, start, end, effect, fault, callback))
        if token in self.spans:
            self.spans[token] = (start, end)
        if self.planned is not None:
            self.planned[token] = (start, end)
        return start, end

    def _keep_span(self, token: int, span) -> None:
        self.spans[token] = span
        if len(self.spans) > 1 << 16:
            self.spans.popitem(last=False)

    def _host_call(self, cost: float, rule: R.Rule = R.HOST_ONLY) -> Timing:
        before = self.now
        self._elapse(cost)
        took = secs(self.now - before)
        return Timing(took, took, rule.blocks, self.timing_label, rule=rule.why, basis="modeled")

    def _noticed(self, t: int) -> int:
        """When a host waiting for work that ends at t goes on: the completion's round trip after t (sync_latency);
        at once for work already over."""
        return t + self.sync_ns if t > self.now else self.now

    def _wait_device(self, what: str = "cuCtxSynchronize") -> None:
        """Until every queued operation has ended — on destroyed streams too."""
        self._wait(self._noticed(max([self.now] + [op.end for op in self.ops])), what)
