"""Measurement: versions, the clock as the shell reads it, finished work's spans, plans run without the shell,
the modeled time of a user kernel, bench copies between GPUs and NUMA nodes."""

from __future__ import annotations

from ...errors import ShellError
from ..base import WORK_CALLS, round_stats
from .common import INVALID_DEVICE


class Measurement:
    """The simulator's measurement (a mixin: its state is made in SimBackend._fresh)."""

    def versions(self):
        return {"driver": "simulated", "profile": self.profile.name}

    def clock(self):
        return self.now

    def command_started(self):
        self._advance(self.now + self.profile.shell_overhead)

    def host_sleep(self, seconds):
        self._advance(self.now + seconds)

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
        self._advance(self.now + per * reps)
        return per

    def host_copy(self, device, node, nbytes, reps, to_device):
        self._alive()
        self._refuse_held("a timed copy (it waits for its end)")
        if not 0 <= device < self.profile.gpus:
            raise ShellError(INVALID_DEVICE, f"there is no GPU {device}: the profile has {self.profile.gpus}")
        per = self.profile.copy_seconds("pinned h2d" if to_device else "pinned d2h", nbytes)
        self._advance(self.now + per * (reps + 1))
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
        return span[1] - span[0], span[0], span[1]

    def run_plan(self, calls, rounds, gate=False, trace=True):
        """The calls at the driver's pace: no shell time between them (the modeled host cost of each call only)."""
        self._alive()
        self._refuse_held("a repeat run on the GPU side (it waits for its work at the end)")
        if gate:
            self.hold([])
        records, per = [], []
        t0 = self.now
        try:
            for _ in range(rounds):
                r0 = self.now
                for k, (method, args) in enumerate(calls):
                    t = getattr(self, method)(*args)
                    if method in WORK_CALLS:
                        records.append([k, t.issued, t.start, t.end, t.token])
                per.append(self.now - r0)
        finally:
            if gate:
                self.release()
        host = self.now - t0
        self._wait_device("the end of the repeat")
        self._alive()
        for r in records:
            if r[2] is None:
                r[2], r[3] = self.spans.get(r[4]) or (None, None)
            self.spans.pop(r[4], None)
            del r[4]
        done = [r for r in records if r[2] is not None]
        return {"host_seconds": host, "per_round": round_stats(per),
                "gpu_seconds": max(r[3] for r in done) - min(r[2] for r in done) if done else None,
                "busy_seconds": sum(r[3] - r[2] for r in done), "records": done, "source": "modeled"}
