"""Measurement: versions, the clock as the shell reads it, finished work's spans, plans run without the shell,
the modeled time of a user kernel, bench copies between GPUs and NUMA nodes."""

from __future__ import annotations

from ...errors import ShellError
from ..base import WORK_CALLS, round_stats
from .common import INVALID_DEVICE, ns, secs


class Measurement:
    """The simulator's measurement (a mixin: its state is made in SimBackend._fresh)."""

    def versions(self):
        return {"driver": "simulated", "profile": self.profile.name}

    def clock(self):
        return secs(self.now)

    def command_started(self):
        self._advance(self.now + self.overhead_ns)

    def host_sleep(self, seconds):
        self._elapse(seconds)

    def memory_paths(self):
        return self.profile.memory_paths()

    def peer_copy(self, src, dst, nbytes, reps, peer):
        self._alive()
        self._refuse_held("a copy between GPUs (timed to its end)")
        p = self.profile
        if not (0 <= src < p.gpus and 0 <= dst < p.gpus) or src == dst:
            raise ShellError(INVALID_DEVICE, f"no pair of GPUs {src} → {dst} in a profile of {p.gpus}")
        if peer and not p.peer_access:
            raise ShellError("CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", f"GPU {src} cannot reach GPU {dst} directly")
        per = p.peer_latency + nbytes / (p.peer_rate if peer else p.peer_staged_rate)
        self._advance(self.now + ns(per) * reps)
        return per

    def host_copy(self, device, node, nbytes, reps, to_device):
        self._alive()
        self._refuse_held("a timed copy (it waits for its end)")
        if not 0 <= device < self.profile.gpus:
            raise ShellError(INVALID_DEVICE, f"there is no GPU {device}: the profile has {self.profile.gpus}")
        per = self.profile.copy_seconds("pinned h2d" if to_device else "pinned d2h", nbytes)
        self._advance(self.now + ns(per) * (reps + 1))
        return per

    def kernel_seconds(self, traffic) -> float:
        """A user kernel's modeled time from its counts: the memory it moved at each kind's rate (constant memory:
        a pass for each distinct address of a warp's request past the first), or the warp instructions
        it issued, whichever takes longer, after the launch latency and the calibrated floor."""
        p = self.profile
        rate = {"device": p.kernel_device_read, "managed": p.kernel_device_read, "zero-copy": p.kernel_zero_copy_read,
                "peer": p.peer_rate}
        memory = sum(n * 32 / rate[k] for k, n in traffic.sectors.items()) + traffic.atomics * 32 / p.kernel_device_read \
            + (traffic.constant_addresses - traffic.constant_requests) / p.kernel_constant_replays
        issue = traffic.instructions / p.kernel_warp_instructions + traffic.shared_wavefronts / p.kernel_shared_wavefronts
        return p.launch_latency + p.kernel_floor + max(memory, issue)

    def fired_callbacks(self):
        fired, self.fired = self.fired, []
        return fired

    def resolve(self, token):
        span = self.spans.get(token)
        if span is None or span[1] > self.now or self.dead:  # after a fault no event completes: work stays pending
            return None
        del self.spans[token]
        return secs(span[1] - span[0]), secs(span[0]), secs(span[1])

    def run_plan(self, calls, rounds, gate=False, trace=True):
        """The calls at the driver's pace: no shell time between them (the modeled host cost of each call only)."""
        self._alive()
        self._refuse_held("a repeat run on the GPU side (it waits for its work at the end)")
        if gate:
            self.hold([])
        issued, per = [], []  # (the call's place in a round, when it was issued, its operation's token)
        self.planned = planned = {}
        t0 = self.now
        try:
            for _ in range(rounds):
                r0 = self.now
                for k, (method, args) in enumerate(calls):
                    seq = self.seq
                    t = getattr(self, method)(*args)
                    if method in WORK_CALLS and self.seq != seq:  # it queued an operation (a 0-byte copy does not)
                        issued.append((k, t.issued, self.seq))
                per.append(secs(self.now - r0))
        finally:
            if gate:
                self.release()  # what was held is scheduled now, its spans planned
            self.planned = None
        host = secs(self.now - t0)
        self._wait_device("the end of the repeat")
        self._alive()
        spans = [(k, at, *planned[token]) for k, at, token in issued]
        for _, _, token in issued:
            self.spans.pop(token, None)
        return {"host_seconds": host, "per_round": round_stats(per),  # the totals from the clock's ns: exact
                "gpu_seconds": secs(max(s[3] for s in spans) - min(s[2] for s in spans)) if spans else None,
                "busy_seconds": secs(sum(s[3] - s[2] for s in spans)),
                "records": [[k, at, secs(start), secs(end)] for k, at, start, end in spans], "source": "modeled"}
