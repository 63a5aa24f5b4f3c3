"""time, timeline, trace export, profile: what ran when, from the trace of every GPU operation."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import NotRequired, TypedDict

from ..errors import usage
from ..language.grammar import Arg, Flag, Opt
from ..language.registry import command
from ..model.operations import ENGINES, OPERATIONS, TraceEntry, of_text
from ..output.render import Whole, fmt_seconds, nvprof_time, plural
from ..output.results import Message, Result, Settings
from .checks import check_writable, write_file

LETTERS = ", ".join(dict.fromkeys(f"{op.glyph} {op.legend}" for op in OPERATIONS))  # as the rows name them


def source_of(backend) -> str:
    """What the engine times are: the simulator's model, CUPTI's records, or the events around each operation."""
    if backend.capabilities.models_time:
        return "modeled"
    return backend.tracing or "CUDA events (" + (backend.tracing_why or "no CUPTI") + ")"


def finished(session, backend) -> tuple[list[TraceEntry], int]:
    """Trace entries with known start and end (pending ones are resolved first when they can be)."""
    session.settle(backend)
    session.refine(backend)
    done = [e for e in session.trace if e.start is not None and e.end is not None]
    return done, len(session.trace) - len(done)


@command("time", "session", "time every command (host wall time) — on or off", "time on", "(none)",
         args=(Arg("SWITCH", choices=("on", "off")),), exported=False)
def time_(session, backend, args):
    session.settings["time"] = args.get("SWITCH")
    return Settings({"settings": {"time": session.settings["time"]}})


@command("explain", "session", "after each command, show the CUDA runtime C and the driver call — on or off",
         "explain on", "(none)", args=(Arg("SWITCH", choices=("on", "off")),), exported=False)
def explain_(session, backend, args):
    session.settings["explain"] = args.get("SWITCH")
    return Settings({"settings": {"explain": session.settings["explain"]}})


@command("timeline", "streams", "an ASCII Gantt chart of the GPU work, per stream and per engine",
         "timeline last 12", "(CUPTI activity records — CUDA events around each operation where CUPTI is missing; "
         "modeled on the simulator)",
         opts=(Opt("last", Arg("OPS", "count")), Opt("width", Arg("W", "count"))),
         details="One row per stream and per engine (copy H2D, copy D2H, compute): overlap shows as letters "
                 "in the same columns, each operation by its letter (" + LETTERS + "); "
                 "# where one engine row holds two operations at once; . on a stream row: issued, waiting in its "
                 "queue for the engine. On a GPU the engine times are CUPTI's (when the engine really started "
                 "and ended); without CUPTI they come from events, which count a wait in the queue as running. "
                 "The chart is as wide as the terminal (64 columns in a script or a pipe); a `width` wider than the "
                 "terminal is narrowed to fit it, and the chart says so: a chart is never wrapped. `last 0` draws "
                 "nothing.", exported=False)
def timeline(session, backend, args):
    asked = args.get("W")
    if asked is not None and not 16 <= asked <= 400:  # checked before anything settles: a refused command changes nothing
        raise usage("width must be 16..400", args.col("W"))
    done, pending = finished(session, backend)
    last = args.get("OPS")
    if last is not None:
        done = done[len(done) - min(last, len(done)):]  # `last 0`: none (done[-0:] would be all)
    if not done:
        return Timeline({"rows": [], "pending": pending, "ops": 0, "timing": backend.timing_label,
                         **({"last": last} if last is not None else {})})
    streams = sorted({e.stream for e in done}, key=lambda s: (s != "0", s.isdigit() and int(s) or 0, s))
    engines = [e for e in ENGINES if e in {x.engine for x in done}]
    names = [f"stream {s}" for s in streams] + engines
    width, clamped = chart_width(asked, max(map(len, names)), session)
    t0, t1 = min(e.start for e in done), max(e.end for e in done)
    scale = max(t1 - t0, 1e-9) / width
    rows: dict[str, list[str]] = {name: [" "] * width for name in names}
    for e in done:  # waiting first: the running operations are drawn over it
        issued = e.issued
        if issued is not None and issued < e.start:
            a, b = int((max(issued, t0) - t0) / scale), min(width, int((e.start - t0) / scale))
            cells = rows[f"stream {e.stream}"]
            for i in range(a, b):
                cells[i] = "." if cells[i] == " " else cells[i]
    for e in done:
        a = min(width - 1, int((e.start - t0) / scale))
        b = max(a + 1, min(width, round((e.end - t0) / scale)))
        g = e.operation.glyph
        for row in (f"stream {e.stream}", e.engine):
            cells = rows[row]
            for i in range(a, b):  # a stream runs one thing at a time: only an engine row can clash
                cells[i] = g if row.startswith("stream") or cells[i] in (" ", g) else "#"
    spans = [e.fields("op", "stream", "engine", "issued", "start", "end") for e in done]
    return Timeline({"rows": [{"name": k, "cells": "".join(v)} for k, v in rows.items()], "spans": spans,
                               "start": t0, "end": t1, "per_cell": scale, "ops": len(done), "pending": pending,
                               "timing": backend.timing_label, "source": source_of(backend), "width": width,
                               **({"asked_width": asked} if clamped else {}), **({"last": last} if last is not None else {})})


DEFAULT_WIDTH = 64  # a chart's columns where no terminal says how many fit (a script, a pipe)


def chart_width(asked: int | None, label: int, session) -> tuple[int, bool]:
    """The chart's columns, and whether `asked` was narrowed: what the terminal has room for beside the row names
    (`  NAME |…|`), never under 16 — in JSON no terminal constrains it."""
    terminal = int(session.settings["width"] or 0)
    room = max(16, min(400, terminal - label - 5)) if terminal and session.settings["format"] != "json" else None
    if asked is None:
        return room or DEFAULT_WIDTH, False
    return (room, True) if room is not None and asked > room else (asked, False)


@command("trace export", "streams", "write the trace as Chrome trace JSON (Perfetto, chrome://tracing)",
         "trace export run.json", "(the session's trace)", args=(Arg("FILE", "written-file"),), flags=(Flag("force"),),
         details="Each operation on its stream's track and its engine's, with the engine times (CUPTI's on a GPU "
                 "that has it); the time it waited in its queue, from issue to start, on a `stream N (waiting)` "
                 "track beside its stream.", exported=False)
def trace_export(session, backend, args):
    path = Path(args.get("FILE"))
    check_writable(path, "force" in args.flags, args.col("FILE"))  # before anything settles
    done, pending = finished(session, backend)
    events = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": label}}
              for pid, label in ((1, "streams"), (2, "engines"))]
    for e in done:
        common = {"name": e.op, "cat": e.engine, "ph": "X", "ts": e.start * 1e6,
                  "dur": (e.end - e.start) * 1e6, "args": {"bytes": e.bytes, "timing": e.timing}}
        events.append({**common, "pid": 1, "tid": f"stream {e.stream}"})
        events.append({**common, "pid": 2, "tid": e.engine})
        if e.issued is not None and e.issued < e.start:  # its wait in the queue, on a track beside
            events.append({"name": f"waiting: {e.op}", "cat": "queue", "ph": "X", "ts": e.issued * 1e6,
                           "dur": (e.start - e.issued) * 1e6, "pid": 1, "tid": f"stream {e.stream} (waiting)",
                           "args": {"timing": e.timing}})
    write_file(path, json.dumps({"traceEvents": events, "displayTimeUnit": "ms",
                                 "otherData": {"timing": backend.timing_label, "device": backend.info.name}}),
               args.col("FILE"))
    return Message({"text": f"wrote {plural(len(done), 'operation')} to {path}"
                              + (f" ({pending} still running were left out)" if pending else ""),
                              "path": str(path), "ops": len(done), "pending": pending})


def _stats(name_times: dict) -> list[dict]:
    total = sum(sum(v) for v in name_times.values()) or 1.0
    rows = [{"name": n, "percent": 100 * sum(v) / total, "total": sum(v), "calls": len(v), "avg": sum(v) / len(v),
             "min": min(v), "max": max(v)} for n, v in name_times.items()]
    return sorted(rows, key=lambda r: -r["total"])


@command("profile", "streams", "nvprof's summary: GPU activities and API calls", "profile",
         "(what nvprof / nsys print: CUPTI's engine times of the trace, and the host time of every CUDA call)",
         details="In nvprof's own layout: Time(%), Time, Calls, Avg, Min, Max, Name, for the GPU activities (the "
                 "engine time of each operation: CUPTI's records on a GPU that has them, events otherwise, modeled "
                 "on the simulator) and for the API calls (the host time of each call the shell made).", exported=False)
def profile(session, backend, args):
    done, pending = finished(session, backend)
    gpu = defaultdict(list)
    for e in done:
        kernel = session.kernels.get(e.name) if e.operation.runs_kernel else None
        gpu[kernel.signature() if kernel else e.operation.nvprof or e.name].append(e.end - e.start)
    api = defaultdict(list)
    for call, seconds in session.api:
        api[call].append(seconds)
    return Profile({"gpu": _stats(gpu), "api": _stats(api), "pending": pending,
                              "timing": backend.timing_label, "source": source_of(backend),
                              "metrics": _metrics(done)})


def _metrics(done: list[TraceEntry]) -> list[dict]:
    """What users' kernels moved (the simulator counts it), summed per kernel and memory kind: nvprof's
    gld_transactions_per_request and gld_efficiency, in the shell's words."""
    rows: dict = {}
    for e in done:
        c = e.counts
        if not c:
            continue
        kernel = e.name
        for kind, g in c["global"].items():
            r = rows.setdefault((kernel, kind), {"kernel": kernel, "memory": kind, "launches": 0, "requests": 0,
                                                 "sectors": 0, "useful_bytes": 0})
            r["requests"] += g["requests"]
            r["sectors"] += g["sectors"]
            r["useful_bytes"] += g["useful_bytes"]
        if c["shared"]["requests"]:
            r = rows.setdefault((kernel, "shared"), {"kernel": kernel, "memory": "shared", "launches": 0,
                                                     "requests": 0, "wavefronts": 0})
            r["requests"] += c["shared"]["requests"]
            r["wavefronts"] += c["shared"]["wavefronts"]
    for e in done:
        if e.counts:
            kernel = e.name
            for (k, _), r in rows.items():
                if k == kernel:
                    r["launches"] += 1
    return list(rows.values())


# ------------------------------------------------------------------ the results of these commands
class ProfileDataGpuItem(TypedDict):
    name: str
    percent: float
    total: float
    calls: int
    avg: float
    min: float
    max: float


class ProfileDataApiItem(TypedDict):
    name: str
    percent: float
    total: float
    calls: int
    avg: float
    min: float
    max: float


class ProfileDataMetricsItem(TypedDict):
    kernel: str
    memory: str
    launches: int
    requests: int
    sectors: int
    useful_bytes: int


class ProfileData(TypedDict):
    gpu: list[ProfileDataGpuItem]
    api: list[ProfileDataApiItem]
    pending: int
    timing: str
    source: str
    metrics: list[ProfileDataMetricsItem]


class Profile(Result, kind="profile"):
    Data = ProfileData

    def lines(self, tablefmt="simple", width=0):
        """nvprof's own layout (the tablefmt setting does not apply: this is what nvprof users know)."""
        d = self.data
        head = f"{'Time(%)':>7}{'Time':>10}{'Calls':>10}{'Avg':>10}{'Min':>10}{'Max':>10}  Name"
        source = f": {d['source']}" if d.get("source", d["timing"]) != d["timing"] else ""
        out = [f"==cudashell== Profiling result ({d['timing']}{source}):"]
        if not d["gpu"] and not d["api"]:
            return out + ["nothing has run yet"]
        for title, stats in (("GPU activities", d["gpu"]), ("API calls", d["api"])):
            if title == "API calls":
                out.append("==cudashell== API calls (host time of each call):")
            out.append(head)
            out += [Whole(f"{r['percent']:>6.2f}%{nvprof_time(r['total']):>10}{r['calls']:>10}"  # a row, as nvprof's
                          f"{nvprof_time(r['avg']):>10}{nvprof_time(r['min']):>10}{nvprof_time(r['max']):>10}"
                          f"  {r['name']}") for r in stats]
        if d.get("metrics"):
            out.append("==cudashell== Metrics of your kernels (counted by the simulator):")
            out.append(f"{'Kernel':<20}{'Memory':<12}{'Requests':>10}{'Sectors':>10}{'Per req':>9}{'Used':>7}")
            for r in d["metrics"]:
                if r["memory"] == "shared":
                    per = r["wavefronts"] / r["requests"] if r["requests"] else 0
                    out.append(Whole(f"{r['kernel']:<20}{'shared':<12}{r['requests']:>10}{r['wavefronts']:>10}"
                                     f"{per:>9.2f}{'':>7}  (wavefronts: bank conflicts above 1 a request)"))
                else:
                    per = r["sectors"] / r["requests"] if r["requests"] else 0
                    used = r["useful_bytes"] / (32 * r["sectors"]) if r["sectors"] else 1
                    out.append(Whole(f"{r['kernel']:<20}{r['memory']:<12}{r['requests']:>10}{r['sectors']:>10}"
                                     f"{per:>9.2f}{100 * used:>6.0f}%"))
        if d["pending"]:
            out.append(f"({plural(d['pending'], 'operation')} still running "
                       f"{'is' if d['pending'] == 1 else 'are'} not counted: `sync` first)")
        return out

    def figure(self):
        from ..output.figures import profile_figure

        return profile_figure(self.data) if self.data.get("gpu") else None


class TimelineDataRowsItem(TypedDict):
    name: str
    cells: str


class TimelineDataSpansItem(TypedDict):
    op: str
    stream: str
    engine: str
    issued: float
    start: float
    end: float


class TimelineData(TypedDict):
    rows: list[TimelineDataRowsItem]
    spans: NotRequired[list[TimelineDataSpansItem]]
    start: NotRequired[float]
    end: NotRequired[float]
    per_cell: NotRequired[float]
    width: NotRequired[int]  # the chart's columns
    asked_width: NotRequired[int]  # `width N` that the terminal had no room for (narrowed to `width`)
    last: NotRequired[int]  # `last N`, when given
    ops: int
    pending: int
    timing: str
    source: NotRequired[str]


class Timeline(Result, kind="timeline"):
    Data = TimelineData

    def text(self):
        d = self.data
        if not d["rows"] and d.get("last") == 0:
            return ["timeline: `last 0` asks for no operations — an empty chart"]
        if not d["rows"]:
            return ["no finished GPU work in the trace yet" + (f" ({d['pending']} still running)" if d["pending"] else "")]
        width = max(len(r["name"]) for r in d["rows"])
        source = "" if d.get("source", d["timing"]) == d["timing"] else f": {d['source']}"
        out = [f"timeline of {d['ops']} operation{'s' if d['ops'] != 1 else ''}, {fmt_seconds(d['start'])} … "
               f"{fmt_seconds(d['end'])} ({d['timing']}{source}); one column = {fmt_seconds(d['per_cell'])}"]
        if "asked_width" in d:
            out.append(f"(width {d['asked_width']} does not fit the terminal: drawn {d['width']} columns wide)")
        out += [Whole(f"  {r['name']:<{width}} |{r['cells']}|") for r in d["rows"]]
        return out + self.legend() + ([f"  ({plural(d['pending'], 'operation')} still running "
                                       f"{'is' if d['pending'] == 1 else 'are'} not shown: `sync` first)"]
                                      if d["pending"] else [])

    def legend(self) -> list[str]:
        """The letters drawn, each named by its operation's row (operations.py), in the table's order."""
        drawn = {of_text(s["op"])[0] for s in self.data.get("spans", ())}
        letters = dict.fromkeys(f"{op.glyph} {op.legend}" for op in OPERATIONS if op in drawn)
        return ["  " + "  ".join(letters), "  # two at once on one engine  . issued, waiting in its queue"]

    def figure(self):
        from ..output.figures import timeline_figure

        return timeline_figure(self.data) if self.data.get("spans") else None

