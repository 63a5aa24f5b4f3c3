"""The GPU's own timestamps, from NVIDIA's profiling interface (CUPTI, through the `cupti-python` package), in
the GPU worker. CUDA events around an operation measure stream time: a copy queued behind another is charged
for its wait. CUPTI's activity records say when the copy engine or the SMs started and finished it — what
nvprof and Nsight Systems show. Each operation the worker issues is tagged with an external correlation id
(ours), so its records can be found again; records arrive in buffers, on CUPTI's thread, and are matched on
demand after a flush."""

from __future__ import annotations

import ctypes as C
import re
import struct
import threading
from operator import itemgetter

BUFFER_BYTES = 8 << 20
KEEP = 1 << 20  # tags and spans kept at most: the oldest go first
KIND = struct.Struct("<I")  # every activity record begins with its kind
# the driver calls that queue work (every version and variant of each name): the only ones CUPTI records
TRACED_DRIVER_CALLS = ("cuMemcpy", "cuMemset", "cuLaunchKernel", "cuLaunchHostFunc", "cuMemPrefetchAsync")


def _keep_newest(d: dict, n: int) -> None:
    if len(d) > n:
        for key in list(d)[: len(d) - n // 2]:
            del d[key]


def unavailable_reason(driver_cuda_major: int) -> str | None:
    """None when cupti-python is installed for this driver; else why not, in one line. (Whether it loads is seen
    when tracing starts, at the first timed call: loading it is most of a second's start.)"""
    try:
        from importlib.metadata import PackageNotFoundError, version
        try:
            wanted = int(version("cupti-python").split(".")[0])
        except PackageNotFoundError:
            return ("cupti-python is not installed (pip install cupti-python, of the driver's CUDA major version): "
                    "engine times come from CUDA events")
        if wanted > driver_cuda_major:
            return (f"cupti-python {wanted} needs a CUDA {wanted} driver, this one is CUDA {driver_cuda_major} "
                    f"(pip install 'cupti-python=={driver_cuda_major}.*'): engine times come from CUDA events")
    except Exception as e:  # a broken install: unreadable metadata
        return f"cupti-python's install is broken ({type(e).__name__}: {e}): engine times come from CUDA events"
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
        self.flushes = 0
        kinds = cupti.ActivityKind
        self.kinds = (kinds.MEMCPY, kinds.MEMSET, kinds.CONCURRENT_KERNEL)
        self.external = kinds.EXTERNAL_CORRELATION
        self.custom = cupti.ExternalCorrelationKind.CUSTOM0
        # CUPTI writes an external-correlation record for each driver API record only: DRIVER must be on too
        # (measured on the H100: without it, no record ties our tag to the work) — for the calls that queue work
        self.enabled = (*self.kinds, self.external, kinds.DRIVER)
        self.base_ns = cupti.get_timestamp()  # the trace's time zero, on CUPTI's clock (loads libcupti)
        self.reader = RecordReader(cupti, self._completed, {int(k): ("work", _layout(cupti, k)) for k in self.kinds}
                                   | {int(self.external): ("tag", _layout(cupti, self.external))})
        self.resume()

    def _completed(self, tags: list, records: list) -> None:
        """On CUPTI's thread (a full buffer) or the flushing one: file what a buffer held."""
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
        self.flushes += 1  # work that had ended before this flush has all its records delivered
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
        """Records again: of the driver's calls, only those that queue work (each record costs µs to make and to
        read; the queries and event records a command makes around its work were most of them)."""
        for kind in self.enabled:
            self.cupti.activity_enable(kind)
        self.work_cbids, self.work_paused = [], False
        for name, cbid in self.cupti.driver_api_trace_cbid.__members__.items():
            if name not in ("INVALID", "SIZE", "FORCE_INT"):
                self.cupti.activity_enable_driver_api(int(cbid), name.startswith(TRACED_DRIVER_CALLS))
                if name.startswith(TRACED_DRIVER_CALLS):
                    self.work_cbids.append(int(cbid))

    def pause_work(self) -> None:
        """No records of work until `resume_work` (a long plan's untraced rounds), cheaply: the work kinds and the
        work calls' driver records off, DRIVER itself left on (turning it on again would need its list of calls
        made again: 0.6 ms on the H100 host, where this takes 70 µs)."""
        for kind in self.kinds:
            self.cupti.activity_disable(kind)
        for cbid in self.work_cbids:
            self.cupti.activity_enable_driver_api(cbid, 0)
        self.work_paused = True

    def resume_work(self) -> None:
        for kind in self.kinds:
            self.cupti.activity_enable(kind)
        for cbid in self.work_cbids:
            self.cupti.activity_enable_driver_api(cbid, 1)
        self.work_paused = False

    def close(self) -> None:
        try:
            self.cupti.activity_flush_all(1)
            for kind in self.enabled:
                self.cupti.activity_disable(kind)
        except Exception:  # a dead context: there is nothing left to flush
            pass


def unpacker(layout: list[tuple[int, str]]):
    """(buffer, record's offset) → the fields `layout` names, in its order, read by one struct call: the fields
    sorted by offset, the gaps between them skipped."""
    by_offset = sorted(range(len(layout)), key=lambda i: layout[i][0])
    base, fmt, end = layout[by_offset[0]][0], "<", 0
    for i in by_offset:
        offset, code = layout[i]
        fmt += f"{offset - base - end}x{code[1:]}"
        end = offset - base + struct.calcsize("<" + code[1:])
    unpack, reorder = struct.Struct(fmt).unpack_from, itemgetter(*[by_offset.index(i) for i in range(len(layout))])
    return lambda view, at: reorder(unpack(view, at + base))


def _layout(cupti, kind) -> list[tuple[int, str]]:
    """(offset, struct format) of the fields read from a record of `kind`: correlation id then start, end (work) or
    the external id (a tag). From cupti-python's numpy type of the newest record version it knows — the C struct
    its libcupti writes — not from offsets kept here."""
    stem = {"MEMCPY": "memcpy", "MEMSET": "memset", "CONCURRENT_KERNEL": "kernel",
            "EXTERNAL_CORRELATION": "external_correlation"}[kind.name]
    versions = {int(m.group(1) or 0): name for name in dir(cupti)
                if (m := re.fullmatch(rf"activity_{stem}(\d*)_dtype", name))}
    dtype = getattr(cupti, versions[max(versions)])
    wanted = ("correlation_id", "external_id") if stem == "external_correlation" else ("correlation_id", "start", "end")
    formats = {("u", 4): "<I", ("u", 8): "<Q", ("i", 4): "<i", ("i", 8): "<q"}
    return [(dtype.fields[f][1], formats[dtype.fields[f][0].kind, dtype.fields[f][0].itemsize]) for f in wanted]


def _libcupti() -> C.CDLL:
    """The libcupti cupti-python loaded (found where the process mapped it)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            if "libcupti.so" in line:
                return C.CDLL(line.split()[-1])
    raise OSError("libcupti is not loaded")


REQUESTED = C.CFUNCTYPE(None, C.POINTER(C.c_void_p), C.POINTER(C.c_size_t), C.POINTER(C.c_size_t))
COMPLETED = C.CFUNCTYPE(None, C.c_void_p, C.c_uint32, C.c_void_p, C.c_size_t, C.c_size_t)


class RecordReader:
    """CUPTI's activity buffers, registered and read here through libcupti's C API. cupti-python's own callback
    turns every record into an object before we see it, and its fields are slow to read: 28 µs a record on the
    H100 (a 4-byte copy leaves three), more than the copy. Here a record is walked with
    cuptiActivityGetNextRecord and only its kind and the fields `_layout` names are unpacked."""

    def __init__(self, cupti, deliver, layouts: dict[int, tuple[str, list]]):
        self.deliver, self.layouts = deliver, layouts
        self.readers = {kind: (what == "tag", unpacker(layout)) for kind, (what, layout) in layouts.items()}
        self.lib = _libcupti()
        self.lib.cuptiActivityGetNextRecord.argtypes = [C.c_void_p, C.c_size_t, C.POINTER(C.c_void_p)]
        self.free: list = []  # buffers CUPTI handed back, for reuse
        self.lent: dict[int, object] = {}  # address → buffer CUPTI is filling (kept alive until it returns)
        self.callbacks = REQUESTED(self._requested), COMPLETED(self._completed)  # alive as long as CUPTI calls them
        res = self.lib.cuptiActivityRegisterCallbacks(*self.callbacks)
        if res:
            cupti.check_status(res)

    def _requested(self, buffer, size, max_records) -> None:
        buf = self.free.pop() if self.free else (C.c_uint64 * (BUFFER_BYTES // 8))()  # 8-byte aligned, as CUPTI asks
        self.lent[C.addressof(buf)] = buf
        buffer[0], size[0], max_records[0] = C.addressof(buf), BUFFER_BYTES, 0

    def _completed(self, context, stream_id, address, size, valid) -> None:
        try:
            tags, records = self.read(address, valid)
            self.deliver(tags, records)
        except Exception:  # an exception must not unwind into CUPTI's thread: the records of this buffer are lost
            pass
        finally:
            buf = self.lent.pop(address, None)
            if buf is not None:
                self.free.append(buf)

    def read(self, address: int, valid: int) -> tuple[list, list]:
        """(correlation id, our tag) pairs and (correlation id, start ns, end ns) work records in a buffer."""
        if not valid:
            return [], []
        view = memoryview((C.c_char * valid).from_address(address)).cast("B")
        record, tags, records = C.c_void_p(0), [], []
        # what each record costs is most of a flush's: the call's arguments made once, one struct call a record
        buffer, size, place = C.c_void_p(address), C.c_size_t(valid), C.byref(record)
        next_record, readers, kind_of = self.lib.cuptiActivityGetNextRecord, self.readers, KIND.unpack_from
        while next_record(buffer, size, place) == 0:
            at = record.value - address
            what = readers.get(kind_of(view, at)[0])
            if what is None:  # a driver call's own record: it only carries the correlation
                continue
            (tags if what[0] else records).append(what[1](view, at))
        return tags, records
