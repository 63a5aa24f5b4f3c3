"""The GPU's own timestamps, from NVIDIA's profiling interface (CUPTI, through the `cupti-python` package), in
the GPU worker. CUDA events around an operation measure stream time: a copy queued behind another is charged
for its wait. CUPTI's activity records say when the copy engine or the SMs started and finished it — what
nvprof and Nsight Systems show. Each operation the worker issues is tagged with an external correlation id
(ours), so its records can be found again; records arrive in buffers, on CUPTI's thread, and are matched on
demand after a flush."""

from __future__ import annotations

import threading

BUFFER_BYTES = 8 << 20
KEEP = 1 << 20  # tags and spans kept at most: the oldest go first


def _keep_newest(d: dict, n: int) -> None:
    if len(d) > n:
        for key in list(d)[: len(d) - n // 2]:
            del d[key]


def unavailable_reason(driver_cuda_major: int) -> str | None:
    """None when cupti-python can trace on this driver; else why not, in one line."""
    try:
        from importlib.metadata import PackageNotFoundError, version
        try:
            wanted = int(version("cupti-python").split(".")[0])
        except PackageNotFoundError:
            return "cupti-python is not installed (pip install 'cudashell[cupti]'): engine times come from CUDA events"
        if wanted > driver_cuda_major:
            return (f"cupti-python {wanted} needs a CUDA {wanted} driver, this one is CUDA {driver_cuda_major} "
                    f"(pip install 'cupti-python=={driver_cuda_major}.*'): engine times come from CUDA events")
        from cupti import cupti  # noqa: F401
    except Exception as e:  # a broken install: its libcupti missing, a cuda-bindings mismatch
        return f"CUPTI did not load ({type(e).__name__}: {e}): engine times come from CUDA events"
    return None


class Activity:
    """Memcpy, memset and kernel activity records, by our correlation tag."""

    def __init__(self):
        from cupti import cupti

        self.cupti = cupti
        self.lock = threading.Lock()
        self.tag_of: dict[int, int] = {}  # CUPTI correlation id → our tag
        self.unmatched: list[tuple[int, int, int]] = []  # (correlation id, start ns, end ns) not yet tagged
        self.spans: dict[int, list[tuple[int, int, int]]] = {}  # tag → its records (correlation id, start, end)
        self.kinds = (cupti.ActivityKind.MEMCPY, cupti.ActivityKind.MEMSET, cupti.ActivityKind.CONCURRENT_KERNEL)
        self.external = cupti.ActivityKind.EXTERNAL_CORRELATION
        self.custom = cupti.ExternalCorrelationKind.CUSTOM0
        # CUPTI writes an external-correlation record for each driver API record only: DRIVER must be on too
        # (measured on the H100: without it, no record ties our tag to the work)
        self.enabled = (*self.kinds, self.external, cupti.ActivityKind.DRIVER)
        cupti.activity_register_callbacks(self._requested, self._completed)
        for kind in self.enabled:
            cupti.activity_enable(kind)
        self.base_ns = cupti.get_timestamp()  # the trace's time zero, on CUPTI's clock

    @staticmethod
    def _requested():
        return BUFFER_BYTES, 0

    def _completed(self, activities) -> None:
        """On CUPTI's thread: keep what is needed, as plain numbers."""
        tags, records = [], []
        for a in activities:
            if a.kind == self.external:
                tags.append((a.correlation_id, a.external_id))
            elif a.kind in self.kinds:
                records.append((a.correlation_id, a.start, a.end))
        with self.lock:
            self.tag_of.update(tags)
            self.unmatched += records

    def now(self) -> float:
        """Seconds since the trace's time zero, on the clock the records use."""
        return (self.cupti.get_timestamp() - self.base_ns) / 1e9

    def tag(self, tag: int) -> None:
        """The calls made until `untag` belong to `tag`."""
        self.cupti.activity_push_external_correlation_id(self.custom, tag)

    def untag(self) -> None:
        self.cupti.activity_pop_external_correlation_id(self.custom)

    def flush(self) -> None:
        """Deliver every record CUPTI holds, and file the records under their tags."""
        self.cupti.activity_flush_all(1)
        with self.lock:
            for rec in self.unmatched:  # after a forced flush, a record without a tag was never tagged: dropped
                tag = self.tag_of.get(rec[0])
                if tag is not None:
                    self.spans.setdefault(tag, []).append(rec)
            self.unmatched = []
            _keep_newest(self.tag_of, KEEP)  # calls that ran no GPU work (an event record in a plan) leave tags
            _keep_newest(self.spans, KEEP)  # spans nobody asked for (no `timeline` yet)

    def delivered(self, tag: int) -> bool:
        """Whether `span(tag)` would answer without a flush (it is not asked: asking forgets)."""
        with self.lock:
            return bool(self.spans.get(tag))

    def span(self, tag: int) -> tuple[float, float] | None:
        """(start, end) in trace seconds of the work tagged `tag` (several records: first start, last end);
        forgotten once asked."""
        recs = self.spans.pop(tag, None)
        if not recs:
            return None
        return (min(r[1] for r in recs) - self.base_ns) / 1e9, (max(r[2] for r in recs) - self.base_ns) / 1e9

    def plan_records(self, tag: int, work: list[int], rounds: int) -> list[list]:
        """[call index, None, start, end] for each work call of a plan run tagged `tag`, in issue order: one
        correlation id per call. [] when the records cannot be lined up with the calls."""
        recs = self.spans.pop(tag, [])
        by_call: dict[int, list[int]] = {}
        for corr, start, end in recs:
            span = by_call.setdefault(corr, [start, end])
            span[0], span[1] = min(span[0], start), max(span[1], end)
        if len(by_call) != len(work) * rounds:
            return []
        out = []
        for i, corr in enumerate(sorted(by_call)):
            start, end = by_call[corr]
            out.append([work[i % len(work)], None, (start - self.base_ns) / 1e9, (end - self.base_ns) / 1e9])
        return out

    def pause(self) -> None:
        """No records (and none of their cost) until `resume`."""
        for kind in self.enabled:
            self.cupti.activity_disable(kind)

    def resume(self) -> None:
        for kind in self.enabled:
            self.cupti.activity_enable(kind)

    def close(self) -> None:
        try:
            self.cupti.activity_flush_all(1)
            for kind in self.enabled:
                self.cupti.activity_disable(kind)
        except Exception:  # a dead context: there is nothing left to flush
            pass
