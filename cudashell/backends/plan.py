"""`repeat` at the driver's pace: the first round runs through the shell (parsed, checked, recorded, as typed),
with a Recorder standing in for the backend that keeps the GPU calls it passes on; the other rounds are those
calls, run by the backend itself as a loop of driver calls (`Backend.run_plan`) without the shell in between."""

from __future__ import annotations

from ..model.operations import KERNEL, REPEAT, TraceEntry, plan_entries
from .base import CONTRACT, PLAN_CALLS, QUERIES, WORK_CALLS, in_contract_order


def _recording(cls):
    """The Recorder's methods, one for each call of the contract (base.CONTRACT): queries are passed on, plan calls
    are kept (in the contract's order, however the handler passed them), any other call is noted."""
    for name in CONTRACT:
        setattr(cls, name, _recorder_method(name))
    return cls


def _recorder_method(name: str):
    if name in QUERIES:
        def method(self, *args, **kwargs):
            return getattr(self._backend, name)(*args, **kwargs)
    else:
        def method(self, *args, **kwargs):
            args = in_contract_order(name, args, kwargs)
            mark = self._session.traced()
            value = getattr(self._backend, name)(*args)
            if name in PLAN_CALLS:
                self.calls.append([name, args])
                self.marks.append(mark)
            else:
                self.other.append(name)
            return value
    method.__name__ = method.__qualname__ = name
    return method


@_recording
class Recorder:
    """The backend as round 1 sees it: every call is passed on; GPU calls are kept, with where their trace
    entries will be; any other call (an allocation, a free, a fill, a registration…) makes the block unplannable."""

    def __init__(self, backend, session):
        object.__setattr__(self, "_backend", backend)
        object.__setattr__(self, "_session", session)
        object.__setattr__(self, "calls", [])
        object.__setattr__(self, "marks", [])
        object.__setattr__(self, "other", [])

    def __getattr__(self, name):  # what is not a call of the contract: the backend's name, info, capabilities…
        return getattr(self._backend, name)

    def __setattr__(self, name, value):
        setattr(self._backend, name, value)

    def why_not(self, session) -> str | None:
        """None when the rounds can run without the shell; else why not, in a few words."""
        if self.other:
            return f"the block calls {self.other[0]}, which a plan does not run: every round goes through the shell"
        if not self.calls:
            return "the block queues no GPU work"
        if session.held is not None:
            return "the streams are held, and a plan waits for its work at the end"
        if self._backend.dead:
            return "the GPU side is dead"
        elsewhere = {id(s.handle) for s in session.streams.values() if s.context != session.current}
        if any(id(a) in elsewhere for _, args in self.calls for a in args):
            return "the block uses a stream of another context, and a plan runs in the current one"
        return None

    def templates(self, session) -> dict[int, TraceEntry]:
        """call index → the trace entry round 1 made for it (its operation, engine, stream, bytes)."""
        out = {}
        for k, ((name, _), mark) in enumerate(zip(self.calls, self.marks)):
            i = mark - session.trace_dropped
            if name in WORK_CALLS and 0 <= i < len(session.trace) and session.trace[i].operation.method == name:
                out[k] = session.trace[i]
        return out


def trace_plan(session, recorder: Recorder, run: dict, label: str) -> int:
    """Put the rounds' operations into the trace, finished: one entry per operation where the backend timed
    each (CUPTI, the simulator), else one for the whole run — which stands for the operations until the trace is
    read, where the backend reads their records later (`records_tag`: Session.refine). Returns how many entries
    were added."""
    templates = recorder.templates(session)
    entries = plan_entries(templates, run["records"], label)
    for e in entries:
        session.add_trace(e)
    added = len(entries)
    if not run["records"] and run.get("span") and templates:
        first = next(iter(templates.values()))
        engines = {t.engine for t in templates.values()}
        start, end = run["span"]
        plan = (run["records_tag"], templates, run.get("traced_rounds", 0) < run.get("rounds", 0)) \
            if run.get("records_tag") is not None else None
        session.add_trace(TraceEntry(REPEAT, first.stream, sum(t.bytes for t in templates.values()), end - start,
                                     start, end, label, engine=engines.pop() if len(engines) == 1 else KERNEL.engine,
                                     plan=plan))
        added = 1
    return added
